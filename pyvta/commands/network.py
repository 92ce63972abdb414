"""Shared by ``pyvta run``, ``pyvta compile`` and the ResNet-18 demo: compile an ONNX model for a
target (kernels included), load it onto a device by name, run it, and report per layer."""

from __future__ import annotations

import functools
import time
from pathlib import Path

from pyvta.commands.common import CommandError


def target_of(target):
    """A ``compiler.targets.Target`` from one, or from a ``--target`` spelling (an old one with
    its notice; ``pyvta.commands.vocabulary``)."""
    from pyvta.commands.vocabulary import resolve
    from pyvta.compiler.targets import Target

    return target if isinstance(target, Target) else resolve(target, None, run=False)[0]


def measure_for(hw):
    """The cycle model's estimate for ``hw`` (what ``--search`` ranks candidates by)."""
    from pyvta.driver import SimDevice

    return SimDevice(hw, dram_bytes=1 << 12, cycles=True).estimate_cycles


def compile_for(
    path: str | Path,
    target: str,
    log=print,
    hw=None,
    tuning_log: str | Path | None = None,
    search: int = 0,
    calibration: str | Path | None = None,
    input_shapes: dict | None = None,
    partition: str | None = None,
    batch: int | None = None,
    weight_scales=None,
    keep_float=None,
    other_cpu_records: bool = False,
):
    """Compile an ONNX file (or load a compiled artifact ``.npz``) for ``target`` (a
    ``compiler.targets.Target`` or a ``--target`` spelling); for the accelerator, its kernels
    are lowered here (tuned configs from ``tuning_log``); ``partition`` (``--partition``): what
    the accelerator takes, "whole" (default) or "legacy"; ``batch`` (``--batch``): the images
    per inference (every input's first dimension); ``weight_scales``: a quantized
    target's ``WeightScales`` (None: the default); ``keep_float`` (``--keep-float``): a
    quantized target's float layers, names or a ``KeepFloat`` (None: the default);
    ``other_cpu_records`` (``--other-cpu-records``): a CPU conv layer whose ``tuning_log``
    records are all another CPU's takes their best (default: the untuned schedule)."""
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.isa import HwConfig
    from pyvta.runtime.compiled_model import CompiledModel

    spec = target_of(target)
    path = Path(path)
    t0 = time.perf_counter()
    if path.suffix == ".npz":
        unused = [
            flag
            for flag, given in (
                ("--tuning-log", tuning_log is not None),
                ("--other-cpu-records", other_cpu_records),
                ("--search", bool(search)),
                ("--calibration", calibration is not None),
                ("--input-shape", bool(input_shapes)),
                ("--partition", partition is not None),
                ("--batch", batch is not None),
                ("--weight-scales", weight_scales is not None),
                ("--keep-float", keep_float is not None),
            )
            if given
        ]
        if unused:
            raise CommandError(
                f"{', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to compiling"
                f" an ONNX file; {path} is a compiled artifact (its kernels, configs and"
                " quantization were fixed by `pyvta compile`): drop the option, or give the"
                " .onnx file"
            )
        cm = CompiledModel.load(path)
        if cm.target != spec.name:
            raise CommandError(f"{path} was compiled for {cm.target!r}, not {spec.name!r}")
        if hw is not None and cm.hw is not None and cm.hw != hw:
            raise CommandError(
                f"{path} was compiled for HwConfig {cm.hw.tag}; --config gives {hw.tag}"
                " (recompile it with that --config)"
            )
        log(
            f"loaded compiled model {path} ({cm.target}, {len(cm.kernels)} accelerator kernels,"
            f" {len(cm.gpu_kernels)} GPU kernels) in {time.perf_counter() - t0:.2f} s"
        )
        return cm
    if not path.exists():
        raise CommandError(f"no model file {path}")
    if other_cpu_records and tuning_log is None:
        raise CommandError("--other-cpu-records applies to --tuning-log's records: give one")
    _check_applies(spec, hw, tuning_log, search, calibration, partition, other_cpu_records)
    if weight_scales is not None and not spec.quantized:
        raise CommandError(
            f"--weight-scales applies to a quantized target; {spec.name} computes in float"
        )
    if keep_float is not None and not spec.quantized:
        raise CommandError(
            f"--keep-float applies to a quantized target; {spec.name} computes in float"
        )
    if spec.quantized:
        log(
            f"calibration: samples from {calibration}"
            if calibration
            else "calibration: 8 seeded standard-normal samples (give real ones with --calibration)"
        )
    log(f"compiling {path} for {spec.name} (import, fold, fuse, quantize, pack, partition)...")
    if batch is not None:
        input_shapes = batch_shapes(path, batch, input_shapes)
    schedules = None
    if tuning_log and not spec.accelerator:  # the CPU's tuned conv schedules
        schedules = cpu_tuned_schedules(path, tuning_log, log, other_cpu_records)
    cm = compile_model(
        path, spec.name, calibration, lower=False, cpu_schedules=schedules,
        input_shapes=input_shapes, vta_partition=partition or "whole",
        weight_scales=weight_scales, keep_float=keep_float,
    )  # fmt: skip
    if spec.accelerator:
        hw = hw or HwConfig()
        configs = tuned_configs(cm, tuning_log, log) if tuning_log else None
        spec.lower_kernels(cm, hw, configs, measure_for(hw) if search else None, search, log)
    log(f"compiled in {time.perf_counter() - t0:.1f} s")
    return cm


