# The two commands of the README. Both set everything up first (scripts/setup.sh, idempotent).
.PHONY: setup demo test test-slow board-test lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/pyvta demo

# -P: the checkout's folders are not on sys.path, so the tests import pyvta as installed.
# -n 2: two pytest-xdist workers, one per core of the machine CI runs on (the README gives the
# timings); the hardware tests share one worker (tests/conftest.py: by folder, as pytest 9.2
# keeps xdist 3.8 from grouping by marks).
# The tests marked slow (more of an already-covered path: a second simulator, a second RTL config,
# bigger sizes) run with `make test-slow`, keeping CI's run under its 20-minute budget.
# The board-side tests run on x86 and the emulated armhf userland there (about 2 minutes, most
# of it qemu); the arm64 userland too with `make test-slow` or `make board-test`.
test: setup
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/python -P -m pytest -q -m "not slow" -n 2 --dist loadgroup --durations=20
	PYVTA_BOARD_ARCHES=armhf $(MAKE) board-test

test-slow: setup
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/python -P -m pytest -q -m slow --durations=20
	PYVTA_BOARD_ARCHES=arm64 $(MAKE) board-test

# The board-side runtime under the board's Python (3.10, numpy 1.26, no extras): tests/board;
# then the same tests on emulated ARM userlands (PYVTA_BOARD_ARCHES, default "armhf arm64").
board-test: setup
	@bash scripts/board_test.sh

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

bench: setup
	.venv/bin/python benchmarks/sim_throughput.py
