"""pyvta compiler: tensor expressions -> schedules -> loop IR -> backends.

>>> from pyvta.compiler import te, create_schedule, lower, build

The names are imported when first used (PEP 562): importing a subpackage (``compiler.graph`` to
run an artifact) does not load the code generators.
"""

import importlib

_HOMES = {"te": None, "build": "api", "lower": "api", "create_schedule": "schedule"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _HOMES[name] is None:
        return importlib.import_module(f"{__name__}.{name}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
