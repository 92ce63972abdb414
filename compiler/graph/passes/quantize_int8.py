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

Per-channel weight scales: ``fw[o]`` per output channel (the same choice on ``w[o]``), so each
channel's accumulator has ``fa[o] = fx + fw[o]`` and the node's ``shift`` / ``res_shift`` attrs are
lists (``shift[o] = fa[o] - fy``); the output keeps one scale ``fy``. ``QuantConfig.weight_scales``
(``WeightScales``): TENSOR never, CHANNEL wherever channels' scales differ, AUTO per node when the
node's int8 output is closer to its float output (squared error over up to ``choice_samples``
calibration samples, each node fed its float input quantized) than with one weight scale, and
then, node by node (largest gain first, up to ``auto_trials``), only if the whole int8 graph's
outputs come closer to float on those samples too.

With ``QuantConfig.int8_pools``, a global mean read only by quantized dense layers is re-centred
per channel (``_Rewriter.centred_mean``): ``mean - offset`` at the finer scale its spread allows,
``W @ offset`` folded into the dense's bias (a classifier whose bias cancels most of ``W @ mean``
would amplify the plain int8 mean's rounding).

The result is a ``qconv2d``/``qdense`` node (int8 in and out) implementing the arithmetic of
:mod:`runtime.vta_ops`; its ``acc_frac_bits`` attr records ``fa`` (for readers only). Float readers of a quantized value get a ``dequantize`` node that
produces the original float name; quantized readers of a float value get a ``quantize`` node.
Which nodes stay float: ``keep_float`` names, or a ``KeepFloat`` choice (default: the first conv2d
and the last dense). A float layer whose output feeds a ``quantize`` makes the int8 codes depend on
the CPU's float rounding (fused multiply-add or not, the vector width's reduction order), so only
``KeepFloat.NONE`` (every conv2d/dense int8, the output a power-of-two ``dequantize``) gives the
same bits on every CPU.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

from pyvta.compiler.graph.calibrate import (
    MIN_FRAC_BITS,
    Calibration,
    calibrate,
    forward_values,
    frac_bits_for,
    quantization_error,
)
from pyvta.compiler.graph.passes.rewrite import NodeEmitter
from pyvta.runtime.cpu_ops import run_cpu_op
from pyvta.runtime.ir import Graph, GraphError, Node
from pyvta.runtime.vta_ops import MAX_SHIFT, avg_pool_params, mean_offsets

QUANTIZABLE = ("conv2d", "dense")
INT8_POOLS = ("max_pool", "global_avg_pool", "flatten")  # with ``QuantConfig.int8_pools``


class WeightScales(enum.Enum):
    """How a quantized layer's weights are scaled (powers of two)."""

    TENSOR = "tensor"  # one scale per layer
    CHANNEL = "channel"  # one per output channel wherever the channels' scales differ
    AUTO = "auto"  # per channel where it brings the layer's int8 output closer to float


@dataclass
class QuantConfig:
    """``samples``: calibration inputs (dicts input name -> array). ``keep_float``: node names to
    leave in float, or a ``KeepFloat`` choice; ``None`` is ``KeepFloat.DEFAULT`` (the first
    conv2d and the last dense, the VTA convention).
    ``extra_bits``: activation scales may be up to this many bits finer than the max-range
    choice when that lowers the calibration quantization error (0: plain max calibration).
    ``bias_correction``: subtract the mean output shift that weight rounding causes (computed
    from the calibrated input channel means), as in data-free quantization (Nagel et al. 2019).
    ``weight_scales``: per layer, per output channel, or per node by ``choose_per_channel``
    (``choice_samples``: the calibration samples it compares on)."""

    samples: list[dict[str, np.ndarray]] = field(default_factory=list)
    keep_float: tuple[str, ...] | KeepFloat | None = None
    extra_bits: int = 2
    bias_correction: bool = True
    # max pool, global average pool and flatten of an int8 value stay int8 (the accelerator
    # runs them): max pool and flatten keep the input's scale, the mean requantizes with an
    # integer multiplier (``vta_ops.avg_pool_params``); False: they run in float
    int8_pools: bool = False
    weight_scales: WeightScales = WeightScales.TENSOR
    choice_samples: int = 4
    auto_trials: int = 24  # AUTO: at most this many nodes tried on the whole graph's error


