"""One vocabulary for every command: ``--target`` says what to compile, ``--device`` where to run.

- ``--target``: a ``compiler.targets`` name (``cpu``, ``cpu-int8``, ``gpu``, ``vta``),
- ``--device``: a ``driver.open`` name (``sim``, ``rtl``, ``rtl:cocotb``, ``pynq``,
  ``tcp://HOST:PORT``) for ``vta``, or ``cuda`` / ``cuda-emulated`` for ``gpu``; default: the
  target's first (``sim``, ``cuda``); the CPU targets take none.

Old spellings keep working for one release: :data:`OLD_TARGETS` maps each to the new
``--target``/``--device``, and using one prints a one-line notice naming the new spelling.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from pyvta.commands.common import CommandError
from pyvta.compiler.targets import NETWORK_DEFAULT

OLD_TARGETS: dict[str, tuple[str, str | None]] = {
    "vta-sim": ("vta", "sim"),
    "vta-rtl": ("vta", "rtl"),
    "pynq": ("vta", "pynq"),
    "gpu-emulated": ("gpu", "cuda-emulated"),
    "llvm": ("cpu", None),
    "cuda": ("gpu", "cuda"),
    "cuda-emulated": ("gpu", "cuda-emulated"),
}
"""Old ``--target`` spelling -> (target, device)."""
OLD_PREFIXES = {"vta-": "vta"}
"""Old ``--target`` prefix -> target: ``vta-<device>`` (e.g. ``vta-rtl:icarus``,
``vta-tcp://HOST:PORT``) is ``--target vta --device <device>``."""

TARGET_HELP = "cpu | cpu-int8 | gpu | vta (what to compile)"
DEVICE_HELP = (
    "where to run: vta: a driver.open name (sim, rtl, rtl:cocotb, pynq, tcp://HOST:PORT;"
    " default sim); gpu: cuda (default) or cuda-emulated"
)


def notice(text: str) -> None:
    """One line on stderr (stdout stays the command's output)."""
    print(f"notice: {text}", file=sys.stderr)


def add_target_arguments(p: argparse.ArgumentParser, default: str | None = NETWORK_DEFAULT) -> None:
    """``--target`` and ``--device`` (parsed by :func:`resolve`)."""
    shown = f" (default {default})" if default else ""
    p.add_argument("--target", default=None, help=f"{TARGET_HELP}{shown}")
    p.add_argument("--device", default=None, metavar="NAME", help=DEVICE_HELP)


def resolve(
    target: str | None,
    device: str | None,
    default: str = NETWORK_DEFAULT,
    say: Callable[[str], None] = notice,
    run: bool = True,
):
    """(Target, device name or None) of a command's ``--target``/``--device``; an old spelling
    is mapped with a notice naming the new one (through ``say``). ``run``: the command runs the
    model, so a target with devices gets its default device (a command that only compiles takes
    no device: an old spelling's is dropped)."""
    from pyvta.compiler.targets import TargetError
    from pyvta.compiler.targets import resolve as resolve_target

    name = target or default
    try:
        spec, device, said = resolve_target(
            name, device, OLD_TARGETS, default_device=run, old_prefixes=OLD_PREFIXES
        )
    except TargetError as e:
        raise CommandError(str(e)) from None
    if not run:  # an old spelling's device (checked above) has no use when only compiling
        device = None
        if said:
            said = (
                f"--target {name} is the old spelling of --target {spec.name} (accepted for one"
                " release)"
            )
    if said:
        say(said)
    return spec, device
