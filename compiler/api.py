"""Top-level API: ``lower(schedule, args)`` and ``build(schedule, args, target="llvm")``."""

from __future__ import annotations

from pyvta.compiler.backend.llvm.entry import default_cache_dir
from pyvta.compiler.ir.stmt import PrimFunc
from pyvta.compiler.lower.schedule_ops import lower_schedule
from pyvta.compiler.passes.pipeline import PASSES, run_passes

__all__ = ["build", "default_cache_dir", "lower"]


def lower(sch, args, name: str = "main") -> PrimFunc:
    """Loop IR of schedule ``sch`` with parameters ``args`` (tensors, in call order).
    ``print(lower(...))`` shows its stable text."""
    from pyvta.compiler.ir.verify import verify

    return run_passes(verify(lower_schedule(sch, args, name)), PASSES)


def build(sch, args=None, target: str = "llvm", name: str = "main", **options):
    """Compile ``sch`` (a schedule, or an already lowered ``PrimFunc``) for ``target`` and
    return a module callable on numpy arrays in the order of ``args``.

    Targets (``compiler.backend.TARGETS``): ``"llvm"`` (the host CPU; options ``cache_dir``,
    ``num_threads``), ``"cuda"`` (PTX for an NVIDIA GPU, ``.ptx``; option ``arch``),
    ``"cuda-emulated"`` (the same GPU kernels run on the CPU with GPU semantics)."""
    from pyvta.compiler.backend import get_backend

    backend = get_backend(target)
    func = sch if isinstance(sch, PrimFunc) else lower(sch, args, name)
    return backend.build(func, **options)
