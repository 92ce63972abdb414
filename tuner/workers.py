"""A small pool of killable worker processes.

Each job is a picklable ``(fn, args)`` run in a worker; the pool reports per job either
``("ok", value)``, ``("error", traceback_text)``, ``("timeout", msg)`` or
``("crash", msg)``. A worker that exceeds the job's timeout is killed, one that dies (segfault,
``os._exit``) is noticed through its sentinel; both are replaced and the pool goes on.
Workers start with the ``spawn`` method (no state inherited from the tuner process). A worker
that has done ``max_jobs`` jobs is retired and replaced: what a job leaves behind in a process
(LLVM's own state of every kernel JIT-compiled there, about 0.4-1 MB a candidate, not freed with
the kernel) does not pile up over a long tuning session.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import time
import traceback
from multiprocessing.connection import wait

# Library thread pools in a worker stay single-threaded: a candidate is timed with the machine's
# cores to itself, and a multi-threaded BLAS call (e.g. a reference check) would leave spinning
# threads that halve a parallel kernel's measured speed. Set before the worker starts, since a
# spawned worker imports the parent's main module (and numpy's OpenBLAS) before any of our code.
_ENV = {
    "OMP_WAIT_POLICY": "passive",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


MAX_JOBS_PER_WORKER = 200
"""Jobs a worker does before it is replaced (a new process: about a second to start, beside
the 1-30 s a candidate's build or run takes)."""


@contextlib.contextmanager
def _child_env():
    """``_ENV`` in ``os.environ`` while a worker process starts (it inherits it), then restored."""
    old = {k: os.environ.get(k) for k in _ENV}
    os.environ.update(_ENV)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _worker_main(conn) -> None:
    for k, v in _ENV.items():
        os.environ.setdefault(k, v)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        fn, args = job
        try:
            out = ("ok", fn(*args))
        except BaseException:  # noqa: BLE001 - any failure is a result to record
            out = ("error", traceback.format_exc(limit=8))
        try:
            conn.send(out)
        except Exception:  # noqa: BLE001 - unpicklable result
            conn.send(("error", traceback.format_exc(limit=4)))


class _Worker:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child,), daemon=True)
        with _child_env():
            self.proc.start()
        child.close()
        self.jobs_done = 0

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.conn.send(None)
        self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2)
        self.conn.close()


class WorkerPool:
    """``n_workers`` processes; ``map(jobs, timeout_s)`` runs ``[(fn, args), ...]`` and yields
    ``(job_position, status, value)`` as jobs finish. ``max_jobs``: a worker's jobs before it
    is replaced by a fresh process (None: never)."""

    def __init__(self, n_workers: int = 1, max_jobs: int | None = MAX_JOBS_PER_WORKER):
        if n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}")
        if max_jobs is not None and max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1 or None, got {max_jobs}")
        self._ctx = mp.get_context("spawn")
        self.n_workers, self.max_jobs = n_workers, max_jobs
        self._workers: list[_Worker] = []

    def _ensure(self) -> None:
        self._workers = [w for w in self._workers if w.proc.is_alive()]
        while len(self._workers) < self.n_workers:
            self._workers.append(_Worker(self._ctx))

    def map(self, jobs, timeout_s: float):
        self._ensure()
        todo = list(enumerate(jobs))[::-1]
        busy: dict[_Worker, tuple[int, float]] = {}
        while todo or busy:
            for w in self._workers:
                if todo and w not in busy:
                    pos, job = todo.pop()
                    try:
                        w.conn.send(job)
                    except Exception as e:  # noqa: BLE001 - e.g. an unpicklable job
                        yield pos, "error", f"could not send the job to a worker: {e!r}"
                        continue
                    busy[w] = (pos, time.monotonic() + timeout_s)
            if not busy:
                continue
            now = time.monotonic()
            wait_s = max(0.0, min(d for _, d in busy.values()) - now)
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], wait_s)
            replaced, retired = [], []
            for w, (pos, deadline) in list(busy.items()):
                if w.conn in ready:
                    try:
                        status, value = w.conn.recv()
                        w.jobs_done += 1
                        if self.max_jobs is not None and w.jobs_done >= self.max_jobs:
                            retired.append(w)
                    except (EOFError, OSError):
                        w.proc.join(1)
                        status, value = "crash", f"worker died (exit code {w.proc.exitcode})"
                        replaced.append(w)
                    del busy[w]
                    yield pos, status, value
                elif w.proc.sentinel in ready:
                    w.proc.join(1)
                    del busy[w]
                    replaced.append(w)
                    yield pos, "crash", f"worker died (exit code {w.proc.exitcode})"
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
                self._workers.append(_Worker(self._ctx))

    def close(self) -> None:
        for w in self._workers:
            w.close()
        self._workers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
