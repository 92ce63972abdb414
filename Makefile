# The two commands of the README. Both set everything up first (scripts/setup.sh, idempotent).
.PHONY: setup demo test lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/pyvta demo

# -P: the checkout's folders are not on sys.path, so the tests import pyvta as installed.
test: setup
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/python -P -m pytest -q

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

bench: setup
	.venv/bin/python benchmarks/sim_throughput.py
