"""A lowered GPU function as a sequence of kernel launches.

After ``CUDA_PASSES`` the body is a sequence of root stages; each must start with its loops
bound to ``blockIdx.*`` (perfectly nested), which makes it one kernel: its grid is their
extents, its block the largest extent bound to each ``threadIdx.*`` inside. A loop bound to a
thread index narrower than the block runs guarded (``if tid < extent``). ``shared``
allocations become one buffer per kernel, per block.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyvta.compiler.backend.cuda.limits import LaunchError, limits
from pyvta.compiler.backend.cuda.passes import has_barrier
from pyvta.compiler.backend.llvm.frame import ELEM_BYTES
from pyvta.compiler.backend.llvm.vector import stmt_exprs_deep, walk_stmts
from pyvta.compiler.ir.expr import Load, free_vars
from pyvta.compiler.ir.stmt import (
    THREAD_TAGS,
    Allocate,
    For,
    IfThenElse,
    PrimFunc,
    Seq,
    Store,
    stmt_map,
)

DIMS = "xyz"


@dataclass(frozen=True)
class Kernel:
    """``body``: the statement run by every thread (bound loops still in it: code generators
    read them as launch indices); ``grid`` / ``block``: (x, y, z) extents; ``shared``: its
    ``shared`` buffers; ``params``: the function's buffers it touches, in function order."""

    name: str
    body: object
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: tuple
    params: tuple

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def shared_bytes(self) -> int:
        return sum(b.size_elems * ELEM_BYTES[b.dtype] for b in self.shared)

    def launch(self, buffers) -> dict:
        """This kernel's launch record: name, grid, block and the indices of its arguments
        in ``buffers`` (the function's parameters then workspace)."""
        index = {b: i for i, b in enumerate(buffers)}
        return {
            "name": self.name,
            "grid": list(self.grid),
            "block": list(self.block),
            "args": [index[b] for b in self.params],
        }


def block_loops(s) -> tuple[list, object]:
    """The ``blockIdx``-bound loops at the top of kernel statement ``s`` and what they hold."""
    loops = []
    while isinstance(s, For) and s.kind.startswith("blockIdx."):
        loops.append(s)
        s = s.body
    return loops, s


def _dims(loops, prefix: str) -> tuple[int, int, int]:
    ext = {}
    for f in loops:
        d = f.kind[len(prefix) :]
        ext[d] = max(ext.get(d, 1), f.extent.value)
    return tuple(ext.get(d, 1) for d in DIMS)


def _hoist_shared(s) -> tuple[object, list]:
    found = []

    def f(x):
        if isinstance(x, Allocate) and x.buffer.scope == "shared":
            found.append(x.buffer)
            return x.body
        return None

    return stmt_map(s, f), found


def _buffers_used(s) -> set:
    out = set()
    for st in walk_stmts(s):
        if isinstance(st, Store):
            out.add(st.buffer)
    out |= {e.buffer for e in stmt_exprs_deep(s) if isinstance(e, Load)}
    return out


def _check_barriers(s, block: tuple, thread_vars: set) -> None:
    """A barrier must be reached by every thread of the block: not under a condition on a
    thread index, nor inside a loop bound to a thread index narrower than the block."""
    for st in walk_stmts(s):
        if isinstance(st, IfThenElse) and free_vars(st.cond) & thread_vars and has_barrier(st):
            raise LaunchError("a barrier sits under a condition on the thread index")
        if not (isinstance(st, For) and st.kind.startswith("threadIdx.")):
            continue
        width = block[DIMS.index(st.kind[-1])]
        if st.extent.value < width and has_barrier(st.body):
            raise LaunchError(
                f"loop {st.var.name} bound to {st.kind} covers {st.extent.value} of the "
                f"block's {width} threads but contains a barrier"
            )


def split_kernels(func: PrimFunc) -> list[Kernel]:
    """The kernels of ``func`` (after ``CUDA_PASSES``), in launch order."""
    stmts = func.body.stmts if isinstance(func.body, Seq) else (func.body,)
    buffers = func.params + func.workspace
    kernels = []
    for n, s in enumerate(stmts):
        loops, inner = block_loops(s)
        if not loops:
            raise LaunchError(
                f"statement {n} of {func.name} is not bound to blockIdx: bind the outer loops "
                "of every root stage to blockIdx.* / threadIdx.* (GPU kernels run nothing "
                "on the host)"
            )
        bound = [x for x in walk_stmts(inner) if isinstance(x, For) and x.kind in THREAD_TAGS]
        if any(x.kind.startswith("blockIdx.") for x in bound):
            raise LaunchError(f"kernel {n}: blockIdx loops must be the outermost, perfectly nested")
        threads = [x for x in bound if x.kind.startswith("threadIdx.")]
        body, shared = _hoist_shared(s)
        if any(isinstance(x, Allocate) and x.buffer.scope == "global" for x in walk_stmts(body)):
            raise LaunchError(f"kernel {n}: a global-scope buffer is allocated inside the kernel")
        block = _dims(threads, "threadIdx.")
        _check_barriers(body, block, {x.var for x in threads})
        used = _buffers_used(body)
        params = tuple(b for b in buffers if b in used)
        grid = _dims(loops, "blockIdx.")
        kernels.append(Kernel(f"{func.name}_k{n}", body, grid, block, tuple(shared), params))
    return kernels


def check_launch(k: Kernel, arch: str) -> None:
    """Raise ``LaunchError`` if ``k``'s block, grid or shared memory exceed ``arch``'s limits."""
    lim = limits(arch)
    if k.threads > lim.max_threads_per_block:
        raise LaunchError(
            f"{k.name}: {k.threads} threads per block {k.block}; {arch} allows at most "
            f"{lim.max_threads_per_block}"
        )
    for d, (got, top) in enumerate(zip(k.block, lim.max_block_dims, strict=True)):
        if got > top:
            raise LaunchError(f"{k.name}: block dim {DIMS[d]} is {got}; {arch} allows {top}")
    for d, (got, top) in enumerate(zip(k.grid, lim.max_grid_dims, strict=True)):
        if got > top:
            raise LaunchError(f"{k.name}: grid dim {DIMS[d]} is {got}; {arch} allows {top}")
    if k.shared_bytes > lim.max_shared_bytes_per_block:
        raise LaunchError(
            f"{k.name}: {k.shared_bytes} bytes of shared memory per block; {arch} allows "
            f"{lim.max_shared_bytes_per_block} (static)"
        )
