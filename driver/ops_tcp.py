"""A device served by ``pyvta serve`` on another machine (or this one): ``tcp://HOST:PORT``.

``driver.open("tcp://HOST:PORT", key_file=K, config=cfg)`` connects, checks the protocol version
and the server device's HwConfig against ``config``, answers the HMAC challenge with the key and
checks the server's answer, then waits its turn for the device. Each call is one request
(``driver.remote.protocol``). Constants are sent once per session: ``write_const`` sends a
constant's bytes the first time and only its sha256 after that (the server keeps the bytes).
``tls_ca=FILE`` wraps the connection in TLS, checking the server's certificate against that CA.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import socket
import ssl
import time

import numpy as np

from pyvta.driver.device import (
    Device,
    DeviceError,
    RunResult,
    check_alignment,
    check_count,
    host_bytes,
    parameters,
)
from pyvta.driver.remote import protocol as p
from pyvta.driver.stats import Stats
from pyvta.isa import HwConfig

CHUNK_BYTES = 16 << 20  # larger writes and reads go as several requests


class ConnectionLost(DeviceError):
    """The server went away (or the network): the device cannot be used through this object."""


class RemoteDevice(Device):
    """A ``Device`` over the device server's protocol. ``address`` ``HOST:PORT``; ``key`` the
    pre-shared key (bytes) if the server requires one; ``timeout_s`` per request (a launch waits
    ``launch_timeout_s``); ``queue_timeout_s`` for the device when another client holds it."""

    remote = True

    def __init__(
        self,
        address: str,
        key: bytes | None = None,
        config: HwConfig | None = None,
        timeout_s: float = 60.0,
        launch_timeout_s: float = 600.0,
        queue_timeout_s: float = 60.0,
        tls_ca: str | None = None,
    ):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise DeviceError(f"tcp device address {address!r}: give HOST:PORT")
        self.address, self.timeout_s, self.launch_timeout_s = address, timeout_s, launch_timeout_s
        self.name = f"tcp://{address}"
        self._consts: set[str] = set()
        self.last_device_s = 0.0
        self._sock = self._connect(host.strip("[]"), int(port), tls_ca)
        try:
            server_cfg = self._handshake(key, queue_timeout_s)
        except BaseException:
            self._sock.close()
            raise
        if config is not None and config != server_cfg:
            self.close()
            raise DeviceError(
                f"{self.name} serves HwConfig {server_cfg.tag}; this needs {config.tag}"
            )
        super().__init__(server_cfg)

    @classmethod
    def open(cls, variant: str | None = None, key_file: str | None = None, **kwargs) -> Device:
        if not variant:
            raise DeviceError("a tcp device is named tcp://HOST:PORT")
        key = p.read_key_file(key_file) if key_file else kwargs.pop("key", None)
        return cls(variant, key=key, **kwargs)

    @classmethod
    def options(cls, variant: str | None = None) -> frozenset[str]:
        """The constructor's (but the address, the device's name) and ``key_file``."""
        return (parameters(cls.__init__) - {"address"}) | (parameters(cls.open) - {"variant"})

    # -- connection --------------------------------------------------------------------------
    def _connect(self, host: str, port: int, tls_ca: str | None) -> socket.socket:
        try:
            sock = socket.create_connection((host, port), timeout=self.timeout_s)
        except OSError as e:
            raise ConnectionLost(f"cannot connect to {self.name}: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls_ca:
            ctx = ssl.create_default_context(cafile=tls_ca)
            try:
                sock = ctx.wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, OSError) as e:
                sock.close()
                raise DeviceError(f"TLS with {self.name} failed: {e}") from None
        return sock

    def _handshake(self, key: bytes | None, queue_timeout_s: float) -> HwConfig:
        hello = self._recv()
        if hello.get("ok") is False:  # refused before the hello: busy, too many connections
            raise DeviceError(
                f"{self.name} refused the connection: {hello.get('error')}: {hello.get('msg')}"
            )
        if hello.get("op") != "hello" or hello.get("version") != p.VERSION:
            raise DeviceError(
                f"{self.name} speaks protocol {hello.get('version')!r}; this client {p.VERSION}"
            )
        if hello.get("auth"):
            if key is None:
                raise DeviceError(f"{self.name} requires a key (give key_file= / --key-file)")
            nonce, mine = bytes.fromhex(hello["nonce"]), secrets.token_bytes(p.NONCE_BYTES)
            mac = p.key_mac(key, p.AUTH_CLIENT, nonce, mine)
            reply = self._ask({"op": "auth", "client_nonce": mine.hex(), "mac": mac})
            want = p.key_mac(key, p.AUTH_SERVER, mine, nonce)
            if not p.mac_matches(want, reply.get("mac")):
                raise DeviceError(f"{self.name} did not prove it holds the key")
        self._sock.settimeout(queue_timeout_s + self.timeout_s)
        self._check(self._recv(), "waiting for the device")
        self._sock.settimeout(self.timeout_s)
        return HwConfig.from_dict(hello["config"])

    def _recv(self) -> dict:
        header, self._blobs = self._recv_frame()
        return header

    def _recv_frame(self):
        try:
            return p.recv_frame(self._sock)
        except (OSError, ConnectionError) as e:
            raise ConnectionLost(f"{self.name}: connection lost ({e})") from None

    def _check(self, reply: dict, what: str) -> dict:
        if not reply.get("ok") and "fault" in reply:
            raise _fault_error(reply)
        if not reply.get("ok"):
            raise DeviceError(
                f"{self.name} refused {what}: {reply.get('error')}: {reply.get('msg')}"
            )
        return reply

    def _ask(self, header: dict, blobs=(), timeout_s: float | None = None) -> dict:
        if self._sock is None:
            raise ConnectionLost(f"{self.name} is closed")
        try:
            if timeout_s is not None:
                self._sock.settimeout(timeout_s)
            self._sock.sendall(p.encode_frame(header, blobs))
            reply = self._recv()
        except (OSError, ConnectionError) as e:
            raise ConnectionLost(f"{self.name}: connection lost ({e})") from None
        finally:
            if timeout_s is not None and self._sock is not None:
                self._sock.settimeout(self.timeout_s)
        return self._check(reply, header.get("op", "?"))

    # -- the Device interface ----------------------------------------------------------------
    def alloc(self, nbytes: int, align_bytes: int = 64) -> int:
        nbytes, align_bytes = check_count("nbytes", nbytes), check_alignment(align_bytes)
        return self._ask({"op": "alloc", "nbytes": nbytes, "align_bytes": align_bytes})["addr"]

    def write(self, addr: int, data: np.ndarray | bytes) -> None:
        addr, raw = check_count("addr", addr), memoryview(host_bytes(data)).cast("B")
        for at in range(0, max(len(raw), 1), CHUNK_BYTES):  # frames stay under the server's limit
            self._ask({"op": "write", "addr": int(addr) + at}, [raw[at : at + CHUNK_BYTES]])

    def write_const(self, addr: int, data: bytes) -> None:
        """The bytes once per session, their sha256 afterwards (the server keeps them)."""
        raw = _bytes_of(data)
        digest = hashlib.sha256(raw).hexdigest()
        if digest in self._consts:
            try:
                self._ask({"op": "write_cached", "addr": int(addr), "sha256": digest})
                return
            except ConnectionLost:
                raise
            except DeviceError:  # the server's cache was full: send the bytes
                self._consts.discard(digest)
        reply = self._ask({"op": "write", "addr": int(addr), "cache": True}, [raw])
        if reply.get("cached"):
            self._consts.add(digest)

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        addr, nbytes = check_count("addr", addr), check_count("nbytes", nbytes)
        out = np.empty(int(nbytes), np.uint8)
        for at in range(0, max(int(nbytes), 1), CHUNK_BYTES):
            n = min(CHUNK_BYTES, int(nbytes) - at)
            self._ask({"op": "read", "addr": int(addr) + at, "nbytes": n})
            out[at : at + n] = np.frombuffer(self._blobs[0], np.uint8)
        return out

    def launch(self, insn_addr: int, insn_count: int) -> RunResult:
        insn_addr, insn_count = (
            check_count("insn_addr", insn_addr),
            check_count("insn_count", insn_count),
        )
        t0 = time.perf_counter()
        reply = self._ask(
            {"op": "launch", "insn_addr": insn_addr, "insn_count": insn_count},
            timeout_s=self.launch_timeout_s,
        )
        self.last_device_s = time.perf_counter() - t0
        stats = reply.get("stats")
        return RunResult(
            stats=Stats(**stats) if stats else None,
            counters=reply.get("counters", {}),
            wall_s=float(reply.get("wall_s", 0.0)),
        )

    def reset(self) -> None:
        self._ask({"op": "reset"})

    def session_stats(self) -> dict:
        """The server's counts for this session (operations, bytes, device seconds, errors)."""
        return self._ask({"op": "stats"})["session"]

    def measure_cpu(
        self,
        triple: str,
        shared: bytes,
        sig,
        arrays: list[np.ndarray],
        repeats: int,
        number: int = 0,
        min_repeat_ms: float = 20.0,
    ) -> tuple[list[float], int, list[np.ndarray]]:
        """``driver.ops_cpu.CpuDevice.measure_cpu`` on the server's CPU (``pyvta serve --device
        cpu``): the kernel ``sig`` (``runtime.cpu_code.KernelSig``) of ``shared`` timed there on
        ``arrays``; seconds per call of each repeat, calls per repeat, the written arrays."""
        names = ["shared", *(p.name for p in sig.params)]
        blobs = [bytes(shared), *(_bytes_of(np.ascontiguousarray(a)) for a in arrays)]
        header = {
            "op": "measure_cpu",
            "names": names,
            "triple": triple,
            "kernel": sig.to_json(),
            "repeats": int(repeats),
            "number": int(number),
            "min_repeat_us": round(min_repeat_ms * 1e3),
        }
        reply = self._ask(header, blobs, timeout_s=self.launch_timeout_s)
        by_name = {p.name: p for p in sig.params}
        outs = [
            np.frombuffer(b, np.dtype(by_name[n].dtype)).reshape(by_name[n].shape).copy()
            for n, b in zip(reply["written"], self._blobs, strict=True)
        ]
        return [float(c) for c in reply["costs_s"]], int(reply["number"]), outs

    def upload_bitstream(self, files: dict[str, bytes]) -> dict:
        """Send a bitstream folder (``.bit``, ``.hwh``, ``manifest.json``: name -> bytes) for the
        server to keep and program; its answer (sha256, config tag read back)."""
        names = sorted(files)
        return self._ask({"op": "upload_bitstream", "names": names}, [files[n] for n in names])

    def close(self) -> None:
        if self._sock is None:
            return
        with contextlib.suppress(OSError):
            self._sock.sendall(p.encode_frame({"op": "bye"}))
        self._sock.close()
        self._sock = None


def _fault_error(reply: dict) -> Exception:
    """The error a launch that stopped at a bad instruction raises on a local device (the same
    ``DeviceFault`` subclass, so also the simulator's error class), from the server's reply."""
    from pyvta.driver.launch import FAULT_ERRORS, DeviceFault
    from pyvta.isa import launch as protocol
    from pyvta.isa.regmap import Fault

    try:
        kind, index = Fault[str(reply["fault"])], int(reply["index"])
    except (KeyError, ValueError, TypeError):
        return DeviceError(f"the server reported a fault this client cannot read: {reply}")
    report = protocol.FaultReport(kind, index)
    return FAULT_ERRORS.get(kind, DeviceFault)(protocol.Outcome("fault", {}, 0, fault=report))


def _bytes_of(data) -> bytes | memoryview:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    return np.ascontiguousarray(data).view(np.uint8).reshape(-1).data


DEVICE = RemoteDevice
