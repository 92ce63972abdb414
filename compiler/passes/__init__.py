"""Loop-IR passes and the target-independent pipeline that runs them (see ``pipeline``)."""

from pyvta.compiler.passes.pipeline import PASSES, run_passes

__all__ = ["PASSES", "run_passes"]
