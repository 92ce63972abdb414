"""The CUDA toolchain files this backend uses without a GPU, from the pinned wheel
``nvidia-cuda-nvcc-cu12==12.9.86`` (extra ``gpu-check``): ``ptxas`` (assembles PTX and reports
each kernel's registers, shared memory and spills) and ``libdevice.10.bc`` (math functions).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pyvta.isa.errors import PyvtaError

WHEEL = "nvidia-cuda-nvcc-cu12==12.9.86"


class ToolchainMissing(PyvtaError, RuntimeError):
    pass


class PtxasError(PyvtaError, RuntimeError):
    pass


def _wheel_dir() -> Path:
    try:
        import nvidia.cuda_nvcc as pkg
    except ImportError:
        raise ToolchainMissing(
            f"the CUDA toolchain wheel is not installed: pip install {WHEEL} "
            "(or pip install 'pyvta[gpu-check]')"
        ) from None
    return Path(next(iter(pkg.__path__)))


def ptxas_path() -> Path:
    p = _wheel_dir() / "bin" / "ptxas"
    if not p.exists():
        raise ToolchainMissing(f"{p} is missing from the {WHEEL} wheel")
    return p


def libdevice_path() -> Path:
    p = _wheel_dir() / "nvvm" / "libdevice" / "libdevice.10.bc"
    if not p.exists():
        raise ToolchainMissing(f"{p} is missing from the {WHEEL} wheel")
    return p


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel: registers per thread, static shared memory per block
    (bytes), bytes spilled to local memory (stores + loads), stack frame bytes, barriers."""

    name: str
    registers: int
    shared_bytes: int
    spill_bytes: int
    stack_bytes: int
    barriers: int


_FUNC = re.compile(r"Compiling entry function '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BAR = re.compile(r"used (\d+) barriers")


def parse_resources(log: str) -> dict[str, KernelResources]:
    """``ptxas -v`` output -> ``{kernel: KernelResources}``."""
    out, cur, frame = {}, None, (0, 0, 0)
    for line in log.splitlines():
        if m := _FUNC.search(line):
            cur, frame = m.group(1), (0, 0, 0)
        elif cur and (m := _FRAME.search(line)):
            frame = tuple(int(g) for g in m.groups())
        elif cur and (m := _USED.search(line)):
            smem = _SMEM.search(line)
            bar = _BAR.search(line)
            out[cur] = KernelResources(
                cur,
                int(m.group(1)),
                int(smem.group(1)) if smem else 0,
                frame[1] + frame[2],
                frame[0],
                int(bar.group(1)) if bar else 0,
            )
    return out


def assemble(ptx: str, arch: str) -> dict[str, KernelResources]:
    """Assemble ``ptx`` for ``arch`` with ptxas; its per-kernel resources. ``PtxasError`` with
    ptxas' message when it rejects the PTX (too much shared memory, bad syntax, ...)."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        cmd = [str(ptxas_path()), f"-arch={arch}", "-v", "-o", str(Path(d) / "k.cubin"), str(src)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise PtxasError(f"ptxas -arch={arch} rejected the PTX:\n{r.stderr.strip()}")
    return parse_resources(r.stderr + r.stdout)
