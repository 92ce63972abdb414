"""pyvta disasm: print an instruction stream as readable text."""

from __future__ import annotations

import argparse
from pathlib import Path

from pyvta.commands.common import CommandError, add_config_argument, config_from
from pyvta.isa import PyvtaError, decode_insns, disassemble

HELP = "disassemble an instruction stream (raw .bin of 16-byte words, or a program bundle .npz)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="raw instruction stream or program bundle (.npz)")
    add_config_argument(p)


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if path.suffix == ".npz" or _is_zip(path):
        from pyvta.sim import Program

        program = Program.load(path)
        if args.config and config_from(args) != program.config:
            raise CommandError(
                f"--config {args.config} ({config_from(args).tag}) differs from the config"
                f" {program.config.tag} recorded in the bundle {path}; a bundle carries its own"
                " config (drop --config)"
            )
        insns = program.insns()
        print(
            f"# {path}: {program.insn_count} instructions at {program.insn_addr:#x},"
            f" config {program.config.tag}"
        )
    else:
        cfg = config_from(args)
        try:
            insns = decode_insns(path.read_bytes(), cfg)
        except PyvtaError as e:
            raise CommandError(f"{path}: {e}") from None
        print(f"# {path}: {len(insns)} instructions, config {cfg.tag}")
    print(disassemble(insns))
    return 0


def _is_zip(path: Path) -> bool:
    """A zip archive (an .npz under another name) rather than a raw instruction stream."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False
