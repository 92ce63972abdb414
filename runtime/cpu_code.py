"""An artifact's CPU kernels as machine code for one CPU (a board's): one shared object and, per
graph node, the symbol it exports and the arrays it takes. A process on that CPU loads it with
ctypes: no llvmlite, no compiler (``compiler.graph.cpu_cross`` makes it on the host).

    code = CpuCode.from_artifact(meta, arrays)   # CompiledModel.load does this
    if code.runs_here(): modules = code.load()   # node -> SharedKernel, what CpuKernels calls

This module imports numpy and nothing of the compiler's code generation.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import platform
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from pyvta.isa.errors import PyvtaError
from pyvta.runtime.arrays import aligned_empty, check_arrays

# architecture families: LLVM's triple's first field or platform.machine() -> (family, bits)
_FAMILIES = {
    "x86_64": ("x86_64", 64),
    "amd64": ("x86_64", 64),
    "aarch64": ("aarch64", 64),
    "arm64": ("aarch64", 64),
}
_ARM32 = ("arm32", 32)  # armv7a (a triple), armv7l / armv8l (a 32-bit userland), ...


def arch_family(name: str) -> tuple[str, int]:
    """``(family, pointer bits)`` of a triple's architecture or a ``platform.machine()``."""
    arch = name.split("-")[0].lower()
    if arch in _FAMILIES:
        return _FAMILIES[arch]
    if arch.startswith(("arm", "thumb")):
        return _ARM32
    return (arch, 0)


def this_machine() -> tuple[str, int]:
    """This process's architecture family and pointer width (a 32-bit userland on a 64-bit
    ARM kernel is arm32)."""
    family, _ = arch_family(platform.machine())
    bits = struct.calcsize("P") * 8
    if family == "aarch64" and bits == 32:
        return _ARM32
    return family, bits


class CpuCodeError(PyvtaError, ValueError):
    """CPU kernels that cannot run here (another CPU) or arrays they cannot take."""


class Param(NamedTuple):
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class KernelSig:
    """One node's kernel: ``symbol`` in the shared object, its array ``params`` (in order; the
    ``written`` ones are outputs) and the scratch buffers (``workspace``: shape, dtype) that
    follow them."""

    symbol: str
    params: tuple[Param, ...]
    workspace: tuple[tuple[tuple[int, ...], str], ...]
    written: tuple[str, ...]
    consts: tuple[str, ...] = ()  # arrays of ``CpuCode.consts`` it takes (an int8 kernel's
    # packed weight and corrected bias)

    @property
    def name(self) -> str:
        return self.symbol

    def to_json(self) -> dict:
        return {
            "symbol": self.symbol,
            "params": [[p.name, list(p.shape), p.dtype] for p in self.params],
            "workspace": [[list(s), d] for s, d in self.workspace],
            "written": list(self.written),
            "consts": list(self.consts),
        }

    @classmethod
    def from_json(cls, d: dict) -> KernelSig:
        params = tuple(Param(n, tuple(s), t) for n, s, t in d["params"])
        workspace = tuple((tuple(s), t) for s, t in d["workspace"])
        return cls(d["symbol"], params, workspace, tuple(d["written"]), tuple(d["consts"]))


