"""Helpers shared by subcommands."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from pyvta.isa import HwConfig, PyvtaError


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="hardware config JSON (VTA's vta_config.json keys; a sample: pyvta isa --print-config)",
    )


def config_from(args: argparse.Namespace) -> HwConfig:
    """The HwConfig of ``--config FILE`` (the default one without it); errors name the option."""
    path = getattr(args, "config", None)
    if not path:
        return HwConfig()
    try:
        return HwConfig.load(path)
    except (PyvtaError, OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        why = why.removeprefix(f"{path}: ")
        raise CommandError(f"--config {path}: {why}") from None


class CommandError(PyvtaError, ValueError):
    """A command-line request that cannot be carried out as asked."""


def count_or_all(text: str) -> int:
    """An option's count: an integer >= 0, or -1 for all (argparse ``type``)."""
    value = int(text)
    if value < -1:
        raise ValueError(text)
    return value


count_or_all.__name__ = "count (>= 0, or -1 for all)"


def output_path(
    path: str | os.PathLike,
    suffix: str | None = None,
    inputs: tuple = (),
    flag: str = "--out",
) -> Path:
    """Check an output file before any long work runs; returns the path that will be written.

    ``suffix`` (e.g. ``".npz"``) is added when the name has none and refused when it has another
    (numpy would otherwise write ``NAME.npz`` next to what was printed). Refused: a directory
    (``DIR/`` or ``DIR/.npz``), a missing or unwritable folder, a special file, and a path equal
    to one of ``inputs`` (after adding the suffix and resolving symlinks and hard links)."""
    text = os.fspath(path)
    p = Path(text).expanduser()
    if not text or text.endswith(("/", os.sep)) or p.is_dir() or (suffix and p.name == suffix):
        folder = p if p.is_dir() else p.parent
        raise CommandError(
            f"{flag} {text!r} is a directory; give a file name"
            f" (e.g. {folder / ('out' + (suffix or ''))})"
        )
    if suffix and p.suffix != suffix:
        if p.suffix:
            raise CommandError(f"{flag} {text}: the file must end in {suffix} (got {p.suffix!r})")
        p = p.with_name(p.name + suffix)
    parent = p.parent.resolve()
    if not parent.is_dir():
        raise CommandError(f"{flag} {text}: folder {parent} does not exist")
    if p.exists() and not p.is_file():
        raise CommandError(f"{flag} {text} exists and is not a regular file")
    for other in inputs:
        if other is not None and _same_file(p, Path(os.fspath(other)).expanduser()):
            raise CommandError(
                f"{flag} {p} is the input {other}; writing it would destroy the input"
                " (give another file name)"
            )
    _check_writable(p, parent, flag)
    return p.resolve() if p.is_symlink() else p  # write the file a link names, not the link


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    return a.exists() and b.exists() and os.path.samefile(a, b)


def _check_writable(p: Path, parent: Path, flag: str) -> None:
    """Create (and remove) a file next to ``p``: os.access lies for root and network mounts."""
    if p.exists() and not os.access(p, os.W_OK):
        raise CommandError(f"{flag} {p} is not writable")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".probe")
    except OSError as exc:
        raise CommandError(
            f"{flag} {p}: the folder {parent} exists but no file can be created in it"
            f" ({exc.strerror}: a read-only or virtual file system, or no permission); give a"
            " path in a writable folder"
        ) from exc
    os.close(fd)
    os.unlink(probe)
