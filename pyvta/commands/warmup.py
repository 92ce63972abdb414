"""pyvta warmup: compile the simulator's native kernels for a config (the default one unless
``--config``) into the cache root, so the first accelerator run of a new install is already on
the native engine. ``make setup`` runs it; without it, ``engine="auto"`` compiles them once a
process has run enough work on the numpy engine (``sim.functional.NATIVE_COMPILE_WORK``)."""

from __future__ import annotations

import argparse
import time

from pyvta.commands.common import CommandError, add_config_argument, config_from

HELP = "compile the simulator's native kernels for a config into the cache (make setup runs it)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_argument(p)


def run(args: argparse.Namespace) -> int:
    from pyvta.sim import native

    cfg = config_from(args)
    if not native.available():
        raise CommandError(
            "the native engine needs llvmlite, which is not installed here (pip install"
            " 'pyvta[host]'); the simulator runs on its numpy engine without it"
        )
    ready = native.kernels_ready(cfg)
    t0 = time.perf_counter()
    native.kernels(cfg)
    how = "already in the cache, loaded" if ready else "compiled"
    print(
        f"simulator kernels for config {cfg.tag}: {how} in {time.perf_counter() - t0:.2f} s"
        f" ({native.default_cache_dir()})"
    )
    return 0
