"""The timing estimate: parsing yosys ``sta`` / ``ltp`` output, and the quick mode end to end."""

import time

import pytest

from pyvta.hw import timing

pytestmark = pytest.mark.hw

# Excerpts of yosys 0.70 output (a 3-cell path and a 3-cell fabric path), endpoint first.
STA = """
Warning: Module 'FDRE' has no timing arcs!
Latest arrival time in 'vta' is 2921:
    2921 (<unknown>)
Warning: Critical-path does not terminate in a recognised endpoint.
           n3
    2921 c3 (LUT5.I4->O)
           c3.I4
    2794 c2b (DSP48E1.PCIN->PCOUT)
           n1
    1534 c1 (RAMB36E1.CLKARDCLK->DOADO)
           clk
       0   \\clk (<primary input>)
Warning: Endpoint vta.n9 has no (* sta_arrival *) value.
Warning: Endpoint vta.n8 has no (* sta_arrival *) value.

Arrival histogram:
"""
LTP = """
Longest topological path in vta (length=3):
    0: $q
    1: $a (via lut_a)
    2: $b (via carry_b)
    3: $c (via lut_c)
"""


def test_sta_path_is_split_into_cell_delays():
    worst, path, unannotated = timing.parse_sta(STA)
    assert worst == 2921 and unannotated == 2
    assert [(s.cell_type, s.arc, s.delay_ps) for s in path] == [
        ("RAMB36E1", "CLKARDCLK->DOADO", 1534),
        ("DSP48E1", "PCIN->PCOUT", 1260),
        ("LUT5", "I4->O", 127),
    ]
    assert path[-1].arrival_ps == worst


# A path that ends at a cell's input (yosys 0.70 on the pipelined GEMM core): the last step is
# the DSP's PCIN with its setup into the P register.
STA_TO_PIN = """
Latest arrival time in 'vta' is 4123:
    4123 $auto$maccmap.cc:308:maccmap$15682 (DSP48E1.PCIN)
           $abc$196590$aiger$o11553
    3098 $auto$maccmap.cc:308:maccmap$15684 (DSP48E1.CLK->PCOUT)
       0   \\clk (<primary input>)
Warning: Endpoint vta.\\irq has no (* sta_arrival *) value.
"""


def test_sta_path_ending_at_a_cell_input_counts_its_setup():
    worst, path, unannotated = timing.parse_sta(STA_TO_PIN)
    assert worst == 4123 and unannotated == 1
    assert [(s.cell_type, s.arc, s.delay_ps) for s in path] == [
        ("DSP48E1", "CLK->PCOUT", 3098),
        ("DSP48E1", "PCIN setup", 1025),
    ]
    assert path[-1].arrival_ps == worst


def test_ltp_levels_and_the_report_table():
    levels, nets = timing.parse_ltp(LTP)
    assert levels == 3 and nets == ["$q", "$a", "$b", "$c"]
    assert timing.parse_ltp("Longest topological path in vta (length=-1):\n") == (0, [])
    with pytest.raises(RuntimeError, match="no 'Longest topological path'"):
        timing.parse_ltp("nothing here")
    from pyvta.hw.synth import parse_stat

    _, path, _ = timing.parse_sta(STA)
    report = timing.TimingReport(
        "t", "k", 2921, path, levels, nets, parse_stat({"modules": {"\\vta": {}}})
    )
    assert report.fmax_upper_bound_mhz == pytest.approx(342.35, abs=0.01)
    assert "| DSP48E1 | PCIN->PCOUT | 1 | 1.26 |" in report.table()
    assert timing.TimingReport.from_json(report.to_json()).path == path


def test_quick_mode_synthesises_and_is_cached(tmp_path_factory):
    # yowasp cannot see the system temp folder: build under the user cache instead.
    from pyvta.hw.runner import default_cache_dir

    build = default_cache_dir() / "timing-test"
    t0 = time.monotonic()
    report = timing.timing(timing.QUICK_CONFIG, build_dir=build, use_cache=False)
    print(f"\n[hw] quick timing in {time.monotonic() - t0:.1f} s: {report.worst_ps} ps")
    assert report.path and report.path[-1].arrival_ps == report.worst_ps
    assert sum(s.delay_ps for s in report.path) == report.worst_ps
    assert report.logic_levels > 0 and report.resources.lut > 0 and report.resources.fits()
    # the target (<= 10 fabric levels); the deepest ends name what broke it
    assert report.logic_levels <= 10, report.deep
    assert report.deep and report.deep[0][0] == report.logic_levels
    t0 = time.monotonic()
    again = timing.timing(timing.QUICK_CONFIG, build_dir=build)
    assert time.monotonic() - t0 < 5 and again.worst_ps == report.worst_ps


