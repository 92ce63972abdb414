"""pyvta compiler: tensor expressions -> schedules -> loop IR -> backends.

>>> from pyvta.compiler import te, create_schedule, lower, build
"""

from pyvta.compiler import te
from pyvta.compiler.api import build, lower
from pyvta.compiler.schedule import create_schedule

__all__ = ["build", "create_schedule", "lower", "te"]
