"""The register map is the host-visible contract: consistent, documented, and it identifies the
hardware (magic, ISA version, config hash)."""

import pytest

from pyvta.isa import INSN_BYTES, ISA_VERSION, HwConfig, regmap
from pyvta.isa.errors import PyvtaError


def test_offsets_are_unique_aligned_and_documented():
    offsets = [r.offset for r in regmap.REGISTERS]
    assert len(set(offsets)) == len(offsets)
    assert all(o % regmap.REG_BYTES == 0 and o < 1 << regmap.ADDR_BITS for o in offsets)
    assert regmap.offset("INSN_COUNT") == 0x10 and regmap.offset("INSN_ADDR") == 0x18
    assert all(r.access in regmap.ACCESS for r in regmap.REGISTERS)
    doc = regmap.markdown()
    assert all(f"| {r.name} |" in doc for r in regmap.REGISTERS)
    assert "[31:24] S2C" in doc and "[30] FETCH_DONE" in doc


@pytest.mark.parametrize("reg", regmap.REGISTERS, ids=lambda r: r.name)
def test_fields_fit_32_bits_without_overlap(reg):
    used = 0
    for f in reg.fields:
        assert f.width >= 1 and f.lsb + f.width <= 32, f
        assert not used & f.mask, f"{reg.name}.{f.name} overlaps another field"
        used |= f.mask
    values = {f.name: (0x5A5A5A5A >> f.lsb) & ((1 << f.width) - 1) for f in reg.fields}
    assert reg.decode(reg.encode(**values)) == values


def test_encode_refuses_values_and_names_that_do_not_fit():
    ctrl = regmap.register("CTRL")
    assert ctrl.encode(START=1, IRQ_EN=1) == 0b11
    with pytest.raises(PyvtaError, match="does not fit 1 bits"):
        ctrl.encode(START=2)
    with pytest.raises(KeyError, match="fields: START, IRQ_EN, CLEAR"):
        ctrl.encode(GO=1)
    with pytest.raises(KeyError, match="registers: CTRL"):
        regmap.offset("NOPE")


def test_counters_are_registers():
    assert all(regmap.register(n).access == "ro" for n in regmap.COUNTERS)


def test_id_names_magic_version_and_config():
    cfg = HwConfig()
    ident = regmap.id_value()
    assert regmap.register("ID").decode(ident)["MAGIC"] == regmap.ID_MAGIC
    assert ISA_VERSION == "0.0.2" and regmap.register("ID").decode(ident)["VERSION_PATCH"] == 2
    assert regmap.id_mismatch(ident, cfg.config_hash, cfg) is None
    assert "magic" in regmap.id_mismatch(0, cfg.config_hash, cfg)
    other_version = regmap.id_value("0.1.0")
    assert "implements ISA 0.1.0" in regmap.id_mismatch(other_version, cfg.config_hash, cfg)
    other = HwConfig(LOG_ACC_BUFF_SIZE=16)
    assert "another HwConfig" in regmap.id_mismatch(ident, other.config_hash, cfg)


def test_config_hash_follows_the_hardware_shape_only():
    base = HwConfig()
    assert base.config_hash == HwConfig().config_hash
    assert 0 <= base.config_hash < 1 << 32
    assert HwConfig(TARGET="pynq").config_hash == base.config_hash  # same hardware, other board
    shapes = [
        HwConfig(LOG_WGT_BUFF_SIZE=17),
        HwConfig(LOG_BUS_WIDTH=7),
        HwConfig(LOG_ACC_BUFF_SIZE=16),
    ]
    assert len({base.config_hash, *(c.config_hash for c in shapes)}) == 4


def test_error_index_names_any_instruction_and_every_fault_kind():
    """ERROR_INDEX.INDEX counts the 16-byte instructions of the 32-bit INSN_ADDR space; KIND holds
    every Fault; STATUS.ERROR sits beside DONE."""
    reg = regmap.register("ERROR_INDEX")
    index, kind = reg.field("INDEX"), reg.field("KIND")
    assert 1 << index.width == (1 << regmap.REG_BITS) // INSN_BYTES
    assert max(regmap.Fault) < 1 << kind.width and regmap.Fault.NONE == 0
    word = reg.encode(INDEX=(1 << index.width) - 1, KIND=regmap.Fault.OUT_OF_BOUNDS)
    assert reg.decode(word) == {"INDEX": (1 << index.width) - 1, "KIND": 4}
    assert regmap.register("STATUS").encode(DONE=1, ERROR=1) == 0b1001
    doc = regmap.markdown()
    assert all(f"{f.value} {f.name}" in doc for f in regmap.Fault)
    assert all(f.description for f in regmap.Fault)
