"""pyvta compiler: tensor expressions -> schedules -> loop IR -> backends.

>>> from pyvta.compiler import te, create_schedule, lower, build

Importing it loads the compiler's own pure-Python modules only; the code generators (llvmlite)
load when something is built, so a board runtime can import ``compiler.graph``.
"""

import pyvta.compiler.lower  # noqa: F401 - first, so the name ``lower`` below is the function
from pyvta.compiler import te
from pyvta.compiler.schedule import create_schedule


def lower(*args, **kwargs):
    """``compiler.api.lower``: a schedule to loop IR (imported here on first use)."""
    from pyvta.compiler.api import lower as lower_schedule

    return lower_schedule(*args, **kwargs)


def build(*args, **kwargs):
    """``compiler.api.build``: a schedule to a callable module for a target (see there)."""
    from pyvta.compiler.api import build as build_schedule

    return build_schedule(*args, **kwargs)


__all__ = ["build", "create_schedule", "lower", "te"]
