"""The device server: one ``driver.Device`` served to authenticated clients over TCP (asyncio).

``DeviceServer(device, key, host, port, ssl_context, limits)``: listens on loopback unless told
otherwise and refuses any other address without a key. Per connection: ``hello`` with a fresh
nonce, HMAC challenge-response (``protocol``), then the client waits for the device (one owner at
a time, first come first served, ``limits.queue_timeout_s`` before a "busy" answer); the owner's
session starts and ends with ``device.scrub()`` (nothing of the previous client's DRAM is left,
inside an allocation or not). Before authentication a connection may send one frame of
``protocol.AUTH_FRAME_BYTES`` within ``handshake_timeout_s``; at most ``max_unauthenticated``
wait at once (one more cuts off the oldest), apart from ``max_connections``, which counts key
holders only (so keyless sockets never take their places). Every
request has a deadline (``request_timeout_s``; a launch ``launch_timeout_s``); a client that
stalls mid-frame is cut off at it. Device operations run in one worker thread, so a client that
disconnects mid-launch only loses its answer: the launch finishes, then the next client gets the
device. Frame errors (too large, inconsistent lengths) end the connection; message errors
(malformed JSON, unknown operation, bad fields, a read outside every allocation) are answered
and the session goes on. Sessions are logged (peer, operation counts, errors), never data.

Standard library and numpy only (the board's Python >= 3.10).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ipaddress
import itertools
import logging
import secrets
import threading
from dataclasses import dataclass

from pyvta.driver.remote import protocol as p
from pyvta.driver.remote.session import OpRefused, Session
from pyvta.isa.errors import PyvtaError

LOG = logging.getLogger("pyvta.remote")
TIMEOUTS = (asyncio.TimeoutError, TimeoutError)  # two classes on Python 3.10 (the board's)


@dataclass(frozen=True)
class Limits:
    """Seconds and bytes the server allows: a frame, the handshake, the wait for the device, an
    idle gap between requests, a request (its frame and its work), a launch; constants cached per
    session; connections at once."""

    max_frame_bytes: int = p.MAX_FRAME_BYTES
    handshake_timeout_s: float = 3.0  # TLS, then hello to auth: one round trip with the key
    queue_timeout_s: float = 30.0
    idle_timeout_s: float = 600.0
    request_timeout_s: float = 60.0
    launch_timeout_s: float = 600.0
    const_cache_bytes: int = 128 << 20  # a small board has 512 MiB
    max_connections: int = 64  # authenticated: the owner and those queued for the device
    max_unauthenticated: int = 256  # before auth (~4 kB each); one more cuts off the oldest


def _peer(writer) -> str:
    """``HOST:PORT`` of the other end ("?" once it has gone: a connection reset at once)."""
    peer = writer.get_extra_info("peername")
    return "{}:{}".format(*peer[:2]) if isinstance(peer, tuple) and len(peer) >= 2 else "?"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Closed(Exception):
    """The session ends (the reason is logged where it is raised)."""


class DeviceServer:
    """Serve ``device`` (see the module docstring). ``key``: the pre-shared key (bytes; None only
    on loopback); ``store``: a ``BitstreamStore`` to accept uploads into (None: refused)."""

    def __init__(
        self,
        device,
        key: bytes | None,
        host: str = "127.0.0.1",
        port: int = p.DEFAULT_PORT,
        ssl_context=None,
        limits: Limits = Limits(),
        store=None,
    ):
        if key is None and not is_loopback(host):
            raise p.ProtocolError(
                f"refusing to listen on {host} without a key (give --key-file; without one only"
                " loopback, 127.0.0.1, is served)"
            )
        self.device, self.key, self.host, self.port = device, key, host, port
        self.ssl_context, self.limits, self.store = ssl_context, limits, store
        self._sids = itertools.count(1)
        self._owner = asyncio.Lock()
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="device")
        self._connections = 0
        self._unauthenticated: dict = {}  # task -> (sid, writer), oldest first
        self._tasks: dict = {}  # task -> its writer
        self._server = None
        self.sessions_served = 0

    async def start(self) -> None:
        try:  # refuse a device that cannot erase one client's data before the next
            await self._device_call(self.device.scrub)
        except PyvtaError as e:
            raise p.ProtocolError(
                f"cannot serve {type(self.device).__name__}: {e} (the server erases the device"
                " between clients)"
            ) from None
        self._server = await asyncio.start_server(
            self._connection,
            self.host,
            self.port,
            ssl=self.ssl_context,
            ssl_handshake_timeout=self.limits.handshake_timeout_s if self.ssl_context else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        LOG.info(
            "serving %s (HwConfig %s) on %s:%d%s%s",
            type(self.device).__name__,
            self.device.config.tag,
            self.host,
            self.port,
            ", TLS" if self.ssl_context else "",
            ", key required" if self.key else ", no key (loopback only)",
        )

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        async with self._server:
            await self._server.serve_forever()

    async def stop(self) -> None:
        """Stop listening, close every connection, wait for the device thread."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for writer in self._tasks.values():
            writer.transport.abort()  # its reads and writes end: the session ends by itself
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=5.0)
            for task in late:  # a device call still running (a cancelled connection task is
                task.cancel()  # logged as an error by asyncio's streams on Python 3.11)
            await asyncio.gather(*late, return_exceptions=True)
        self._thread.shutdown(wait=True)

    # -- one connection ----------------------------------------------------------------------
    async def _connection(self, reader, writer) -> None:
        peer = _peer(writer)
        sid = next(self._sids)
        task = asyncio.current_task()
        while len(self._unauthenticated) >= self.limits.max_unauthenticated:
            oldest, (old_sid, old_writer) = next(iter(self._unauthenticated.items()))
            del self._unauthenticated[oldest]
            LOG.warning("session %d: cut off before authentication (a newer one came)", old_sid)
            self._cut_off(old_writer, "too many connections waiting to authenticate")
        self._unauthenticated[task] = (sid, writer)
        self._tasks[task] = writer
        session = Session(sid, peer, self.device, self.limits.const_cache_bytes, self.store)
        counted = False
        try:
            await asyncio.wait_for(self._handshake(reader, writer, session), self._hs_timeout)
            self._unauthenticated.pop(task, None)
            if self._connections >= self.limits.max_connections:
                why = f"{self._connections} clients hold or wait for the device; try again later"
                self._refuse(session, "busy", why)
                await self._send(writer, self._error("busy", why))
                raise _Closed
            self._connections += 1
            counted = True
            await self._own_and_serve(reader, writer, session)
        except _Closed:
            pass
        except p.ProtocolError as e:  # a bad frame before the session began
            self._refuse(session, "bad_request", str(e))
            with contextlib.suppress(ConnectionError, OSError):
                await self._send(writer, self._error("bad_request", str(e)))
        except TIMEOUTS:
            LOG.warning("session %d %s: handshake timed out", sid, peer)
            self._cut_off(writer, f"no authentication within {self._hs_timeout} s")
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            LOG.info("session %d %s: connection lost", sid, peer)
        except Exception:  # noqa: BLE001 - a session never takes the server down
            LOG.exception("session %d %s: internal error", sid, peer)
        finally:
            self._connections -= counted
            self._unauthenticated.pop(task, None)
            self._tasks.pop(task, None)
            writer.close()
            LOG.info("session %d %s: ended %s", sid, peer, session.summary())
            session.close()  # its cached constants go now, not at the next garbage collection

    @property
    def _hs_timeout(self) -> float:
        return self.limits.handshake_timeout_s

    def _cut_off(self, writer, why: str) -> None:
        """End a connection now: a last ``busy`` frame if the socket takes it, no waiting."""
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            writer.write(p.encode_frame(self._error("busy", why)))
        writer.close()

    async def _handshake(self, reader, writer, session) -> None:
        nonce = secrets.token_bytes(p.NONCE_BYTES)
        cfg = self.device.config
        hello = {
            "op": "hello",
            "version": p.VERSION,
            "config": cfg.to_dict(),
            "config_tag": cfg.tag,
            "nonce": nonce.hex(),
            "auth": self.key is not None,
        }
        await self._send(writer, hello)
        if self.key is None:
            return
        try:
            header, _ = await p.read_frame(reader, p.AUTH_FRAME_BYTES, p.AUTH_FRAME_BYTES)
        except p.FrameError as e:
            self._refuse(session, "auth", str(e))
            msg = (
                f"authenticate first: op 'auth' in one frame of at most {p.AUTH_FRAME_BYTES} bytes"
            )
            await self._send(writer, self._error("auth", msg))
            raise _Closed from None
        client_nonce = header.get("client_nonce")
        mac = header.get("mac")
        if (
            header.get("op") != "auth"
            or not isinstance(mac, str)
            or not isinstance(client_nonce, str)
            or len(client_nonce) != 2 * p.NONCE_BYTES
        ):
            op = header.get("op")
            got = repr(op) if isinstance(op, str) else f"a {type(op).__name__}"
            self._refuse(session, "auth", f"authentication required first (got {got[:80]})")
            await self._send(writer, self._error("auth", "authenticate first: op 'auth'"))
            raise _Closed
        try:
            cn = bytes.fromhex(client_nonce)
        except ValueError:
            cn = b""
        want = p.key_mac(self.key, p.AUTH_CLIENT, nonce, cn)
        if not cn or not p.mac_matches(want, mac):
            self._refuse(session, "auth", "wrong key or replayed answer")
            await self._send(writer, self._error("auth", "authentication failed"))
            raise _Closed
        await self._send(writer, {"ok": True, "mac": p.key_mac(self.key, p.AUTH_SERVER, cn, nonce)})
        LOG.info("session %d %s: authenticated", session.sid, session.peer)

    async def _own_and_serve(self, reader, writer, session) -> None:
        try:
            await asyncio.wait_for(self._owner.acquire(), self.limits.queue_timeout_s)
        except TIMEOUTS:
            self._refuse(session, "busy", "device busy")
            await self._send(writer, self._error("busy", "the device is in use by another client"))
            raise _Closed from None
        try:
            await self._device_call(session.scrub)
            await self._send(writer, {"ok": True, "ready": True})
            self.sessions_served += 1
            LOG.info("session %d %s: owns the device", session.sid, session.peer)
            while await self._serve_one(reader, writer, session):
                pass
        finally:
            try:  # the next owner finds nothing of this one's (the start scrubs again)
                await self._device_call(session.scrub)
            except Exception:  # noqa: BLE001 - logged; the next session's start scrubs
                LOG.exception("session %d %s: erasing the device failed", session.sid, session.peer)
            finally:
                self._owner.release()

    async def _serve_one(self, reader, writer, session) -> bool:
        """Answer one request; False when the session ends. Between requests the client may
        idle (``idle_timeout_s``); from a request's first byte, the whole frame must arrive
        within ``request_timeout_s``."""
        try:
            first = await asyncio.wait_for(p.read_exactly(reader, 1), self.limits.idle_timeout_s)
        except asyncio.IncompleteReadError:
            return False
        except TIMEOUTS:
            self._refuse(session, "timeout", "idle")
            await self._send(writer, self._error("timeout", "idle too long"))
            return False
        try:
            header, blobs = await asyncio.wait_for(
                p.read_frame(reader, self.limits.max_frame_bytes, first=first),
                self.limits.request_timeout_s,
            )
            op, fields = p.check_request(header, blobs)
        except asyncio.IncompleteReadError:
            return False
        except TIMEOUTS:
            self._refuse(session, "timeout", "stalled mid-frame")
            await self._send(writer, self._error("timeout", "frame not received in time"))
            return False
        except p.FrameError as e:
            self._refuse(session, "frame", str(e))
            await self._send(writer, self._error("frame", str(e)))
            return False
        except p.ProtocolError as e:
            self._refuse(session, "bad_request", str(e))
            await self._send(writer, self._error("bad_request", str(e)))
            return True
        session.ops[op] += 1
        long_op = op in ("launch", "measure_cpu")  # a kernel's run, timed under emulation too
        timeout = self.limits.launch_timeout_s if long_op else self.limits.request_timeout_s
        try:
            reply, out = await self._device_call(
                session.execute, op, fields, blobs, timeout=timeout
            )
        except OpRefused as e:
            self._refuse(session, e.kind, str(e))
            reply, out = {**self._error(e.kind, str(e)), **e.fields}, []
        except p.ProtocolError as e:
            self._refuse(session, "refused", str(e))
            reply, out = self._error("refused", str(e)), []
        except TIMEOUTS:
            self._refuse(session, "deadline", f"{op} over {timeout} s")
            await self._send(writer, self._error("deadline", f"{op} took over {timeout} s"))
            return False
        except Exception as e:  # noqa: BLE001 - the device refused; the server stays up
            self._refuse(session, "device", f"{op}: {type(e).__name__}")
            reply, out = self._error("device", f"{op}: {type(e).__name__}: {e}"), []
        del blobs
        await self._send(writer, reply, out)
        return op != "bye"

    async def _device_call(self, fn, *args, timeout: float | None = None):
        """``fn(*args)`` in the device thread. On a timeout the device stays owned until the
        call has finished (a thread cannot be interrupted), then the timeout is raised."""
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._thread, fn, *args)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TIMEOUTS:
            await asyncio.wait([fut])
            raise

    # -- helpers -----------------------------------------------------------------------------
    @staticmethod
    def _error(kind: str, msg: str) -> dict:
        return {"ok": False, "error": kind, "msg": msg}

    @staticmethod
    def _refuse(session, kind: str, why: str) -> None:
        session.errors[kind] += 1
        LOG.warning("session %d %s: refused (%s): %s", session.sid, session.peer, kind, why)

    @staticmethod
    async def _send(writer, header: dict, blobs=()) -> None:
        writer.write(p.encode_frame(header, blobs))
        await writer.drain()


class ServerThread:
    """A ``DeviceServer`` on its own event loop in a background thread (tests, benchmarks,
    notebooks): ``with ServerThread(device, key) as s: driver.open(f"tcp://{s.address}", ...)``."""

    def __init__(self, device, key: bytes | None, host: str = "127.0.0.1", port: int = 0, **kw):
        self.server = DeviceServer(device, key, host, port, **kw)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="device-server", daemon=True)
        self._error: BaseException | None = None
        self._stop_lock, self._stopping = threading.Lock(), False

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.server.start())
        except BaseException as e:  # noqa: BLE001 - reported by start()
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self.server.stop())
        self._loop.close()

    @property
    def address(self) -> str:
        return f"{self.server.host}:{self.server.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Stop serving and wait for it; idempotent (from any thread, as often as called)."""
        with self._stop_lock:
            first, self._stopping = not self._stopping, True
        if first and self._thread.is_alive():  # once: a second loop.stop would cut the
            self._loop.call_soon_threadsafe(self._loop.stop)  # server's own stop() short
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
