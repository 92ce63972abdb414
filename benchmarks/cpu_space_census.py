"""Census of the CPU conv templates' tuning spaces: per ResNet-18 layer C1-C12 (as the CPU
network blocks its channels on this host) and, with ``--mobilenet``, per conv layer of the zoo's
MobileNet-style net, each template's space size and how many of its points are valid (the space's
``problem`` accepts them: they build), and optionally how much room the space has.

    .venv/bin/python benchmarks/cpu_space_census.py                      # sizes, ~10 s
    .venv/bin/python benchmarks/cpu_space_census.py --mobilenet
    .venv/bin/python benchmarks/cpu_space_census.py --layers C9,C12 --sample 16 --rounds 5

``--sample N`` measures N random valid points of each task (seeded, ``--seed``) and the
compiler's untuned point of that template (``kernels.default_conv_schedule``'s knobs: the direct
template's for every layer, Winograd's and pointwise's where they are the untuned choice, else
the template's first point), interleaved: ``--rounds`` rounds, each one run of every config in
turn, each config's median over the rounds (the machine may be shared: interleaving gives every
config the same load). Columns: the default's ms, the best and median of the sample, and
default / best (above 1: a random point beat the untuned schedule, room for the tuner).
Costs are one layer alone, ``--threads`` threads, float64-checked outputs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def _tasks(names: list[str], mobilenet: bool, size: int):
    """``[(label, workload, task)]``: ResNet-18's ``names``, then MobileNet's conv layers."""
    from pyvta.tuner import cpu

    out = []
    workloads = cpu.resnet18_cpu_workloads()
    for name in names:
        for t in cpu.nchwc_conv_tasks(workloads[name]):
            out.append((name, workloads[name], t))
    if mobilenet:
        import tempfile
        from pathlib import Path

        from pyvta.compiler.graph import zoo
        from pyvta.tuner.cpu_network import cpu_network_layers

        with tempfile.TemporaryDirectory() as d:
            path = str(Path(d) / "mobilenet.onnx")
            zoo.save_model("mobilenet", path, size=size)
            layers = cpu_network_layers(path)
        for i, layer in enumerate(layers, 1):
            for t in cpu.nchwc_conv_tasks(layer.workload):
                out.append((f"M{i}", layer.workload, t))
    return out


def _default_point(wl, task):
    """The untuned point of ``task``'s template for ``wl`` (its first point where the
    compiler's untuned knobs are not one of the space's)."""
    from pyvta.compiler.ops.cpu.winograd import WinogradKnobs
    from pyvta.compiler.targets.cpu import kernels
    from pyvta.tuner import cpu

    name = task.name
    if name == cpu.CONV2D_NCHWC.name:
        knobs = kernels.default_direct_knobs(wl)
    elif name == cpu.WINOGRAD_NCHWC.name:
        knobs = kernels.default_winograd_knobs(wl) or WinogradKnobs().to_dict()
    elif name == cpu.POINTWISE_NCHWC.name:
        knobs = kernels.default_pointwise_knobs(wl).to_dict()
    else:
        knobs = kernels.default_conv_schedule(wl)["knobs"]
    try:
        return cpu.point_of_schedule(task, knobs)
    except ValueError:
        return task.space.get(0)


def _measure(task, configs, rounds: int, threads: int) -> list[float]:
    """Median seconds of each config over ``rounds`` interleaved rounds (inf: it failed)."""
    from pyvta.tuner.cpu_measure import CpuBackend
    from pyvta.tuner.measure import InProcessMeasurer

    meas = InProcessMeasurer(CpuBackend(num_threads=threads, min_repeat_ms=5.0), repeats=1)
    costs: list[list[float]] = [[] for _ in configs]
    for _ in range(rounds):
        for i, res in enumerate(meas.measure(task, configs)):
            costs[i].append(res.cost if res.ok else float("inf"))
            if not res.ok:
                print(f"    {task.name} {configs[i].to_dict()}: {res.error} {res.msg[-200:]}")
    return [statistics.median(c) for c in costs]


def main(argv=None) -> int:
    from pyvta.tuner.cli_support import layer_names
    from pyvta.tuner.cpu import schedule_of, valid_count
    from pyvta.tuner.cpu_measure import cpu_target_info

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default="C1-C12", help="ResNet-18 layers, e.g. C1-C12 or C2,C9")
    p.add_argument("--mobilenet", action="store_true", help="also the MobileNet-style net's")
    p.add_argument("--size", type=int, default=224, help="--mobilenet: input size")
    p.add_argument("--sample", type=int, default=0, help="random valid points measured per task")
    p.add_argument("--rounds", type=int, default=3, help="--sample: interleaved rounds")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    print(f"host: {cpu_target_info()}; seed {a.seed}")
    head = f"{'layer':6} {'template':10} {'points':>12} {'valid':>12} {'valid%':>7}"
    if a.sample:
        head += f" {'default ms':>10} {'best ms':>9} {'median ms':>9} {'dflt/best':>9}"
    print(head)
    rng = np.random.default_rng(a.seed)
    smallest: dict[str, int] = {}
    for label, wl, task in _tasks(layer_names(a.layers), a.mobilenet, a.size):
        t0 = time.perf_counter()
        valid = valid_count(task)
        template = schedule_of(task, task.space.get(0))["template"]
        smallest[template] = min(smallest.get(template, valid), valid)
        line = f"{label:6} {template:10} {task.space.size:12d} {valid:12d}"
        line += f" {100 * valid / task.space.size:6.1f}%"
        if a.sample:
            default = _default_point(wl, task)
            picks = [task.space.get(i) for i in task.space.sample_unique(rng, a.sample)]
            picks = [c for c in picks if c.index != default.index]
            costs = _measure(task, [default, *picks], a.rounds, a.threads)
            ok = sorted(c for c in costs[1:] if np.isfinite(c))
            best, med = (ok[0], statistics.median(ok)) if ok else (float("nan"),) * 2
            line += f" {costs[0] * 1e3:10.3f} {best * 1e3:9.3f} {med * 1e3:9.3f}"
            line += f" {costs[0] / best:9.2f}"
            if ok:
                top = picks[costs[1:].index(best)]
                line += f"   best: {json.dumps(schedule_of(task, top)['knobs'])}"
        print(line + f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(
        "smallest valid count per template: " + ", ".join(f"{k} {v}" for k, v in smallest.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
