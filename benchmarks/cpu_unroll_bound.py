"""What ``tuner.cpu.MAX_UNROLLED_FMAS`` (the direct template's bound on an unrolled reduction
step) costs and saves, read from measured records: per layer, the builds by unrolled size
(vector FMAs, ``NchwcConvKnobs.unrolled_fmas``), their mean build time and build timeouts, the
share of all build time spent past the bound, and the best cost within the bound over the best
of all (1.000: the bound keeps the best) with the configs within 5% of the best it drops.

    .venv/bin/python benchmarks/cpu_unroll_bound.py --log CACHE.jsonl [--bound 512]

``CACHE.jsonl``: a tuning log or ``tune_search.py --cache`` of direct-template layers
(``cpu.conv2d_nchwc``), measured on this machine's kind (the lanes are this host's). A timed-out
build counts its bound's seconds (``--timeout-s``).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict


def unrolled(task, config: dict) -> int:
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.tuner.cpu import direct_knobs
    from pyvta.tuner.cpu_nchwc import nchwc_workload

    wl = nchwc_workload(*task.args)
    lanes = CpuTarget.host().vector_lanes("float32")
    return direct_knobs(config).unrolled_fmas(wl.kernel, wl.ob, lanes)


def report(log: str, bound: int, timeout_s: float) -> int:
    from pyvta.tuner.cpu import CONV2D_NCHWC
    from pyvta.tuner.log import read_records, tasks_in_log

    tasks = {t.key: t for t in tasks_in_log(log, {CONV2D_NCHWC.name: CONV2D_NCHWC})}
    if not tasks:
        print(f"no records of the direct template ({CONV2D_NCHWC.name}) in the log")
        return 1
    by_task = defaultdict(list)  # every record, those past the bound too (no task's filter)
    for r in read_records(log):
        if r.task_key in tasks:
            by_task[r.task_key].append(r)
    print(f"bound: {bound} vector FMAs per unrolled reduction step\n")
    for key, rs in by_task.items():
        sizes = [unrolled(tasks[key], r.config) for r in rs]
        secs = [timeout_s if r.result.error == "build_timeout" else r.result.build_s for r in rs]
        ok = [(r.result.cost, n) for r, n in zip(rs, sizes, strict=True) if r.result.ok]
        if not ok:
            continue
        best = min(c for c, _ in ok)
        inside = min((c for c, n in ok if n <= bound), default=float("inf"))
        near_past = sum(best / c >= 0.95 and n > bound for c, n in ok)
        past_s = sum(s for s, n in zip(secs, sizes, strict=True) if n > bound)
        timeouts = [n for r, n in zip(rs, sizes, strict=True) if r.result.error == "build_timeout"]
        print(
            f"{key}: {len(rs)} builds; best within the bound / best {inside / best:.3f};"
            f" {near_past} configs within 5% of the best past it; build time past it"
            f" {past_s / sum(secs):.0%} of {sum(secs):.0f} s; build timeouts past it"
            f" {sum(n > bound for n in timeouts)} of {len(timeouts)}"
        )
        buckets = defaultdict(list)
        for n, s, r in zip(sizes, secs, rs, strict=True):
            buckets[1 << max(n, 1).bit_length() - 1].append((s, r.result.error == "build_timeout"))
        for lo in sorted(buckets):
            b = buckets[lo]
            mark = " (past the bound)" if lo >= bound else ""
            print(
                f"  {lo:>5}-{2 * lo - 1:<5} FMAs: {len(b):4d} builds, mean {sum(s for s, _ in b) / len(b):5.1f} s,"
                f" {sum(t for _, t in b):3d} timed out{mark}"
            )
    return 0


def main(argv=None) -> int:
    from pyvta.tuner.cpu import MAX_UNROLLED_FMAS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--log", required=True, help="tuning log or tune_search --cache of direct layers"
    )
    p.add_argument(
        "--bound", type=int, default=MAX_UNROLLED_FMAS, help="vector FMAs (default: the tuner's)"
    )
    p.add_argument("--timeout-s", type=float, default=30.0, help="seconds a timed-out build counts")
    a = p.parse_args(argv)
    return report(a.log, a.bound, a.timeout_s)


if __name__ == "__main__":
    sys.exit(main())
