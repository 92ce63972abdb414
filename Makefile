# The two commands of the README. Both set everything up first (scripts/setup.sh, idempotent).
.PHONY: setup demo test board-test lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/pyvta demo

# -P: the checkout's folders are not on sys.path, so the tests import pyvta as installed.
test: setup
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/python -P -m pytest -q --durations=20
	$(MAKE) board-test

# The board-side runtime under the board's Python (3.10, numpy 1.26, no extras): tests/board.
board-test: setup
	@bash scripts/board_test.sh

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

bench: setup
	.venv/bin/python benchmarks/sim_throughput.py
