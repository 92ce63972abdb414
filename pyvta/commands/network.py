"""Shared by ``pyvta run``, ``pyvta compile`` and the ResNet-18 demo: compile an ONNX model for a
target (kernels included), load it onto a device by name, run it, and report per layer."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np

from pyvta.commands.common import CommandError

CPU_TARGETS = ("cpu", "cpu-int8")
GPU_TARGETS = {"gpu": "cuda", "gpu-emulated": "cuda-emulated"}  # -> where "gpu" nodes run
FLOAT_TARGETS = ("cpu", "gpu")  # compile targets that need no calibration
TARGET_HELP = (
    "cpu | cpu-int8 | gpu | gpu-emulated | vta-sim | vta-rtl | pynq | vta-<device>"
    " (a driver.open name)"
)
BOARD_TARGETS = ("pynq",)  # devices that are only ever an accelerator: their name is a target


def parse_target(target: str) -> tuple[str, str | None]:
    """A user's target -> (compile target of compiler.graph, device name for "vta" nodes):
    ``cpu``, ``cpu-int8``; ``vta-sim`` / ``vta-rtl`` / ``vta-rtl:icarus`` -> ("vta", "sim"...);
    ``vta`` alone compiles for the accelerator without choosing a device; ``gpu`` /
    ``gpu-emulated`` -> ("gpu", "cuda" / "cuda-emulated"): where the GPU kernels run."""
    from pyvta.driver import device_kinds
    from pyvta.driver.registry import parse_name

    if target in CPU_TARGETS:
        return target, None
    if target in GPU_TARGETS:
        return "gpu", GPU_TARGETS[target]
    if target == "vta":
        return "vta", None
    if target in BOARD_TARGETS:
        return "vta", target
    if target.startswith("vta-"):
        device = target[4:]
        if parse_name(device)[0] in device_kinds():
            return "vta", device
    kinds = ", ".join(f"vta-{k}" for k in device_kinds())
    gpu = ", ".join(GPU_TARGETS)
    raise CommandError(f"unknown target {target!r} (allowed: cpu, cpu-int8, {gpu}, vta, {kinds})")


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
    weight_scales=None,
):
    """Compile an ONNX file (or load a compiled artifact ``.npz``) for ``target``; for the
    accelerator, its kernels are lowered here (tuned configs from ``tuning_log``).
    ``weight_scales``: int8 targets' ``WeightScales`` (None: the default)."""
    from pyvta.compiler.graph.compiled_model import CompiledModel, compile_model
    from pyvta.isa import HwConfig

    kind, _ = parse_target(target)
    path = Path(path)
    t0 = time.perf_counter()
    if path.suffix == ".npz":
        unused = [
            flag
            for flag, given in (
                ("--tuning-log", tuning_log is not None),
                ("--search", bool(search)),
                ("--calibration", calibration is not None),
                ("--input-shape", bool(input_shapes)),
                ("--weight-scales", weight_scales is not None),
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
        if cm.target != kind:
            raise CommandError(f"{path} was compiled for {cm.target!r}, not {kind!r} ({target})")
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
    _check_applies(target, kind, hw, tuning_log, search, calibration, weight_scales)
    if kind not in FLOAT_TARGETS:
        log(
            f"calibration: samples from {calibration}"
            if calibration
            else "calibration: 8 seeded standard-normal samples (give real ones with --calibration)"
        )
    log(f"compiling {path} for {target} (import, fold, fuse, quantize, pack, partition)...")
    schedules = None
    if kind == "cpu" and tuning_log:
        schedules = cpu_tuned_schedules(path, tuning_log, log)
    cm = compile_model(
        path,
        kind,
        calibration,
        lower=False,
        cpu_schedules=schedules,
        input_shapes=input_shapes,
        weight_scales=weight_scales,
    )
    if kind == "vta":
        hw = hw or HwConfig()
        configs = tuned_configs(cm, tuning_log, log) if tuning_log else None
        cm.lower_kernels(hw, configs, measure_for(hw) if search else None, search, log)
    log(f"compiled in {time.perf_counter() - t0:.1f} s")
    return cm


def _check_applies(
    target: str, kind: str, hw, tuning_log, search: int, calibration, weight_scales=None
) -> None:
    """Refuse compile options that the target would leave unused (never a silent no-op)."""
    unused = [
        f"{flag} ({why})"
        for flag, given, applies, why in (
            ("--config", hw is not None, kind == "vta", "the accelerator's hardware"),
            ("--search", bool(search), kind == "vta", "accelerator layers' configs"),
            ("--tuning-log", tuning_log is not None, kind in ("cpu", "vta"), "cpu and vta-*"),
            ("--calibration", calibration is not None, kind not in FLOAT_TARGETS, "quantized"),
            ("--weight-scales", weight_scales is not None, kind not in FLOAT_TARGETS, "quantized"),
        )
        if given and not applies
    ]
    if unused:
        raise CommandError(
            f"--target {target} does not use {', '.join(unused)}: drop the option or choose a"
            " target it applies to"
        )


def cpu_tuned_schedules(path: Path, log_path: str | Path, log=print) -> dict:
    """The best schedule of each CPU conv layer of the ONNX file ``path`` in a tuning log."""
    from pyvta.tuner.cpu_network import cpu_network_layers, cpu_schedules

    layers = functools.partial(cpu_network_layers, path)
    foreign: dict[str, str] = {}
    best = functools.partial(cpu_schedules, foreign=foreign)
    found = _best_from_log(log_path, layers, best, "schedules", "CPU conv", log)
    if foreign:
        from pyvta.tuner.cpu import cpu_measured_on

        machines = ", ".join(sorted(set(foreign.values())))
        log(
            f"tuning log {log_path}: {len(foreign)} of those layers use the closest records,"
            f" measured on {machines}, not this CPU ({cpu_measured_on()}): valid schedules whose"
            " speed here is unmeasured (re-tune: pyvta tune MODEL --target cpu)"
        )
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
    from pyvta import driver

    kwargs = dict(device_kwargs)
    if trace:
        kwargs["trace"] = True
    device = driver.open(device_name, config=cm.hw, **kwargs)
    vta = cm.accelerator(device)
    log(
        f"loaded {len(cm.kernels)} kernels onto {device_name} in {vta.load_s * 1e3:.1f} ms"
        " (allocation, relocation, constants)"
    )
    return vta


def run_on(cm, target: str, x: np.ndarray, vta=None):
    """Run a compiled model once: (outputs, timing table, backend used for vta nodes)."""
    from pyvta.compiler.graph.compiled_model import run_model

    kind, device = parse_target(target)
    if kind == "gpu":
        outputs, table = run_model(cm, x, gpu=device)
        return outputs, table, None
    if device is not None and vta is None:
        vta = open_accelerator(cm, device, log=lambda _: None)
    outputs, table = run_model(cm, x, backends={"vta": vta} if vta is not None else None)
    return outputs, table, vta


def vta_summary(vta, runs=None) -> str:
    runs = vta.runs if runs is None and vta is not None else runs
    if not runs:
        return ""
    cycles = sum(r.cycles or 0 for r in runs)
    sim_s = sum(r.sim_wall_s for r in runs)
    macs = sum(r.workload.macs for r in runs)
    per_cycle = vta.device.config.gemm_macs_per_cycle
    util = macs / per_cycle / cycles if cycles else 0.0
    return (
        f"accelerator: {len(runs)} launches, {cycles / 1e6:.2f} M cycles"
        f" ({cycles / 100e6 * 1e3:.1f} ms at 100 MHz), GEMM utilisation {100 * util:.1f}%;"
        f" device time {sim_s:.2f} s wall"
    )
