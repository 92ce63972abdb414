"""Schedule building blocks shared by the GPU templates."""

from __future__ import annotations


def cooperative_fetch(sch, stage, threads: tuple[int, ...]) -> None:
    """Let a whole thread block copy ``stage`` (a ``shared`` cache computed inside a loop of
    its reader): its loops are fused into one, which is split across the block's threads —
    ``threads`` = ``(tx, ty, ...)`` extents, bound to ``threadIdx.x``, ``threadIdx.y``, ... — so
    consecutive threads copy consecutive elements (coalesced global loads). The remaining
    outer loop runs serially in each thread."""
    st = sch[stage]
    axes = list(st.leaf)
    fused = axes[0]
    for a in axes[1:]:
        fused = st.fuse(fused, a)
    rest = fused
    for d, n in enumerate(threads):
        if n > 1:
            rest, inner = st.split(rest, n)
            st.bind(inner, f"threadIdx.{'xyz'[d]}")


def bind_flat(sch, stage, threads: int) -> None:
    """An elementwise ``stage`` over a flat 1-D launch: all its loops fused, split into
    ``threads`` per block on ``threadIdx.x`` and blocks on ``blockIdx.x``."""
    st = sch[stage]
    axes = [a for a in st.leaf if a.kind == "data"]
    fused = axes[0]
    for a in axes[1:]:
        fused = st.fuse(fused, a)
    bo, ti = st.split(fused, threads)
    st.bind(bo, "blockIdx.x")
    st.bind(ti, "threadIdx.x")
