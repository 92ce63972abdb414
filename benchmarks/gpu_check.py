"""The GPU backend on a real GPU: every kernel of the suite against numpy, and GEMM 4096^3 fp32
plus the ResNet-18 convolutions C2-C12 against cuBLAS / cuDNN (through torch, TF32 off).

Two steps, because the GPU machine needs nothing pyvta cannot carry there:

    # here (pyvta installed): compile everything to PTX, with inputs and expected outputs
    .venv/bin/python benchmarks/gpu_check.py --prepare build/gpu_check
    # on the GPU machine (numpy + cuda-bindings + torch; the folder above copied along)
    python benchmarks/gpu_check.py --run build/gpu_check

``--prepare`` writes ``manifest.json``, one ``.ptx`` per kernel (sm_90 by default), ``.npz``
inputs + float64 references for the suite, and a copy of the driver-API runner
(``compiler/backend/cuda/launch.py``), which ``--run`` loads by path. The benchmark inputs are
generated on the GPU machine (seeded). Printed ratios are baseline_ms / our_ms (> 1: we are
faster); for each workload the default schedule and the best of a few fixed knob variants
(not a tuner search) are shown. Meant to take well under 5 minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np

SEED = 20261201
GEMM_SIZE = 4096
CONV_LAYERS = [f"C{i}" for i in range(2, 13)]


# -- here: compile ---------------------------------------------------------------------------
def _gemm_variants():
    from pyvta.compiler.ops.cuda import GpuGemmKnobs

    return {
        "default": GpuGemmKnobs(),
        "8x8regs": GpuGemmKnobs(reg_m=8, reg_n=8),
        "8x8regs_k16": GpuGemmKnobs(reg_m=8, reg_n=8, tile_k=16),
        "8x4regs_32x8thr": GpuGemmKnobs(threads_x=32, threads_y=8, reg_m=8, reg_n=4),
        "vt2x2_4x4regs": GpuGemmKnobs(vthread_m=2, vthread_n=2),
        "vt2x2_4x4regs_k16": GpuGemmKnobs(vthread_m=2, vthread_n=2, tile_k=16),
    }


def _conv_variants():
    """Direct convolution knobs, and implicit GEMM (GEMM knobs) under names ``igemm*``."""
    from pyvta.compiler.ops.cuda import GpuConv2dKnobs, GpuGemmKnobs

    return {
        "default": GpuConv2dKnobs(),
        "wide": GpuConv2dKnobs(threads_x=14, threads_y=2, threads_z=8, reg_x=2, reg_o=4),
        "igemm": GpuGemmKnobs(threads_x=16, threads_y=8),
        "igemm_vt": GpuGemmKnobs(threads_x=16, threads_y=8, vthread_n=2),
    }


def _write(out: Path, name: str, mod) -> dict:
    """``name``.ptx and its manifest entry; ptxas' resource report, when the wheel is here."""
    from pyvta.compiler.backend.cuda.ptxas import ToolchainMissing

    (out / f"{name}.ptx").write_text(mod.ptx)
    try:
        res = mod.resources()
    except ToolchainMissing:
        res = {}
    for r in res.values():
        print(
            f"  {name:<26} {r.name}: {r.registers} registers, {r.shared_bytes} B shared, "
            f"{r.spill_bytes} B spilled"
        )
    return {"name": name, "ptx": f"{name}.ptx", "plan": mod.plan}


def prepare(out: Path, arch: str) -> None:
    from pyvta import compiler
    from pyvta.compiler.backend.cuda import launch
    from pyvta.compiler.ops.cuda import conv2d_gpu, conv2d_implicit_gemm, gemm
    from pyvta.compiler.workloads import RESNET18_LAYERS
    from pyvta.testing.gpu_suite import ATOL, RTOL, SUITE

    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(launch.__file__, out / "launch.py")
    manifest = {"arch": arch, "rtol": RTOL, "atol": ATOL, "suite": [], "bench": []}
    for name, k in SUITE.items():
        sch, args = k.make()
        entry = _write(out, name, compiler.build(sch, args, target="cuda", arch=arch))
        arrays = k.inputs(args, SEED)
        np.savez(out / f"{name}.npz", *arrays, expected=k.reference(*arrays[:-1]))
        manifest["suite"].append({**entry, "data": f"{name}.npz"})
    n = GEMM_SIZE
    for var, kn in _gemm_variants().items():
        mod = compiler.build(*gemm(n, n, n, kn), target="cuda", arch=arch)
        entry = _write(out, f"gemm{n}_{var}", mod)
        manifest["bench"].append(
            {
                **entry,
                "kind": "gemm",
                "workload": f"gemm {n}^3",
                "m": n,
                "n": n,
                "k": n,
                "variant": var,
                "knobs": kn.to_dict(),
            }
        )
    for layer in CONV_LAYERS:
        L = RESNET18_LAYERS[layer]
        for var, kn in _conv_variants().items():
            make = conv2d_implicit_gemm if var.startswith("igemm") else conv2d_gpu
            sch, args = make(
                L.in_channels, L.height, L.width, L.out_channels, L.kernel, L.stride, L.pad, kn
            )
            entry = _write(
                out, f"conv_{layer}_{var}", compiler.build(sch, args, target="cuda", arch=arch)
            )
            manifest["bench"].append(
                {
                    **entry,
                    "kind": "conv2d",
                    "workload": layer,
                    "variant": var,
                    "knobs": kn.to_dict(),
                    "stride": L.stride,
                    "pad": L.pad,
                }
            )
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(
        f"wrote {len(manifest['suite'])} suite and {len(manifest['bench'])} benchmark kernels "
        f"to {out}"
    )


