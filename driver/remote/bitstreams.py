"""The server's bitstream store: uploaded bitstream folders, content-addressed by sha256.

An upload is a bitstream folder as ``pyvta board recipe --build`` writes it (``driver.ops_pynq``):
``manifest.json`` naming a ``.bit`` and a ``.hwh`` (``"files": {"bit": NAME, "hwh": NAME}``) with
their sha256 (``"build": {"bit_sha256", "hwh_sha256"}``, required here) and the ``config_tag``.
Names are plain file names (no folders); the upload must be exactly those three files. It is
written to a temporary folder, checked there by ``ops_pynq.read_manifest`` (the one check of a
bitstream folder), then renamed to ``ROOT/<sha256 of the manifest>/``: the client never chooses a
path. Standard library only (plus what ``ops_pynq`` imports without pynq).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path

from pyvta.driver.ops_pynq import MANIFEST, BitstreamError, read_manifest

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def _named_files(files: dict[str, bytes]) -> dict:
    """The upload's manifest, with its names and hashes present (the bytes are checked later)."""
    for name in files:
        if not _NAME.fullmatch(name) or ".." in name:
            raise BitstreamError(f"file name {name!r} refused (plain names: letters, digits, _.-)")
    if MANIFEST not in files:
        raise BitstreamError(f"an upload needs a {MANIFEST} (got {sorted(files)})")
    try:
        manifest = json.loads(files[MANIFEST].decode("utf-8"))
        named = {manifest["files"]["bit"], manifest["files"]["hwh"]}
        build = manifest["build"]
        hashes = (build["bit_sha256"], build["hwh_sha256"])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise BitstreamError(
            f"{MANIFEST}: not a built bitstream manifest (files.bit, files.hwh, build.bit_sha256,"
            f" build.hwh_sha256, config_tag): {type(e).__name__} {e}"
        ) from None
    if not all(isinstance(h, str) and h for h in hashes):
        raise BitstreamError(f"{MANIFEST}: an upload carries the sha256 of its .bit and .hwh")
    if set(files) != named | {MANIFEST} or len(named) != 2:
        raise BitstreamError(f"{MANIFEST} names {sorted(named)}; the upload has {sorted(files)}")
    return manifest


class BitstreamStore:
    """Checked uploads under ``root``, one folder per manifest digest."""

    def __init__(self, root):
        self.root = Path(root)

    def put(self, files: dict[str, bytes]) -> tuple[str, Path, dict]:
        """Check and keep an upload (name -> bytes): ``(digest, folder, manifest)``; an upload
        already kept is checked, not kept twice. ``BitstreamError`` for a refused one."""
        _named_files(files)
        digest = hashlib.sha256(files[MANIFEST]).hexdigest()
        folder = self.root / digest
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".upload-", dir=self.root))
        manifest = None
        try:
            for name, data in files.items():
                (tmp / name).write_bytes(data)
            manifest = read_manifest(tmp)[0]  # every upload checked, a repeated one too
            if not folder.is_dir():
                tmp.rename(folder)
        except OSError as e:  # a full disk; or another session kept the same upload meanwhile
            if manifest is None or not folder.is_dir():
                raise BitstreamError(f"cannot keep the upload in {self.root}: {e}") from None
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        return digest, folder, manifest
