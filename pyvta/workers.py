"""A small pool of killable worker processes: the tuner's builds and timings of candidates
(``tuner.measure``) and a network's kernels built on more than one core
(``compiler.targets.cpu.builds``).

Each job is a picklable ``(fn, args)`` run in a worker; the pool reports per job either
``("ok", value)``, ``("error", traceback_text)``, ``("timeout", msg)`` or
``("crash", msg)``. A worker that exceeds the job's timeout is killed, one that dies (segfault,
``os._exit``) is noticed when its end of the pipe closes; both are replaced and the pool goes
on. A worker is a fresh interpreter (``python -c``, this process's ``sys.path``) that imports
this module and nothing else of its parent: not the parent's main module, as
``multiprocessing``'s ``spawn`` does, so a user's script that compiles a network at its top
level, without an ``if __name__ == "__main__"`` guard, is not run again in each worker. A
worker that has done ``max_jobs`` jobs is retired and replaced: what a job leaves behind in a
process (LLVM's own state of every kernel JIT-compiled there, about 0.4-1 MB a candidate, not
freed with the kernel) does not pile up over a long tuning session. A worker whose parent dies
reads the end of its pipe and exits; those still alive when the parent's interpreter exits are
killed then (what ``multiprocessing`` did for its daemonic workers).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import os
import subprocess
import sys
import time
import traceback
import weakref
from multiprocessing.connection import Connection, wait

# Library thread pools in a worker stay single-threaded: a candidate is timed with the machine's
# cores to itself, and a multi-threaded BLAS call (e.g. a reference check) would leave spinning
# threads that halve a parallel kernel's measured speed. Set in the worker's environment when it
# starts, before numpy (OpenBLAS) is imported there.
_ENV = {
    "OMP_WAIT_POLICY": "passive",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


WORKERS_ENV = "PYVTA_BUILD_WORKERS"
"""Environment variable: the most worker processes compile work starts (a network's missing
kernels, ``compiler.targets.cpu.builds``; the accelerator's default layer configs,
``compiler.backend.vta.default``); default: one per CPU this process may run on; 0 or 1: none,
the work is done in the process."""


def workers_for(jobs: int, least: int) -> int:
    """Worker processes for ``jobs`` independent jobs: 0 (do them in this process) below
    ``least`` jobs, on one CPU, inside a daemonic ``multiprocessing`` worker (someone's process
    pool, whose cores are spoken for) or where ``WORKERS_ENV`` says at most 1."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    most = os.environ.get(WORKERS_ENV, "").strip()
    if most:
        try:
            cpus = min(cpus or 1, int(most))
        except ValueError:
            raise ValueError(f"${WORKERS_ENV} must be a whole number, got {most!r}") from None
    n = min(cpus or 1, jobs)
    if jobs < least or n < 2 or mp.current_process().daemon:
        return 0
    return n


def in_workers(jobs: list, least: int, timeout_s: float, workers: int | None = None) -> int:
    """Run ``jobs`` (``[(fn, args), ...]``, each leaving its result where the caller finds it,
    e.g. a disk cache) in ``workers`` processes (default :func:`workers_for`'s rule with
    ``least``), their results not sent back: a job that failed is the caller's to do again.
    Returns the workers started (0: none, nothing run)."""
    n = min(workers_for(len(jobs), least) if workers is None else workers, len(jobs))
    if n < 1:
        return 0
    with WorkerPool(n, max_jobs=None) as pool:
        for _ in pool.map(jobs, timeout_s):
            pass
    return n


MAX_JOBS_PER_WORKER = 200
"""Jobs a worker does before it is replaced (a fresh interpreter; its start is small beside
the 1-30 s a candidate's build or run takes)."""


_BOOT = (
    "import sys; sys.path[:] = {path!r}; "
    "from pyvta.workers import _worker_main; _worker_main({jobs}, {results})"
)
"""A worker's program: this process's import path, then the loop of ``_worker_main`` on the
two pipes' descriptors it inherits (jobs in, results out)."""


_UNPICKLABLE = (
    "the worker could not load the job: its function, or a class of its arguments, must be"
    " importable by name in a fresh interpreter (defined in a module, not in the main script"
    " or inside a function)\n"
)


