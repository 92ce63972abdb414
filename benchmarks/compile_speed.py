"""Compile time from an empty cache, this checkout against another revision, side by side.

Two kinds of work, each timed in a fresh process with an empty cache (``PYVTA_CACHE_DIR``):

- **tuning builds**: what a tuning run compiles, one kernel per config: ``--configs N`` configs
  of each of ResNet-18's conv layers (``--layers``, the direct NCHWc template's ``nchwc:C1``
  ...), drawn from the layer's space with a fixed seed (printed; the same configs for both
  checkouts), each lowered, optimised and JIT-compiled (``compiler.build``), timed inside the
  process (its start and imports left out);
- **a network's first run** (``--models``, zoo names or ONNX files): ``pyvta run MODEL --target
  T --runs 1`` (``--target``, default ``cpu``; ``cpu-int8`` also calibrates and quantizes), the
  whole process by the wall clock: what a user's first run waits; with ``--warm``, its later
  runs: each side's cache filled by one untimed run of the same model first (kept over the
  rounds), so what is timed is reading the kept kernels, configs and programs.

``--before REV`` checks REV out into a temporary git worktree and runs the same work there
(imported through a folder of links laid out as the installed package), in a random order
per round (``tuner.in_network_confirm.round_order``); each line gives both times and their
ratio, the end their sums and the geometric mean of the paired ratios. ``--kernels R`` then
times the kernels the two sides generated for the same configs (a change in code generation
changes them), in turn in this process, after checking that their outputs are equal.

    .venv/bin/python benchmarks/compile_speed.py --before 3301f79 --configs 3 --rounds 2
    .venv/bin/python benchmarks/compile_speed.py --before 3301f79 --models none --kernels 15
    .venv/bin/python benchmarks/compile_speed.py --layers C9 --configs 8 --models none
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
from statistics import geometric_mean

ROOT = Path(__file__).resolve().parents[1]
KERNEL_THREADS = 2  # the kernels are built, and timed by --kernels, for 2 threads


def _subpackages(checkout: Path) -> tuple[str, ...]:
    """The folders ``checkout``'s setup.py installs as ``pyvta.<name>`` (its
    ``SUBPACKAGES``), read from the file, not run."""
    import ast

    tree = ast.parse((checkout / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SUBPACKAGES" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError(f"{checkout / 'setup.py'} defines no SUBPACKAGES")


def package_view(checkout: Path, into: Path) -> Path:
    """A folder holding ``pyvta/`` laid out as installed, made of links into ``checkout``
    (``pyvta/``'s own files, and each subpackage's folder): put on ``PYTHONPATH`` it imports
    that checkout's code ahead of the editable install's."""
    pkg = into / "pyvta"
    pkg.mkdir(parents=True)
    for f in (checkout / "pyvta").iterdir():
        (pkg / f.name).symlink_to(f)
    for name in _subpackages(checkout):
        (pkg / name).symlink_to(checkout / name)
    return into


def random_configs(task, n: int, seed: int) -> list[int]:
    """``n`` indices of valid configs of ``task``'s space, drawn with ``seed``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[int] = []
    for _ in range(200 * n):
        if len(out) == n:
            break
        i = int(rng.integers(len(task.space)))
        try:
            task.instantiate(task.space.get(i))
        except Exception:  # a point the template refuses
            continue
        out.append(i)
    return out


def worker(layer: str, indices: list[int], keep: str | None) -> None:
    """Build ``layer``'s configs ``indices`` into this process's (empty) cache; print the
    seconds of each build as JSON. ``keep``: a folder to write each kernel's optimised LLVM IR
    and the digest of its loop IR into (``--kernels`` times them)."""
    from pyvta.compiler import build
    from pyvta.tuner.cli_support import parse_workload

    task = parse_workload("nchwc:" + layer)
    times = []
    for i in indices:
        t = time.perf_counter()
        sch, args = task.instantiate(task.space.get(i))
        mod = build(sch, args, num_threads=KERNEL_THREADS)
        times.append(time.perf_counter() - t)
        if keep is not None:
            (Path(keep) / f"{i}.ll").write_text(mod.llvm_ir)
            (Path(keep) / f"{i}.loop").write_text(_digest(str(mod.ir)))
    print(json.dumps(times))


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _run(python_path: str | None, argv: list[str], cache: Path) -> tuple[float, str]:
    env = dict(os.environ, PYVTA_CACHE_DIR=str(cache))
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-P", *argv], env=env, capture_output=True, text=True, cwd=cache
    )
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return wall, p.stdout


