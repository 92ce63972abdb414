"""Tuning that helps the network on the CPU: tuned ResNet-18 and MobileNet-style networks
against the compiler's default schedules and onnxruntime, side by side in one run.

Run: .venv/bin/python benchmarks/tune_network.py [--models resnet18,mobilenet] [--size 224]
     [--logs out/net] [--trials 16 | --budget 10m] [--top-k 3] [--explore 0]
     [--screen-rounds 4] [--rerank-rounds 15] [--confirm-rounds 20] [--rounds 30] [--threads 2] [--no-rerank]
     [--cpu-time] [--wall-threads 2] [--sweep 12 --sweep-passes 2] [--no-alone]

Per model (the zoo's, ``pyvta.compiler.graph.zoo``, seed 0): its tuning log
``LOGS/MODEL_cpu.jsonl`` (tuned first with ``pyvta tune MODEL.onnx --target cpu --trials N``
when missing), re-ranked inside the network (``tuner.in_network.rerank_in_network``: each
layer's default and ``--top-k`` best logged schedules timed node by node in the running
network, with ``--explore`` more drawn from the layer's spaces and screening stages keeping
the faster half, then ``--confirm-rounds`` of the chosen network against the default one,
keeping only the choices borne out; ``--no-rerank`` keeps the choices already beside the log).
Then four runs, interleaved one inference at a time per round (in a seeded random order):
onnxruntime, pyvta with the compiler's default schedules, with the log's isolated per-layer bests ("alone", what
``cpu_schedules`` chose before re-ranking), and with the in-network choices ("in network").
Each reports its median over ``--rounds``; ratios: default / tuned (> 1: tuning helps) and
onnxruntime / pyvta, and the median of the per-round ratio default / in network (both timed
in the same round: steadier on a loaded machine). All outputs must agree with onnxruntime
within 1e-4. The load average is printed before and after: the machine may be shared.

``--sweep N`` adds per layer up to N schedules one knob away from its default (every knob
moved once before any twice), ``--sweep-passes 2`` re-ranks again with N moves from the first
pass's choices (a coordinate descent in the network). ``--no-rerank`` re-measures from the
log and its LOG.network.json alone (the lead's rerun on a quiet machine); ``--no-alone`` leaves
the isolated bests out (a third fewer kernels to build on a cold kernel cache).

``--cpu-time`` (one thread): the re-ranking and the runs are timed by the CPU time of the
calling thread (``time.thread_time``), which leaves out the time it waited for a core: on a
machine shared with other work the wall clock then compares the load more than the schedules.
``--wall-threads N`` then repeats the four-way comparison on N threads by the wall clock (the
choices still made at one thread), with the per-round paired ratio and its quartiles.
The choices are written beside the log as LOG.network.json either way (the last run's).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.reference import onnxruntime_session
from pyvta.runtime.compiled_model import run_model
from pyvta.testing.side_by_side import rel_err, timed_ms
from pyvta.tuner.in_network_confirm import round_order

MAX_REL_ERR = 1e-4


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def tune_log(model: str, onnx: Path, log: Path, args) -> None:
    """``pyvta tune`` the model's CPU conv layers into ``log`` (its own process, as a user runs
    it: ``--budget`` if given, else ``--trials``), unless the log is there."""
    if log.exists():
        print(f"{model}: tuning log {log} ({sum(1 for _ in log.open())} records)")
        return
    how = ["--budget", args.budget] if args.budget else ["--trials", str(args.trials)]
    cmd = [sys.executable, "-m", "pyvta.cli", "tune", str(onnx), "--target", "cpu", *how,
           "--batch", "8", "--log", str(log), "--no-progress"]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    print(f"{model}: tuned in {time.perf_counter() - t0:.0f} s -> {log}")


def compare(model: str, onnx: Path, log: Path, args, threads: int, clock) -> dict[str, float]:
    """onnxruntime, default, alone and in network on ``threads`` threads, interleaved one
    inference at a time per round, timed by ``clock``; prints medians and ratios."""
    from pyvta.compiler.targets.cpu.kernels import CpuKernels
    from pyvta.tuner.cpu_network import tuned_schedules
    from pyvta.tuner.in_network import paired_ratio

    x = zoo.sample_inputs(1, args.size, 0)[0]
    sess = onnxruntime_session(str(onnx), threads=threads, spin=False)
    ref = sess.run(None, {"input": x})[0]
    runs = {"onnxruntime": lambda: sess.run(None, {"input": x})}
    schedules = {
        "default": None,
        # the log's per-layer bests as measured alone, whichever CPU measured them
        "alone": tuned_schedules(str(onnx), str(log), in_network=False, other_cpus=True),
        "in network": tuned_schedules(str(onnx), str(log)),
    }
    if args.no_alone:  # a third fewer kernels to build
        del schedules["alone"]
    for key, sched in schedules.items():
        cm = compile_model(str(onnx), "cpu", cpu_schedules=sched)
        kernels = {"cpu": CpuKernels(cm.graph, threads)}

        def run(cm=cm, kernels=kernels):
            return run_model(cm, x, backends=kernels)[0]

        err = rel_err(run()[0], ref)
        assert err < MAX_REL_ERR, f"{model} {key}: wrong result ({err:.3g} >= {MAX_REL_ERR})"
        runs[key] = run
    names = list(runs)
    times: dict[str, list[float]] = {k: [] for k in names}
    what = "thread CPU time" if clock is time.thread_time else "wall clock"
    print(
        f"{model}: {threads} threads, {what}, {args.rounds} rounds; load average before: {load()}"
    )
    for r in range(args.rounds):
        for key in round_order(names, r):
            times[key].append(timed_ms(runs[key], clock))
    med = {k: float(np.median(v)) for k, v in times.items()}
    quart = {k: np.percentile(v, [25, 75]) for k, v in times.items()}
    print(f"{model}: load average after: {load()}")
    for k in names:
        print(f"  {k:<12} median {med[k]:8.2f} ms  (quartiles {quart[k][0]:.2f}-{quart[k][1]:.2f})")
    out = {
        "in network / default": med["default"] / med["in network"],
        "in network / onnxruntime": med["onnxruntime"] / med["in network"],
        "default / onnxruntime": med["onnxruntime"] / med["default"],
    }
    if "alone" in med:
        out["alone / default"] = med["default"] / med["alone"]
        out["in network / alone"] = med["alone"] / med["in network"]
    # per round, the paired ratio (same moment, same load): its median is steadier
    paired = np.array(times["default"]) / np.array(times["in network"])
    out["in network / default, paired"] = paired_ratio(times["default"], times["in network"])
    q1, q3 = np.percentile(paired, [25, 75])
    print(f"  {model} speed-ups (x > 1: the first is faster): "
          + ", ".join(f"{k} {v:.3f}x" for k, v in out.items())
          + f" (paired quartiles {q1:.3f}-{q3:.3f})")  # fmt: skip
    return out


def bench(model: str, args, clock) -> dict[str, dict[str, float]]:
    from pyvta.tuner.in_network import descend_in_network, in_network_choices

    folder = Path(args.logs)
    folder.mkdir(parents=True, exist_ok=True)
    onnx = folder / f"{model}_{args.size}.onnx"
    if not onnx.exists():
        zoo.save_model(model, str(onnx), size=args.size, seed=0)
    log = folder / f"{model}_{args.size}_cpu.jsonl"
    tune_log(model, onnx, log, args)
    # --continue: the first pass sweeps from the choices already beside the log (this host's)
    start = in_network_choices(log) if args.resume_sweep else None
    t0 = time.perf_counter()
    passes = descend_in_network(
        onnx, log, 0 if args.no_rerank else args.sweep_passes, args.sweep, start,
        top_k=args.top_k, rounds=args.rerank_rounds, threads=args.threads, clock=clock,
        explore=args.explore, screen_rounds=args.screen_rounds, confirm_rounds=args.confirm_rounds,
    )  # fmt: skip
    for sweep_pass, rr in enumerate(passes, 1):
        print(f"{model}: re-ranked in the network in {time.perf_counter() - t0:.0f} s"
              f" (pass {sweep_pass}: top {args.top_k} + {args.sweep} one-knob moves"
              f" + {args.explore} from the spaces, {args.rerank_rounds} final rounds;"
              f" * = chosen; ms per inference, all launches):")  # fmt: skip
        t0 = time.perf_counter()
        print(rr.summary())
        print(f"{model}: per layer, the default and the chosen schedule in the network:")
        print(rr.table())
        print(rr.confirmed())
    out = {f"{args.threads} thread(s)": compare(model, onnx, log, args, args.threads, clock)}
    if args.wall_threads:
        out[f"{args.wall_threads} threads wall"] = compare(
            model, onnx, log, args, args.wall_threads, time.perf_counter
        )
    return out


def main() -> None:
    from pyvta.tuner.cpu_measure import cpu_target_info

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mobilenet")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--logs", default="out/net", help="folder of the models and their logs")
    ap.add_argument("--trials", type=int, default=16, help="per layer, when tuning a log")
    ap.add_argument(
        "--budget", default="", help="when tuning a log: pyvta tune --budget (e.g. 10m)"
    )
    ap.add_argument("--top-k", dest="top_k", type=int, default=3)
    ap.add_argument("--explore", type=int, default=0,
                    help="per layer, schedules drawn from its spaces, tried in the network too")  # fmt: skip
    ap.add_argument("--sweep", type=int, default=0,
                    help="per layer, one-knob moves from the default, tried in the network")  # fmt: skip
    ap.add_argument("--sweep-passes", dest="sweep_passes", type=int, default=1,
                    help="re-rankings, each sweeping from the last one's choices")  # fmt: skip
    ap.add_argument("--continue", dest="resume_sweep", action="store_true",
                    help="the first sweep starts from the choices beside the log")  # fmt: skip
    ap.add_argument("--screen-rounds", dest="screen_rounds", type=int, default=4)
    ap.add_argument("--rerank-rounds", dest="rerank_rounds", type=int, default=15)
    ap.add_argument("--confirm-rounds", dest="confirm_rounds", type=int, default=20,
                    help="the chosen network against the default, kept where borne out (0: off)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wall-threads", dest="wall_threads", type=int, default=0,
                    help="also compare on this many threads by the wall clock")  # fmt: skip
    ap.add_argument("--no-rerank", dest="no_rerank", action="store_true")
    ap.add_argument("--no-alone", dest="no_alone", action="store_true",
                    help="compare without the log's isolated bests (fewer kernels to build)")  # fmt: skip
    ap.add_argument("--cpu-time", dest="cpu_time", action="store_true",
                    help="time by the calling thread's CPU time (needs --threads 1)")  # fmt: skip
    args = ap.parse_args()
    if args.cpu_time and args.threads != 1:
        ap.error("--cpu-time needs --threads 1 (it times the calling thread only)")
    clock = time.thread_time if args.cpu_time else time.perf_counter
    print(f"host: {cpu_target_info()}; pyvta and onnxruntime on {args.threads} threads")
    print(f"load average (1, 5, 15 min): {load()}")
    what = "CPU time of the calling thread" if args.cpu_time else "wall clock"
    print(f"timed by: {what}")
    summary = {m: bench(m, args, clock) for m in args.models.split(",")}
    print("summary (default / tuned in network; goal >= 1.1x):")
    for m, per in summary.items():
        for how, r in per.items():
            alone = r.get("alone / default")
            print(f"  {m}, {how}: {r['in network / default']:.3f}x"
                  f" (paired {r['in network / default, paired']:.3f}x),"
                  + ("" if alone is None else f" isolated bests {alone:.3f}x,")
                  + f" vs onnxruntime {r['in network / onnxruntime']:.3f}x")  # fmt: skip


if __name__ == "__main__":
    main()
