"""The GPU backend on a real GPU: every kernel of the suite against numpy, GEMM 4096^3 fp32
plus the ResNet-18 convolutions C2-C12 against cuBLAS / cuDNN (through torch, TF32 off), and
the whole zoo ResNet-18 (224x224, every node a GPU kernel: ``--target gpu``) against the same
fused graph run by torch (cuDNN) and against onnxruntime's output computed here.

Two steps, because the GPU machine needs nothing pyvta cannot carry there:

    # here (pyvta installed): compile everything to PTX, with inputs and expected outputs
    .venv/bin/python benchmarks/gpu_check.py --prepare build/gpu_check
    # on the GPU machine (numpy + cuda-bindings + torch; the folder above copied along)
    python benchmarks/gpu_check.py --run build/gpu_check

``--prepare`` writes ``manifest.json``, one ``.ptx`` per kernel (sm_90 by default), ``.npz``
inputs + float64 references for the suite, and a copy of the driver-API runner
(``compiler/backend/cuda/launch.py``), which ``--run`` loads by path. For the network it writes
``network/``: the network plan (``gpu_kernels.network_plan``), each node's PTX, the graph's
nodes (for the torch baseline), its constants, one input and onnxruntime's output for it. The benchmark inputs are
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
import tempfile
from pathlib import Path

import numpy as np

SEED = 20261201
GEMM_SIZE = 4096
CONV_LAYERS = [f"C{i}" for i in range(2, 13)]
NETWORK, NETWORK_SIZE = "resnet18", 224
NETWORK_RTOL = 1e-4  # max |ours - onnxruntime| / max |onnxruntime|, as the emulated tests


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
    manifest["network"] = prepare_network(out / "network", arch)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(
        f"wrote {len(manifest['suite'])} suite and {len(manifest['bench'])} benchmark kernels "
        f"and {NETWORK} ({manifest['network']['kernel_nodes']} kernel nodes) to {out}"
    )


def prepare_network(d: Path, arch: str, size: int = NETWORK_SIZE, classes: int = 1000) -> dict:
    """The zoo network compiled for ``--target gpu`` into folder ``d``; its manifest entry."""
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.graph.reference import run_onnxruntime
    from pyvta.compiler.graph.zoo import sample_inputs, save_model
    from pyvta.compiler.targets.gpu.kernels import network_plan

    d.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # the ONNX file stays here (the weights are
        path = save_model(
            NETWORK, str(Path(tmp) / "model.onnx"), size=size, classes=classes
        )  # in constants)
        cm = compile_model(path, "gpu", gpu_arch=arch)
        x = sample_inputs(1, size, SEED)[0]
        (ref,) = run_onnxruntime(path, {cm.graph.inputs[0]: x})
    g = cm.graph
    files: dict[str, str] = {}
    ptx_of = {}
    for name, k in cm.gpu_kernels.items():
        files.setdefault(k.ptx, f"k{len(files)}.ptx")
        ptx_of[name] = files[k.ptx]
    for text, file in files.items():
        (d / file).write_text(text)
    (d / "plan.json").write_text(json.dumps(network_plan(g, cm.gpu_kernels)))
    nodes = [{"op": n.op, "inputs": n.inputs, "outputs": n.outputs, "attrs": n.attrs}
             for n in g.nodes]  # fmt: skip
    (d / "graph.json").write_text(json.dumps(nodes))
    names = sorted(g.constants)
    np.savez(d / "constants.npz", **{f"c{i}": g.constants[n] for i, n in enumerate(names)})
    np.savez(d / "io.npz", input=x, expected=ref)
    print(f"  {NETWORK} {size}x{size}: {len(g.nodes)} nodes, {len(files)} distinct PTX modules")
    return {
        "name": f"{NETWORK} {size}x{size}",
        "dir": d.name,
        "ptx": ptx_of,
        "constants": names,
        "input": g.inputs[0],
        "output": g.outputs[0],
        "kernel_nodes": len(ptx_of),
    }


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
        try:
            loaded = gpu.load((d / e["ptx"]).read_text(), e["plan"])
            loaded.run(arrays)
            loaded.close()
        except Exception as x:  # one kernel's failure is reported, the others still run
            failed += 1
            print(f"  {e['name']:<20} FAILED  {type(x).__name__}: {x}")
            continue
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


def _baseline(torch, e: dict, arrays, dtype=None):
    """The workload in torch on the GPU (cuBLAS / cuDNN); ``dtype``: computed in that type."""
    t = [torch.from_numpy(a).cuda().to(dtype) for a in arrays[:-1]]
    if e["kind"] == "gemm":
        return lambda: torch.matmul(t[0], t[1])
    f = torch.nn.functional.conv2d
    return lambda: f(t[0], t[1], stride=e["stride"], padding=e["pad"])


def _rel(a, ref) -> float:
    return float(np.abs(a - ref).max() / np.abs(ref).max())


def _run_bench(gpu, d: Path, manifest: dict) -> tuple[int, list]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rng = np.random.default_rng(SEED)
    rows, failed = [], 0
    for e in manifest["bench"]:
        arrays = _bench_inputs(e, rng)
        try:
            loaded = gpu.load((d / e["ptx"]).read_text(), e["plan"])
            loaded.run(arrays)
            ours_ms = loaded.time_ms(number=10, repeat=3)
            loaded.close()
        except Exception as x:
            failed += 1
            print(f"  {e['name']:<26} FAILED  {type(x).__name__}: {x}")
            continue
        base = _baseline(torch, e, arrays)
        ref = base().cpu().numpy()
        ref64 = _baseline(torch, e, arrays, torch.float64)().cpu().numpy()
        ours = arrays[-1].reshape(ref.shape)  # implicit GEMM writes NCHW as [O, OH * OW]
        rel = _rel(ours, ref)
        failed += rel > 1e-4 or _rel(ours, ref64) > 1e-4
        base_ms = _torch_ms(torch, base)
        flops = 2.0 * float(np.prod(ref.shape)) * _reduction(e, arrays)
        rows.append((e["workload"], e["variant"], ours_ms, base_ms, flops, rel))
        print(
            f"  {e['name']:<26} ours {ours_ms:8.3f} ms  {flops / ours_ms / 1e9:6.2f} TFLOP/s  "
            f"baseline {base_ms:8.3f} ms  ratio {base_ms / ours_ms:5.2f}  rel err {rel:.1e} "
            f"(vs float64: ours {_rel(ours, ref64):.1e}, baseline {_rel(ref, ref64):.1e})"
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
        default = next((r for r in mine if r[1] == "default"), None)
        best = min(mine, key=lambda r: r[2])
        shown = f"{default[3] / default[2]:6.2f}" if default else "failed"
        print(f"  {wl:<12} {shown:>6}        {best[3] / best[2]:6.2f} ({best[1]})")


def _torch_node(torch, n: dict, args):
    """One node of our fused graph in torch (cuDNN / cuBLAS)."""
    F, op, a = torch.nn.functional, n["op"], n["attrs"]
    if op in ("conv2d", "dense"):
        res = args[3] if len(args) > 3 else None
        if op == "conv2d":
            pad = a["pads"][0]
            y = F.conv2d(args[0], args[1], args[2], a["strides"], pad, groups=a["group"])
        else:
            y = F.linear(args[0], args[1], args[2])
        y = y + res if res is not None else y
        return y.clamp(*a["clip"]) if a.get("clip") else y
    if op in ("max_pool", "avg_pool"):
        pool = F.max_pool2d if op == "max_pool" else F.avg_pool2d
        return pool(args[0], a["kernel"], a["strides"], a["pads"][0])
    table = {
        "global_avg_pool": lambda: args[0].mean(dim=(2, 3), keepdim=True),
        "flatten": lambda: args[0].reshape(args[0].shape[0], -1),
        "reshape": lambda: args[0].reshape(a["shape"]),
        "identity": lambda: args[0],
        "add": lambda: args[0] + args[1],
        "relu": lambda: args[0].relu(),
        "clip": lambda: args[0].clamp(a["min"], a["max"]),
        "softmax": lambda: args[0].softmax(dim=a["axis"]),
    }
    return table[op]()


def _torch_network(torch, nodes, constants: dict, inp: str, out: str):
    """``fn(x)`` running ``nodes`` in torch on the GPU (constants uploaded once)."""
    consts = {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in constants.items()}

    def fn(x):
        env = {**consts, inp: x}
        for n in nodes:
            env[n["outputs"][0]] = _torch_node(torch, n, [env[i] for i in n["inputs"]])
        return env[out]

    return fn


def network_on_gpu(gpu, launch, d: Path, manifest: dict):
    """The prepared network on ``gpu`` from its PTX (``launch``: the runner module): its
    output's error relative to onnxruntime's, and ms per inference (launches only)."""
    e = manifest["network"]
    nd = d / e["dir"]
    plan = json.loads((nd / "plan.json").read_text())
    ptx = {node: (nd / f).read_text() for node, f in e["ptx"].items()}
    with np.load(nd / "constants.npz") as z:
        constants = {name: z[f"c{i}"] for i, name in enumerate(e["constants"])}
    with np.load(nd / "io.npz") as z:
        x, ref = z["input"], z["expected"]
    net = launch.LoadedNetwork(gpu, plan, ptx, constants)
    got = net.run({e["input"]: x})[e["output"]]
    ours_ms = net.time_ms(number=10, repeat=3)
    node_ms = {name: net.nodes[i].time_ms(number=10, repeat=3) for name, i in net.index.items()}
    net.close()
    rel = _rel(got, ref)
    print(f"  {e['name']}: {e['kernel_nodes']} kernel nodes, ours {ours_ms:8.3f} ms per inference"
          f" (launches only, values on the GPU), rel err vs onnxruntime {rel:.1e}")  # fmt: skip
    print(f"  its nodes timed one at a time (sum {sum(node_ms.values()):.3f} ms), slowest first:")
    for name, ms in sorted(node_ms.items(), key=lambda kv: -kv[1])[:12]:
        print(f"    {name:<40} {ms:8.3f} ms")
    return rel, ours_ms, constants, x, ref


def _run_network(gpu, launch, d: Path, manifest: dict) -> int:
    """The whole network: ours against onnxruntime's output, timed against the same graph in
    torch. Returns 1 on a mismatch."""
    import torch

    rel, ours_ms, constants, x_np, ref = network_on_gpu(gpu, launch, d, manifest)
    e = manifest["network"]
    nodes = json.loads((d / e["dir"] / "graph.json").read_text())
    fn = _torch_network(torch, nodes, constants, e["input"], e["output"])
    x = torch.from_numpy(x_np).cuda()
    with torch.no_grad():
        t_rel = float(np.abs(fn(x).cpu().numpy() - ref).max() / np.abs(ref).max())
        torch_ms = _torch_ms(torch, lambda: fn(x))
    print(f"  torch (cuDNN, TF32 off) {torch_ms:8.3f} ms, rel err {t_rel:.1e};"
          f" ratio torch ms / ours ms {torch_ms / ours_ms:5.2f}")  # fmt: skip
    return int(rel > NETWORK_RTOL)


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
    if rows:
        _summary(rows)
    print("whole network (--target gpu) against torch and onnxruntime:")
    try:
        net_bad = _run_network(gpu, launch, d, manifest)
    except Exception as x:
        net_bad = 1
        print(f"  FAILED  {type(x).__name__}: {x}")
    print(f"\n{failed} suite mismatches, {bad} benchmark mismatches, {net_bad} network mismatches")
    return 1 if failed or bad or net_bad else 0


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
