"""The device server's cost per launch on loopback, next to the launch itself.

    python benchmarks/remote_overhead.py [--layer C9] [--runs 3]

One ResNet-18 layer (default config, seeded random weights) is loaded and run on a local
``SimDevice`` and on the same simulator behind ``pyvta serve`` (a separate process, 127.0.0.1,
a key): per run (write the input, launch, read the output) the local time, the remote time, the
server's device time, and their difference (the protocol: framing, copies, round trips); an empty
request's round trip; and what loading the kernel sends the first time and again in the session
(constants by sha256 only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from pyvta import driver
from pyvta.compiler.backend.vta.operator import build_kernel
from pyvta.compiler.backend.vta.workload import Epilogue, resnet18_workload
from pyvta.driver import SimDevice
from pyvta.driver.kernel import RegionKind, load_kernel
from pyvta.isa import HwConfig
from pyvta.testing.remote import key_file, start_server

SEED = 0


def _kernel(layer: str):
    rng = np.random.default_rng(SEED)
    wl = resnet18_workload(layer)
    w = rng.integers(-8, 8, (wl.co_blocks, wl.ci_blocks, 3, 3, 16, 16), dtype=np.int8)
    w = w[:, :, : wl.kernel_h, : wl.kernel_w]
    b = rng.integers(-500, 500, (wl.co_blocks, 16), dtype=np.int32)
    kernel = build_kernel(wl, Epilogue(bias=True, shift=8), np.ascontiguousarray(w), b, HwConfig())
    x = {
        r.name: rng.integers(-64, 64, r.nbytes, dtype=np.int8).view(np.uint8)
        for r in kernel.regions_of(RegionKind.INPUT)
    }
    return kernel, x


def _timed_runs(local, remote, dev, x, runs: int):
    """Per run, taking turns (both see the same machine load): local seconds, remote seconds,
    and the server's device seconds of that remote run; and the last outputs of each."""
    rows = []
    for _ in range(runs):
        t0 = time.perf_counter()
        want, _ = local.run(x)
        t1 = time.perf_counter()
        before = dev.session_stats()["device_s"]
        t2 = time.perf_counter()
        got, _ = remote.run(x)
        t3 = time.perf_counter()
        rows.append((t1 - t0, t3 - t2, dev.session_stats()["device_s"] - before))
    return rows, want, got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", default="C9")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"layer {args.layer}, default config, seed {SEED}, {args.runs} runs each (median)")
    kernel, x = _kernel(args.layer)
    local = load_kernel(SimDevice(HwConfig()), kernel)
    path = key_file()
    proc, address = start_server(path)
    try:
        with driver.open(f"tcp://{address}", key_file=path) as dev:
            s0 = dev.session_stats()
            t0 = time.perf_counter()
            loaded = load_kernel(dev, kernel)
            first_s, s1 = time.perf_counter() - t0, dev.session_stats()
            t0 = time.perf_counter()
            loaded = load_kernel(dev, kernel)
            again_s, s2 = time.perf_counter() - t0, dev.session_stats()
            rows, want, got = _timed_runs(local, loaded, dev, x, args.runs)
            rtts = []
            for _ in range(200):
                t0 = time.perf_counter()
                dev.session_stats()
                rtts.append(time.perf_counter() - t0)
    finally:
        proc.terminate()
        proc.wait()
        os.unlink(path)
    same = all(np.array_equal(got[k], want[k]) for k in want)
    local_s, remote_s, device_s = (statistics.median(r[i] for r in rows) for i in range(3))
    over = statistics.median(r[1] - r[2] for r in rows)
    print(f"outputs equal to the local run: {same}")
    print(f"per run (write input, launch, read output), median of {args.runs}:")
    print(f"local run (SimDevice, in process):   {local_s * 1e3:9.1f} ms")
    print(f"remote run (tcp://127.0.0.1):         {remote_s * 1e3:9.1f} ms")
    print(f"  of which the server's device time:  {device_s * 1e3:9.1f} ms")
    print(
        f"  protocol overhead per launch:       {over * 1e3:9.2f} ms (remote - device, per run)"
        f" ({100 * over / device_s:.2f}% of the launch; remote/local {remote_s / local_s:.3f}x)"
    )
    print(f"empty request round trip:             {statistics.median(rtts) * 1e6:9.0f} us")
    mb = 1 << 20
    print(
        f"load_kernel first: {first_s * 1e3:.1f} ms, {(s1['bytes_in'] - s0['bytes_in']) / mb:.2f}"
        f" MiB sent; again in the session: {again_s * 1e3:.1f} ms,"
        f" {(s2['bytes_in'] - s1['bytes_in']) / 1024:.1f} KiB sent (constants by sha256)"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