def _model_path(model: str, into: Path) -> str:
    if model.endswith(".onnx"):
        return str(Path(model).resolve())
    out = into / f"{model}.onnx"
    if not out.exists():
        subprocess.run(
            [sys.executable, "-P", "-m", "pyvta.cli", "zoo", model, "-o", str(out)],
            check=True,
            capture_output=True,
        )
    return str(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--before", help="a git revision to compare with (default: this checkout alone)")
    p.add_argument(
        "--layers",
        default="C1-C12",
        help="ResNet-18 conv layers (default C1-C12; 'none': no build)",
    )
    p.add_argument("--configs", type=int, default=4, help="configs a layer (default 4)")
    p.add_argument("--seed", type=int, default=0, help="the configs' seed (default 0)")
    p.add_argument(
        "--models", default="resnet18,mobilenet", help="networks' first runs ('none': no network)"
    )
    p.add_argument("--target", default="cpu", help="the networks' target (default cpu)")
    p.add_argument("--rounds", type=int, default=1, help="rounds of everything (default 1)")
    p.add_argument(
        "--warm", action="store_true", help="networks: time later runs (a filled cache), not first"
    )
    p.add_argument(
        "--kernels",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="with --before: also time each side's kernels of the first round's builds in turn,"
        " in this process, over ROUNDS rounds (their outputs compared)",
    )
    p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a.worker[0], json.loads(a.worker[1]), a.worker[2] or None)
        return 0
    if a.kernels and not a.before:
        p.error("--kernels compares two sides' kernels: give --before REV")

    from pyvta.tuner.cli_support import layer_names, parse_workload
    from pyvta.tuner.in_network_confirm import round_order

    layers = [] if a.layers == "none" else layer_names(a.layers)
    models = [] if a.models == "none" else a.models.split(",")
    builds = f"configs: {a.configs} a layer, seed {a.seed}; " if layers else ""
    print(f"{builds}rounds {a.rounds}")
    indices = {}
    for layer in layers:
        indices[layer] = random_configs(parse_workload("nchwc:" + layer), a.configs, a.seed)
    with tempfile.TemporaryDirectory(prefix="compile_speed_") as tmp:
        tmp = Path(tmp)
        sides = {"this": None}
        if a.before:
            base = tmp / "before"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), a.before],
                check=True,
                capture_output=True,
            )
            sides = {"before": str(package_view(base, tmp / "view")), "this": None}
        try:
            totals = _compare(a, layers, models, indices, sides, tmp, round_order)
            if a.kernels:
                _time_kernels(layers, indices, tmp, a.kernels, round_order)
        finally:
            if a.before:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "before")],
                    check=False,
                    capture_output=True,
                )
    _summary(totals, sides)
    return 0


def _compare(a, layers, models, indices, sides, tmp, round_order) -> dict:
    """Run every item in every round, the sides in each round's order; ``{kind: {item: {side:
    [seconds per round]}}}``."""
    script = str(Path(__file__).resolve())
    items = [("build", layer) for layer in layers] + [("network", m) for m in models]
    out: dict = {"build": {}, "network": {}}
    n = 0
    for r in range(a.rounds):
        for kind, item in items:
            times = {}
            for side in round_order(list(sides), r * len(items) + n):
                n += 1
                if kind == "network" and a.warm:
                    cache = tmp / f"warm_{side}_{Path(item).stem}"
                    if not cache.exists():
                        cache.mkdir()
                        _run(sides[side], _network_argv(a, item, tmp), cache)  # fills it
                else:
                    cache = tmp / f"cache{n}_{side}"
                    cache.mkdir()
                if kind == "build":
                    keep = tmp / "kernels" / side / item if r == 0 and a.kernels else None
                    if keep is not None:
                        keep.mkdir(parents=True)
                    argv = [script, "--worker", item, json.dumps(indices[item]), str(keep or "")]
                    _, text = _run(sides[side], argv, cache)
                    times[side] = sum(json.loads(text.strip().splitlines()[-1]))
                else:
                    times[side], _ = _run(sides[side], _network_argv(a, item, tmp), cache)
                out[kind].setdefault(item, {}).setdefault(side, []).append(times[side])
            what = f"{len(indices[item])} builds" if kind == "build" else "first run"
            what = "warm run" if kind == "network" and a.warm else what
            line = "  ".join(f"{s} {t:6.2f} s" for s, t in times.items())
            ratio = f"  before / this {times['before'] / times['this']:.2f}x" if a.before else ""
            print(f"round {r} {item:>14} ({what}): {line}{ratio}", flush=True)
    return out


