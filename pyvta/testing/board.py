"""The board-side runtime's test inputs, made on the host: artifacts compiled here (with onnx and
the compiler) and the outputs the host computes for them, for ``tests/board`` to check under the
board's Python (3.10, numpy 1.x, no llvmlite/onnx).

    python -m pyvta.testing.board OUT_DIR     # OUT_DIR/{vta,cpu}.npz, expected.npz, bitstream/,
                                              # cpu-armhf.npz, cpu-arm64.npz
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SEED = 11
MODEL = dict(size=32, classes=10, width=16, seed=SEED)
# the emulated ARM userlands (scripts/arm_userland.sh) -> the board CPU their artifact is for
ARM_CPUS = {"armhf": "cortex-a9", "arm64": "cortex-a53"}


def build_board_fixtures(out: str | Path) -> Path:
    """A small ResNet-18 of the zoo compiled for ``vta`` and ``cpu``, a seeded input, and the
    outputs the host gets for them (float CPU layers in numpy, as on a board)."""
    from pyvta import driver
    from pyvta.compiler.graph import cpu_llvm
    from pyvta.compiler.graph.compiled_model import compile_model, run_model
    from pyvta.compiler.graph.zoo import save_model

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / "r18.onnx"
    save_model("resnet18", str(onnx_path), **MODEL)
    vta, cpu = compile_model(onnx_path, "vta"), compile_model(onnx_path, "cpu")
    vta.save(out / "vta.npz")
    cpu.save(out / "cpu.npz")  # compiled CPU kernels: a board without llvmlite refuses it
    from pyvta.compiler.backend.llvm.target import CpuTarget
    from pyvta.compiler.graph.cpu_cross import cross_compile_cpu

    for arch, name in ARM_CPUS.items():  # the same model with its CPU kernels for the board
        cpu.cpu_code = cross_compile_cpu(cpu.graph, CpuTarget.cross(name))
        cpu.save(out / f"cpu-{arch}.npz")
    cpu.cpu_code = None
    shape = vta.graph.values[vta.input_names[0]].shape
    x = np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)
    with cpu_llvm.numpy_only():
        (y_vta,), _ = run_model(vta, x, device=driver.open("sim", config=vta.hw))
        (y_golden,), _ = run_model(vta, x)  # the golden integer model for the vta nodes
    (y_cpu,), _ = run_model(cpu, x)  # the host's JIT kernels
    np.savez(out / "expected.npz", x=x, vta=y_vta, golden=y_golden, cpu=y_cpu)
    from pyvta.testing.board_model import write_model_bitstream

    write_model_bitstream(out / "bitstream", vta.hw)  # for PynqDevice on the model board
    onnx_path.unlink()  # the board never sees the ONNX file
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m pyvta.testing.board OUT_DIR")
    print(f"board fixtures (seed {SEED}) in {build_board_fixtures(sys.argv[1])}")
