"""Quantize float ``conv2d``/``dense`` to int8 with power-of-two scales (requantize = shift).

For a node ``y = act(x * w + b [+ r])`` with calibrated frac bits ``fx`` (input), ``fy`` (output),
``fr`` (residual) and ``fw = frac_bits_for(max|w|)`` (per tensor):

- ``w_q = clip(round(w * 2**fw))`` int8; the accumulator has frac bits ``fa = fx + fw``,
- ``shift = fa - fy`` (if negative, ``fy`` is raised to ``fa`` and ``shift = 0``),
- bias correction: ``b -= sum_c (w_q * 2**-fw - w)[o, c, :, :] * mean(x_c)`` (optional),
- ``b_q = round(b * 2**fa) + (1 << (shift - 1) if shift else 0)`` int32 (the added half makes the
  floor shift round to nearest),
- ``res_shift = fa - fr`` (if negative, the residual is first re-quantized to ``fa`` on the cpu),
- ``[clip_lo, clip_hi] = clip(round([lo, hi] * 2**fy), -128, 127)``; ``relu`` gives ``clip_lo = 0``.

The result is a ``qconv2d``/``qdense`` node (int8 in and out) implementing the arithmetic of
:mod:`compiler.graph.vta_ops`; its ``acc_frac_bits`` attr records ``fa`` (for readers only). Float readers of a quantized value get a ``dequantize`` node that
produces the original float name; quantized readers of a float value get a ``quantize`` node.
Which nodes stay float: ``keep_float`` names, or by default the first conv2d and the last dense.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pyvta.compiler.graph.calibrate import (
    MIN_FRAC_BITS,
    Calibration,
    calibrate,
    frac_bits_for,
    quantization_error,
)
from pyvta.compiler.graph.ir import Graph, GraphError, Node
from pyvta.compiler.graph.passes.rewrite import NodeEmitter
from pyvta.compiler.graph.vta_ops import avg_pool_params

QUANTIZABLE = ("conv2d", "dense")
INT8_POOLS = ("max_pool", "global_avg_pool", "flatten")  # with ``QuantConfig.int8_pools``


@dataclass
class QuantConfig:
    """``samples``: calibration inputs (dicts input name -> array). ``keep_float``: node names to
    leave in float; ``None`` means the first conv2d and the last dense (the VTA convention).
    ``extra_bits``: activation scales may be up to this many bits finer than the max-range
    choice when that lowers the calibration quantization error (0: plain max calibration).
    ``bias_correction``: subtract the mean output shift that weight rounding causes (computed
    from the calibrated input channel means), as in data-free quantization (Nagel et al. 2019)."""

    samples: list[dict[str, np.ndarray]] = field(default_factory=list)
    keep_float: tuple[str, ...] | None = None
    extra_bits: int = 2
    bias_correction: bool = True
    # max pool, global average pool and flatten of an int8 value stay int8 (the accelerator
    # runs them): max pool and flatten keep the input's scale, the mean requantizes with an
    # integer multiplier (``vta_ops.avg_pool_params``); False: they run in float
    int8_pools: bool = False


def default_keep_float(graph: Graph) -> tuple[str, ...]:
    """The first conv2d and the last dense in node order."""
    convs = [n.name for n in graph.nodes if n.op == "conv2d"]
    denses = [n.name for n in graph.nodes if n.op == "dense"]
    return tuple(convs[:1] + denses[-1:])


def _to_int8(a: np.ndarray, frac_bits: int) -> np.ndarray:
    return np.clip(np.round(a.astype(np.float64) * 2.0**frac_bits), -128, 127).astype(np.int8)


def weight_frac_bits(w: np.ndarray) -> int:
    """The max-range frac bits or one finer, whichever quantizes ``w`` with less squared error."""
    f = frac_bits_for(float(np.max(np.abs(w))))
    return min((f, f + 1), key=lambda c: quantization_error(w.astype(np.float64), c))


class _Rewriter:
    def __init__(self, g: Graph, cal: Calibration, bias_correction: bool) -> None:
        self.g = g
        self.nodes: list[Node] = []
        self.em = NodeEmitter(g, self.nodes)
        self.fracs = cal.frac_bits
        self.means = cal.channel_means
        self.bias_correction = bias_correction
        self.int8: dict[str, tuple[str, int]] = {}  # float name -> (int8 name, frac bits)
        self.float_ready: set[str] = set(g.inputs) | set(g.constants)

    def as_int8(self, name: str) -> tuple[str, int]:
        if name not in self.int8:
            f = self.fracs.get(name, 7)
            q = self.em.emit("quantize", [name], {"frac_bits": f}, f"{name}_quantize")
            self.int8[name] = (q, f)
        return self.int8[name]

    def as_float(self, name: str) -> str:
        if name not in self.float_ready:
            q, f = self.int8[name]
            self.em.emit("dequantize", [q], {"frac_bits": f}, f"{name}_dequantize", output=name)
            self.float_ready.add(name)
        return name

    def int8_pool(self, n: Node) -> bool:
        """``n`` (max pool, global average pool, flatten) on its int8 input, if it has one."""
        if n.op not in INT8_POOLS or n.inputs[0] not in self.int8:
            return False
        xq, fx = self.int8[n.inputs[0]]
        y, attrs, fy, op = n.outputs[0], dict(n.attrs), fx, n.op
        if n.op == "global_avg_pool":
            _, _, h, w = self.g.values[n.inputs[0]].shape
            fy = max(fx, self.fracs.get(y, fx))  # (a mean needs no coarser scale than its input)
            attrs["mult"], attrs["shift"] = avg_pool_params(h * w, fx, fy)
            op = "qglobal_avg_pool"
        self.em.names.discard(n.name)
        out = self.em.emit(op, [xq], attrs, n.name, output=self.g.fresh_name(f"{y}_int8"))
        self.int8[y] = (out, fy)
        return True

    def requantize_residual(self, r: str, fr: int, fa: int) -> str:
        fl = self.em.emit("dequantize", [r], {"frac_bits": fr}, f"{r}_to_float")
        return self.em.emit("quantize", [fl], {"frac_bits": fa}, f"{r}_to_acc")

    def quantize_node(self, n: Node) -> None:
        g = self.g
        xq, fx = self.as_int8(n.inputs[0])
        w = g.constants[n.inputs[1]]
        fw = weight_frac_bits(w)
        bias = g.constants[n.inputs[2]].astype(np.float64)
        bias_max = float(np.max(np.abs(bias), initial=0.0))
        while fw > MIN_FRAC_BITS and bias_max * 2.0 ** (fx + fw) >= 2**30:
            fw -= 1  # keep the bias (at the accumulator's scale) well inside int32
        wq = _to_int8(w, fw)
        mean = self.means.get(n.inputs[0])
        if self.bias_correction and mean is not None:
            bias = bias - _weight_error_shift(w, wq, fw, n.attrs.get("group", 1), mean)
        fa = fx + fw
        y = n.outputs[0]
        fy = self.fracs.get(y, 7)
        shift = fa - fy
        if shift < 0:
            fy, shift = fa, 0
        if shift > 31:
            raise GraphError(f"node {n.name!r}: shift {shift} exceeds 31 (input/weight scales)")
        bq = np.round(bias * 2.0**fa) + (1 << (shift - 1) if shift else 0)
        if np.max(np.abs(bq), initial=0) >= 2**31:
            raise GraphError(
                f"node {n.name!r}: its int32 bias overflows at the accumulator's scale"
                f" 2**{-fa}: max |weight| {float(np.max(np.abs(w))):.3g} and max |bias|"
                f" {float(np.max(np.abs(bias))):.3g} (after rounding correction) do not fit int8"
                " weights with an int32 bias at one power-of-two scale; check this node's weights"
            )
        attrs = {k: n.attrs[k] for k in ("strides", "pads", "dilations", "group") if k in n.attrs}
        clip = n.attrs.get("clip") or [-math.inf, math.inf]
        attrs["clip_lo"] = int(max(-128, min(127, _scaled(clip[0], fy))))
        attrs["clip_hi"] = int(max(attrs["clip_lo"], min(127, _scaled(clip[1], fy))))
        attrs["shift"] = shift
        attrs["res_shift"] = 0
        attrs["acc_frac_bits"] = fa
        ins = [
            xq,
            g.add_constant(g.fresh_name(f"{n.inputs[1]}_int8"), wq),
            g.add_constant(g.fresh_name(f"{n.inputs[2]}_int32"), bq.astype(np.int32)),
        ]
        if len(n.inputs) == 4:
            rq, fr = self.as_int8(n.inputs[3])
            if fa < fr:
                rq, fr = self.requantize_residual(rq, fr, fa), fa
            attrs["res_shift"] = fa - fr
            ins.append(rq)
        op = "qconv2d" if n.op == "conv2d" else "qdense"
        self.em.names.discard(n.name)  # the quantized node keeps the float node's name
        out = self.em.emit(op, ins, attrs, n.name, output=g.fresh_name(f"{y}_int8"))
        self.int8[y] = (out, fy)


def check_finite_constants(graph: Graph) -> None:
    """An int8 target cannot represent NaN or Inf: refuse a float constant (weight, bias, ...)
    holding one, naming the first node that reads it (float targets propagate them)."""
    for n in graph.nodes:
        for name in n.inputs:
            c = graph.constants.get(name)
            if c is None or c.dtype.kind != "f" or np.isfinite(c).all():
                continue
            n_nan, n_inf = int(np.isnan(c).sum()), int(np.isinf(c).sum())
            raise GraphError(
                f"node {n.name!r} ({n.op}): constant {name!r} holds {n_nan} NaN and {n_inf} Inf"
                f" of {c.size} values; an int8 target needs finite weights (the float target"
                " 'cpu' propagates them)"
            )


def _weight_error_shift(w, wq, fw: int, group: int, mean: np.ndarray) -> np.ndarray:
    """Expected output change from rounding the weights: ``sum_c (w_q - w)[o, c] * E[x_c]``."""
    err = wq.astype(np.float64) * 2.0**-fw - w.astype(np.float64)
    if err.ndim == 2:
        return err @ mean
    o, cg = err.shape[:2]
    per_in = err.sum(axis=(2, 3)).reshape(group, o // group, cg)
    return np.einsum("goc,gc->go", per_in, mean.reshape(group, cg)).reshape(o)


def _scaled(v: float, frac: int) -> float:
    if math.isinf(v):
        return v
    return round(v * 2.0**frac)


def quantize_int8(graph: Graph, options) -> Graph:
    """Rewrite quantizable nodes (constant weights and bias) to int8 ``qconv2d``/``qdense``."""
    cfg: QuantConfig | None = getattr(options, "quant", None)
    if cfg is None:
        return graph
    check_finite_constants(graph)
    keep = set(cfg.keep_float if cfg.keep_float is not None else default_keep_float(graph))
    g = graph.copy()
    rw = _Rewriter(g, calibrate(graph, cfg.samples, cfg.extra_bits), cfg.bias_correction)
    for n in graph.copy().nodes:
        quantizable = (
            n.op in QUANTIZABLE
            and n.name not in keep
            and all(i in g.constants for i in n.inputs[1:3])
            and g.values[n.inputs[0]].dtype == "float32"
        )
        if quantizable:
            rw.quantize_node(n)
        elif cfg.int8_pools and rw.int8_pool(n):
            pass
        else:
            n.inputs = [rw.as_float(i) for i in n.inputs]
            rw.nodes.append(n)
            rw.float_ready.update(n.outputs)
    g.nodes = rw.nodes
    for o in g.outputs:
        rw.as_float(o)
    # drop the float records of values that now exist only in int8
    live = {o for n in g.nodes for o in n.outputs} | set(g.inputs) | set(g.constants)
    g.values = {k: v for k, v in g.values.items() if k in live}
    return g
