"""The CPU's measurement ``Backend``: a template's kernel built with the compiler's llvmlite
backend, run on seeded inputs in fresh memory, timed (``CpuBackend``) and checked against the
template's reference (``check_output``); the CPU a record names as measured on, and how near
another is (``ON_CPU``: every CPU template's). The templates themselves are ``tuner.cpu``.
"""

from __future__ import annotations

import functools
import mmap
import os
import time

import numpy as np

from pyvta.tuner.measure import Backend
from pyvta.tuner.task import Task, WrongAnswer

TIMERS = ("wall", "thread")  # CpuBackend's clocks
CACHE_STATES = ("warm", "cold")  # CpuBackend's caches before each call
DEFAULT_EVICT_BYTES = 64 << 20  # cold: bytes streamed through the caches before each call
COLD_MAX_CALLS = 10  # cold: calls per repeat at most (each one after its own eviction)


class CpuBackend(Backend):
    """Build with ``compiler.build`` (target ``llvm``) into a kernel cache in ``cache_dir``
    (by default the cache root's ``tune`` folder, ``pyvta.cache``: kept apart from the ``llvm``
    folder's compiled models, shared by tuning sessions, keyed by loop IR like it), run on random inputs and time it.

    With ``check`` the output is compared with the template's ``reference_fn`` (if any); a
    mismatch is recorded as ``wrong_answer``. One repeat calls the kernel ``number`` times, with
    ``number`` chosen so that a repeat lasts about ``min_repeat_ms``; its cost is the mean
    seconds per call.

    ``timer``: ``"wall"`` (default) times the kernel as it runs, on ``num_threads`` threads, by
    the wall clock. ``"thread"`` builds it for one thread (its ``parallel`` loops run serially
    in the calling thread) and times it by the calling thread's CPU time
    (``time.thread_time``): on a machine shared with other work the wall clock also counts the
    time the thread waits for a core (C12 on 2 cores at load 13: repeats of one config from 2.3
    to 72 ms), the thread's CPU time does not, so the ranking of configs survives the load.
    Contention the clock still sees (caches and memory bandwidth shared with the other work, a
    busy SMT sibling) only adds time: take the min of the repeats (``MinOfRepeats``). It ranks
    the one-threaded kernel: what a config does to the split of ``parallel`` loops over threads
    is not measured.

    ``cache``: ``"warm"`` (default) calls the kernel back to back, so its weights stay in the
    caches from one call to the next. ``"cold"`` streams ``evict_bytes`` through the caches
    before each call (not timed) and times that call alone, right after the eviction (no
    warm-up call between them: the kernel finds its weights in memory). Meant to model a
    network running a layer: between
    two of its launches the other layers pass their weights and activations through the
    caches. ResNet-18's C9 with Winograd, its untuned schedule (4 MB of transformed weights)
    against a tuned one (9 MB), on 2 threads: the tuned one ran 1.49x faster alone and warm,
    0.91x inside the network, and measured side by side under load 1.24x warm, 0.98x with 64 MB
    evicted before each call, 0.88x with 512 MB. ``tuner.cpu_network`` measures a network's
    layers cold, ``evict_bytes`` the network's weights (:func:`network_evict_bytes`)."""

    def __init__(
        self,
        cache_dir: str | None = None,
        num_threads: int | None = None,
        min_repeat_ms: float = 20.0,
        check: bool = True,
        timer: str = "wall",
        cache: str = "warm",
        evict_bytes: int = DEFAULT_EVICT_BYTES,
    ):
        if timer not in TIMERS:
            raise ValueError(f"timer {timer!r} is not one of {TIMERS}")
        if cache not in CACHE_STATES:
            raise ValueError(f"cache {cache!r} is not one of {CACHE_STATES}")
        if evict_bytes < 1:
            raise ValueError(f"evict_bytes must be >= 1, got {evict_bytes}")
        self.cache, self.evict_bytes = cache, int(evict_bytes)
        if timer == "thread" and num_threads not in (None, 1):
            raise ValueError(
                f"timer 'thread' times one thread; num_threads must be 1 (or None), got"
                f" {num_threads}"
            )
        self.check, self.timer = check, timer
        if cache_dir is None:
            from pyvta import cache

            cache_dir = str(cache.folder("tune"))
        self.cache_dir = cache_dir
        self.num_threads = 1 if timer == "thread" else num_threads or os.cpu_count() or 1
        self.min_repeat_ms = min_repeat_ms
        self._refs: dict = {}  # (task, input shapes) -> reference output (inputs are seeded)

    def describe(self) -> str:
        """How a cost is measured (for benchmark output)."""
        if self.timer == "thread":
            how = "one thread, timed by its CPU time (time.thread_time)"
        else:
            how = f"{self.num_threads} threads, wall clock"
        if self.cache == "cold":
            return (
                f"{how}, each call after {self.evict_bytes / 2**20:g} MiB streamed through the"
                f" caches, up to {COLD_MAX_CALLS} calls per repeat of >= {self.min_repeat_ms:g} ms"
            )
        return f"{how}, repeats of >= {self.min_repeat_ms:g} ms"

    def _func_key(self, task, config) -> str:
        from pyvta.compiler.backend.llvm.cache import func_key

        return func_key(f"tune {task.key} {task.space.signature()} {config.index}")

    def _module(self, task, config, key: str | None = None):
        from pyvta.compiler import build

        sch, args = task.instantiate(config)
        mod = build(sch, args, cache_dir=self.cache_dir, num_threads=self.num_threads, func_key=key)
        return mod, args

    def build(self, task, config):
        key = self._func_key(task, config)
        self._module(task, config, key)
        # the optimised kernel is in the disk cache, keyed by its loop IR, and the lowered
        # function under ``key``: the run loads both without lowering again
        return key

    def run(self, task, config, artifact, repeats):
        from pyvta.compiler.backend import get_backend

        mod = None
        if artifact is not None:
            llvm = get_backend("llvm")
            mod = llvm.cached(artifact, cache_dir=self.cache_dir, num_threads=self.num_threads)
        if mod is None:
            mod, args = self._module(task, config)
        else:
            args = task.instantiate(config)[1]
        clock = time.thread_time if self.timer == "thread" else time.perf_counter
        rng = np.random.default_rng(0)
        values = [rng.standard_normal(t.shape).astype(t.dtype) for t in args]
        values = task.template.inputs(values, task.args)
        arrays = fresh_copies(values)
        time_ms = mod.time_ms if self.cache == "warm" else self._cold_time_ms(mod)
        est_ms = time_ms(*arrays, number=1, repeat=1, clock=clock)
        number = max(1, min(10_000, int(self.min_repeat_ms / max(est_ms, 1e-4))))
        if self.cache == "cold":
            number = min(number, COLD_MAX_CALLS)
        out = []
        for i in range(repeats):
            if i:  # each repeat on memory of its own: the median is over placements too
                arrays = fresh_copies(values)
            out.append(time_ms(*arrays, number=number, repeat=1, clock=clock) * 1e-3)
        if self.check:  # after the timing: the reference uses the BLAS
            check_output(self._refs, task, arrays)
        return out

    def _cold_time_ms(self, mod):
        """A ``time_ms`` that streams the caches before each call and times that call alone
        (``cache="cold"``): no warm-up call between the eviction and the timed one."""
        buf = evict_buffer(self.evict_bytes)

        def time_ms(*arrays, number: int, repeat: int, clock) -> float:
            call = mod.bind(*arrays)  # checked once, outside the clock
            best = float("inf")
            for _ in range(repeat):
                total = 0.0
                for _ in range(number):
                    evict(buf)
                    t0 = clock()
                    call()
                    total += clock() - t0
                best = min(best, total / number)
            return best * 1e3

        return time_ms


