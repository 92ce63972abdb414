"""The board-side runtime's test inputs, made on the host: artifacts compiled here (with onnx and
the compiler) and the outputs the host computes for them, for ``tests/board`` to check under the
board's Python (3.10, numpy 1.x, no llvmlite/onnx).

    python -m pyvta.testing.board OUT_DIR [ARCH ...]  # OUT_DIR/{vta,cpu}.npz, expected.npz,
        # bitstream/, {cpu,cpu-grouped,cpu-int8,vta}-ARCH.npz (ARCH: armhf, always, and those
        # named)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SEED = 11
MODEL = dict(size=32, classes=10, width=16, seed=SEED)
# the emulated ARM userlands (scripts/arm_userland.sh) -> the board CPU their artifact is for
ARM_CPUS = {"armhf": "cortex-a9", "arm64": "cortex-a53"}


def build_board_fixtures(out: str | Path, arches: tuple[str, ...] = tuple(ARM_CPUS)) -> Path:
    """A small ResNet-18 of the zoo compiled for ``vta`` and ``cpu`` (and a small ResNeXt-26 for
    ``cpu``: its grouped convs' kernels), a seeded input, and the outputs the host gets for them (float CPU layers in numpy, as on a board). ``vta.npz`` keeps
    the legacy partition (float stem conv, pools and classifier on the board's CPU: what the CPU
    side of the runtime is tested on); ``vta-whole.npz`` is the default, the whole network on
    the accelerator (only quantize, the stem's fold, unpack and dequantize on the CPU)."""
    from pyvta import driver
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.graph.zoo import save_model
    from pyvta.runtime import cpu_llvm
    from pyvta.runtime.compiled_model import run_model

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / "r18.onnx"
    save_model("resnet18", str(onnx_path), **MODEL)
    vta = compile_model(onnx_path, "vta", vta_partition="legacy")
    whole, cpu = compile_model(onnx_path, "vta"), compile_model(onnx_path, "cpu")
    vta.save(out / "vta.npz")
    whole.save(out / "vta-whole.npz")
    cpu.save(out / "cpu.npz")  # compiled CPU kernels: a board without llvmlite refuses it
    grouped_path = out / "rx.onnx"  # grouped convs: groups of 4 and 8 on the depthwise template
    save_model("resnext26", str(grouped_path), **{**MODEL, "groups": 8})
    grouped = compile_model(grouped_path, "cpu")
    from pyvta.compiler.backend.llvm.target import CpuTarget
    from pyvta.compiler.graph import KeepFloat
    from pyvta.compiler.graph.cpu_cross import cross_compile_cpu

    int8 = compile_model(onnx_path, "cpu-int8")
    # every conv/dense int8 (``--keep-float none``): no float value feeds a quantize, so every
    # CPU computes the same bits
    int8_all = compile_model(onnx_path, "cpu-int8", keep_float=KeepFloat.NONE)
    for arch in dict.fromkeys(("armhf", *arches)):  # x86's tests read the armhf ones
        name = ARM_CPUS[arch]  # the same models with their CPU kernels for the board
        models = ((cpu, "cpu"), (grouped, "cpu-grouped"), (int8, "cpu-int8"),
                  (int8_all, "cpu-int8-all"), (vta, "vta"))  # fmt: skip
        for cm, stem in models:
            cm.cpu_code = cross_compile_cpu(cm.graph, CpuTarget.cross(name))
            cm.save(out / f"{stem}-{arch}.npz")
            cm.cpu_code = None
    build_kernel_fixture(out / "kernel-x86_64.npz", CpuTarget.host(1))  # x86's leg: this host's
    for arch in dict.fromkeys(("armhf", *arches)):
        build_kernel_fixture(out / f"kernel-{arch}.npz", CpuTarget.cross(ARM_CPUS[arch]))
    shape = vta.graph.values[vta.input_names[0]].shape
    x = np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)
    with cpu_llvm.numpy_only():
        (y_vta,), _ = run_model(vta, x, device=driver.open("sim", config=vta.hw))
        (y_golden,), _ = run_model(vta, x)  # the golden integer model for the vta nodes
        (y_whole,), _ = run_model(whole, x, device=driver.open("sim", config=whole.hw))
    (y_cpu,), _ = run_model(cpu, x)  # the host's JIT kernels
    (y_grouped,), _ = run_model(grouped, x)
    with cpu_llvm.numpy_only():
        (y_int8,), _ = run_model(int8, x)  # as a board runs it without kernels for its CPU
    (y_int8_all,), _ = run_model(int8_all, x)  # the host's JIT kernels (AVX-512 here)
    np.savez(
        out / "expected.npz",
        x=x,
        vta=y_vta,
        golden=y_golden,
        whole=y_whole,
        cpu=y_cpu,
        cpu_grouped=y_grouped,
        int8=y_int8,
        int8_all=y_int8_all,
    )
    from pyvta.testing.board_model import write_model_bitstream

    write_model_bitstream(out / "bitstream", vta.hw)  # for PynqDevice on the model board
    onnx_path.unlink()  # the board never sees the ONNX files
    grouped_path.unlink()
    return out


KERNEL_GEMM = (8, 32, 24)  # M, N, K of the kernel a board's ``pyvta serve --device cpu`` times


def build_kernel_fixture(path: Path, target) -> Path:
    """One GEMM kernel (``KERNEL_GEMM``, the GEMM template's knobs for ``target``) cross-compiled
    for ``target`` as a tuner sends it to ``pyvta serve --device cpu``: ``shared`` (ELF bytes),
    ``sig`` (its ``KernelSig`` as JSON), ``triple``, seeded inputs ``a``, ``b`` and the product
    ``want`` (float64 on the host)."""
    import json

    from pyvta import compiler
    from pyvta.compiler.backend.llvm.shared import for_llvm, shared_object
    from pyvta.compiler.graph.cpu_cross import gemm_schedule, kernel_sig

    sch, args = gemm_schedule(*KERNEL_GEMM, target)
    func = for_llvm(compiler.lower(sch, args, name="pyvta_board_gemm"))
    sig = kernel_sig(func)
    rng = np.random.default_rng(SEED)
    a, b = (rng.standard_normal(p.shape).astype(np.float32) for p in sig.params[:2])
    np.savez(
        path,
        shared=np.frombuffer(shared_object([func], target), np.uint8),
        sig=np.array(json.dumps(sig.to_json())),
        triple=np.array(target.triple),
        a=a,
        b=b,
        want=a.astype(np.float64) @ b.astype(np.float64),
    )
    return path


if __name__ == "__main__":
    if len(sys.argv) < 2 or not set(sys.argv[2:]) <= set(ARM_CPUS):
        sys.exit(
            f"usage: python -m pyvta.testing.board OUT_DIR [ARCH ...] (ARCH: {', '.join(ARM_CPUS)})"
        )
    print(
        f"board fixtures (seed {SEED}) in {build_board_fixtures(sys.argv[1], tuple(sys.argv[2:]))}"
    )
