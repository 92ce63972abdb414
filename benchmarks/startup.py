"""What a `pyvta` command waits for before it works: its imports, and a warm run of a network.

Each round, in fresh processes and in a seeded random order
(``tuner.in_network_confirm.round_order``):

- **imports**: ``python -X importtime -c "import pyvta.cli, <the run command's modules>"``
  (what ``pyvta run MODEL.onnx`` imports before it reads the file), the total from the
  interpreter's own report;
- **run**: ``pyvta run MODEL --target cpu --runs 1`` by the wall clock, its kernels already in
  the cache (one run ahead of the rounds): what a user's second and later runs wait.

``--against DIR`` runs each also with ``DIR`` first on ``PYTHONPATH`` (e.g. another version of a
dependency, ``pip install --target DIR PACKAGE==VERSION --no-deps``), side by side in the same
rounds; each line then gives both and their ratio, the end the medians and the paired ratio.
The modules that took longest to import themselves (``--top``, from the last round's report of
this environment) are listed at the end: a dependency whose import got slow shows there.

    .venv/bin/python benchmarks/startup.py --rounds 6
    .venv/bin/python benchmarks/startup.py --against /tmp/ml_dtypes-0.7.0 --rounds 6
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyvta.tuner.in_network_confirm import paired_ratio, round_order

ROOT = Path(__file__).resolve().parents[1]
RUN_MODULES = (
    "pyvta.cli",
    "pyvta.commands.run_model",
    "pyvta.commands.network",
    "pyvta.compiler.graph.onnx_import",
    "pyvta.compiler.graph.compile",
    "pyvta.runtime.compiled_model",
)


def _env(pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    return env


def import_report(pythonpath: str | None) -> list[tuple[int, int, str]]:
    """``-X importtime``'s rows (self us, cumulative us, module) of importing ``RUN_MODULES``
    in a fresh interpreter."""
    code = "import " + ", ".join(RUN_MODULES)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        env=_env(pythonpath), capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = []
    for line in out.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[0]), int(parts[1]), parts[2][1:]))  # nested: indented
    return rows


def imports_s(rows) -> float:
    """The whole import: the sum of the top-level rows' cumulative times."""
    return sum(cum for _, cum, name in rows if not name.startswith(" ")) / 1e6


def run_s(model: str, pythonpath: str | None) -> float:
    cmd = [str(ROOT / ".venv/bin/pyvta"), "run", model, "--target", "cpu", "--runs", "1"]
    start = time.perf_counter()
    subprocess.run(cmd, env=_env(pythonpath), capture_output=True, check=True)
    return time.perf_counter() - start


def model_file(model: str, into: Path) -> str:
    """``model`` itself (an ONNX file), or the zoo's model of that name written into ``into``."""
    if model.endswith(".onnx"):
        return str(Path(model).resolve())
    from pyvta.compiler.graph.zoo import save_model

    return save_model(model, str(into / f"{model}.onnx"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18", help="a zoo name or ONNX file (default resnet18)")
    p.add_argument("--rounds", type=int, default=6, help="rounds (default 6)")
    p.add_argument("--against", help="a folder put first on PYTHONPATH for the other side")
    p.add_argument("--top", type=int, default=8, help="slowest modules listed (default 8)")
    args = p.parse_args(argv)
    model = model_file(args.model, Path(tempfile.mkdtemp(prefix="pyvta-startup-")))
    sides = {"this": None} | ({"against": args.against} if args.against else {})
    for path in sides.values():
        run_s(model, path)  # the kernels into the cache: the rounds time warm runs
    times = {(side, kind): [] for side in sides for kind in ("imports", "run")}
    print(f"rounds {args.rounds}; model {args.model}; sides: {sides}")
    rows = []
    for r in range(args.rounds):
        for side in round_order(list(sides), r):
            report = import_report(sides[side])
            rows = report if side == "this" else rows
            times[side, "imports"].append(imports_s(report))
            times[side, "run"].append(run_s(model, sides[side]))
        print(f"round {r}: " + "; ".join(
            f"{side} imports {times[side, 'imports'][-1]:.3f} s, run {times[side, 'run'][-1]:.2f} s"
            for side in sides
        ))  # fmt: skip
    for kind in ("imports", "run"):
        line = ", ".join(f"{s} {statistics.median(times[s, kind]):.3f} s" for s in sides)
        if args.against:
            ratio = paired_ratio(times["against", kind], times["this", kind])
            line += f"; against / this {ratio:.2f}x paired"
        print(f"{kind} (medians): {line}")
    print(f"slowest modules to import themselves (this side, last round; top {args.top}):")
    for own, _, name in sorted(rows, reverse=True)[: args.top]:
        print(f"  {own / 1e3:8.1f} ms  {name.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
