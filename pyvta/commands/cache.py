"""pyvta cache: where pyvta keeps work between runs (``pyvta.cache``), what is there, and emptying
it. ``clear`` removes only the folders pyvta writes (``pyvta.cache.FOLDERS``), never the root
itself or anything else in it."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from pathlib import Path

from pyvta import cache
from pyvta.commands.common import CommandError

HELP = "show (info) or empty (clear [FOLDER ...]) the cache root and its folders"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("info", "clear"))
    p.add_argument(
        "folders",
        nargs="*",
        metavar="FOLDER",
        help=f"clear: only these folders (default: all of {', '.join(cache.FOLDERS)})",
    )


def run(args: argparse.Namespace) -> int:
    unknown = [f for f in args.folders if f not in cache.FOLDERS]
    if unknown:
        raise CommandError(
            f"unknown cache folder {unknown[0]!r} (allowed: {', '.join(cache.FOLDERS)})"
        )
    if args.action == "info":
        if args.folders:
            raise CommandError("info takes no FOLDER (it lists them all)")
        return _info()
    return _clear(args.folders or list(cache.FOLDERS))


def _source() -> str:
    if os.environ.get(cache.ROOT_VAR):
        return f"${cache.ROOT_VAR}"
    if os.environ.get("XDG_CACHE_HOME"):
        return f"$XDG_CACHE_HOME/pyvta (set ${cache.ROOT_VAR} to move it)"
    return f"the default (set ${cache.ROOT_VAR} to move it)"


def _usage(path: Path) -> tuple[int, int]:
    """(files, bytes) below ``path``; links are counted, not followed."""
    files = size = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            files += 1
            with contextlib.suppress(OSError):  # removed while we looked
                size += os.lstat(os.path.join(dirpath, name)).st_size
    return files, size


def _size(n_bytes: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n_bytes < 1024:
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    return f"{n_bytes:.1f} GiB"


def _info() -> int:
    root = cache.root()
    print(f"cache root: {root} ({_source()})")
    total_files = total_size = 0
    for name, what in cache.FOLDERS.items():
        path = root / name
        if path.is_dir():
            files, size = _usage(path)
            total_files, total_size = total_files + files, total_size + size
            print(f"  {name:11s} {files:7d} files {_size(size):>10s}  {what}")
        else:
            print(f"  {name:11s} {'-':>7s}       {'-':>10s}  {what}")
    print(f"  {'total':11s} {total_files:7d} files {_size(total_size):>10s}")
    return 0


def _clear(names: list[str]) -> int:
    root = cache.root()
    for name in names:
        path = root / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            files, size = _usage(path)
            shutil.rmtree(path)
            print(f"removed {path} ({files} files, {_size(size)})")
    print(f"cleared {', '.join(names)} under {root}")
    return 0
