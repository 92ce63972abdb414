"""int8 conv2d / dense on the CPU with the accelerator's integer contract, fused (batch 1).

What one output element computes is :mod:`compiler.graph.vta_ops`'s contract, bit for bit::

    acc = wrap_int32(sum_{c, ky, kx} x * w + bias + (res << res_shift))
    out = int8(clip(acc >> shift, clip_lo, clip_hi))

The kernel reads and writes the graph's NCHW int8 tensors (no layout change between layers).
Input channels go in pairs, two int16 in one int32 lane, and ``te.dot_i16x2`` multiplies a
vector of such lanes with one ``vpmaddwd`` (AVX2; AVX-512BW on 16 lanes): 16 exact int8 x int8
products per instruction. The padded input is stored as those pairs, offset to unsigned,
``u = x + 128`` (pad cells 128, that is x = 0) so that packing two into an int32 is plain
arithmetic, ``u0 + 65536 * u1``; the weights are packed once, at build time. The offset is
paid back in the bias: ``sum (u - 128) * w = sum u * w - 128 * sum w``, and ``sum w`` is per
output channel, padding included since a padded tap is ``u = 128``, so :func:`pack_qconv`
folds ``-128 * sum w`` into the int32 bias. All of it is int32 arithmetic modulo 2**32, as the
accumulator is, so the wrap matches the contract's. On a CPU with AVX-512 VNNI, LLVM fuses
the ``vpmaddwd`` and the accumulating add into ``vpdpwssd``; :func:`dot_isa` names what a
CPU's features give and :func:`assembly_for` compiles a kernel for a CPU we do not run on, to
check that. (The 4 x u8 * s8 ``vpdpbusd`` form is not generated: its offset and bias
correction are the ones above, but the template does not yet group channels by 4.)

Register tile: ``oc_block`` output channels (the vector lanes) x ``ow_block`` output columns,
the input value broadcast per column and the weight vector shared by the columns.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pyvta.compiler.graph.vta_ops import FusedParams
from pyvta.compiler.ir.expr import all_, const
from pyvta.compiler.schedule.schedule import create_schedule
from pyvta.compiler.te.expr_ops import cast, dot_i16x2, maximum, minimum, select
from pyvta.compiler.te.tensor import compute, placeholder, reduce_axis
from pyvta.compiler.te.tensor import sum as te_sum
from pyvta.isa.errors import PyvtaError

U8_OFFSET = 128  # u = x + 128 maps int8 onto 0..255
HALF = 1 << 16  # the high int16 of an int32 lane
DOT_ISAS = ("avx512vnni", "avxvnni", "avx2", "scalar")  # best first


class Int8TemplateError(PyvtaError, ValueError):
    """A layer or tile the int8 template cannot build."""


def dot_isa(features: dict[str, bool]) -> str:
    """The int8 dot-product instructions a CPU with ``features`` (llvmlite's
    ``get_host_cpu_features()``) gives these kernels, one of ``DOT_ISAS``."""
    if features.get("avx512vnni") and features.get("avx512bw"):
        return "avx512vnni"
    if features.get("avxvnni"):
        return "avxvnni"
    return "avx2" if features.get("avx2") else "scalar"


def assembly_for(sch, args, cpu: str, features: str, vector_bits: int) -> str:
    """Assembly of ``(sch, args)`` compiled for CPU ``cpu`` with LLVM ``features`` (e.g.
    ``"+avx512vnni,+avx512bw"``): code generation only, it is not run (the host may lack
    them)."""
    import llvmlite.binding as llvm

    from pyvta.compiler.api import lower
    from pyvta.compiler.backend.llvm.codegen import CodeGen
    from pyvta.compiler.backend.llvm.jit import optimize
    from pyvta.compiler.backend.llvm.passes import LLVM_PASSES
    from pyvta.compiler.backend.llvm.target import CpuTarget, cpu_scopes
    from pyvta.compiler.passes.pipeline import run_passes

    host = CpuTarget.host(1)
    target = CpuTarget(host.triple, cpu, features, vector_bits, 1)
    func = run_passes(lower(sch, args), LLVM_PASSES)
    text = optimize(str(CodeGen(func, target, cpu_scopes()).generate()), target)
    return target.target_machine().emit_assembly(llvm.parse_assembly(text))


@dataclass(frozen=True)
class Int8ConvKnobs:
    """``oc_block`` output channels per vector (8 int32 lanes of AVX2; the output channels must
    be a multiple, else use 1); ``ow_block`` unrolled output columns per tile (divides the output
    width); ``parallel``: output channel blocks x rows across threads."""

    oc_block: int = 8
    ow_block: int = 4
    parallel: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def for_layer(o: int, ow: int, lanes: int = 8, registers: int = 16) -> Int8ConvKnobs:
        """Full vectors of ``lanes`` int32 when ``o`` allows (else 8, else scalar); the widest
        column tile dividing ``ow`` that leaves room for the weight vector, the broadcast input
        and a temporary."""
        oc = next((b for b in (lanes, 8) if o % b == 0), 1)
        room = registers - 4
        owb = max(d for d in range(1, min(room, ow) + 1) if ow % d == 0)
        return Int8ConvKnobs(oc_block=oc, ow_block=owb)


def conv_out_hw(h, w, kernel, strides, pads) -> tuple[int, int]:
    (kh, kw), (sh, sw), (t, lft, b, r) = kernel, strides, pads
    oh, ow = (h + t + b - kh) // sh + 1, (w + lft + r - kw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise Int8TemplateError(
            f"kernel {kernel} larger than the padded input {h + t + b}x{w + lft + r}"
        )
    return oh, ow


def pack_qconv(w: np.ndarray, bias: np.ndarray, oc_block: int) -> tuple[np.ndarray, np.ndarray]:
    """OIHW int8 weights and int32 bias -> ``([O/ob, ceil(C/2), KH, KW, ob] int32, [O]
    int32)``: each weight lane the pair of input channels ``2c`` (low int16) and ``2c + 1``
    (high; an odd count padded with a zero weight); the bias carries the unsigned-input
    correction ``-128 * sum w[o]`` (wrapped to int32)."""
    o, c, kh, kw = w.shape
    if o % oc_block:
        raise Int8TemplateError(f"{o} output channels are not a multiple of oc_block {oc_block}")
    c2 = -(-c // 2)
    wpad = np.zeros((o, 2 * c2, kh, kw), np.int64)
    wpad[:, :c] = w
    pairs = (wpad[:, 0::2] & 0xFFFF) | (wpad[:, 1::2] << 16)  # [O, C/2, KH, KW]
    pairs = ((pairs + 2**31) & 0xFFFFFFFF) - 2**31
    wp = np.ascontiguousarray(
        pairs.reshape(o // oc_block, oc_block, c2, kh, kw).transpose(0, 2, 3, 4, 1)
    )
    corr = bias.astype(np.int64) - U8_OFFSET * w.reshape(o, -1).astype(np.int64).sum(axis=1)
    wrapped = ((corr + 2**31) & 0xFFFFFFFF) - 2**31
    return wp.astype(np.int32), wrapped.astype(np.int32)


def _offset_pairs(data, pads):
    """``u0 + 65536 * u1`` of the unsigned ``u = x + 128`` of channels ``2c``, ``2c + 1``:
    int32 ``[ceil(C/2), H + t + b, W + l + r]``, pad cells (and a channel past the input's)
    ``u = 128`` (x = 0)."""
    _, c, h, w = data.shape
    t, lft, b, r = pads

    def f(c2, y, x):
        inside = all_(y >= t, y < h + t, x >= lft, x < w + lft)

        def u(ch, valid):
            v = cast("int32", data[0, ch, y - t, x - lft]) + U8_OFFSET
            return select(all_(inside, valid), v, const(U8_OFFSET))

        hi = u(2 * c2 + 1, 2 * c2 + 1 < c) if c % 2 else u(2 * c2 + 1, const(True))
        return u(2 * c2, const(True)) + hi * HALF

    return compute((-(-c // 2), h + t + b, w + lft + r), f, name="data.pairs")


def _requantize(acc, res, p: FusedParams):
    """int32 ``acc`` (bias added) + residual -> int8 by the contract's shift and clip."""
    if res is not None:
        acc = acc + (cast("int32", res) << p.res_shift)
    y = acc >> p.shift
    return cast("int8", minimum(maximum(y, const(p.clip_lo)), const(p.clip_hi)))


def qconv2d_nchw(
    c: int,
    h: int,
    w: int,
    o: int,
    kernel: tuple[int, int],
    params: FusedParams,
    residual: bool = False,
    knobs: Int8ConvKnobs | None = None,
):
    """``(sch, [data, weight, bias, (residual,) out])``: data int8 ``[1, C, H, W]``, weight and
    bias from :func:`pack_qconv`, residual and out int8 ``[1, O, OH, OW]`` (``params``: shift,
    clip, residual shift, strides, pads); ``knobs`` default: :meth:`Int8ConvKnobs.for_layer`."""
    kh, kw = kernel
    oh, ow = conv_out_hw(h, w, kernel, params.strides, params.pads)
    knobs = knobs or Int8ConvKnobs.for_layer(o, ow)
    (sh, sw), ob, owb = params.strides, knobs.oc_block, knobs.ow_block
    if o % ob or ow % owb:
        raise Int8TemplateError(
            f"oc_block {ob} must divide the {o} output channels, ow_block {owb} the width {ow}"
        )
    data = placeholder((1, c, h, w), "int8", "data")
    c2 = -(-c // 2)  # input channel pairs: one vpmaddwd multiplies two channels
    wgt = placeholder((o // ob, c2, kh, kw, ob), "int32", "weight")
    bias = placeholder((o,), "int32", "bias")
    args = [data, wgt, bias]
    res = placeholder((1, o, oh, ow), "int8", "residual") if residual else None
    if res is not None:
        args.append(res)
    u = _offset_pairs(data, params.pads)
    rc, ry, rx = reduce_axis(c2, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
    acc = compute(
        (o // ob, oh, ow, ob),
        lambda f, y, x, fi: te_sum(
            dot_i16x2(u[rc, y * sh + ry, x * sw + rx], wgt[f, rc, ry, rx, fi]), [rc, ry, rx]
        ),
        name="acc",
    )

    def out_fn(n, oc, y, x):
        r = res[n, oc, y, x] if res is not None else None
        return _requantize(acc[oc // ob, y, x, oc % ob] + bias[oc], r, params)

    out = compute((1, o, oh, ow), out_fn, name="out")
    s = create_schedule(out)
    s[acc].set_scope("local")
    fo, fi = s[out].split("oc", ob)
    xo, xi = s[out].split("x", owb)
    s[out].reorder("n", fo, "y", xo, xi, fi)
    s[acc].compute_at(s[out], xo)
    s[acc].reorder("f", "y", "rc", "ry", "rx", "x", "fi")
    if ob > 1:
        s[acc].vectorize("fi")
        s[out].vectorize(fi)
    s[acc].unroll("x")
    s[out].unroll(xi)
    if knobs.parallel:
        s[out].parallel(s[out].fuse(fo, "y"))
        s[u].parallel("c2")
    return s, args + [out]
