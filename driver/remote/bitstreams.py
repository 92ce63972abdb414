"""The server's bitstream store: uploaded bitstream directories, content-addressed by sha256.

An upload is a ``.bit``, a ``.hwh`` and a ``manifest.json``: ``{"config_tag": TAG, "files":
{NAME: SHA256_HEX, ...}}`` naming exactly the other two files. Names are plain file names (no
folders); the manifest is checked against the files before anything is kept. A checked upload
lands in ``ROOT/<sha256 of the manifest>/`` (written to a temporary folder, then renamed); the
client never chooses a path. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from pyvta.driver.remote.protocol import ProtocolError

MANIFEST = "manifest.json"
SUFFIXES = (".bit", ".hwh")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class BitstreamError(ProtocolError):
    """An upload refused: its names, its manifest or its files' hashes."""


def check_upload(files: dict[str, bytes]) -> dict:
    """The manifest of an upload (name -> bytes), checked: one file of each of ``SUFFIXES`` plus
    ``manifest.json``, plain names, every file listed with its sha256 and nothing else listed."""
    for name in files:
        if not _NAME.fullmatch(name) or ".." in name:
            raise BitstreamError(f"file name {name!r} refused (plain names: letters, digits, _.-)")
    if MANIFEST not in files:
        raise BitstreamError(f"an upload needs a {MANIFEST} (got {sorted(files)})")
    for suffix in SUFFIXES:
        n = sum(name.endswith(suffix) for name in files)
        if n != 1:
            raise BitstreamError(f"an upload has exactly one {suffix} file (got {n})")
    if len(files) != len(SUFFIXES) + 1:
        raise BitstreamError(f"an upload is one .bit, one .hwh and {MANIFEST}; got {sorted(files)}")
    try:
        manifest = json.loads(files[MANIFEST].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BitstreamError(f"{MANIFEST} is not UTF-8 JSON ({e})") from None
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict) or not isinstance(manifest.get("config_tag"), str):
        raise BitstreamError(
            f'{MANIFEST} needs "config_tag" (a string) and "files" (name -> sha256)'
        )
    payload = {n for n in files if n != MANIFEST}
    if set(listed) != payload:
        raise BitstreamError(f"{MANIFEST} lists {sorted(listed)}; the upload has {sorted(payload)}")
    for name in sorted(payload):
        digest = hashlib.sha256(files[name]).hexdigest()
        if listed[name] != digest:
            raise BitstreamError(f"{name}: sha256 {digest}, the manifest says {listed[name]!r}")
    return manifest


class BitstreamStore:
    """Checked uploads under ``root``, one folder per manifest digest."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def put(self, files: dict[str, bytes]) -> tuple[str, Path, dict]:
        """Check and keep an upload: ``(digest, folder, manifest)``; an identical upload already
        kept is not written again."""
        manifest = check_upload(files)
        digest = hashlib.sha256(files[MANIFEST]).hexdigest()
        folder = self.root / digest
        if folder.is_dir():
            return digest, folder, manifest
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".upload-", dir=self.root))
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        try:
            tmp.rename(folder)
        except OSError:  # another session kept the same upload meanwhile
            for p in tmp.iterdir():
                p.unlink()
            tmp.rmdir()
        return digest, folder, manifest

    def bitstream(self, digest: str) -> Path:
        """The ``.bit`` of a kept upload."""
        folder = self.root / digest
        return next(p for p in folder.iterdir() if p.suffix == ".bit")
