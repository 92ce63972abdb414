"""Simulated MACs per second of the functional simulator's two engines on five program bundles,
against the original C++ simulator (fsim) figures measured for issue 22 on this machine kind.

Bundles (saved by the commands named, into --bundles; made when missing):
  gemm_heavy  this script's 2048x512 @ 512x256 GEMM (sim.programs.matmul_program)
  demo_gemm   pyvta demo gemm --save demo_gemm.npz
  C2 C9 C12   pyvta conv --layer C2 --save C2.npz  (likewise C9, C12)

Targets (issue 22): native >= 5x fsim on C2, C9, C12 (>= 1.2e10 MAC/s) and on the GEMM-heavy
program; all of ResNet-18's accelerator layers (C2..C12, ``--resnet18``) simulated in <= 0.15 s.
Times are the minimum of --repeats runs, engines interleaved (the machine is shared: minima are
the figures least disturbed by other load); the CPU time of the simulating thread is printed
too, as the figure other processes' load inflates least. ``sim.run`` copies each bundle's DRAM image per run,
as a caller gets it; the copy is included in the times.

Cold and warm (``--cold-warm``, on by default): a new process runs ResNet-18's layers C2..C12
round after round on ``engine="auto"`` for --seconds, first with an empty cache root (nothing
compiled: the engine switches to native once the numpy work passes NATIVE_COMPILE_WORK), then
again with the kernels its first run left in that root; per layer, the first run's time and
the median of the runs that start from the second second on, cold and warm side by side,
against fsim where issue 22 measured it.

    .venv/bin/python benchmarks/sim_throughput.py [--repeats 7] [--resnet18] [--bundles DIR]
        [--seconds 3] [--no-cold-warm]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta import sim
from pyvta.sim.programs import matmul_program

# fsim (tvm-vta d4a15f6, g++ 12 -O3 -march=native), issue 22's table: seconds per bundle.
FSIM_S = {"gemm_heavy": 98e-3, "demo_gemm": 6.2e-3, "C2": 45e-3, "C9": 45e-3, "C12": 50e-3}
TARGET_X_FSIM = 5.0
RESNET18_TARGET_S = 0.15
RESNET18_LAYERS = ["C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11", "C12"]


def _cli(*args: str) -> None:
    code = "import sys; from pyvta.cli import main; sys.exit(main(sys.argv[1:]))"
    subprocess.run([sys.executable, "-c", code, *args], check=True, stdout=subprocess.DEVNULL)


def bundle(name: str, folder: Path, seed: int) -> sim.Program:
    path = folder / f"{name}.npz"
    if not path.exists():
        if name == "gemm_heavy":
            rng = np.random.default_rng(seed)
            a = rng.integers(-128, 128, (2048, 512), dtype=np.int8)
            b = rng.integers(-128, 128, (512, 256), dtype=np.int8)
            matmul_program(a, b).program.save(path)
        elif name == "demo_gemm":
            _cli("demo", "gemm", "--save", str(path))
        else:
            _cli("conv", "--layer", name, "--save", str(path), "--disasm", "0")
    return sim.Program.load(path)


def min_times(programs: dict[str, sim.Program], engines, repeats: int) -> tuple[dict, dict]:
    """{(name, engine): seconds} of wall and of this thread's CPU time (what other processes'
    load does not inflate), each the minimum over ``repeats`` interleaved runs."""
    wall: dict = {}
    cpu: dict = {}
    for _ in range(repeats):
        for name, program in programs.items():
            for engine in engines:
                t0, c0 = time.perf_counter(), time.thread_time()
                sim.run(program, engine=engine)
                dt, dc = time.perf_counter() - t0, time.thread_time() - c0
                wall[name, engine] = min(dt, wall.get((name, engine), dt))
                cpu[name, engine] = min(dc, cpu.get((name, engine), dc))
    return wall, cpu


def check_same(program: sim.Program) -> int:
    """Both engines give the same image; returns the MACs."""
    ref, got = sim.run(program, engine="numpy"), sim.run(program, engine="native")
    assert np.array_equal(ref.dram, got.dram), "the engines disagree"
    return ref.counters.macs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bundles", type=Path, help="folder of saved bundles (default: a temp one)")
    ap.add_argument("--resnet18", action="store_true", help="also time C2..C12 back to back")
    ap.add_argument("--seconds", type=float, default=3.0, help="cold/warm: seconds per process")
    ap.add_argument("--no-cold-warm", dest="cold_warm", action="store_false")
    ap.add_argument("--auto-child", nargs=2, metavar=("BUNDLES", "SECONDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.auto_child:
        auto_child(Path(args.auto_child[0]), float(args.auto_child[1]))
        return
    print(f"seed {args.seed}; minimum of {args.repeats} interleaved repeats")
    folder = args.bundles or Path(tempfile.mkdtemp(prefix="pyvta_sim_bundles_"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.cold_warm:
        for name in RESNET18_LAYERS:
            bundle(name, folder, args.seed)
        cold_warm(folder, args.seconds)
    programs = {name: bundle(name, folder, args.seed) for name in FSIM_S}
    macs = {name: check_same(p) for name, p in programs.items()}
    best, cpu = min_times(programs, ("numpy", "native"), args.repeats)
    print("wall ms: minimum wall time; cpu ms: minimum CPU time of the simulating thread")
    head = (
        f"{'bundle':11s} {'MACs':>9s} {'DRAM B':>9s} | {'numpy ms':>9s} {'native ms':>9s}"
        f" {'cpu ms':>7s} {'native MAC/s':>12s} | {'fsim ms':>8s} {'x fsim':>7s}"
        f" {'x numpy':>8s}"
    )
    print(head)
    print("-" * len(head))
    for name, program in programs.items():
        t_np, t_nat = best[name, "numpy"], best[name, "native"]
        print(
            f"{name:11s} {macs[name]:9.3g} {program.dram.size:9d} | {t_np * 1e3:9.2f}"
            f" {t_nat * 1e3:9.2f} {cpu[name, 'native'] * 1e3:7.2f} {macs[name] / t_nat:12.3g} |"
            f" {FSIM_S[name] * 1e3:8.1f} {FSIM_S[name] / t_nat:7.2f} {t_np / t_nat:8.2f}"
        )
    targets = ("gemm_heavy", "C2", "C9", "C12")
    worst = min(FSIM_S[n] / best[n, "native"] for n in targets)
    worst_cpu = min(FSIM_S[n] / cpu[n, "native"] for n in targets)
    print(
        f"native / fsim, worst of GEMM-heavy, C2, C9, C12: {worst:.2f}x wall, {worst_cpu:.2f}x"
        f" CPU time (target {TARGET_X_FSIM}x)"
    )
    gemm = programs["gemm_heavy"]
    t_cyc = min(_timed(lambda: sim.run_cycles(gemm))[0] for _ in range(3))
    print(f"cycle model on gemm_heavy: {t_cyc * 1e3:.1f} ms")
    if args.resnet18:
        layers = {name: bundle(name, folder, args.seed) for name in RESNET18_LAYERS}
        for p in layers.values():
            check_same(p)
        for engine in ("numpy", "native"):
            runs = [
                _timed(lambda e=engine: [sim.run(p, engine=e) for p in layers.values()])
                for _ in range(args.repeats)
            ]
            print(
                f"ResNet-18 accelerator layers C2..C12 ({len(layers)} programs), {engine}:"
                f" {min(r[0] for r in runs):.3f} s wall, {min(r[1] for r in runs):.3f} s CPU"
                f" (target {RESNET18_TARGET_S} s)"
            )


def auto_child(folder: Path, seconds: float) -> None:
    """(In a new process.) Run C2..C12 round after round on engine="auto" for ``seconds``;
    print one JSON list of [layer, start s, run s, native after the run]."""
    from pyvta.sim import native

    layers = [(n, sim.Program.load(folder / f"{n}.npz")) for n in RESNET18_LAYERS]
    cfg = layers[0][1].config
    runs, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for name, program in layers:
            start = time.perf_counter()
            sim.run(program)
            runs.append([name, start - t0, time.perf_counter() - start, native.kernels_ready(cfg)])
    print(json.dumps(runs))


def _child_runs(folder: Path, seconds: float, root: Path) -> list:
    env = {**os.environ, "PYVTA_CACHE_DIR": str(root)}
    cmd = [sys.executable, __file__, "--auto-child", str(folder), str(seconds)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def cold_warm(folder: Path, seconds: float) -> None:
    """ResNet-18's layers on engine="auto" in a new process: from an empty cache root (cold)
    and with the kernels the cold process left there (warm)."""
    root = Path(tempfile.mkdtemp(prefix="pyvta_cache_root_"))
    cold = _child_runs(folder, seconds, root)
    warm = _child_runs(folder, seconds, root)
    print(
        f'\nengine="auto", C2..C12 round after round for {seconds:g} s in a new process; cold:'
        f" empty cache root ({root}), warm: the kernels the cold process compiled there"
    )
    switch = next((r for r in cold if r[3]), None)
    n_numpy = sum(1 for r in cold if not r[3])
    if switch:
        print(
            f"cold: {n_numpy} runs on numpy, then native from the run starting at"
            f" {switch[1]:.2f} s ({switch[0]}, {switch[2] * 1e3:.0f} ms with the compile);"
            f" warm: native from the first run ({warm[0][3]})"
        )
    else:
        print(f"cold: all {n_numpy} runs on numpy (no switch within {seconds:g} s)")
    head = (
        f"{'layer':6s} | {'cold 1st ms':>11s} {'cold >=1s ms':>12s} | {'warm 1st ms':>11s}"
        f" {'warm >=1s ms':>12s} | {'fsim ms':>7s} {'x fsim cold 1st':>15s} {'cold>=1s':>8s}"
        f" {'warm 1st':>8s} {'warm>=1s':>8s}"
    )
    print(head)
    print("-" * len(head))
    per_round = {"cold 1st": 0.0, "cold >=1s": 0.0, "warm 1st": 0.0, "warm >=1s": 0.0}
    for name in RESNET18_LAYERS:
        figs = []
        for runs in (cold, warm):
            mine = [r for r in runs if r[0] == name]
            later = [r[2] for r in mine if r[1] >= 1.0]
            figs += [mine[0][2], float(np.median(later)) if later else float("nan")]
        for key, v in zip(per_round, figs, strict=True):
            per_round[key] += v
        fsim = FSIM_S.get(name)
        ratios = ""
        if fsim:
            x = [fsim / v for v in figs]
            ratios = f" {fsim * 1e3:7.1f} {x[0]:15.2f} {x[1]:8.2f} {x[2]:8.2f} {x[3]:8.2f}"
        print(
            f"{name:6s} | {figs[0] * 1e3:11.2f} {figs[1] * 1e3:12.2f} | {figs[2] * 1e3:11.2f}"
            f" {figs[3] * 1e3:12.2f} |{ratios}"
        )
    print(
        "sum C2..C12 (one round): "
        + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in per_round.items())
    )


def _timed(fn) -> tuple[float, float]:
    """(wall, thread CPU) seconds of one call."""
    t0, c0 = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - t0, time.thread_time() - c0


if __name__ == "__main__":
    main()
