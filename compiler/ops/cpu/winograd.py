"""Winograd F(2x2, 3x3) convolution schedule for the CPU (3x3 kernels, stride 1, pad 1).

Each 2x2 output tile comes from a 4x4 input tile: ``Y = A^T [(G g G^T) * (B^T d B)] A``.
Per layer, for ``C`` input and ``K`` output channels and ``P`` tiles:

- the kernel transform ``U[4, 4, K/k_block, C, k_block]`` is done once ahead of time
  (``transform_weights``);
- the input transform ``V[4, 4, C, P]`` is one parallel pass over the input: per channel and
  row of tiles, the zero-padded 4x4 tiles are gathered into a small local buffer, then
  transformed with additions only; on NCHW{c}c data it is ``V[4, 4, P, C]``, per tile and
  channel block: 16 channel vectors loaded, transformed, stored (no gathers);
- 16 independent GEMMs ``M[e, P, K] = V[e]^T U[e]`` (e over the 4x4 positions) do the work,
  register-tiled like the GEMM template: ``p_block`` tiles x ``k_block`` channels per tile
  (NCHWc: the tiles are rounded up to whole register tiles, so any ``p_block`` fits);
- the output transform writes NCHW ``[1, K, H, W]`` (or NCHW{c}c).

It does 2.25x fewer multiplications than direct convolution; the results differ from direct
convolution by float32 rounding only (a relative error around 1e-6).

``WinogradKnobs.out_tile`` 4 is F(4x4, 3x3) instead: 4x4 output tiles from 6x6 input tiles,
36 GEMMs over 4x fewer tiles (4x fewer multiplications than direct; the transforms multiply
by small constants), a relative error around 1e-5. In ResNet-18 (224, one thread, Zen 4,
thread CPU time, in the network) it ran the 56x56 and 28x28 3x3 layers 1.6-1.7x faster than
F(2x2, 3x3); its kernels take ~10x longer to build (20-30 s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pyvta.compiler.ir.expr import all_, const, equal
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import select
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum

_BT = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
_G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))
_AT = ((1, 1, 1, 0), (0, 1, -1, -1))
# F(4x4, 3x3) (Lavin and Gray, 2015): 6x6 input tiles, points 0, +-1, +-2
_BT4 = (
    (4, 0, -5, 0, 1, 0),
    (0, -4, -4, 1, 1, 0),
    (0, 4, -4, -1, 1, 0),
    (0, -2, -1, 2, 1, 0),
    (0, 2, -1, -2, 1, 0),
    (0, 4, 0, -5, 0, 1),
)
_G4 = (
    (1 / 4, 0.0, 0.0),
    (-1 / 6, -1 / 6, -1 / 6),
    (-1 / 6, 1 / 6, -1 / 6),
    (1 / 24, 1 / 12, 1 / 6),
    (1 / 24, -1 / 12, 1 / 6),
    (0.0, 0.0, 1.0),
)
_AT4 = ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))
OUT_TILES = {2: (_BT, _G, _AT), 4: (_BT4, _G4, _AT4)}  # output tile side -> B^T, G, A^T


# A position's U[e] (C x K float32) of at least this many bytes is swept once per GEMM, the
# tiles inside its column blocks (C x k_block stays in cache while every tile uses it), not
# once per tile block: layer 4's 1 MB U[e] ran 7.1 -> 4.6 ms (512 channels, 7x7, one thread),
# layer 3's 256 KB about 10% faster; at 64 KB (128 channels) the other order was faster.
U_COLUMN_OUTER_BYTES = 256 * 1024


GEMM_ORDERS = ("auto", "tiles", "columns")  # of the batched GEMM's tile and column blocks


@dataclass(frozen=True)
class WinogradKnobs:
    """``p_block``: tiles per register tile (unrolled); ``k_block``: output channels per
    register tile (vector lanes, a multiple of 16 with AVX-512); ``parallel``.

    The batched GEMM's loops over register tiles (P: blocks of ``p_block`` tiles, K: column
    blocks of ``k_block`` channels), defaults the loops of before: ``gemm_order`` which runs
    outside the other (``tiles``: P, ``columns``: K; ``auto``: K for a U[e] of at least
    ``U_COLUMN_OUTER_BYTES``); cache blocks of ``tile_p`` register tiles' tiles and
    ``tile_k`` column blocks (1: none), their outer loops outside the inner ones (in the
    order of ``gemm_order`` at both levels; one block alone on the outer axis changes nothing
    and is refused); ``unroll_rc`` the reduction over the input channels unrolled by this
    factor (a divisor of them; 1: not); ``parallel_loops`` GEMM loops fused with the 16
    positions into the parallel loop (0: the positions only); ``out_tile`` the output tile's
    side (2: F(2x2, 3x3), 16 GEMMs; 4: F(4x4, 3x3), 36 GEMMs on 6x6 input tiles, 4x fewer
    multiplications than direct instead of 2.25x, the transforms dearer)."""

    p_block: int = 14
    k_block: int = 32
    parallel: bool = True
    gemm_order: str = "auto"
    tile_p: int = 1
    tile_k: int = 1
    unroll_rc: int = 1
    parallel_loops: int = 1
    out_tile: int = 2

    def to_dict(self) -> dict:
        return asdict(self)

    def columns_outer(self, c: int, k: int) -> bool:
        """Whether K runs outside P (``gemm_order``) for ``c`` input, ``k`` output channels."""
        if self.gemm_order == "auto":
            return c * k * 4 >= U_COLUMN_OUTER_BYTES
        return self.gemm_order == "columns"

    def gemm_problem(self, c: int, k: int, p_tiles: int) -> str | None:
        """Why the GEMM knobs do not fit ``c`` / ``k`` channels and ``p_tiles`` padded tiles
        (register tiles of ``p_block`` and ``k_block`` that fit), or None."""
        if self.out_tile not in OUT_TILES:
            return f"out_tile {self.out_tile} (allowed: {', '.join(map(str, OUT_TILES))})"
        if self.gemm_order not in GEMM_ORDERS:
            return f"gemm_order {self.gemm_order!r} (allowed: {', '.join(GEMM_ORDERS)})"
        blocks = {"tile_p": -(-p_tiles // self.p_block), "tile_k": k // self.k_block}
        for name, t in (("tile_p", self.tile_p), ("tile_k", self.tile_k)):
            if t != 1 and not 1 < t < blocks[name]:
                return f"{name} {t} must be 1 (none) or in 2..{blocks[name] - 1}"
        outer = "tile_k" if self.columns_outer(c, k) else "tile_p"
        inner = "tile_p" if outer == "tile_k" else "tile_k"
        if getattr(self, outer) > 1 and getattr(self, inner) == 1:
            return f"{outer} {getattr(self, outer)} alone splits the outer loop (no change)"
        if self.unroll_rc < 1 or c % self.unroll_rc:
            return f"unroll_rc {self.unroll_rc} must divide the {c} input channels"
        n_loops = 2 + (self.tile_p > 1) + (self.tile_k > 1)
        if not 0 <= self.parallel_loops <= n_loops:
            return f"parallel_loops {self.parallel_loops} must be in 0..{n_loops}"
        return None


def _schedule_gemm_loops(m, knobs: WinogradKnobs, c: int, k: int) -> list:
    """Split and order the batched GEMM stage ``m`` (axes a, b, p, kk) into register tiles
    inside cache blocks (:class:`WinogradKnobs`); returns its loops over register tiles and
    blocks after (a, b), outermost first (the register tile computed at the last)."""
    m.split("kk", knobs.k_block)
    pbo, pbi = m.split("p", knobs.p_block)
    loops = {"p": [pbo], "k": [m.axis("kk.outer")]}
    for axis, t in (("p", knobs.tile_p), ("k", knobs.tile_k)):
        if t > 1:
            loops[axis] = list(m.split(loops[axis][0], t))
    first, second = ("k", "p") if knobs.columns_outer(c, k) else ("p", "k")
    order = [loops[first][0], loops[second][0]]
    order += [x[1] for x in (loops[first], loops[second]) if len(x) > 1]
    m.reorder("a", "b", *order, pbi, "kk.inner")
    return order


def transform_weights(
    kernel: np.ndarray, k_block: int | None = None, out_tile: int = 2
) -> np.ndarray:
    """OIHW ``[K, C, 3, 3]`` -> ``U = G g G^T`` as ``[n, n, K/k_block, C, k_block]`` (n =
    ``out_tile`` + 2; float32, contiguous: a register tile's column of U is one stream;
    default ``k_block`` K, the same bytes as ``[n, n, C, K]``)."""
    k, c = kernel.shape[:2]
    kb = k if k_block is None else k_block
    if kb < 1 or k % kb:
        raise ValueError(f"k_block {kb} must divide the {k} output channels")
    if out_tile not in OUT_TILES:
        raise ValueError(f"out_tile {out_tile} (allowed: {', '.join(map(str, OUT_TILES))})")
    g = np.asarray(OUT_TILES[out_tile][1], np.float64)
    n = out_tile + 2
    u = np.einsum("ai,kcij,bj->abck", g, kernel.astype(np.float64), g)
    u = u.reshape(n, n, c, k // kb, kb).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(u.astype(np.float32))


def _signed_sum(terms):
    """``sum(coef * x)`` for integer coefficients, without multiplications for those in
    {-1, 0, 1}."""
    out = None
    for coef, x in terms:
        if coef == 0:
            continue
        sign = 1 if coef > 0 else -1
        if abs(coef) != 1:
            x = x * const(float(abs(coef)))
        if out is None:
            out = x if sign > 0 else const(0.0) - x
        else:
            out = out + x if sign > 0 else out - x
    return out


def _by_position(a, b, exprs):
    """``exprs[a][b]`` for loop variables ``a``, ``b`` in 0..3 as a select chain; it folds to
    one expression once ``a`` and ``b`` are unrolled."""
    out = exprs[-1][-1]
    for i in reversed(range(len(exprs))):
        for j in reversed(range(len(exprs[0]))):
            if (i, j) != (len(exprs) - 1, len(exprs[0]) - 1):
                out = select(all_(equal(a, i), equal(b, j)), exprs[i][j], out)
    return out


def conv2d_winograd(
    c: int,
    h: int,
    w: int,
    k: int,
    knobs: WinogradKnobs = WinogradKnobs(),
    blocks: tuple[int, int] | None = None,
    epilogue=None,
):
    """Schedule and arguments ``(sch, [data, U, out])`` for a 3x3 / stride 1 / pad 1 float32
    convolution of ``data [1, C, H, W]`` into ``out [1, K, H, W]``; ``U`` comes from
    ``transform_weights(w, knobs.k_block)``.

    With ``blocks=(ic, oc)`` data and out are NCHW{c}c (``[1, C/ic, H, W, ic]``, ``[1, K/oc,
    H, W, oc]``); with an ``epilogue`` (``compiler.ops.cpu.nchwc.Epilogue``) the arguments are
    ``[data, U, bias, (residual,) out]`` and the output transform applies it."""
    pb, kb, mt = knobs.p_block, knobs.k_block, knobs.out_tile
    if mt not in OUT_TILES:
        raise ValueError(f"out_tile {mt} (allowed: {', '.join(map(str, OUT_TILES))})")
    bt, _, at_ = OUT_TILES[mt]
    n_in = mt + 2  # the input tile's side
    ib, ob = blocks if blocks is not None else (None, None)
    nth, ntw = -(-h // mt), -(-w // mt)
    p_tiles = nth * ntw
    # NCHWc: the tiles rounded up to whole register tiles (the extra tiles read zero padding
    # or the last rows again, and nothing reads their results); NCHW: p_block divides them
    p_pad = -(-p_tiles // pb) * pb if blocks is not None and pb > 0 else p_tiles
    if pb < 1 or p_pad % pb or k % kb:
        raise ValueError(
            f"p_block {pb} must divide the {p_tiles} tiles (NCHWc: be positive) and k_block"
            f" {kb} the {k} channels"
        )
    if ib is not None and (c % ib or k % ob or ob % 8):
        raise ValueError(f"blocks {blocks} must divide the channels {c}/{k} (oc a multiple of 8)")
    why = knobs.gemm_problem(c, k, p_pad)
    if why:
        raise ValueError(why)
    dshape = (1, c, h, w) if ib is None else (1, c // ib, h, w, ib)
    data = placeholder(dshape, "float32", "data")
    u = placeholder((n_in, n_in, k // kb, c, kb), "float32", "U")
    args = [data, u]
    if epilogue is not None:
        args.append(placeholder((k,), "float32", "bias"))
        oshape = (1, k, h, w) if ob is None else (1, k // ob, h, w, ob)
        if epilogue.residual:
            args.append(placeholder(oshape, "float32", "residual"))

    def read(ch, y, x):
        return data[0, ch, y, x] if ib is None else data[0, ch // ib, y, x, ch % ib]

    def tile_fn(i, j, ch, p):  # the 4x4 input tile of every output tile, zero-padded
        y, x = (p // ntw) * mt + (i - 1), (p % ntw) * mt + (j - 1)
        inside = all_(y >= 0, y < h, x >= 0, x < w)
        return select(inside, read(ch, y, x), const(0.0))

    # NCHW: V[a, b, C, P] (tiles of a row vectorized); NCHWc: V[a, b, P, C] (channels
    # vectorized: the tile's inputs are whole channel vectors of the blocked layout)
    blocked = ib is not None

    def at(t, a, b, ch, p):
        return t[a, b, p, ch] if blocked else t[a, b, ch, p]

    vshape = (n_in, n_in, p_pad, c) if blocked else (n_in, n_in, c, p_pad)
    if blocked:
        dt = compute(vshape, lambda i, j, p, ch: tile_fn(i, j, ch, p), name="D")
    else:
        dt = compute(vshape, tile_fn, name="D")

    def v_fn(a, b, ch, p):
        ns = range(n_in)
        dd = [[at(dt, i, j, ch, p) for j in ns] for i in ns]
        btd = [[_signed_sum([(bt[r][i], dd[i][j]) for i in ns]) for j in ns] for r in ns]
        v = [[_signed_sum([(bt[s][j], btd[r][j]) for j in ns]) for s in ns] for r in ns]
        return _by_position(a, b, v)

    if blocked:
        vt = compute(vshape, lambda a, b, p, ch: v_fn(a, b, ch, p), name="V")
    else:
        vt = compute(vshape, v_fn, name="V")
    rc = reduce_axis(c, "rc")
    m = compute(
        (n_in, n_in, p_pad, k),
        lambda a, b, p, kk: te_sum(at(vt, a, b, rc, p) * u[a, b, kk // kb, rc, kk % kb], rc),
        name="M",
    )

    def out_fn(n, kk, y, x):
        return _finish(_transformed(kk, y, x), kk, (n, kk, y, x))

    def out_c_fn(n, ko, y, x, ki):
        return _finish(_transformed(ko * ob + ki, y, x), ko * ob + ki, (n, ko, y, x, ki))

    def _finish(v, kk, idx):
        if epilogue is None:
            return v
        res = args[3](*idx) if epilogue.residual else None
        return epilogue.apply(v, args[2][kk], res)

    def _transformed(kk, y, x):
        ns = range(n_in)
        ty, tx, dy, dx = y // mt, x // mt, y % mt, x % mt
        p = ty * ntw + tx
        ys = [
            [
                _signed_sum([(at_[r][a] * at_[s][b], m[a, b, p, kk]) for a in ns for b in ns])
                for s in range(mt)
            ]
            for r in range(mt)
        ]
        return _by_position(dy, dx, ys)

    if ob is None:
        out = compute((1, k, h, w), out_fn, name="out")
    else:
        out = compute((1, k // ob, h, w, ob), out_c_fn, name="out")
    s = create_schedule(out)
    # input transform: one (channel, tile row) per task, a/b unrolled, tiles in a row vectorized;
    # the row's 4x4 input tiles are gathered first (strided masked loads) into a local buffer
    s[dt].set_scope("local")
    if blocked:  # per tile and channel block: 16 vector loads, transform, 16 vector stores
        co, ci = s[vt].split("ch", ib)
        s[vt].reorder("p", co, "a", "b", ci)
        s[vt].vectorize(ci)
        s[dt].compute_at(s[vt], co)
        s[dt].reorder("i", "j", "p", "ch")
        s[dt].vectorize("ch")
        v_task = ("p", co)
    else:
        po, pi = s[vt].split("p", ntw)
        s[vt].reorder("ch", po, "a", "b", pi)
        s[vt].vectorize(pi)
        s[dt].compute_at(s[vt], po)
        s[dt].reorder("ch", "i", "j", "p")
        s[dt].vectorize("p")
        v_task = ("ch", po)
    s[vt].unroll("a")
    s[vt].unroll("b")
    s[dt].unroll("i")
    s[dt].unroll("j")
    # batched GEMM: p_block x k_block register tiles, reduction over C inside; with a large
    # U[e] the tiles run inside the channel blocks (see U_COLUMN_OUTER_BYTES)
    ml = s.cache_write(m, "local")
    gemm = _schedule_gemm_loops(s[m], knobs, c, k)
    s[ml].compute_at(s[m], gemm[-1])
    rc = ["rc"]
    if knobs.unroll_rc > 1:
        rc = [a.name for a in s[ml].split("rc", knobs.unroll_rc)]
        s[ml].unroll(rc[-1])
    s[ml].reorder("a.c", "b.c", *rc, "p.c", "kk.c")
    s[ml].unroll("p.c")
    s[ml].vectorize("kk.c")
    s[m].vectorize("kk.inner")
    # output transform: 2x2 outputs per tile unrolled, channels innermost (vector loads of M)
    ko, ki = s[out].split("kk", 16) if ob is None else ("ko", "ki")
    yo, yi = s[out].split("y", mt)
    xo, xi = s[out].split("x", mt)
    s[out].reorder("n", ko, yo, xo, yi, xi, ki)
    s[out].unroll(yi)
    s[out].unroll(xi)
    s[out].vectorize(ki)
    if knobs.parallel:
        s[vt].parallel(s[vt].fuse(*v_task))
        fused = s[m].fuse("a", "b")
        for loop in gemm[: knobs.parallel_loops]:
            fused = s[m].fuse(fused, loop)
        s[m].parallel(fused)
        s[out].parallel(s[out].fuse(ko, yo))
    return s, args + [out]