class KeepFloat(enum.Enum):
    """Which conv2d/dense layers an int8 target leaves in float (``pyvta compile --keep-float``)."""

    DEFAULT = "default"  # the first conv2d and the last dense (the VTA convention)
    CLASSIFIER = "classifier"  # the last dense only: the first conv is int8 too
    NONE = "none"  # none: every value is an integer up to the output's dequantize


def default_keep_float(graph: Graph) -> tuple[str, ...]:
    """The first conv2d and the last dense in node order."""
    convs = [n.name for n in graph.nodes if n.op == "conv2d"]
    denses = [n.name for n in graph.nodes if n.op == "dense"]
    return tuple(convs[:1] + denses[-1:])


def keep_float_names(graph: Graph, keep: tuple[str, ...] | KeepFloat | None) -> tuple[str, ...]:
    """The names of the layers ``keep`` leaves in float (None: ``KeepFloat.DEFAULT``); raises
    ``GraphError`` for a name that is not a conv2d/dense of ``graph``."""
    if keep is None or keep is KeepFloat.DEFAULT:
        return default_keep_float(graph)
    if keep is KeepFloat.CLASSIFIER:
        return tuple([n.name for n in graph.nodes if n.op == "dense"][-1:])
    if keep is KeepFloat.NONE:
        return ()
    layers = [n.name for n in graph.nodes if n.op in QUANTIZABLE]
    unknown = [k for k in keep if k not in layers]
    if unknown:
        raise GraphError(
            f"keep_float names {', '.join(unknown)}, not a conv2d/dense of the graph (allowed:"
            f" {', '.join(layers)})"
        )
    return tuple(keep)


def _to_int8(a: np.ndarray, frac_bits: int) -> np.ndarray:
    return np.clip(np.round(a.astype(np.float64) * 2.0**frac_bits), -128, 127).astype(np.int8)


def weight_frac_bits(w: np.ndarray) -> int:
    """The max-range frac bits or one finer, whichever quantizes ``w`` with less squared error."""
    f = frac_bits_for(float(np.max(np.abs(w))))
    return min((f, f + 1), key=lambda c: quantization_error(w.astype(np.float64), c))


@dataclass
class NodeQuant:
    """The int8 form of one conv2d/dense: int8 weights, int32 bias, the shifts (an int, or a
    tuple per output channel), the output's and the residual's frac bits (``fr`` None: no
    residual; ``fr`` below the accumulator's: the residual is re-quantized to ``fr`` first)."""

    wq: np.ndarray
    bq: np.ndarray
    shift: int | tuple[int, ...]
    res_shift: int | tuple[int, ...]
    fa: np.ndarray  # accumulator frac bits per output channel
    fy: int
    fr: int | None

    @property
    def per_channel(self) -> bool:
        return isinstance(self.shift, tuple)


def plan_node(
    name: str,
    w: np.ndarray,
    bias: np.ndarray,
    fx: int,
    fy: int,
    fr: int | None,
    mean: np.ndarray | None,
    group: int,
    per_channel: bool,
) -> NodeQuant:
    """Weights, bias and shifts of a node (formulas in the module docstring); ``mean``: the
    input's channel means for bias correction (None: none). Raises ``GraphError`` when a shift
    or the bias does not fit."""
    o = w.shape[0]
    bias = bias.astype(np.float64)
    if per_channel:  # a channel of tiny weights may not push its shift past 31
        fw = np.array([weight_frac_bits(w[i]) for i in range(o)])
        fw = np.minimum(fw, MAX_SHIFT + min(fy, fx + int(fw.min())) - fx)
    else:
        fw = np.full(o, weight_frac_bits(w))
    limit = np.abs(bias) * 2.0 ** (fx + fw) >= 2**30
    while (limit & (fw > MIN_FRAC_BITS)).any():  # keep the bias well inside int32
        fw = np.where(limit & (fw > MIN_FRAC_BITS), fw - 1, fw) if per_channel else fw - 1
        limit = np.abs(bias) * 2.0 ** (fx + fw) >= 2**30
    scale = 2.0 ** fw.reshape((o,) + (1,) * (w.ndim - 1))
    wq = np.clip(np.round(w.astype(np.float64) * scale), -128, 127).astype(np.int8)
    if mean is not None:
        bias = bias - _weight_error_shift(w, wq, fw, group, mean)
    fa = fx + fw
    fy = min(fy, int(fa.min()))  # no negative shift: the output takes the coarser scale
    shift = fa - fy
    if shift.max() > 31:
        raise GraphError(f"node {name!r}: shift {shift.max()} exceeds 31 (input/weight scales)")
    bq = np.round(bias * 2.0**fa) + np.where(shift > 0, 1 << np.maximum(shift - 1, 0), 0)
    if np.max(np.abs(bq), initial=0) >= 2**31:
        raise GraphError(
            f"node {name!r}: its int32 bias overflows at the accumulator's scale"
            f" 2**{-int(fa.min())}: max |weight| {float(np.max(np.abs(w))):.3g} and max |bias|"
            f" {float(np.max(np.abs(bias))):.3g} (after rounding correction) do not fit int8"
            " weights with an int32 bias at one power-of-two scale; check this node's weights"
        )
    res_shift = np.zeros(o, np.int64)
    if fr is not None:
        fr = min(fr, int(fa.min()))
        res_shift = fa - fr
    if per_channel and np.unique(fw).size > 1:
        shifts = tuple(int(v) for v in shift), tuple(int(v) for v in res_shift)
    else:
        shifts = int(shift[0]), int(res_shift[0])
    return NodeQuant(wq, bq.astype(np.int32), *shifts, fa, fy, fr)


