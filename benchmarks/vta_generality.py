"""Generated networks (the kinds users bring) on the accelerator: how many convs ``vta`` takes,
why the rest stay on the CPU, and whether each network runs bit-exact on the simulator.

Run: .venv/bin/python benchmarks/vta_generality.py [--count 30] [--first-seed 0]
     [--partition whole|legacy] [--no-run]

Networks: ``pyvta.testing.netgen.random_network(seed)`` for ``--count`` seeds (the test suite's
generator, as ``benchmarks/cpu_generality.py``). Each is compiled for ``vta``
(``partition_targets.conv_placement``: convs on the accelerator, in all, the others' one-line
reasons); unless ``--no-run``, its kernels are lowered (analytic default schedules) and the
network runs on ``SimDevice`` (the cycle model) and through the golden model: outputs equal bit
for bit, and the accelerator cycles are printed. A network that fails is listed with its error.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from pyvta.compiler.graph.compile import compile_model, lower_kernels
from pyvta.compiler.targets.vta.partition_targets import VTA_PARTITIONS, conv_placement
from pyvta.driver import SimDevice
from pyvta.runtime.compiled_model import run_model
from pyvta.testing import netgen


def network(seed: int, folder: Path, partition: str, run: bool) -> dict:
    """One generated network: placement, and (``run``) bit-exactness and cycles on the sim."""
    model = netgen.random_network(seed)
    path = folder / f"net{seed}.onnx"
    onnx.save(model, str(path))
    cm = compile_model(path, "vta", lower=False, vta_partition=partition)
    on, total, reasons = conv_placement(cm.graph, partition)
    info = {"name": f"net{seed}", "describe": netgen.describe(model), "on": on, "total": total}
    info["reasons"] = reasons
    if run:
        t0 = time.perf_counter()
        lower_kernels(cm)
        feeds = {"input": netgen.sample_input(model, seed + 100)}
        backend = cm.accelerator(SimDevice(cm.hw))
        out = run_model(cm, feeds, backends={"vta": backend})[0]
        gold = run_model(cm, feeds)[0]
        info["exact"] = all(np.array_equal(a, b) for a, b in zip(out, gold, strict=True))
        info["cycles"] = backend.total_cycles
        info["launches"] = len(backend.runs)
        info["s"] = time.perf_counter() - t0
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--first-seed", dest="first_seed", type=int, default=0)
    ap.add_argument("--partition", choices=VTA_PARTITIONS, default="whole")
    ap.add_argument("--no-run", dest="run", action="store_false", help="placement only")
    args = ap.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="pyvta-vta-generality-"))
    rows, failures = [], []
    for seed in range(args.first_seed, args.first_seed + args.count):
        try:
            r = network(seed, folder, args.partition, args.run)
        except Exception as e:  # a failing network is listed, never ends the run
            failures.append((f"net{seed}", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
            print(f"net{seed}: FAILED {failures[-1][1]}")
            continue
        rows.append(r)
        run = (
            f"; sim {'bit-exact' if r['exact'] else 'DIFFERS'}, {r['cycles']:,} cycles in"
            f" {r['launches']} launches ({r['s']:.0f} s)"
            if args.run
            else ""
        )
        print(f"{r['describe']}: {r['on']}/{r['total']} convs on vta{run}")
    on, total = sum(r["on"] for r in rows), sum(r["total"] for r in rows)
    reasons: dict[str, int] = {}
    for r in rows:
        for why, n in r["reasons"].items():
            reasons[why] = reasons.get(why, 0) + n
    print(f"\n{len(rows)} networks compiled ({args.partition} partition): {on} of {total} convs on"
          " the accelerator")  # fmt: skip
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  on the CPU: {n:3d} x {why}")
    if args.run:
        exact = sum(1 for r in rows if r["exact"])
        print(f"bit-exact on the simulator vs the golden model: {exact} of {len(rows)} networks")
    print(f"failures: {len(failures)}")
    for name, err in failures:
        print(f"  {name}: {err}")
    ok = not failures and (not args.run or all(r["exact"] for r in rows))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