def _check_applies(
    spec, hw, tuning_log, search: int, calibration, partition=None, other_cpu_records=False
) -> None:
    """Refuse compile options that the target would leave unused (never a silent no-op)."""
    from pyvta.compiler.targets import get_target, target_names

    given = {
        "config": (hw is not None, "--config", "the accelerator's hardware"),
        "search": (bool(search), "--search", "accelerator layers' configs"),
        "tuning_log": (tuning_log is not None, "--tuning-log", "tuned layers"),
        "calibration": (calibration is not None, "--calibration", "quantized"),
        "partition": (partition is not None, "--partition", "the accelerator's share"),
        "other_cpu_records": (other_cpu_records, "--other-cpu-records", "tuned CPU layers"),
    }
    unused = [
        f"{flag} ({why}: --target"
        f" {', '.join(n for n in target_names() if option in get_target(n).compile_options)})"
        for option, (was_given, flag, why) in given.items()
        if was_given and option not in spec.compile_options
    ]
    if unused:
        raise CommandError(
            f"--target {spec.name} does not use {', '.join(unused)}: drop the option or choose a"
            " target it applies to"
        )


def cpu_tuned_schedules(
    path: Path, log_path: str | Path, log=print, other_cpus: bool = False
) -> dict:
    """The best schedule of each CPU conv layer of the ONNX file ``path`` in a tuning log; a
    layer with records of other CPUs only keeps the untuned schedule unless ``other_cpus``
    (``--other-cpu-records``; ``tuner.cpu_network.cpu_schedules``)."""
    from pyvta.tuner.cpu_network import cpu_network_layers, cpu_schedules

    layers = functools.partial(cpu_network_layers, path)
    foreign: dict[str, str] = {}
    best = functools.partial(cpu_schedules, foreign=foreign, other_cpus=other_cpus)
    found = _best_from_log(log_path, layers, best, "schedules", "CPU conv", log)
    if foreign:
        from pyvta.tuner.cpu import cpu_measured_on

        machines = ", ".join(sorted(set(foreign.values())))
        what = (
            "use them (--other-cpu-records): valid schedules whose speed here is unmeasured"
            " and may be below the untuned schedules'"
            if other_cpus
            else "keep the untuned schedules (another CPU's per-layer bests can be slower here:"
            " a Zen 4's ran ResNet-18 at 0.69-0.75x the untuned schedules on an Intel host;"
            " --other-cpu-records applies them)"
        )
        log(
            f"tuning log {log_path}: {len(foreign)} layers have records only of other CPUs"
            f" ({machines}), not of this one ({cpu_measured_on()}); they {what}."
            f" To tune here: pyvta tune MODEL --target cpu --log NEW.jsonl --in-network 3"
        )
    from pyvta.tuner.in_network import stale_choices

    stale = stale_choices(log_path, path)
    if stale:
        log(f"note: {stale}")
    return found


def tuned_configs(cm, log_path: str | Path, log=print) -> dict:
    """The best config of each accelerator layer of ``cm`` in a ``pyvta tune MODEL`` log."""
    from pyvta.tuner.network import network_configs, network_layers

    layers = functools.partial(network_layers, cm)
    return _best_from_log(log_path, layers, network_configs, "configs", "accelerator", log)


def _best_from_log(log_path, find_layers, best, what: str, kind: str, log) -> dict:
    """``best(log, find_layers())`` for an existing tuning log, saying how many layers it
    covered (the layers are found only once the log is known to exist)."""
    if not Path(log_path).exists():
        raise CommandError(f"no tuning log {log_path} (write one with: pyvta tune MODEL --log)")
    from pyvta.tuner.log import check_log_to_read

    check_log_to_read(log_path, "--tuning-log")
    layers = find_layers()
    found = best(str(log_path), layers)
    log(
        f"tuning log {log_path}: tuned {what} for {len(found)} of {len(layers)} {kind}"
        " layers (the others use the default)"
    )
    return found