# a re-centred mean (``_Rewriter.centred_mean``) gets this many bits of headroom over the spread
# its calibration samples show (few samples: an input's mean may fall outside their range)
CENTRED_HEADROOM_BITS = 1


class _Rewriter:
    def __init__(self, g: Graph, cal: Calibration, bias_correction: bool, quantizable) -> None:
        self.g = g
        self.cal = cal
        self.quantizable = quantizable
        # float name -> the float channel offsets its int8 value is re-centred on (real =
        # q * 2**-frac + offset); only dense readers take one (they fold it into their bias)
        self.offsets: dict[str, np.ndarray] = {}
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
        if name in self.offsets:
            raise GraphError(f"value {name!r} is re-centred (a mean's offsets): no float reader")
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
            centred = self.centred_mean(y, h * w, fx, fy)
            if centred is not None:
                fy, attrs["mult"], attrs["shift"], offsets, self.offsets[y] = centred
                attrs["offset"] = offsets.tolist()
            op = "qglobal_avg_pool"
        elif n.op == "flatten" and n.inputs[0] in self.offsets:
            self.offsets[y] = self.offsets[n.inputs[0]]  # (N, C, 1, 1) -> (N, C): same channels
        self.em.names.discard(n.name)
        out = self.em.emit(op, [xq], attrs, n.name, output=self.g.fresh_name(f"{y}_int8"))
        self.int8[y] = (out, fy)
        return True

    def centred_mean(self, y: str, pixels: int, fx: int, fy: int):
        """A global mean re-centred per channel, where that gives it a finer scale than ``fy``
        and only quantized dense layers read it (directly or through flatten): the int8 mean
        minus each channel's calibrated mid-range (the pool subtracts integer offsets before
        its shift; the dense adds ``W @ offset`` to its bias). A classifier whose bias cancels
        most of ``W @ mean`` amplifies the mean's rounding error; re-centred, the mean keeps
        the spread of its values, not their size, in its 8 bits. Returns (frac bits, mult,
        shift, integer offsets, float offsets) or None."""
        if y not in self.cal.channel_ranges or not self._dense_readers_only(y):
            return None
        lo, hi = self.cal.channel_ranges[y]
        spread = float(np.max(hi - lo)) / 2 * 2**CENTRED_HEADROOM_BITS
        for f in range(frac_bits_for(spread), fy, -1):
            try:
                mult, shift = avg_pool_params(pixels, fx, f, offset=True)
            except ValueError:
                continue  # (too fine for the ALU's immediates: try a coarser scale)
            q = mean_offsets((lo + hi) / 2, pixels, mult, shift, f)
            return f, mult, shift, q, q * 2.0 ** -(f + shift)
        return None

    def _dense_readers_only(self, y: str) -> bool:
        if y in self.g.outputs:
            return False
        for r in (n for n in self.g.nodes if y in n.inputs):
            if r.op == "flatten" and r.inputs[0] == y:
                if not self._dense_readers_only(r.outputs[0]):
                    return False
            elif not (r.op == "dense" and r.inputs[0] == y and self.quantizable(r)):
                return False
        return True

    def requantize_residual(self, r: str, fr: int, fa: int) -> str:
        fl = self.em.emit("dequantize", [r], {"frac_bits": fr}, f"{r}_to_float")
        return self.em.emit("quantize", [fl], {"frac_bits": fa}, f"{r}_to_acc")

    def quantize_node(self, n: Node, per_channel: bool) -> None:
        g = self.g
        xq, fx = self.as_int8(n.inputs[0])
        residual = len(n.inputs) == 4
        rq, fr = self.as_int8(n.inputs[3]) if residual else (None, None)
        mean = self.means.get(n.inputs[0]) if self.bias_correction else None
        w, bias = g.constants[n.inputs[1]], g.constants[n.inputs[2]]
        offset = self.offsets.get(n.inputs[0])
        if offset is not None:  # a re-centred input: x = xq * 2**-fx + offset
            bias = bias.astype(np.float64) + w.astype(np.float64) @ offset
            mean = None if mean is None else mean - offset
        y = n.outputs[0]
        q = plan_node(
            n.name,
            w,
            bias,
            fx,
            self.fracs.get(y, 7),
            fr,
            mean,
            n.attrs.get("group", 1),
            per_channel,
        )
        attrs = node_attrs(n, q)
        ins = [
            xq,
            g.add_constant(g.fresh_name(f"{n.inputs[1]}_int8"), q.wq),
            g.add_constant(g.fresh_name(f"{n.inputs[2]}_int32"), q.bq),
        ]
        if residual:
            if q.fr < fr:
                rq = self.requantize_residual(rq, fr, q.fr)
            ins.append(rq)
        op = "qconv2d" if n.op == "conv2d" else "qdense"
        self.em.names.discard(n.name)  # the quantized node keeps the float node's name
        out = self.em.emit(op, ins, attrs, n.name, output=g.fresh_name(f"{y}_int8"))
        self.int8[y] = (out, q.fy)


