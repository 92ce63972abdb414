"""Measurement fan-out on Dask distributed: many devices (``tcp://`` servers, boards) measure one
tuning run's candidates.

``DaskMeasurer(devices)`` starts one Dask worker per device on this host (in-process, one thread
each), tagged with the resource ``vta-device-<i>`` for ``devices[i]``; with ``scheduler=ADDRESS``
it uses an existing cluster whose workers carry those resources instead (``dask worker ADDRESS
--resources vta-device-0=1``). Candidates are built here, on the host; each built candidate is a
Dask task pinned to one device's resource and runs there (``backend.run``: load the kernel, launch,
read the counters). Dispatch is pull-based: a device gets its next candidate when it has answered
the last one, so a faster device takes a larger share. A device that is lost (its server gone, its
worker dead) has its in-flight candidate recorded as a ``run`` error and takes nothing more; the
others take its share. Every candidate gets exactly one result, reported through the callback to
the tuner's one log writer; ``summary()`` tells each device's work and errors.

Needs the ``distributed`` extra (``pip install pyvta[distributed]``).
"""

from __future__ import annotations

import collections
import contextlib
import time
import traceback
from dataclasses import dataclass

from pyvta.tuner.measure import Measurer, MeasureResult, _build_job
from pyvta.tuner.task import InvalidConfig, WrongAnswer

RESOURCE_PREFIX = "vta-device-"
_BACKENDS: dict = {}  # device name -> its backend, in the worker process that runs it


def resource_name(i: int) -> str:
    """The Dask resource of ``devices[i]``."""
    return f"{RESOURCE_PREFIX}{i}"


@dataclass
class DeviceShare:
    """One device's part of a run: candidates answered, errors among them, busy seconds, and
    why it was dropped (None while it serves)."""

    name: str
    measured: int = 0
    errors: int = 0
    busy_s: float = 0.0
    lost: str | None = None


def _device_lost(exc: BaseException) -> bool:
    from pyvta.driver.ops_tcp import ConnectionLost

    return isinstance(exc, (ConnectionLost, ConnectionError, OSError))


def run_on_device(backend_cls, device: str, device_kwargs: dict, task, config, artifact):
    """The Dask task: ``backend.run`` on ``device`` (its backend, and so its connection, kept in
    the worker between tasks). ``("ok", costs)``, ``(error kind, message)`` or ``("lost", why)``."""
    backend = _BACKENDS.get(device)
    if backend is None:
        backend = _BACKENDS[device] = backend_cls(device, **device_kwargs)
    try:
        return ("ok", [float(c) for c in backend.run(task, config, artifact, 1)])
    except InvalidConfig as e:
        return ("invalid", str(e))
    except WrongAnswer as e:
        return ("wrong_answer", str(e))
    except Exception as e:  # noqa: BLE001 - reported to the host, recorded there
        if _device_lost(e):
            _BACKENDS.pop(device, None)
            return ("lost", f"{type(e).__name__}: {e}")
        return ("run", traceback.format_exc(limit=4))


def close_devices() -> None:
    """Close the devices this worker process opened (run on every worker at the end)."""
    for backend in _BACKENDS.values():
        device = getattr(backend, "_device", None)
        if device is not None:
            device.close()
    _BACKENDS.clear()


