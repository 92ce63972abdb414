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

__all__ = ["Target", "TargetError", "get_target", "target_names"]


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
    if not isinstance(name, str) or not name:
        raise TargetError(f"a target name is a non-empty string, got {name!r}")
    folder = name.replace("-", "_")
    here = Path(__file__).parent
    if (here / folder / "__init__.py").is_file():
        target = _load(folder)
        if target.name == name:
            return target
    raise TargetError(f"target {name!r} is not supported (allowed: {', '.join(target_names())})")
