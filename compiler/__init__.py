"""pyvta compiler: tensor expressions -> schedules -> loop IR -> backends.

>>> from compiler import te, create_schedule, lower, build
"""

from compiler import te
from compiler.api import build, lower
from compiler.schedule import create_schedule

__all__ = ["build", "create_schedule", "lower", "te"]
