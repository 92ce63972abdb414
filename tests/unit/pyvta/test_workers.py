"""The worker pool's processes (``pyvta.workers``): what they import from their parent, and
that they end with it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_worker_does_not_run_the_parents_main_module(tmp_path):
    """A user's script that starts workers at its top level, with no ``__main__`` guard, runs
    once: ``multiprocessing``'s spawn would import it again in every worker."""
    script = _script(
        tmp_path,
        """
        import os
        from pyvta.workers import WorkerPool

        print("the script's top level", os.getpid(), flush=True)
        with WorkerPool(2) as pool:
            got = list(pool.map([(os.getpid, ())] * 4, timeout_s=60))
        print("jobs", sorted(status for _, status, _ in got), len({pid for *_, pid in got}))
        """,
    )
    p = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("the script's top level") == 1, p.stdout
    assert "jobs ['ok', 'ok', 'ok', 'ok'] 2" in p.stdout, p.stdout


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead but not reaped, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _worker_left_by(script: Path) -> int:
    """Run ``script``, which prints ``worker PID`` and exits; the worker's process id."""
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split("worker")[1].split()[0])


def _ends_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pid)


def test_a_worker_ends_when_its_parent_dies(tmp_path):
    """A parent killed with its pool open leaves no worker behind: the worker reads the end of
    its pipe and exits."""
    script = _script(
        tmp_path,
        """
        import os
        from pyvta.workers import WorkerPool

        pool = WorkerPool(1)
        (_, status, pid), = pool.map([(os.getpid, ())], timeout_s=60)
        print("worker", pid, flush=True)
        os._exit(0)  # no close, no atexit
        """,
    )
    pid = _worker_left_by(script)
    assert _ends_within(pid, 20), f"worker {pid} outlived its parent"


def test_a_worker_imports_through_its_parents_path(tmp_path):
    """A job's function in a module the parent imports from its script's folder (where Python
    looks first for a script, not the environment's ``PYTHONPATH`` nor the working folder)
    runs in the worker, which is started from another folder."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "user_jobs.py").write_text("def where():\n    return __file__\n")
    script = _script(
        lib,
        """
        import user_jobs
        from pyvta.workers import WorkerPool

        with WorkerPool(1) as pool:
            print(list(pool.map([(user_jobs.where, ())], timeout_s=60)))
        """,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=elsewhere
    )
    assert p.returncode == 0, p.stderr
    assert f"[(0, 'ok', {str(lib / 'user_jobs.py')!r})]" in p.stdout, p.stdout


def test_a_job_defined_in_the_main_script_is_an_error_that_says_why(tmp_path):
    """A worker does not import the parent's main script, so a job's function defined there
    cannot be loaded: the job's result is an error naming the cause, and the pool goes on."""
    script = _script(
        tmp_path,
        """
        import os
        from pyvta.workers import WorkerPool

        def mine():
            return 1

        if __name__ == "__main__":
            with WorkerPool(1) as pool:
                for pos, status, value in pool.map([(mine, ()), (os.getpid, ())], timeout_s=60):
                    print(pos, status, value.splitlines()[0] if status == "error" else "")
        """,
    )
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "0 error the worker could not load the job" in p.stdout, p.stdout
    assert "1 ok" in p.stdout, p.stdout


def test_a_busy_worker_is_killed_when_its_parent_exits(tmp_path):
    """A parent that exits while a worker still runs a job (no close) does not leave it running
    the job out: the workers still alive are killed at the parent's exit."""
    script = _script(
        tmp_path,
        """
        import threading, time
        from pyvta.workers import WorkerPool

        pool = WorkerPool(1)
        busy = threading.Thread(
            target=lambda: list(pool.map([(time.sleep, (60,))], timeout_s=120)), daemon=True
        )
        busy.start()
        while not pool._workers:
            time.sleep(0.01)
        time.sleep(0.5)  # the job sent
        print("worker", pool._workers[0].proc.pid, flush=True)
        """,
    )
    pid = _worker_left_by(script)
    assert _ends_within(pid, 10), f"worker {pid} still runs its job after its parent exited"
