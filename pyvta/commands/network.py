"""Shared by ``pyvta run``, ``pyvta compile`` and the ResNet-18 demo: compile an ONNX model for a
target, run it on the simulated accelerator or the CPU, and report per layer."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from pyvta.commands.common import CommandError

# What a user asks for -> (compile target of compiler.graph, where "vta" nodes run)
TARGETS = {"vta-sim": ("vta", "sim"), "cpu": ("cpu", None), "cpu-int8": ("cpu-int8", None)}


def compile_for(path: str | Path, target: str, log=print, tuning_log: str | None = None):
    """Compile an ONNX file (or load a compiled artifact ``.npz``) for ``target``;
    ``tuning_log`` (``cpu``): the best schedule of each layer from a ``pyvta tune MODEL
    --target cpu`` log."""
    from pyvta.compiler.graph.compiled_model import CompiledModel, compile_model

    if target not in TARGETS:
        raise CommandError(f"unknown target {target!r} (allowed: {', '.join(TARGETS)})")
    path = Path(path)
    t0 = time.perf_counter()
    if path.suffix == ".npz":
        cm = CompiledModel.load(path)
        want = TARGETS[target][0]
        if cm.target != want:
            raise CommandError(f"{path} was compiled for {cm.target!r}, not {want!r} ({target})")
        log(f"loaded compiled model {path} ({cm.target}) in {time.perf_counter() - t0:.1f} s")
        return cm
    log(f"compiling {path} for {target} (import, fold, fuse, quantize, pack, partition)...")
    schedules = cpu_tuned_schedules(path, tuning_log, log) if tuning_log else None
    cm = compile_model(path, TARGETS[target][0], cpu_schedules=schedules)
    log(f"compiled in {time.perf_counter() - t0:.1f} s")
    return cm


def cpu_tuned_schedules(path: Path, log_path: str | Path, log=print) -> dict:
    """The best schedule of each CPU conv layer of the ONNX file ``path`` in a tuning log."""
    from pyvta.tuner.cpu_network import cpu_network_layers, cpu_schedules

    if not Path(log_path).exists():
        raise CommandError(f"no tuning log {log_path} (write one with: pyvta tune MODEL --log)")
    layers = cpu_network_layers(path)
    schedules = cpu_schedules(str(log_path), layers)
    log(
        f"tuning log {log_path}: tuned schedules for {len(schedules)} of {len(layers)} CPU conv"
        " layers (the others use the default)"
    )
    return schedules


def accelerator(search: int = 0, trace: bool = False, configs: dict | None = None):
    """The "vta" backend on a fresh simulated device (``configs``: per-layer configs, e.g.
    ``tuned_configs``)."""
    from pyvta.compiler.backend.vta.graph_backend import AcceleratorBackend
    from pyvta.driver import SimDevice

    return AcceleratorBackend(SimDevice(trace=trace), search=search, configs=configs)


def tuned_configs(cm, log_path: str | Path, log=print) -> dict:
    """The best config of each accelerator layer of ``cm`` in a ``pyvta tune MODEL`` log."""
    from pyvta.tuner.network import network_configs, network_layers

    if not Path(log_path).exists():
        raise CommandError(f"no tuning log {log_path} (write one with: pyvta tune MODEL --log)")
    layers = network_layers(cm)
    configs = network_configs(str(log_path), layers)
    log(
        f"tuning log {log_path}: tuned configs for {len(configs)} of {len(layers)} accelerator"
        " layers (the others use the default)"
    )
    return configs


def run_on(cm, target: str, x: np.ndarray, vta=None):
    """Run a compiled model once: (outputs, timing table, backend used for vta nodes)."""
    from pyvta.compiler.graph.compiled_model import run_model

    if TARGETS[target][1] == "sim" and vta is None:
        vta = accelerator()
    outputs, table = run_model(cm, x, vta)
    return outputs, table, vta


def vta_summary(vta) -> str:
    if vta is None or not getattr(vta, "runs", None):
        return ""
    cycles = sum(r.cycles or 0 for r in vta.runs)
    sim_s = sum(r.sim_wall_s for r in vta.runs)
    macs = sum(r.workload.macs for r in vta.runs)
    util = macs / 256 / cycles if cycles else 0.0
    return (
        f"accelerator: {len(vta.runs)} launches, {cycles / 1e6:.2f} M cycles"
        f" ({cycles / 100e6 * 1e3:.1f} ms at 100 MHz), GEMM utilisation {100 * util:.1f}%;"
        f" functional simulation {sim_s:.2f} s wall"
    )