@functools.lru_cache(maxsize=1)
def evict_buffer(nbytes: int) -> np.ndarray:
    """The eviction buffer of this process (one size at a time: a measurer's)."""
    return np.zeros(max(1, nbytes // 8), np.float64)


def evict(buf: np.ndarray) -> None:
    """Stream ``buf`` through the caches (read and written back: every line of it is loaded,
    and what it displaces goes back to memory as a network's other layers would send it)."""
    np.add(buf, 1.0, out=buf)


def network_evict_bytes(weight_bytes: int) -> int:
    """What a network's layer sees pass through the caches between two of its launches: the
    network's weights (``weight_bytes``), at least ``DEFAULT_EVICT_BYTES`` (the activations
    and the rest pass too)."""
    return max(DEFAULT_EVICT_BYTES, int(weight_bytes))


# a measured kernel's output may be this far (relative to the reference's largest magnitude)
# from the template's reference before it is a wrong answer
MAX_RELATIVE_ERROR = 1e-4


def check_output(refs: dict, task: Task, arrays: list[np.ndarray]) -> None:
    """Raise ``WrongAnswer`` when ``arrays``' last (a kernel's output, after it ran on the
    others) is further than ``MAX_RELATIVE_ERROR`` from ``task``'s template's reference (none:
    nothing to check). ``refs`` caches the reference per (task, input shapes): inputs are seeded."""
    ref_fn = task.template.reference_fn
    if ref_fn is None:
        return
    key = (task.key, tuple(a.shape for a in arrays))
    want = refs.get(key)
    if want is None:
        want = refs[key] = ref_fn(arrays, *task.args)
    err = float(np.max(np.abs(arrays[-1] - want)) / (np.max(np.abs(want)) + 1e-30))
    if not err < MAX_RELATIVE_ERROR:
        raise WrongAnswer(
            f"relative error {err:.3g} against the reference (max {MAX_RELATIVE_ERROR:g})"
        )


def fresh_copies(arrays) -> list[np.ndarray]:
    """Copies of ``arrays`` in freshly mapped memory (page-aligned, so 64-byte aligned as TVM's
    NDArrays are). A kernel's speed depends on where its arrays lie: one tuned GEMM 512^3 ran
    at 484-523 GFLOP/s over 12 placements of the same data (another at 508-519), and a
    measurement on one placement kept for a whole run rewarded configs that were lucky in it.
    ``CpuBackend`` gives each repeat a new placement."""
    out = []
    for a in arrays:
        buf = mmap.mmap(-1, max(a.nbytes, 1))
        b = np.frombuffer(buf, np.uint8, a.nbytes).view(a.dtype).reshape(a.shape)
        b[...] = a
        out.append(b)
    return out


def cpu_target_info() -> str:
    """One line naming the host CPU target (for benchmark output)."""
    from pyvta.compiler.backend.llvm import CpuTarget

    t = CpuTarget.host()
    return (
        f"{t.description} vector_bits={t.vector_bits} threads={t.num_threads}"
        f" ({time.strftime('%F')})"
    )


def cpu_measured_on() -> str:
    """The CPU a measurement runs on, as a tuning record names it (``CpuTarget.description``:
    ``ARCH LEVEL CPU``, the feature level as ``PYVTA_CPU_FEATURES`` leaves it)."""
    from pyvta.compiler.backend.llvm import CpuTarget

    return CpuTarget.host().description


def cpu_nearness(machine: str) -> float:
    """How near a record's CPU (``cpu_measured_on`` of its host) is to this one: the same
    feature level and CPU 4, the same level 3, the same vector width 2, the same arch 1."""
    from pyvta.compiler.backend.llvm.target import X86_LEVELS

    here, there = cpu_measured_on().split(), machine.split()
    if len(there) < 2 or there[0] != here[0]:
        return 0.0
    if there[1] == here[1]:
        return 4.0 if there[2:] == here[2:] else 3.0
    bits = [X86_LEVELS[lv].vector_bits if lv in X86_LEVELS else 0 for lv in (here[1], there[1])]
    return 2.0 if bits[0] == bits[1] else 1.0


# the keyword arguments of every CPU template's ``Template``: its records name the CPU they were
# measured on, and read by how near that CPU is to this one (``tuner.log.closest_records``); its
# XGB tuner ranks with the trees alone: on ResNet-18's C1, C2, C8 and C10 (one thread, 64
# trials, 5 seeds) a linear trend of weight 3 (``tuner.tuners.TREND``, fitted on the first
# batch's 8 points) sent the second batch to poor extremes, and the trials to random search's
# 64-trial best were 1.67x / 0.46x / 1.85x / 1.32x fewer than random's; the trees alone 5.00x /
# 1.50x / 6.78x / 1.94x; over C1-C12 the geometric mean went from 2.50x to 3.97x
# (``benchmarks/tune_search.py --task cpu --trend 0``)
ON_CPU = {"measured_on_fn": cpu_measured_on, "nearness_fn": cpu_nearness, "trend": 0.0}
