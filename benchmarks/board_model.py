"""The zoo's ResNet-18 artifact through PynqDevice on the model board (simulator- and RTL-backed)
against vta-sim, bit for bit: what a PYNQ board runs, checked without one.

    python benchmarks/board_model.py [--size 224] [--backends sim,rtl]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta import driver
from pyvta.compiler.graph.compile import compile_model, lower_kernels
from pyvta.compiler.graph.zoo import save_model
from pyvta.runtime.compiled_model import run_model
from pyvta.testing.board_model import ModelBoard, write_model_bitstream
from pyvta.tuner.network import pretuned_log

SEED = 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--backends", default="sim,rtl")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pyvta-board-"))
    save_model("resnet18", str(root / "r18.onnx"), size=args.size)
    cm = compile_model(root / "r18.onnx", "vta", lower=False)
    log = pretuned_log(f"resnet18_{args.size}")
    configs = None
    if log:
        from pyvta.commands.network import tuned_configs

        configs = tuned_configs(cm, log)
    lower_kernels(cm, None, configs)
    x = np.random.default_rng(SEED).standard_normal(cm.graph.values["input"].shape)
    x = x.astype(np.float32)
    print(f"seed {SEED}; ResNet-18 {args.size}x{args.size}, {len(cm.kernels)} kernels")
    (ref,), _ = run_model(cm, x, device=driver.open("sim", config=cm.hw))
    folder = write_model_bitstream(root / "bitstream", cm.hw)
    for backend in args.backends.split(","):
        board = ModelBoard(backend=backend)
        try:
            t0 = time.perf_counter()
            dev = driver.open("pynq", bitstream=folder, pynq=board.pynq, config=cm.hw)
            vta = cm.accelerator(dev)
            (y,), table = run_model(cm, x, backends={"vta": vta})
            wall = time.perf_counter() - t0
        finally:
            board.close()
        cycles = sum(r.cycles or 0 for r in table.rows)
        print(
            f"model board ({backend}): bit-identical with vta-sim: {np.array_equal(y, ref)};"
            f" {cycles / 1e6:.2f} M cycles; kernels loaded in {vta.load_s * 1e3:.0f} ms;"
            f" {wall:.1f} s wall"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
