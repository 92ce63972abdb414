"""Loop-IR passes and the ordered pipelines that run them (see ``pipeline``)."""

from pyvta.compiler.passes.pipeline import LLVM_PASSES, PASSES, run_passes

__all__ = ["LLVM_PASSES", "PASSES", "run_passes"]
