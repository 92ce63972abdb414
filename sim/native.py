"""The native engine: the functional simulator's kernels JIT-compiled with llvmlite for the host.

The kernels are compiled once per HwConfig (sizes are constants, so LLVM unrolls and
vectorises the micro-op bodies with the host CPU's features) and kept in memory and, as object
code, on disk (the cache root's ``sim`` folder, ``pyvta.cache``, keyed by ``cache_key``): a new process loads them in
milliseconds without generating any IR. Streams are translated once into plans
(``sim/plan.py``), kept in memory by stream, config, DRAM size and limits: a repeated run
decodes and schedules nothing.

The board's runtime has no llvmlite: ``available()`` is then False and the simulator uses the
numpy engine.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import cache
from pathlib import Path

import numpy as np

from pyvta.isa import HwConfig
from pyvta.sim.errors import SimError
from pyvta.sim.plan import (
    BUF_ACC,
    BUF_DRAM,
    BUF_INP,
    BUF_OUT,
    BUF_SCRATCH,
    BUF_UOP,
    BUF_WGT,
    BUF_WPAIRS,
    N_BUFS,
    OP_WGT_PAIRS,
    REC_WORDS,
    Plan,
)
from pyvta.sim.state import SramState

PLAN_CACHE_ENTRIES = 256
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)


@cache
def available() -> bool:
    """True when llvmlite can JIT for this host."""
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
    except (ImportError, RuntimeError, OSError):
        return False
    return True


def default_cache_dir() -> Path:
    """The ``sim`` folder of the cache root (``pyvta.cache``)."""
    from pyvta import cache

    return cache.folder("sim")


class Kernels:
    """The compiled kernels of one config: ``run(records, bufs) -> -1 or failing record``."""

    def __init__(self, cfg: HwConfig, cache_dir: Path | None):
        import llvmlite.binding as llvm

        from pyvta.sim.native_ir import ENTRY

        if not available():
            raise SimError("the native engine needs llvmlite, which is not installed here")
        self.cfg = cfg
        triple, cpu, features = _host()
        self._obj_path = cache_dir / f"{cache_key(cfg)}.o" if cache_dir else None
        target = llvm.Target.from_triple(triple)
        self._tm = target.create_target_machine(
            cpu=cpu, features=features, opt=3, codemodel="jitdefault"
        )
        self.from_disk = bool(self._obj_path and self._obj_path.exists())
        if self.from_disk:
            mod = llvm.parse_assembly("")  # the object cache supplies the code
        else:
            from pyvta.sim.native_ir import KernelModule

            mod = llvm.parse_assembly(KernelModule(cfg).text())
            mod.verify()
            pto = llvm.create_pipeline_tuning_options(speed_level=3)
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            pb = llvm.create_pass_builder(self._tm, pto)
            pb.getModulePassManager().run(mod, pb)
        self._engine = llvm.create_mcjit_compiler(mod, self._tm)
        self._engine.set_object_cache(self._save_object, self._load_object)
        self._engine.finalize_object()
        self._entry = _ENTRY_TYPE(self._engine.get_function_address(ENTRY))

    def _load_object(self, _module) -> bytes | None:
        if self._obj_path and self._obj_path.exists():
            return self._obj_path.read_bytes()
        return None

    def _save_object(self, _module, data: bytes) -> None:
        if not self._obj_path:
            return
        try:
            self._obj_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._obj_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(self._obj_path)
        except OSError:
            pass  # a read-only home: the kernels still run, they are just not kept

    def run(self, records: np.ndarray, bufs: np.ndarray) -> int:
        return int(self._entry(records.ctypes.data, records.shape[0], bufs.ctypes.data))


_kernels: dict[HwConfig, Kernels] = {}


def kernels(cfg: HwConfig, cache_dir: Path | None = None) -> Kernels:
    """The kernels of ``cfg``, compiled (or loaded from the disk cache) at first use."""
    k = _kernels.get(cfg)
    if k is None:
        k = _kernels[cfg] = Kernels(cfg, cache_dir or default_cache_dir())
    return k


def kernels_ready(cfg: HwConfig, cache_dir: Path | None = None) -> bool:
    """Whether ``kernels(cfg)`` costs no compilation (in memory, or object code on disk)."""
    if cfg in _kernels:
        return True
    return ((cache_dir or default_cache_dir()) / f"{cache_key(cfg)}.o").exists()


def _host() -> tuple[str, str, str]:
    """``(triple, cpu, LLVM feature string)`` the kernels are generated for: the host's,
    limited to ``$PYVTA_CPU_FEATURES`` where set (``pyvta.host_cpu``)."""
    from pyvta import host_cpu

    triple, cpu, features = host_cpu.host()
    return triple, cpu, host_cpu.flat(features)


def cache_key(cfg: HwConfig) -> str:
    """The name of a config's object code on disk: a hash of the config, the host CPU (at its
    feature level), llvmlite's version and the source of everything the kernels are generated
    from."""
    return _cache_key(cfg, *_host())


@cache
def _cache_key(cfg: HwConfig, triple: str, cpu: str, features: str) -> str:
    import llvmlite

    from pyvta.isa import layout
    from pyvta.sim import native_ir, plan

    sources = b"".join(Path(m.__file__).read_bytes() for m in (native_ir, plan, layout))
    parts = [llvmlite.__version__, triple, cpu, features, cfg.to_json()]
    return hashlib.sha256(sources + "\n".join(parts).encode()).hexdigest()[:32]


class PlanCache:
    """Plans by key, least recently used dropped beyond ``PLAN_CACHE_ENTRIES``."""

    def __init__(self, entries: int = PLAN_CACHE_ENTRIES):
        self.entries = entries
        self._plans: OrderedDict[Hashable, Plan] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], Plan]) -> Plan:
        plan = self._plans.get(key)
        if plan is None:
            plan = build()
            self._plans[key] = plan
            if len(self._plans) > self.entries:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
        return plan


plans = PlanCache()


def execute(plan: Plan, dram: np.ndarray, st: SramState, fresh_state: bool) -> int:
    """Run every record of ``plan`` on ``dram`` and ``st`` in place; returns -1, or the position
    of the record whose instruction failed a check (nothing of it ran)."""
    cfg = st.cfg
    k = kernels(cfg)
    bi, bo = cfg.block_in, cfg.block_out
    wpairs = np.zeros((cfg.wgt_depth, bi * bo), np.int16)
    scratch = np.empty(3 * cfg.uop_depth, np.int64)
    arrays = {
        BUF_DRAM: dram,
        BUF_UOP: st.uop,
        BUF_WGT: st.wgt,
        BUF_INP: st.inp,
        BUF_ACC: st.acc,
        BUF_OUT: st.out,
        BUF_WPAIRS: wpairs,
        BUF_SCRATCH: scratch,
    }
    for a in arrays.values():
        if not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError("the native engine needs C-contiguous, writeable buffers")
    bufs = np.array([arrays[i].ctypes.data for i in range(N_BUFS)], np.int64)
    if not fresh_state:
        prelude = np.zeros((1, REC_WORDS), np.int64)
        prelude[0, :4] = (OP_WGT_PAIRS, 0, 0, cfg.wgt_depth)
        k.run(prelude, bufs)
    if plan.records.shape[0] == 0:
        return -1
    return k.run(plan.records, bufs)