def _network_argv(a, model: str, tmp: Path) -> list[str]:
    path = _model_path(model, tmp)
    return ["-m", "pyvta.cli", "run", path, "--target", a.target, "--runs", "1"]


def _time_kernels(layers, indices, tmp: Path, rounds: int, round_order) -> None:
    """Each config's kernels as the two sides generated them (their optimised LLVM IR, kept by
    the first round's workers), JIT-compiled here and run in turn on the same inputs: their
    outputs compared, then ``rounds`` rounds timed (each a median of repeats of >= 20 ms)."""
    import numpy as np

    from pyvta.compiler.api import lower
    from pyvta.compiler.backend.llvm.jit import JitFunction
    from pyvta.compiler.backend.llvm.module import Module
    from pyvta.compiler.backend.llvm.passes import LLVM_PASSES
    from pyvta.compiler.backend.llvm.target import CpuTarget
    from pyvta.compiler.passes import run_passes
    from pyvta.tuner.cli_support import parse_workload

    target = CpuTarget.host(KERNEL_THREADS)
    ratios = []
    print(f"\nkernels ({KERNEL_THREADS} threads, median of {rounds} rounds in turn):")
    for layer in layers:
        task = parse_workload("nchwc:" + layer)
        for i in indices[layer]:
            sch, args = task.instantiate(task.space.get(i))
            func = run_passes(lower(sch, args), LLVM_PASSES)
            mods = {}
            for side in ("before", "this"):
                kept = tmp / "kernels" / side / layer
                if (kept / f"{i}.loop").read_text() != _digest(str(func)):
                    raise RuntimeError(f"{layer} config {i}: the sides lowered it differently")
                jit = JitFunction((kept / f"{i}.ll").read_text(), func.name, target)
                mods[side] = Module(func, jit, target, "disk")
            rng = np.random.default_rng(0)
            values = task.template.inputs(
                [rng.standard_normal(t.shape).astype(t.dtype) for t in args], task.args
            )
            arrays = {side: [v.copy() for v in values] for side in mods}
            for side, m in mods.items():
                m(*arrays[side])
            same = all(
                np.array_equal(x, y) for x, y in zip(arrays["before"], arrays["this"], strict=True)
            )
            est = mods["this"].time_ms(*arrays["this"], number=1, repeat=1)
            number = max(1, int(20 / max(est, 1e-3)))
            times: dict = {side: [] for side in mods}
            for r in range(rounds):
                for side in round_order(list(mods), r):
                    times[side].append(mods[side].time_ms(*arrays[side], number=number, repeat=1))
            med = {side: float(np.median(v)) for side, v in times.items()}
            ratios.append(med["before"] / med["this"])
            print(
                f"{layer:>4} config {i:>11}: before {med['before']:.4f} ms  this"
                f" {med['this']:.4f} ms  before / this {ratios[-1]:.3f}x"
                f"  outputs {'equal' if same else 'DIFFER'}",
                flush=True,
            )
            if not same:
                raise RuntimeError(f"{layer} config {i}: the two kernels' outputs differ")
    print(
        f"kernels: before / this {geometric_mean(ratios):.3f}x geomean of {len(ratios)}"
        f" (range {min(ratios):.2f}-{max(ratios):.2f}x)"
    )


def _summary(totals: dict, sides: dict) -> None:
    for kind, rows in totals.items():
        if not rows:
            continue
        sums = {s: sum(sum(v[s]) for v in rows.values()) for s in sides}
        line = "  ".join(f"{s} {t:.1f} s" for s, t in sums.items())
        print(f"\n{kind}: {line}", end="")
        if "before" in sides:
            ratios = [
                b / t for v in rows.values() for b, t in zip(v["before"], v["this"], strict=True)
            ]
            print(
                f"  before / this: {sums['before'] / sums['this']:.2f}x in all,"
                f" {geometric_mean(ratios):.2f}x geomean of {len(ratios)} paired",
                end="",
            )
        print()


if __name__ == "__main__":
    raise SystemExit(main())