def _worker_main(jobs_fd: int, results_fd: int) -> None:
    jobs = Connection(jobs_fd, writable=False)
    results = Connection(results_fd, readable=False)
    while True:
        try:
            job = jobs.recv()
        except EOFError:
            return  # the pool closed its end (or its process ended)
        except Exception:  # noqa: BLE001 - a job this process cannot unpickle
            results.send(("error", _UNPICKLABLE + traceback.format_exc(limit=2)))
            continue
        if job is None:
            return
        fn, args = job
        try:
            out = ("ok", fn(*args))
        except BaseException:  # noqa: BLE001 - any failure is a result to record
            out = ("error", traceback.format_exc(limit=8))
        try:
            results.send(out)
        except (BrokenPipeError, ConnectionResetError):
            return  # the pool is gone: nobody to tell
        except Exception:  # noqa: BLE001 - unpicklable result
            results.send(("error", traceback.format_exc(limit=4)))


_LIVE: weakref.WeakSet = weakref.WeakSet()  # workers not yet closed or killed


@atexit.register
def _kill_live_workers() -> None:
    for w in list(_LIVE):
        w.kill()


class _Worker:
    def __init__(self):
        jobs_r, jobs_w = os.pipe()
        results_r, results_w = os.pipe()
        boot = _BOOT.format(path=list(sys.path), jobs=jobs_r, results=results_w)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", boot],
                pass_fds=(jobs_r, results_w),
                env={**os.environ, **_ENV},
            )
        except BaseException:
            for fd in (jobs_r, jobs_w, results_r, results_w):
                os.close(fd)
            raise
        os.close(jobs_r)  # the worker's ends: a worker that dies closes the results pipe
        os.close(results_w)
        self.jobs = Connection(jobs_w, readable=False)
        self.conn = Connection(results_r, writable=False)  # what the pool waits on
        self.jobs_done = 0
        _LIVE.add(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_code(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(1)
        return self.proc.returncode

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._close_pipes()

    def stop(self) -> None:
        """Ask the worker to end (it finishes its job first); ``close`` waits for it."""
        with contextlib.suppress(BrokenPipeError, OSError):
            self.jobs.send(None)

    def close(self) -> None:
        self.stop()
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(2)
        self._close_pipes()

    def _close_pipes(self) -> None:
        self.jobs.close()
        self.conn.close()
        _LIVE.discard(self)


class WorkerPool:
    """``n_workers`` processes; ``map(jobs, timeout_s)`` runs ``[(fn, args), ...]`` and yields
    ``(job_position, status, value)`` as jobs finish. ``max_jobs``: a worker's jobs before it
    is replaced by a fresh process (None: never)."""

    def __init__(self, n_workers: int = 1, max_jobs: int | None = MAX_JOBS_PER_WORKER):
        if n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}")
        if max_jobs is not None and max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1 or None, got {max_jobs}")
        self.n_workers, self.max_jobs = n_workers, max_jobs
        self._workers: list[_Worker] = []

    def _ensure(self) -> None:
        self._workers = [w for w in self._workers if w.alive()]
        while len(self._workers) < self.n_workers:
            self._workers.append(_Worker())

    def map(self, jobs, timeout_s: float):
        self._ensure()
        todo = list(enumerate(jobs))[::-1]
        busy: dict[_Worker, tuple[int, float]] = {}
        while todo or busy:
            for w in self._workers:
                if todo and w not in busy:
                    pos, job = todo.pop()
                    try:
                        w.jobs.send(job)
                    except Exception as e:  # noqa: BLE001 - e.g. an unpicklable job
                        yield pos, "error", f"could not send the job to a worker: {e!r}"
                        continue
                    busy[w] = (pos, time.monotonic() + timeout_s)
            if not busy:
                continue
            now = time.monotonic()
            wait_s = max(0.0, min(d for _, d in busy.values()) - now)
            ready = wait([w.conn for w in busy], wait_s)
            replaced, retired = [], []
            for w, (pos, deadline) in list(busy.items()):
                if w.conn in ready:
                    try:
                        status, value = w.conn.recv()
                        w.jobs_done += 1
                        if self.max_jobs is not None and w.jobs_done >= self.max_jobs:
                            retired.append(w)
                    except (EOFError, OSError):
                        status, value = "crash", f"worker died (exit code {w.exit_code()})"
                        replaced.append(w)
                    del busy[w]
                    yield pos, status, value
                elif time.monotonic() >= deadline:
                    del busy[w]
                    replaced.append(w)
                    yield pos, "timeout", f"no result within {timeout_s:g} s; worker killed"
            for w in replaced:
                w.kill()
            for w in retired:
                w.close()  # idle: it has just sent its result
            for w in replaced + retired:
                self._workers.remove(w)
                self._workers.append(_Worker())

    def close(self) -> None:
        for w in self._workers:  # every worker told first: they end side by side
            w.stop()
        for w in self._workers:
            w.close()
        self._workers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
