"""Tuning throughput with measurements fanned out over 1 and 2 device servers (Dask), and a run
that loses one of two servers half-way.

    python benchmarks/tune_fanout.py [--layer C9] [--trials 64] [--seed 0]

The ResNet-18 layer's VTA task, ``--trials`` trials (the backend's 12 most promising configs
first, then random ones, as ``pyvta tune --tuner random`` does), cost = the cycle model of a
``pyvta serve --device sim`` server's launch (each a separate process on 127.0.0.1, with a key,
in a session of its own as a service would be: see ``pyvta.testing.remote.start_server`` on why that
matters where Linux shares the CPU by session; ``--same-session`` for the other case).
Every candidate is built once on the host beforehand (timed apart) so that the three runs measure
the same candidates and their times are the devices' fan-out, not the host's lowering. Printed:
trials per second with 1 and 2 servers and their ratio; for the run where the second server is
killed once half the trials are logged: that it finished, the log's records, distinct configs,
repeats and errors, and the per-device summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from pyvta.testing.remote import key_file, start_server
from pyvta.tuner.cli_support import parse_workload
from pyvta.tuner.distributed import DaskMeasurer
from pyvta.tuner.measure import Backend, InProcessMeasurer
from pyvta.tuner.task import InvalidConfig
from pyvta.tuner.tune import tune
from pyvta.tuner.vta import VtaDeviceBackend


class Prebuilt(Backend):
    """Builds each config once (``VtaDeviceBackend.build``) and hands the same kernel out again."""

    def __init__(self):
        self.inner, self.kernels, self.build_s = VtaDeviceBackend("sim"), {}, 0.0

    def build(self, task, config):
        if config.index not in self.kernels:
            t0 = time.perf_counter()
            try:
                self.kernels[config.index] = self.inner.build(task, config)
            except InvalidConfig as e:
                self.kernels[config.index] = e
            self.build_s += time.perf_counter() - t0
        kernel = self.kernels[config.index]
        if isinstance(kernel, InvalidConfig):
            raise kernel
        return kernel

    def run(self, task, config, artifact, repeats):
        return [1.0]  # the warm-up run only builds


def _tune(task, trials, seed, devices, key_path, builder, log):
    with DaskMeasurer(devices, {"key_file": key_path}, builder=builder) as m:
        t0 = time.perf_counter()
        res = tune(
            task,
            trials,
            m,
            tuner="random",
            seed=seed,
            log=str(log) if log else None,
            progress=False,
            initial=task.prior(12),
        )
        wall = time.perf_counter() - t0
        summary = m.summary()
    return res, wall, summary


def _cpu_s(servers) -> float:
    """User + system CPU seconds the server processes have used."""
    import psutil

    return sum(sum(psutil.Process(proc.pid).cpu_times()[:2]) for proc, _ in servers)


def _kill_half_way(proc, log: Path, at: int, stop: threading.Event) -> None:
    while not stop.is_set():
        if log.exists() and len(log.read_text().splitlines()) >= at:
            proc.kill()
            print(f"  killed the second server after {at} logged trials")
            return
        time.sleep(0.05)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", default="C9")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2, help="runs with 1 and with 2 servers")
    ap.add_argument(
        "--same-session",
        action="store_true",
        dest="same_session",
        help="servers in this script's session (see pyvta.testing.remote.start_server)",
    )
    args = ap.parse_args(argv)
    task = parse_workload(f"vta:{args.layer}")
    print(
        f"{args.layer}: {args.trials} trials (12 prior configs, then random; seed {args.seed}),"
        " cost = cycle model of a sim device server"
    )
    builder = Prebuilt()
    path = key_file()
    tmp = Path(tempfile.mkdtemp(prefix="pyvta-fanout-"))
    servers = [start_server(path, own_session=not args.same_session) for _ in range(2)]
    print(f"servers in {'this session' if args.same_session else 'sessions of their own'}")
    try:
        # the candidates the runs will measure: the same seeded run, built once
        warm = InProcessMeasurer(builder, repeats=1)
        tune(
            task,
            args.trials,
            warm,
            tuner="random",
            seed=args.seed,
            progress=False,
            initial=task.prior(12),
        )
        print(f"host builds: {len(builder.kernels)} candidates in {builder.build_s:.1f} s (once)")
        devices = [f"tcp://{a}" for _, a in servers]  # warm up both (a native engine compiles)
        _tune(task, args.trials, args.seed, devices, path, builder, None)
        walls = {1: [], 2: []}
        for _ in range(args.rounds):  # 1 and 2 servers in turns: both see the same machine load
            for n in (1, 2):
                devices = [f"tcp://{a}" for _, a in servers[:n]]
                cpu0, host0 = _cpu_s(servers[:n]), time.process_time()
                load = os.getloadavg()[0]
                res, wall, summary = _tune(
                    task, args.trials, args.seed, devices, path, builder, None
                )
                walls[n].append(wall)
                print(
                    f"{n} server{'s' if n > 1 else ' '}: {wall:6.1f} s,"
                    f" {len(res.history) / wall:.2f} trials/s, best {res.best_cost:.0f} cycles;"
                    f" CPU: servers {_cpu_s(servers[:n]) - cpu0:.1f} s, host"
                    f" {time.process_time() - host0:.1f} s; load average {load:.1f}"
                )
                print("  " + summary.replace("\n", "\n  "))
        rate = {n: args.trials * len(w) / sum(w) for n, w in walls.items()}
        print(
            f"trials/s: 1 server {rate[1]:.2f}, 2 servers {rate[2]:.2f};"
            f" ratio {rate[2] / rate[1]:.2f}x (this machine: {os.cpu_count()} cores)"
        )
        log = tmp / "kill.jsonl"
        stop = threading.Event()
        killer = threading.Thread(
            target=_kill_half_way, args=(servers[1][0], log, args.trials // 2, stop)
        )
        killer.start()
        devices = [f"tcp://{a}" for _, a in servers]
        res, wall, summary = _tune(task, args.trials, args.seed, devices, path, builder, log)
        stop.set()
        killer.join()
        records = [json.loads(line) for line in log.read_text().splitlines()]
        indices = [r["index"] for r in records]
        errors = [r for r in records if r["error"]]
        lost = [r for r in errors if "lost while measuring" in r["msg"]]
        print(
            f"2 servers, one killed half-way: finished in {wall:.1f} s; log: {len(records)}"
            f" records, {len(set(indices))} distinct configs, {len(indices) - len(set(indices))}"
            f" repeated; {len(errors)} errors ({len(lost)} in flight on the killed server)"
        )
        print("  " + summary.replace("\n", "\n  "))
        ok = len(records) == len(set(indices)) == args.trials and len(lost) <= 1
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()
        os.unlink(path)
        shutil.rmtree(tmp)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
