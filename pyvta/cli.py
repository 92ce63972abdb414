"""The ``pyvta`` console command: one subcommand per module in ``pyvta.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

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
    "board": "board",
    "serve": "serve",
    "dse": "dse",
    "cache": "cache",
    "warmup": "warmup",
}

REPORT_TO = (
    "Please report it to the pyvta maintainers (the project's issue tracker) with the command"
    " line and the output of the same command with --debug."
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or (``only``) of that one: its module alone is imported
    (``pyvta serve`` on a board imports the driver and the runtime, none of the compiler)."""
    from pyvta import __version__

    parser = argparse.ArgumentParser(
        prog="pyvta",
        description="A Python-first stack for a VTA-style deep-learning accelerator.",
    )
    parser.add_argument("--version", action="version", version=f"pyvta {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    # --debug after the subcommand too; SUPPRESS keeps the value given before it.
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"pyvta.commands.{module_name}")
        p = sub.add_parser(name, help=module.HELP, description=module.HELP, parents=[debug])
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    _check_numbers(parser)
    return parser


def _check_numbers(parser: argparse.ArgumentParser) -> None:
    """Every int and float option of every subcommand takes a finite number >= 0 (counts,
    sizes, seeds, seconds): anything else is refused while parsing, naming the option."""
    for action in parser._actions:
        if action.type in (int, float):
            action.type = _non_negative(action.type)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _check_numbers(sub)


def _non_negative(kind: type):
    def parse(text: str):
        value = kind(text)
        if not value >= 0 or value == float("inf"):  # also NaN
            raise ValueError(text)
        return value

    parse.__name__ = f"{kind.__name__} (a finite number >= 0)"
    return parse


def _command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is no option), if it is one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(_command_of(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"pyvta {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        return _report(args, exc)


def _report(args: argparse.Namespace, exc: Exception) -> int:
    """Print ``exc`` for the user: one line for bad input (exit 2), a short note and where to
    report it for anything else (exit 3); the traceback only with ``--debug``."""
    if args.debug:
        traceback.print_exception(exc)
    prefix = f"pyvta {args.command}: error:"
    if isinstance(exc, PyvtaError):
        print(f"{prefix} {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, MemoryError):
        print(f"{prefix} out of memory ({exc or 'the request is too large'})", file=sys.stderr)
        return 2
    if isinstance(exc, OSError) and exc.filename is not None:
        print(f"{prefix} {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(
        f"pyvta {args.command}: internal error: {type(exc).__name__}: {exc}\n"
        f"This is a bug in pyvta, not in your input. {REPORT_TO}"
        + ("" if args.debug else " (rerun with --debug for the traceback)"),
        file=sys.stderr,
    )
    return 3


if __name__ == "__main__":
    sys.exit(main())
