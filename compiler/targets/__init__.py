"""Compile targets found by name: ``get_target("cpu")``, ``get_target("vta")``.

A target is one package ``compiler/targets/<name>/`` (``-`` in the name is ``_`` in the folder)
whose ``TARGET`` is a :class:`~compiler.targets.base.Target`: what the pipeline, the executor,
the artifact and the command line ask instead of testing a target's name. Nothing is imported
until a target is asked for (the way ``driver.registry`` finds devices).

Adding a target is adding a folder: ``compiler/targets/cpu_avx2/__init__.py`` with
``TARGET = CpuTarget("cpu-avx2", features="avx2")`` is found by ``get_target("cpu-avx2")``.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

from pyvta.compiler.targets.base import Target, TargetError

__all__ = ["NETWORK_DEFAULT", "Target", "TargetError", "get_target", "resolve", "target_names"]

NETWORK_DEFAULT = "vta"
"""The target a whole network compiles for when a command names none (``pyvta compile``,
``pyvta run``, ``pyvta tune MODEL``): the accelerator."""


@cache
def target_names() -> tuple[str, ...]:
    """The targets this installation has (one per folder here), in folder order."""
    here = Path(__file__).parent
    folders = sorted(p.parent.name for p in here.glob("*/__init__.py"))
    return tuple(_load(f).name for f in folders)


@cache
def _load(folder: str) -> Target:
    module = importlib.import_module(f"{__name__}.{folder}")
    target = module.TARGET
    if not isinstance(target, Target):
        raise TypeError(f"{module.__name__}.TARGET is a {type(target).__name__}, not a Target")
    return target


def get_target(name: str | Target) -> Target:
    """The target called ``name`` (a Target is returned as is); ``TargetError`` naming the
    targets there are for any other name. Aliases are not names: a command line maps its old
    spellings (``pyvta.commands.vocabulary``)."""
    if isinstance(name, Target):
        return name
    folder = name.replace("-", "_") if isinstance(name, str) else ""
    folder = folder if folder.isidentifier() else None
    here = Path(__file__).parent
    if folder and (here / folder / "__init__.py").is_file():
        target = _load(folder)
        if target.name == name:
            return target
    raise TargetError(f"target {name!r} is not supported (allowed: {', '.join(target_names())})")


def resolve(
    target: str,
    device: str | None,
    old: dict[str, tuple[str, str | None]],
    default_device: bool = True,
    old_prefixes: dict[str, str] | None = None,
) -> tuple[Target, str | None, str | None]:
    """(target, device, notice) of a command's ``--target``/``--device``: ``old`` maps a
    command's old spellings to (target, device), ``old_prefixes`` an old prefix to the target it
    named (``{"vta-": "vta"}``: ``vta-<device>`` is ``vta`` on ``<device>``); the notice names the
    new spelling (None for a new one). ``default_device``: a target with devices gets its first
    when none is given. ``TargetError`` names what is allowed."""
    said = None
    spelled = old.get(target)
    for prefix, name in (old_prefixes or {}).items():
        if spelled is None and target.startswith(prefix) and len(target) > len(prefix):
            spelled = (name, target[len(prefix) :])
    if spelled is not None:
        new_name, old_device = spelled
        if device is not None and old_device is not None:
            raise TargetError(
                f"--target {target} names a device already ({old_device}); give --target"
                f" {new_name} --device {device}"
            )
        device = device if old_device is None else old_device
        new = f"--target {new_name}" + (f" --device {old_device}" if old_device else "")
        said = f"--target {target} is the old spelling of {new} (accepted for one release)"
        target = new_name
    try:
        spec = get_target(target)
    except TargetError:
        olds = ", ".join([*old, *(f"{p}<device>" for p in old_prefixes or {})])
        raise TargetError(
            f"unknown target {target!r} (allowed: {', '.join(target_names())}; old spellings:"
            f" {olds})"
        ) from None
    if device is None:
        device = spec.default_device if default_device else None
    else:
        device = spec.check_device(device)
    return spec, device, said
