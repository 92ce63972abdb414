"""Calibration: value ranges on sample inputs and power-of-two scales from them.

A power-of-two scale is stored as ``frac_bits``: ``real = int * 2**-frac_bits``. For a tensor whose
calibrated range is ``[-m, m]``, ``frac_bits = floor(log2(127 / m))`` is the finest scale that still
represents ``m`` without clipping. A power of two can waste up to one bit of that range, so
:func:`choose_frac_bits` also tries one and two bits finer (clipping the largest values) and keeps
the candidate with the smallest squared quantization error over the samples.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from dataclasses import dataclass, field

import numpy as np

from pyvta.isa.errors import PyvtaError
from pyvta.runtime.cpu_ops import conv_gemm, run_cpu_op
from pyvta.runtime.ir import Graph, GraphError, format_graph

MIN_FRAC_BITS, MAX_FRAC_BITS = -16, 30


def frac_bits_for(max_abs: float, qmax: int = 127) -> int:
    """Largest ``f`` with ``max_abs * 2**f <= qmax`` (clamped to -16..30; 0-range -> 7)."""
    if not max_abs > 0 or not math.isfinite(max_abs):
        return 7
    f = math.floor(math.log2(qmax / max_abs))
    return max(MIN_FRAC_BITS, min(MAX_FRAC_BITS, f))


def quantization_error(a: np.ndarray, frac_bits: int) -> float:
    """Sum of squared errors of quantizing ``a`` to int8 at ``frac_bits`` (round half even)."""
    scale = 2.0**frac_bits
    q = np.clip(np.round(a * scale), -128, 127) / scale
    return float(np.sum((q - a) ** 2, dtype=np.float64))


def forward_values(graph: Graph, sample: dict[str, np.ndarray]):
    """Yield ``(name, array)`` for every graph input and node output of one float run."""
    env = dict(graph.constants)
    for name in graph.inputs:
        env[name] = np.asarray(sample[name], np.float32)
        yield name, env[name]
    for n in graph.nodes:
        env[n.outputs[0]] = run_cpu_op(n.op, [env[i] for i in n.inputs], n.attrs)
        yield n.outputs[0], env[n.outputs[0]]


@dataclass
class Calibration:
    """Per float value: chosen ``frac_bits``, the mean over samples of each channel (axis 1),
    and each channel's least and largest value over the samples (``channel_ranges``: (lo, hi)
    arrays, kept for values of one pixel per channel, e.g. a global mean)."""

    frac_bits: dict[str, int]
    channel_means: dict[str, np.ndarray]
    channel_ranges: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def calibrate(
    graph: Graph, samples: list[dict[str, np.ndarray]], extra_bits: int = 2
) -> Calibration:
    """Frac bits per float value: the max-range choice or up to ``extra_bits`` finer, whichever
    gives the least squared int8 quantization error over ``samples``; and channel means (two
    float runs per sample). Kept in the cache (folder ``calibration``): a process that
    calibrates the same graph (its structure and constants) on the same samples reads it back
    (:func:`_kept_at`)."""
    from pyvta import cache

    path = _kept_at(graph, samples, extra_bits)
    try:
        return _read_calibration(path)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        pass  # none yet, or damaged: calibrated again
    cal = _calibrate(graph, samples, extra_bits)
    cache.write_atomic(path, _calibration_bytes(cal))
    return cal


def _kept_at(graph: Graph, samples: list[dict[str, np.ndarray]], extra_bits: int):
    """Where :func:`calibrate` keeps its result: keyed by the graph's text form, the bytes of
    its constants and of the samples, ``extra_bits``, and the sources of the compiler and the
    runtime (whose float ops run the samples)."""
    from pyvta import cache
    from pyvta.compiler.backend.llvm.cache import source_digest

    h = hashlib.sha256(format_graph(graph).encode())
    arrays = [(f"const {k}", graph.constants[k]) for k in sorted(graph.constants)]
    arrays += [
        (f"sample {i} {k}", np.asarray(s[k])) for i, s in enumerate(samples) for k in sorted(s)
    ]
    for name, a in arrays:
        h.update(f"\0{name} {a.dtype} {a.shape}\0".encode())
        h.update(np.ascontiguousarray(a))  # its buffer, not a copy
    what = f"calibration {h.hexdigest()} extra_bits {extra_bits}"
    return cache.keyed_file("calibration", what, source_digest("compiler", "runtime"), ".npz")


def _calibration_bytes(cal: Calibration) -> bytes:
    means, ranges = sorted(cal.channel_means), sorted(cal.channel_ranges)
    arrays = {f"mean{i}": cal.channel_means[k] for i, k in enumerate(means)}
    arrays |= {f"lo{i}": cal.channel_ranges[k][0] for i, k in enumerate(ranges)}
    arrays |= {f"hi{i}": cal.channel_ranges[k][1] for i, k in enumerate(ranges)}
    names = {"frac_bits": cal.frac_bits, "means": means, "ranges": ranges}
    buf = io.BytesIO()
    np.savez(buf, names=np.array(json.dumps(names)), **arrays)
    return buf.getvalue()


def _read_calibration(path) -> Calibration:
    with np.load(path) as z:
        names = json.loads(str(z["names"]))
        return Calibration(
            {k: int(v) for k, v in names["frac_bits"].items()},
            {k: z[f"mean{i}"] for i, k in enumerate(names["means"])},
            {k: (z[f"lo{i}"], z[f"hi{i}"]) for i, k in enumerate(names["ranges"])},
        )


def _calibrate(graph: Graph, samples: list[dict[str, np.ndarray]], extra_bits: int) -> Calibration:
    ranges = collect_ranges(graph, samples)
    base = {k: frac_bits_for(m) for k, m in ranges.items()}
    errors = {k: np.zeros(extra_bits + 1) for k in base}
    sums: dict[str, np.ndarray] = {}
    ranges_c: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for sample in samples:
        for name, a in forward_values(graph, sample):
            if name in base:
                for i in range(extra_bits + 1):
                    errors[name][i] += quantization_error(a, base[name] + i)
                if a.ndim >= 2:
                    axes = (0, *range(2, a.ndim))
                    sums[name] = sums.get(name, 0.0) + a.mean(axis=axes, dtype=np.float64)
                    if a.size == a.shape[0] * a.shape[1]:  # one pixel per channel
                        lo, hi = a.min(axis=axes), a.max(axis=axes)
                        if name in ranges_c:
                            lo = np.minimum(lo, ranges_c[name][0])
                            hi = np.maximum(hi, ranges_c[name][1])
                        ranges_c[name] = (lo, hi)
    fracs = {k: base[k] + int(np.argmin(errors[k])) for k in base}
    return Calibration(fracs, {k: v / len(samples) for k, v in sums.items()}, ranges_c)


def conv_gemms(graph: Graph) -> set[tuple[int, int, int]]:
    """The ``(M, N, K)`` of the compiled GEMMs the float convs of ``graph`` run on in a float
    run (``runtime.cpu_ops.conv_gemm``)."""
    out = set()
    for n in graph.nodes:
        if n.op == "conv2d" and n.inputs[1] in graph.constants:
            w = graph.constants[n.inputs[1]].shape
            shape = conv_gemm(w, graph.values[n.outputs[0]].shape, n.attrs)
            if shape is not None:
                out.add(shape)
    return out


def build_conv_gemms(graph: Graph) -> int:
    """Build the GEMM kernels of the float runs ahead (:func:`conv_gemms`) missing from the
    cache on every core, not one at a time as the runs meet them (``targets.jit.build_gemms``;
    nothing without llvmlite). The workers started."""
    from pyvta.runtime.cpu_llvm import have_llvmlite

    if not have_llvmlite():
        return 0
    from pyvta.compiler.targets.jit import build_gemms

    return build_gemms(conv_gemms(graph))


def collect_ranges(graph: Graph, samples: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Max ``|x|`` of every float value (inputs and node outputs) over the sample inputs.

    Runs the (float, cpu) graph with the numpy kernels, keeping no more than one sample's
    intermediates alive.
    """
    if not samples:
        raise ValueError("calibration needs at least one sample input (got none)")
    build_conv_gemms(graph)
    ranges: dict[str, float] = {}

    def note(name: str, a: np.ndarray) -> None:
        if a.dtype.kind == "f":
            ranges[name] = max(ranges.get(name, 0.0), float(np.max(np.abs(a))) if a.size else 0.0)

    for sample in samples:
        for name, a in forward_values(graph, sample):
            note(name, a)
    return ranges