def test_latest_report_is_the_newest_of_any_sources(tmp_path):
    import os

    from pyvta.hw.synth import parse_stat

    cfg = timing.QUICK_CONFIG
    assert timing.latest_report(cfg, build_dir=tmp_path) is None
    (tmp_path / "reports").mkdir()
    for n, key in enumerate(("old", "new")):
        report = timing.TimingReport(
            cfg.tag, key, 1000 + n, [], 3, [], parse_stat({"modules": {"\\vta": {}}})
        )
        path = tmp_path / "reports" / f"{cfg.tag}-{key}.json"
        path.write_text(report.to_json())
        os.utime(path, (n, n))
    assert timing.latest_report(cfg, build_dir=tmp_path).source_key == "new"
    assert timing.report_key(cfg) != "new"


def _cell(kind, ins, outs):
    conns = {**ins, **outs}
    dirs = {p: "input" for p in ins} | {p: "output" for p in outs}
    return {"type": kind, "port_directions": dirs, "connections": conns}


def test_deep_endpoints_name_each_register_a_long_fabric_path_ends_at():
    # q (bit 2) -> LUT -> CARRY4 -> LUT -> FF r (3 levels); q -> LUT -> FF s (1 level);
    # two lanes' registers lane_0 / lane_1 at 2 levels from q, grouped into one row
    cells = {
        "fq": _cell("FDRE", {"D": [9]}, {"Q": [2]}),
        "l1": _cell("LUT2", {"I0": [2], "I1": ["0"]}, {"O": [3]}),
        "c1": _cell("CARRY4", {"S": [3, 3, 3, 3]}, {"CO": [4, 5, 6, 7]}),
        "l2": _cell("LUT1", {"I0": [7]}, {"O": [8]}),
        "fr": _cell("FDRE", {"D": [8]}, {"Q": [10]}),
        "fs": _cell("FDRE", {"D": [3]}, {"Q": [11]}),
        "f0": _cell("FDRE", {"D": [4]}, {"Q": [12]}),
        "f1": _cell("FDRE", {"D": [5]}, {"Q": [13]}),
    }
    names = {"q": [2], "r": [10], "s": [11], "lane_0": [12], "lane_1": [13], "$x": [8]}
    top = {"attributes": {"top": 1}, "ports": {}, "cells": cells}
    top["netnames"] = {n: {"bits": b} for n, b in names.items()}
    rows = timing.deep_endpoints({"modules": {"vta": top}}, 1)
    assert rows == [(3, "q", "r"), (2, "q", "lane_# (2 ends)"), (1, "q", "s")]
    assert timing.deep_endpoints({"modules": {"vta": top}}, 3) == [(3, "q", "r")]


def _module(text: str, head: str) -> str:
    start = text.index(head)  # to the module's closing ``end`` / ``endmodule`` at column 0
    return text[start : text.index("\nend", start)]


def test_synthesis_reads_the_rtlil_of_the_design_the_verilog_describes():
    # hw.timing synthesises hw.export.rtlil (the Verilog frontend is intractable on the large
    # configs): the same top level, port for port (name, direction, width), as the Verilog
    import re

    from pyvta.hw.export import TOP_NAME, rtlil, verilog

    assert "read_rtlil vta.il; synth_xilinx -family xc7 -flatten" in timing.SYNTH_SCRIPT
    cfg = timing.QUICK_CONFIG
    il = _module(rtlil(cfg), f"module \\{TOP_NAME}\n")
    v = _module(verilog(cfg), f"module {TOP_NAME}(")
    il_ports = {
        (m[3], m[2], int(m[1]))
        for m in re.finditer(r"^\s*wire width (\d+) (input|output) \d+\s+\\(\S+)$", il, re.M)
    }
    v_ports = {
        (m[3], m[1], int(m[2] or 0) + 1)
        for m in re.finditer(r"^\s*(input|output) (?:\[(\d+):0\] )?\\?(\S+?) ?;$", v, re.M)
    }
    assert len(il_ports) > 20 and il_ports == v_ports