# -- on the GPU machine: run -----------------------------------------------------------------
def _load_launch(d: Path):
    spec = importlib.util.spec_from_file_location("pyvta_launch", d / "launch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_suite(gpu, d: Path, manifest: dict) -> int:
    failed = 0
    for e in manifest["suite"]:
        data = np.load(d / e["data"])
        arrays = [np.ascontiguousarray(data[f"arr_{i}"]) for i in range(len(data.files) - 1)]
        loaded = gpu.load((d / e["ptx"]).read_text(), e["plan"])
        loaded.run(arrays)
        loaded.close()
        err = np.abs(arrays[-1] - data["expected"])
        ok = np.all(err <= manifest["atol"] + manifest["rtol"] * np.abs(data["expected"]))
        failed += not ok
        print(f"  {e['name']:<20} {'ok' if ok else 'MISMATCH'}  max |err| {err.max():.2e}")
    return failed


def _torch_ms(torch, fn, number: int = 10, repeat: int = 3) -> float:
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / number)
    return best


def _bench_inputs(e: dict, rng) -> list[np.ndarray]:
    bufs = e["plan"]["buffers"][: e["plan"]["n_params"]]
    arrays = [rng.standard_normal(b["shape"], dtype=np.float32) for b in bufs[:-1]]
    return [*arrays, np.zeros(bufs[-1]["shape"], np.float32)]


def _baseline(torch, e: dict, arrays):
    t = [torch.from_numpy(a).cuda() for a in arrays[:-1]]
    if e["kind"] == "gemm":
        return lambda: torch.matmul(t[0], t[1])
    f = torch.nn.functional.conv2d
    return lambda: f(t[0], t[1], stride=e["stride"], padding=e["pad"])


def _run_bench(gpu, d: Path, manifest: dict) -> tuple[int, list]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rng = np.random.default_rng(SEED)
    rows, failed = [], 0
    for e in manifest["bench"]:
        arrays = _bench_inputs(e, rng)
        loaded = gpu.load((d / e["ptx"]).read_text(), e["plan"])
        loaded.run(arrays)
        ours_ms = loaded.time_ms(number=10, repeat=3)
        loaded.close()
        base = _baseline(torch, e, arrays)
        ref = base().cpu().numpy()
        ours = arrays[-1].reshape(ref.shape)  # implicit GEMM writes NCHW as [O, OH * OW]
        rel = float(np.abs(ours - ref).max() / np.abs(ref).max())
        failed += rel > 1e-4
        base_ms = _torch_ms(torch, base)
        flops = 2.0 * float(np.prod(ref.shape)) * _reduction(e, arrays)
        rows.append((e["workload"], e["variant"], ours_ms, base_ms, flops, rel))
        print(
            f"  {e['name']:<26} ours {ours_ms:8.3f} ms  {flops / ours_ms / 1e9:6.2f} TFLOP/s  "
            f"baseline {base_ms:8.3f} ms  ratio {base_ms / ours_ms:5.2f}  rel err {rel:.1e}"
        )
    return failed, rows


def _reduction(e: dict, arrays) -> int:
    if e["kind"] == "gemm":
        return e["k"]
    w = arrays[1]
    return int(w.shape[1] * w.shape[2] * w.shape[3])


def _summary(rows) -> None:
    print("\nworkload  default ratio  best ratio (variant)   [ratio = cuBLAS/cuDNN ms / ours ms]")
    for wl in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == wl]
        default = next(r for r in mine if r[1] == "default")
        best = min(mine, key=lambda r: r[2])
        print(
            f"  {wl:<12} {default[3] / default[2]:6.2f}        {best[3] / best[2]:6.2f} ({best[1]})"
        )


def run(d: Path) -> int:
    manifest = json.loads((d / "manifest.json").read_text())
    launch = _load_launch(d)
    try:
        gpu = launch.Gpu()
    except launch.GpuUnavailable as e:
        print(f"no GPU: {e}")
        return 2
    print(f"GPU: {gpu.name}; PTX for {manifest['arch']}")
    print("suite against numpy:")
    failed = _run_suite(gpu, d, manifest)
    print("benchmarks against torch (cuBLAS / cuDNN, TF32 off):")
    bad, rows = _run_bench(gpu, d, manifest)
    _summary(rows)
    print(f"\n{failed} suite mismatches, {bad} benchmark mismatches")
    return 1 if failed or bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prepare", type=Path, metavar="DIR", help="compile to DIR (here)")
    g.add_argument("--run", type=Path, metavar="DIR", help="run DIR's kernels (GPU machine)")
    p.add_argument("--arch", default="sm_90", help="GPU architecture for --prepare")
    args = p.parse_args(argv)
    if args.prepare:
        prepare(args.prepare, args.arch)
        return 0
    return run(args.run)


if __name__ == "__main__":
    sys.exit(main())