def open_accelerator(cm, device_name: str, trace: bool = False, log=print, **device_kwargs):
    """Open ``device_name`` for the model's HwConfig and load its kernels: the ``"vta"`` backend."""
    kwargs = dict(device_kwargs)
    if trace:
        kwargs["trace"] = True
    from pyvta.compiler.targets import get_target

    vta = get_target(cm.target).open_backend(cm, device_name, **kwargs)
    log(
        f"loaded {len(cm.kernels)} kernels onto {device_name} in {vta.load_s * 1e3:.1f} ms"
        " (allocation, relocation, constants)"
    )
    return vta


def batch_shapes(path: Path, batch: int, given: dict | None) -> dict:
    """Every model input's shape with ``batch`` images (``--input-shape`` still wins)."""
    from pyvta.compiler.graph.onnx_import import load_onnx

    if batch < 1:
        raise CommandError(f"--batch must be >= 1, got {batch}")
    model = load_onnx(path)
    consts = {t.name for t in model.graph.initializer}
    shapes = {}
    for vi in model.graph.input:
        if vi.name in consts:
            continue
        dims = [
            d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim
        ]
        shapes[vi.name] = (batch, *dims[1:])
    return shapes | dict(given or {})


def add_keep_float_argument(p) -> None:
    """``--keep-float`` (parsed by :func:`keep_float_of`; the choices are ``KeepFloat``'s)."""
    p.add_argument(
        "--keep-float",
        dest="keep_float",
        metavar="LAYERS",
        help="int8 targets: the conv/dense layers left in float: default (the first conv and"
        " the last dense), classifier (the last dense), none (every layer int8: the same bits"
        " on every CPU) or NAME,...; not given: the target's (cpu-int8: default; vta's whole"
        " partition: none)",
    )


def keep_float_of(text: str | None):
    """``--keep-float``: None (not given), a ``KeepFloat`` choice, or a tuple of layer names."""
    from pyvta.compiler.graph import KeepFloat

    if text is None:
        return None
    choices = {k.value: k for k in KeepFloat}
    if text in choices:
        return choices[text]
    names = tuple(n for n in text.split(",") if n)
    if not names:
        raise CommandError(
            f"--keep-float {text!r} (allowed: {', '.join(choices)} or layer names NAME,...)"
        )
    return names


def add_other_cpu_records_argument(p) -> None:
    """``--other-cpu-records`` (``compile_for``'s ``other_cpu_records``)."""
    p.add_argument(
        "--other-cpu-records",
        action="store_true",
        dest="other_cpu_records",
        help="cpu: a layer whose --tuning-log records were all measured on other CPUs takes"
        " their best (default: the untuned schedule; another CPU's bests can be slower here)",
    )


def add_partition_argument(p) -> None:
    from pyvta.compiler.targets.vta.partition_targets import VTA_PARTITIONS

    p.add_argument(
        "--partition",
        choices=VTA_PARTITIONS,
        help="vta: what the accelerator runs; whole (default): every layer it can lower (stem,"
        " pools, classifier too); legacy: the float first conv, pools and last dense on the CPU"
        " (the partition before, for comparison)",
    )
    p.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="compiling: N images per inference (each accelerator layer one launch for all N,"
        " its weights loaded once per tile)",
    )


def plan_lines(graph) -> list[str]:
    """Where every node runs: a count per target, then each CPU node with its one-line reason."""
    from pyvta.compiler.targets.vta.partition_targets import vta_reason
    from pyvta.runtime.ir import HOST

    on = {}
    for n in graph.nodes:
        on[n.target] = on.get(n.target, 0) + 1
    counts = ", ".join(f"{k} {v}" for k, v in sorted(on.items()))
    lines = [f"plan: {len(graph.nodes)} nodes ({counts}); on the CPU:"]
    for n in graph.nodes:
        if n.target == HOST:
            lines.append(f"  {n.name[:32]:<32} {n.op:<16} {vta_reason(graph, n)}")
    return lines


def vta_summary(vta, runs=None) -> str:
    runs = vta.runs if runs is None and vta is not None else runs
    if not runs:
        return ""
    cycles = sum(r.cycles or 0 for r in runs)
    sim_s = sum(r.sim_wall_s for r in runs)
    from pyvta.compiler.backend.vta.graph_backend import kernel_workload

    macs = sum(kernel_workload(r.kernel).macs for r in runs)
    per_cycle = vta.device.config.gemm_macs_per_cycle
    util = macs / per_cycle / cycles if cycles else 0.0
    return (
        f"accelerator: {len(runs)} launches, {cycles / 1e6:.2f} M cycles"
        f" ({cycles / 100e6 * 1e3:.1f} ms at 100 MHz), GEMM utilisation {100 * util:.1f}%;"
        f" device time {sim_s:.2f} s wall"
    )