class DaskMeasurer(Measurer):
    """Measure on ``devices`` (driver.open names) through Dask (see the module docstring).

    ``device_kwargs`` go to ``driver.open`` (``key_file=``); ``backend_cls(device, **kwargs)``
    builds and runs candidates (default ``tuner.vta.VtaDeviceBackend``); ``builder``: the backend
    that builds on the host (default: one of ``backend_cls``)."""

    def __init__(
        self,
        devices: list[str],
        device_kwargs: dict | None = None,
        scheduler: str | None = None,
        backend_cls=None,
        builder=None,
    ):
        if not devices:
            raise ValueError("DaskMeasurer needs at least one device")
        if backend_cls is None:
            from pyvta.tuner.vta import VtaDeviceBackend

            backend_cls = VtaDeviceBackend
        self.devices, self.device_kwargs = list(devices), dict(device_kwargs or {})
        self.backend_cls = backend_cls
        self.builder = builder or backend_cls(devices[0], **self.device_kwargs)
        self.shares = [DeviceShare(d) for d in self.devices]
        self._cluster = None
        self._client = self._connect(scheduler)

    def _connect(self, scheduler: str | None):
        import logging

        from distributed import Client, Scheduler, SpecCluster, Worker

        if scheduler is not None:
            return Client(scheduler)
        workers = {
            f"device-{i}": {
                "cls": Worker,
                "options": {
                    "nthreads": 1,
                    "protocol": "inproc",
                    "resources": {resource_name(i): 1},
                },
            }
            for i in range(len(self.devices))
        }
        self._cluster = SpecCluster(
            workers=workers,
            scheduler={
                "cls": Scheduler,
                "options": {"protocol": "inproc", "dashboard": False, "dashboard_address": None},
            },
            silence_logs=logging.WARNING,
        )
        return Client(self._cluster)

    # -- measuring ---------------------------------------------------------------------------
    def measure(self, task, configs, callback=None):
        configs = list(configs)
        results: list[MeasureResult | None] = [None] * len(configs)

        def done(pos, res):
            results[pos] = res
            if callback is not None:
                callback(pos, res)

        to_build = collections.deque(range(len(configs)))
        built = collections.deque()  # (pos, artifact, build_s)
        inflight = {}  # future -> (pos, device index, build_s, start)
        busy: set[int] = set()
        while to_build or built or inflight:
            alive = [i for i, s in enumerate(self.shares) if s.lost is None]
            if not alive:
                self._fail_rest(to_build, built, configs, done)
                break
            for i in (i for i in alive if i not in busy):
                if not built:
                    break
                pos, artifact, build_s = built.popleft()
                future = self._client.submit(
                    run_on_device,
                    self.backend_cls,
                    self.devices[i],
                    self.device_kwargs,
                    task,
                    configs[pos],
                    artifact,
                    resources={resource_name(i): 1},
                    pure=False,
                )
                inflight[future] = (pos, i, build_s, time.perf_counter())
                busy.add(i)
            if to_build and len(built) < len(alive):  # build ahead: one waiting per device
                pos = to_build.popleft()
                self._build(task, configs, pos, built, done)
                self._collect([f for f in inflight if f.done()], inflight, busy, done)
            elif inflight:
                from distributed import wait

                finished = wait(list(inflight), return_when="FIRST_COMPLETED").done
                self._collect(finished, inflight, busy, done)
        return results

    def _build(self, task, configs, pos, built, done) -> None:
        try:
            status, value, build_s = _build_job(self.builder, task, configs[pos])
        except Exception:  # noqa: BLE001 - recorded, tuning goes on
            done(pos, MeasureResult(error="build", msg=traceback.format_exc(limit=4)))
            return
        if status == "invalid":
            done(pos, MeasureResult(error="invalid", msg=value, build_s=build_s))
        else:
            built.append((pos, value, build_s))

    def _collect(self, finished, inflight, busy, done) -> None:
        for future in finished:
            pos, i, build_s, start = inflight.pop(future)
            busy.discard(i)
            share = self.shares[i]
            share.busy_s += time.perf_counter() - start
            try:
                status, value = future.result()
            except Exception as e:  # noqa: BLE001 - the worker itself died
                status, value = "lost", f"worker: {type(e).__name__}: {e}"
            share.measured += 1
            if status == "ok":
                done(pos, MeasureResult(costs=tuple(value), build_s=build_s))
                continue
            share.errors += 1
            if status == "lost":
                share.lost = value
                value = f"device {share.name} lost while measuring: {value}"
                status = "run"
            done(pos, MeasureResult(error=status, msg=value, build_s=build_s))

    def _fail_rest(self, to_build, built, configs, done) -> None:
        why = "; ".join(f"{s.name}: {s.lost}" for s in self.shares)
        for pos in [p for p, *_ in built] + list(to_build):
            done(pos, MeasureResult(error="run", msg=f"no device left ({why})"))
        to_build.clear()
        built.clear()

    # -- reporting and closing ---------------------------------------------------------------
    def summary(self) -> str:
        """A table: per device, candidates measured, errors, busy seconds, whether it was lost."""
        rows = [f"{'device':28s} {'measured':>8s} {'errors':>6s} {'busy s':>8s}  state"]
        for s in self.shares:
            state = f"lost: {s.lost[:60]}" if s.lost else "ok"
            rows.append(f"{s.name:28s} {s.measured:8d} {s.errors:6d} {s.busy_s:8.1f}  {state}")
        return "\n".join(rows)

    def close(self) -> None:
        if self._client is None:
            return
        with contextlib.suppress(Exception):  # a lost worker has nothing to close
            self._client.run(close_devices)
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None