def node_attrs(n: Node, q: NodeQuant) -> dict:
    """The ``qconv2d``/``qdense`` attrs of float node ``n`` quantized as ``q`` (per-channel
    shifts as lists)."""
    attrs = {k: n.attrs[k] for k in ("strides", "pads", "dilations", "group") if k in n.attrs}
    clip = n.attrs.get("clip") or [-math.inf, math.inf]
    attrs["clip_lo"] = int(max(-128, min(127, _scaled(clip[0], q.fy))))
    attrs["clip_hi"] = int(max(attrs["clip_lo"], min(127, _scaled(clip[1], q.fy))))
    attrs["shift"] = list(q.shift) if q.per_channel else q.shift
    attrs["res_shift"] = list(q.res_shift) if q.per_channel else q.res_shift
    attrs["acc_frac_bits"] = int(q.fa.min())
    return attrs


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


def _weight_error_shift(w, wq, fw, group: int, mean: np.ndarray) -> np.ndarray:
    """Expected output change from rounding the weights: ``sum_c (w_q - w)[o, c] * E[x_c]``
    (``fw``: the weights' frac bits, one or one per output channel)."""
    fw = np.asarray(fw).reshape((-1,) + (1,) * (w.ndim - 1))
    err = wq.astype(np.float64) * 2.0**-fw - w.astype(np.float64)
    if err.ndim == 2:
        return err @ mean
    o, cg = err.shape[:2]
    per_in = err.sum(axis=(2, 3)).reshape(group, o // group, cg)
    return np.einsum("goc,gc->go", per_in, mean.reshape(group, cg)).reshape(o)


def choose_per_channel(graph: Graph, cfg: QuantConfig, cal: Calibration, nodes: list[Node]):
    """Names of ``nodes`` whose int8 output (per-channel weight scales) is closer to their float
    output than with one weight scale: squared error summed over the first ``choice_samples``
    calibration samples, each node fed its float inputs quantized at their calibrated scales;
    the largest relative gain first."""
    fr = cal.frac_bits
    plans = {}
    for n in nodes:
        w, b = graph.constants[n.inputs[1]], graph.constants[n.inputs[2]]
        fres = fr.get(n.inputs[3], 7) if len(n.inputs) == 4 else None
        mean = cal.channel_means.get(n.inputs[0]) if cfg.bias_correction else None
        args = (w, b, fr.get(n.inputs[0], 7), fr.get(n.outputs[0], 7), fres, mean)
        group = n.attrs.get("group", 1)
        pc = plan_node(n.name, *args, group, per_channel=True)
        if pc.per_channel:  # channels' scales differ
            plans[n.name] = (plan_node(n.name, *args, group, per_channel=False), pc)
    errors = {name: np.zeros(2) for name in plans}
    for sample in cfg.samples[: cfg.choice_samples]:
        env = dict(graph.constants)
        env.update({k: np.asarray(sample[k], np.float32) for k in graph.inputs})
        for n in graph.nodes:
            env[n.outputs[0]] = run_cpu_op(n.op, [env[i] for i in n.inputs], n.attrs)
            for i, q in enumerate(plans.get(n.name, ())):
                out = _run_planned(n, q, env, fr)
                errors[n.name][i] += float(np.sum((out - env[n.outputs[0]]) ** 2))
    gains = {name: (e[0] - e[1]) / e[0] for name, e in errors.items() if e[1] < e[0]}
    return sorted(gains, key=gains.get, reverse=True)


def _run_planned(n: Node, q: NodeQuant, env: dict, fracs: dict) -> np.ndarray:
    """Float output of node ``n`` run in int8 as ``q`` on its float inputs (quantized)."""
    x = _to_int8(env[n.inputs[0]], fracs.get(n.inputs[0], 7))
    ins = [x, q.wq, q.bq]
    if q.fr is not None:
        ins.append(_to_int8(env[n.inputs[3]], q.fr))
    op = "qconv2d" if n.op == "conv2d" else "qdense"
    y = run_cpu_op(op, ins, node_attrs(n, q))
    return y.astype(np.float64) * 2.0**-q.fy


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
    keep = set(keep_float_names(graph, cfg.keep_float))
    cal = calibrate(graph, cfg.samples, cfg.extra_bits)

    def quantizable(n: Node) -> bool:
        return (
            n.op in QUANTIZABLE
            and n.name not in keep
            and all(i in graph.constants for i in n.inputs[1:3])
            and graph.values[n.inputs[0]].dtype == "float32"
        )

    candidates = [n for n in graph.nodes if quantizable(n)]
    if cfg.weight_scales is not WeightScales.AUTO:
        chosen = {n.name for n in candidates if cfg.weight_scales is WeightScales.CHANNEL}
        return _rewrite(graph, cal, cfg, quantizable, chosen)
    # greedy on the whole graph's error: a node's per-node gain may not survive the layers
    # after it (errors propagate, a finer channel shifts the bias correction), so each node the
    # per-node test picks, best first, is kept per-channel only if the int8 graph's outputs get
    # closer to float on the calibration samples
    refs = float_outputs(graph, cfg)
    best, chosen = _rewrite(graph, cal, cfg, quantizable, set()), set()
    best_error = output_error(graph, best, cfg, refs)
    for name in choose_per_channel(graph, cfg, cal, candidates)[: cfg.auto_trials]:
        trial = _rewrite(graph, cal, cfg, quantizable, chosen | {name})
        error = output_error(graph, trial, cfg, refs)
        if error < best_error:
            best, best_error, chosen = trial, error, chosen | {name}
    return best


def output_error(graph: Graph, quantized: Graph, cfg: QuantConfig, refs=None) -> float:
    """Squared error of ``quantized``'s outputs against ``graph``'s (float) over the first
    ``choice_samples`` calibration samples (``refs``: the float outputs per sample, from
    :func:`float_outputs`, or None to run ``graph``): AUTO keeps a node per-channel only where
    it brings the whole int8 graph closer to float (per node it cannot see errors propagate)."""
    refs = refs if refs is not None else float_outputs(graph, cfg)
    total = 0.0
    for sample, ref in zip(cfg.samples[: cfg.choice_samples], refs, strict=True):
        out = dict(forward_values(quantized, sample))  # numpy kernels: nothing is compiled
        for name in graph.outputs:
            total += float(np.sum((ref[name].astype(np.float64) - out[name]) ** 2))
    return total


def float_outputs(graph: Graph, cfg: QuantConfig) -> list[dict[str, np.ndarray]]:
    """``graph``'s (float) outputs on the first ``choice_samples`` calibration samples."""
    out = []
    for sample in cfg.samples[: cfg.choice_samples]:
        values = dict(forward_values(graph, sample))
        out.append({name: values[name] for name in graph.outputs})
    return out


def _rewrite(graph: Graph, cal: Calibration, cfg: QuantConfig, quantizable, chosen) -> Graph:
    """``graph`` with its ``quantizable`` nodes in int8, per channel for the ``chosen`` names."""
    g = graph.copy()
    rw = _Rewriter(g, cal, cfg.bias_correction, quantizable)
    for n in graph.copy().nodes:
        if quantizable(n):
            rw.quantize_node(n, n.name in chosen)
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