class CalibrationError(GraphError, PyvtaError):
    """Calibration data that does not fit the model's inputs."""


def _split_samples(name: str, arr: np.ndarray, shape: tuple[int, ...], source: str):
    """An array of one sample (``shape``) or a stack of them (``(K, *shape)``) -> list of samples."""
    arr = np.asarray(arr)
    if not np.issubdtype(arr.dtype, np.number):
        raise CalibrationError(f"{source}: {arr.dtype} data for input {name!r} (need numbers)")
    arr = arr.astype(np.float32)
    if not np.isfinite(arr).all():
        raise CalibrationError(f"{source}: NaN or Inf in the samples for input {name!r}")
    if tuple(arr.shape) == tuple(shape):
        return [arr]
    if arr.ndim == len(shape) + 1 and tuple(arr.shape[1:]) == tuple(shape):
        return list(arr)
    raise CalibrationError(
        f"{source}: array of shape {list(arr.shape)} for input {name!r}; expected one sample"
        f" {list(shape)} or a stack [K, {', '.join(map(str, shape))}]"
    )


def load_calibration(path, graph: Graph) -> list[dict[str, np.ndarray]]:
    """Calibration samples from a folder of ``.npy`` files or an ``.npz``.

    Each ``.npy`` (sorted by name; one-input models only) holds one sample of the input's shape
    or a stack ``(K, *shape)``. An ``.npz`` holds one such array per input name, with the same K
    for every input; for a one-input model its arrays may have any names (each a sample or a
    stack)."""
    from pathlib import Path

    path = Path(path)
    shapes = {n: graph.values[n].shape for n in graph.inputs}
    if path.is_dir():
        files = sorted(path.glob("*.npy"))
        if not files:
            raise CalibrationError(f"{path}: no .npy files in the calibration folder")
        if len(shapes) != 1:
            raise CalibrationError(
                f"{path}: a folder of .npy files calibrates one-input models; this one has inputs"
                f" {graph.inputs} (give an .npz with one array per input)"
            )
        (name, shape), samples = next(iter(shapes.items())), []
        for f in files:
            samples += _split_samples(name, np.load(f, allow_pickle=False), shape, str(f))
        return [{name: s} for s in samples]
    if path.suffix != ".npz" or not path.is_file():
        raise CalibrationError(f"{path}: calibration data is a folder of .npy files or an .npz")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    if set(shapes) <= set(arrays):
        per = {n: _split_samples(n, arrays[n], shapes[n], str(path)) for n in shapes}
        counts = {n: len(v) for n, v in per.items()}
        if len(set(counts.values())) != 1:
            raise CalibrationError(f"{path}: inputs have different sample counts {counts}")
        return [{n: per[n][i] for n in shapes} for i in range(next(iter(counts.values())))]
    if len(shapes) != 1:
        raise CalibrationError(
            f"{path}: arrays {sorted(arrays)}; this model needs one per input {graph.inputs}"
        )
    (name, shape), samples = next(iter(shapes.items())), []
    for key in sorted(arrays):
        samples += _split_samples(name, arrays[key], shape, f"{path}[{key}]")
    if not samples:
        raise CalibrationError(f"{path}: no arrays")
    return [{name: s} for s in samples]
