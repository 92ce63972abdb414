"""driver.kernel.relocate patches the encoded dram_base fields: the same stream as decoding every
instruction, moving its dram_base and encoding again; misplaced regions are refused."""

import dataclasses

import numpy as np
import pytest

from pyvta.compiler.backend.vta.default import default_config
from pyvta.compiler.backend.vta.operator import measurement_kernel
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.driver import DeviceError
from pyvta.driver.kernel import REGION_ALIGN_BYTES, relocate
from pyvta.isa import HwConfig, decode_insns, encode_insns

SEED = 4


def _reference(kernel, bases, cfg):
    insns = decode_insns(kernel.consts["insns"], cfg)
    for i, k in kernel.relocs.tolist():
        insn, region = insns[i], kernel.regions[k]
        elem = cfg.elem_bytes_of(insn.memory_type.dram_elem)
        byte = bases[region.name] + insn.dram_base * elem - region.offset
        insns[i] = dataclasses.replace(insn, dram_base=byte // elem)
    return encode_insns(insns, cfg)


@pytest.mark.parametrize("residual", [False, True])
def test_relocate_equals_decode_move_encode(residual):
    cfg = HwConfig()
    wl = ConvWorkload(8, 8, 32, 32, 3, 3, 1, 1)
    ep = Epilogue(bias=True, shift=4, residual=residual)
    kernel = measurement_kernel(wl, ep, default_config(wl, ep, cfg), cfg)
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    for _ in range(5):
        bases = {r.name: int(rng.integers(0, 1 << 16)) * REGION_ALIGN_BYTES for r in kernel.regions}
        assert relocate(kernel, bases, cfg) == _reference(kernel, bases, cfg)
    assert len(kernel.relocs) > 0
    bases = {r.name: REGION_ALIGN_BYTES for r in kernel.regions}
    bases[kernel.regions[kernel.relocs[0, 1]].name] += 1  # not a multiple of any element
    with pytest.raises(DeviceError, match="not a multiple of"):
        relocate(kernel, bases, cfg)


@pytest.mark.parametrize(
    "name", ["matmul_tiled_xpad", "alu_chain", "dram_bursts", "pad_acc_2_1_1_3"]
)
def test_a_bundle_relocated_onto_a_board_equals_the_simulator(tmp_path, name):
    """``run_relocated``: the bundle's image lands where the device allocates (a model PYNQ
    board's buffers start at 0x10000000), every LOAD/STORE moved with it; the same programs
    unrelocated deadlock or differ there."""
    from pyvta import driver, sim
    from pyvta.driver.kernel import bundle_kernel, load_kernel, run_relocated
    from pyvta.sim.directed import directed_programs
    from pyvta.testing.board_model import ModelBoard, write_model_bitstream

    program = directed_programs()[name]
    expected = sim.run(program).dram
    assert not np.array_equal(expected, program.dram)  # the program stores: a check that can fail
    bit = write_model_bitstream(tmp_path / "bit", program.config)

    def board():
        return driver.open("pynq", bitstream=bit, pynq=ModelBoard().pynq, config=program.config)

    for dev in (driver.open("sim", config=program.config), board()):
        with dev:
            final, _ = run_relocated(dev, program)
        assert final.shape == expected.shape and np.array_equal(final, expected), type(dev)
    unrelocated = dataclasses.replace(bundle_kernel(program), relocs=np.zeros((0, 2), np.int32))
    with board() as dev:
        loaded = load_kernel(dev, unrelocated)
        try:
            loaded.run({})
            same = np.array_equal(dev.read(loaded.addrs["image"], expected.size), expected)
        except DeviceError:
            same = False
    assert not same
