"""The ``pyvta`` console command: one subcommand per module in ``pyvta.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys

from pyvta.isa.errors import PyvtaError

# Subcommand name -> module in pyvta.commands with add_arguments(parser) and run(args) -> int.
COMMANDS = {
    "demo": "demo",
    "sim": "simulate",
    "disasm": "disasm",
    "isa": "isa_info",
    "conv": "conv",
    "hw": "hw",
    "run": "run_model",
    "compile": "compile_model",
    "tune": "tune",
    "zoo": "zoo",
    "dse": "dse",
}


def build_parser() -> argparse.ArgumentParser:
    from pyvta import __version__

    parser = argparse.ArgumentParser(
        prog="pyvta",
        description="A Python-first stack for a VTA-style deep-learning accelerator.",
    )
    parser.add_argument("--version", action="version", version=f"pyvta {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"pyvta.commands.{module_name}")
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except PyvtaError as exc:
        print(f"pyvta {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0
    except FileNotFoundError as exc:
        print(f"pyvta {args.command}: error: {exc.filename}: no such file", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
