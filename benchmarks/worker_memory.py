"""A tuning worker's memory over its candidates: builds and times ``--candidates`` random
configs of a task in one process, as a measuring worker does (``CpuBackend.build`` then
``run``), and prints the process's resident memory every ``--every`` candidates, once with the
kernel cache's memory bound (``compiler.backend.llvm.cache.MEMORY_KERNELS``) and once with
none (every JIT kept, as before the bound), each in a fresh process, side by side.

    .venv/bin/python benchmarks/worker_memory.py   # gemm:128,128,128, 200 candidates
    .venv/bin/python benchmarks/worker_memory.py --task nchwc:C11 --candidates 60
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

import psutil


def one_process(task_text: str, candidates: int, every: int, memory_kernels: int, seed: int):
    """Rows ``(candidates done, resident MiB, seconds)`` of one process."""
    import numpy as np

    from pyvta.compiler.backend.llvm import entry
    from pyvta.compiler.backend.llvm.cache import KernelCache
    from pyvta.tuner.cli_support import parse_workload
    from pyvta.tuner.cpu_measure import CpuBackend

    task = parse_workload(task_text)
    with tempfile.TemporaryDirectory(prefix="pyvta-worker-memory-") as folder:
        entry._CACHES[folder] = KernelCache(folder, memory_kernels=memory_kernels)
        backend = CpuBackend(cache_dir=folder)
        rng = np.random.default_rng(seed)
        me = psutil.Process()  # rows in MiB resident
        rows, done, t0 = [(0, me.memory_info().rss / 2**20, 0.0)], 0, time.perf_counter()
        for index in rng.permutation(len(task.space))[: 20 * candidates]:
            config = task.space.get(int(index))
            if task.space.problem(config) is not None:
                continue
            backend.run(task, config, backend.build(task, config), 1)
            done += 1
            if done % every == 0:
                rows.append((done, me.memory_info().rss / 2**20, time.perf_counter() - t0))
            if done >= candidates:
                break
    return rows


def main(argv=None) -> int:
    from pyvta.compiler.backend.llvm.cache import MEMORY_KERNELS

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="gemm:128,128,128", help="a pyvta tune workload")
    p.add_argument("--candidates", type=int, default=200)
    p.add_argument("--every", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memory-kernels", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.memory_kernels is not None:  # one side, in a process of its own
        for done, mib, secs in one_process(a.task, a.candidates, a.every, a.memory_kernels, a.seed):
            print(f"{done} {mib:.0f} {secs:.0f}", flush=True)
        return 0
    print(f"{a.task}: {a.candidates} random valid candidates (seed {a.seed}), each built and timed")
    sides = {f"bound {MEMORY_KERNELS}": MEMORY_KERNELS, "unbounded": 1 << 30}
    table = {}
    for name, kernels in sides.items():
        cmd = [sys.executable, __file__, "--task", a.task, "--candidates", str(a.candidates)]
        cmd += ["--every", str(a.every), "--seed", str(a.seed), "--memory-kernels", str(kernels)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        table[name] = [tuple(map(float, line.split())) for line in out.splitlines()]
    print("| candidates | " + " | ".join(f"{n}: MiB" for n in sides) + " |")
    print("|---|" + "---|" * len(sides))
    for rows in zip(*table.values(), strict=True):
        print(f"| {rows[0][0]:.0f} | " + " | ".join(f"{r[1]:.0f}" for r in rows) + " |")
    # from the first row after the start (imports, the runtime, the first kernels) to the last
    grow = [(r[-1][1] - r[1][1]) / max(r[-1][0] - r[1][0], 1) for r in table.values()]
    print(
        f"growth per candidate after the first {a.every}: {grow[0]:.2f} MiB with the bound,"
        f" {grow[1]:.2f} MiB without"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
