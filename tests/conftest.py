"""tests/board runs under the board's Python only (``make board-test``: Python 3.10, numpy 1.26,
on fixtures the host makes); the host's test run leaves it to that step."""

import sys

collect_ignore = ["board"] if sys.version_info[:2] != (3, 10) else []