@dataclass
class CpuCode:
    """The shared object (``shared``: ELF bytes) for ``triple`` / ``cpu``, its kernels by node
    name and the arrays laid out for them (``consts``: int8 kernels' packed weights, biases)."""

    triple: str
    cpu: str
    shared: bytes
    kernels: dict[str, KernelSig]
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    gemms: dict[str, KernelSig] = field(default_factory=dict)  # "M N K" -> the float32 GEMM
    # of that shape (``cpu_llvm.gemm``: the numpy ops' conv2d and dense), its B padded to N'
    features: str = ""  # LLVM's features the code was generated with ("+avx2,-avx512f,..."):
    # on x86 every "+" one must be this CPU's (an AVX-512 kernel faults on an AVX2 host)

    KEY = "cpu_so"  # the artifact's array holding ``shared``; its consts are ``KEY_name``

    def runs_here(self) -> bool:
        """Whether this process's CPU runs the shared object: same architecture and width, and
        on x86 every feature it was generated with (read from LLVM: without llvmlite an x86
        shared object with recorded features is not run)."""
        family = arch_family(self.triple)
        if family != this_machine():
            return False
        if family[0] != "x86_64" or not self.features:
            return True
        try:
            from pyvta import host_cpu

            have = host_cpu.host("host")[2]
        except ImportError:
            return False
        need = [f[1:] for f in self.features.split(",") if f.startswith("+")]
        return all(have.get(f, False) for f in need)

    @property
    def description(self) -> str:
        return f"{self.triple} ({self.cpu})"

    def meta(self) -> dict:
        """The artifact's ``cpu_code`` entry (the bytes go in ``arrays()``)."""
        kernels = {n: k.to_json() for n, k in sorted(self.kernels.items())}
        consts = sorted(self.consts)
        gemms = {n: k.to_json() for n, k in sorted(self.gemms.items())}
        return {
            "triple": self.triple,
            "cpu": self.cpu,
            "features": self.features,
            "kernels": kernels,
            "consts": consts,
            "gemms": gemms,
        }

    def arrays(self) -> dict[str, np.ndarray]:
        consts = {f"{self.KEY}_{name}": a for name, a in self.consts.items()}
        return {self.KEY: np.frombuffer(self.shared, np.uint8), **consts}

    @classmethod
    def from_artifact(cls, meta: dict | None, arrays: dict[str, np.ndarray]) -> CpuCode | None:
        if not meta:
            return None
        kernels = {n: KernelSig.from_json(d) for n, d in meta["kernels"].items()}
        consts = {name: arrays[f"{cls.KEY}_{name}"] for name in meta["consts"]}
        gemms = {n: KernelSig.from_json(d) for n, d in meta["gemms"].items()}
        shared = arrays[cls.KEY].tobytes()
        features = meta.get("features", "")  # (artifacts written before it: none recorded)
        return cls(meta["triple"], meta["cpu"], shared, kernels, consts, gemms, features)

    def load(self) -> dict[str, SharedKernel]:
        """Every node's kernel from the shared object, loaded into this process (a
        ``CpuCodeError`` on another CPU)."""
        lib = self._library()
        return {node: SharedKernel(lib, sig) for node, sig in self.kernels.items()}

    def load_gemms(self) -> dict[tuple[int, int, int], tuple[SharedKernel, int]]:
        """``(M, N, K)`` -> (its GEMM kernel, N padded), for ``cpu_llvm.shared_gemms``."""
        lib = self._library()
        out = {}
        for shape, sig in self.gemms.items():
            m, n, k = map(int, shape.split())
            out[(m, n, k)] = (SharedKernel(lib, sig), sig.params[1].shape[1])
        return out

    def _library(self) -> ctypes.CDLL:
        if not self.runs_here():
            family, bits = this_machine()
            raise CpuCodeError(
                f"the artifact's CPU kernels are for {self.description}; this machine is"
                f" {platform.machine()} ({family}, {bits}-bit): compile for it"
                " (pyvta compile --board / --cpu-target)"
            )
        return _load_library(self.shared)


@functools.cache
def _load_library(data: bytes) -> ctypes.CDLL:
    """``data`` written once under the cache's ``cpu-code`` folder (by its sha256) and loaded
    (once per process)."""
    from pyvta import cache

    digest = hashlib.sha256(data).hexdigest()[:32]
    folder = cache.folder("cpu-code")
    path = folder / f"{digest}.so"
    if not path.exists() or path.read_bytes() != data:
        cache.write_atomic(path, data)
    return ctypes.CDLL(str(Path(path)))


class SharedKernel:
    """One node's kernel in a loaded shared object, called as the JIT's ``Module`` is
    (``bind(*arrays)``, ``kernel(*arrays)``; ``func.params`` gives the parameters)."""

    def __init__(self, lib: ctypes.CDLL, sig: KernelSig) -> None:
        self.sig = sig
        fn = getattr(lib, sig.symbol)
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * (len(sig.params) + len(sig.workspace))
        self._fn = fn
        self._written = frozenset(sig.written)
        self._local = threading.local()

    @property
    def func(self) -> KernelSig:
        return self.sig

    def _pointers(self, arrays) -> list[int]:
        arrays = check_arrays(self.sig, arrays, self._written)
        return [a.ctypes.data for a in arrays] + self._workspace()

    def _workspace(self) -> list[int]:
        """Scratch buffers of this calling thread (allocated on its first call, then reused)."""
        ptrs = getattr(self._local, "ptrs", None)
        if ptrs is None:
            arrays = [aligned_empty(shape, dtype) for shape, dtype in self.sig.workspace]
            self._local.arrays = arrays  # keeps them alive
            ptrs = self._local.ptrs = [a.ctypes.data for a in arrays]
        return ptrs

    def __call__(self, *arrays) -> None:
        self._fn(*self._pointers(arrays))

    def bind(self, *arrays):
        """A no-argument call on ``arrays``, checked once now; the caller keeps them alive."""
        return functools.partial(self._fn, *self._pointers(arrays))


class WithGemms:
    """A node backend whose nodes compute their float products (``cpu_llvm.gemm``) with
    ``gemms`` (``CpuCode.load_gemms``); everything else is ``inner``'s."""

    def __init__(self, inner, gemms: dict) -> None:
        self.inner, self.gemms = inner, gemms

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def run(self, node, args: list[np.ndarray]) -> np.ndarray:
        from pyvta.runtime.cpu_llvm import shared_gemms

        with shared_gemms(self.gemms):
            return self.inner.run(node, args)
