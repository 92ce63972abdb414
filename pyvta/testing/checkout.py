"""The files of a source checkout, as git sees them (for tests that read or copy the project)."""

from __future__ import annotations

import subprocess
from pathlib import Path


class NotACheckout(RuntimeError):
    """The folder is not inside a git checkout (or git is missing)."""


def checkout_files(root: Path, *patterns: str) -> list[str]:
    """Paths relative to ``root`` of its files that git tracks, and of the untracked ones it does
    not ignore (a change not yet committed counts), matching ``patterns`` (all when none)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "--", *patterns],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise NotACheckout("git is not installed") from exc
    if out.returncode != 0:
        raise NotACheckout(out.stderr.strip())
    return [f for f in out.stdout.splitlines() if (root / f).is_file()]
