"""The float32 FMA peak of this CPU, measured (``pyvta.compiler.backend.llvm.peak``), per core
and on all cores.

    .venv/bin/python benchmarks/cpu_peak.py [--seconds 1] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics

from pyvta.compiler.backend.llvm.peak import accumulators, peak_gflops
from pyvta.compiler.backend.llvm.target import CpuTarget


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    p.add_argument("--threads", type=int, default=None, help="default: the host's cores")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    target = CpuTarget.host()
    threads = a.threads or target.num_threads
    lanes = target.vector_lanes("float32")
    print(f"host: {target.cpu}, {lanes} float32 lanes, {accumulators(target)} accumulators")
    for nt in sorted({1, threads}):
        vals = peak_gflops(nt, a.seconds, a.repeats)
        print(
            f"FMA peak, {nt} thread{'s' if nt > 1 else ''}: {statistics.median(vals):.1f} GFLOP/s "
            f"(median of {a.repeats}; min {min(vals):.1f}, max {max(vals):.1f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
