"""Hostile clients against the device server (driver.remote), fast: each test plays one attack of
issue 39 on 127.0.0.1 and checks the server's promise (docs/remote.md) still holds: no client
reads another's bytes; before authentication a connection costs a few hundred bytes and a short
deadline, and cannot lock key holders out; memory of ended sessions goes when they end; every
message error is answered and the session goes on; a stalled frame is cut off at the request
deadline. The long run with RSS and latency figures is benchmarks/remote_fuzz.py."""

import gc
import json
import logging
import shutil
import socket
import struct
import time

import numpy as np
import psutil
import pytest

from pyvta import driver
from pyvta.driver import DeviceError, SimDevice
from pyvta.driver.remote import protocol as p
from pyvta.driver.remote.server import Limits, ServerThread
from pyvta.isa import HwConfig
from pyvta.testing.remote import (
    KEY,
    ask,
    auth_frame,
    closed,
    raw_connect,
    raw_session,
    self_signed_cert,
)

SEED = 39
FAST = Limits(request_timeout_s=0.5, queue_timeout_s=0.3, max_frame_bytes=1 << 20)


@pytest.fixture
def server():
    with ServerThread(SimDevice(HwConfig(), dram_bytes=1 << 24), KEY, limits=FAST) as s:
        yield s


def _open(server, **kw):
    return driver.open(f"tcp://{server.address}", key=KEY, **kw)


def _assert_serves(server):
    with _open(server) as dev:
        a = dev.alloc(64)
        dev.write(a, np.arange(64, dtype=np.uint8))
        assert np.array_equal(dev.read(a, 64), np.arange(64, dtype=np.uint8))


def _frame(head: bytes, blobs: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(head) + len(blobs), len(head)) + head + blobs


# -- 1. isolation -----------------------------------------------------------------------------
@pytest.mark.parametrize("goodbye", [True, False], ids=["bye", "dropped"])
def test_the_next_client_reads_zeros_not_the_previous_clients_bytes(server, goodbye):
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    secret = rng.integers(1, 256, 1 << 16, dtype=np.uint8)
    with _open(server) as a:
        first = a.alloc(32)
        a.write(first, secret[:32])
        big = a.alloc(secret.size)
        a.write(big, secret)
        if not goodbye:
            a._sock.close()  # gone without a word
            a._sock = None
    with _open(server) as b:
        assert b.alloc(32) == first  # the same addresses are handed out again ...
        again = b.alloc(secret.size)
        assert again == big
        assert not b.read(first, 32).any()  # ... zeroed
        assert not b.read(again, secret.size).any()


def test_bytes_a_client_left_outside_its_allocations_are_erased_too():
    """A launch may store anywhere in DRAM: the server erases all of it between owners."""
    dev = SimDevice(HwConfig(), dram_bytes=1 << 24)
    with ServerThread(dev, KEY, limits=FAST) as s:
        with _open(s) as a:
            a.alloc(64)
            dev.dram.data[1 << 23 : (1 << 23) + 64] = 0x5A  # as a STORE outside them would
        with _open(s) as b:
            addr = b.alloc(1 << 23)
            at = b.alloc(64)
            assert at >= 1 << 23 and not b.read(at, 64).any() and not b.read(addr, 64).any()
        assert not dev.dram.data.any()  # erased when b ended too


# -- 2. memory before authentication ----------------------------------------------------------
def test_a_large_frame_before_auth_is_refused_at_its_length_words(server):
    """Lengths of a 600 KiB auth frame (under the 1 MiB frame limit): refused before any body
    byte is read, answered, closed."""
    sock, _ = raw_connect(server.address)
    sock.sendall(struct.pack(">II", 600 << 10, 100))
    reply, _ = p.recv_frame(sock)
    assert reply["error"] == "auth" and f"at most {p.AUTH_FRAME_BYTES} bytes" in reply["msg"]
    assert closed(sock)
    _assert_serves(server)


def test_a_large_header_after_auth_is_refused_before_it_is_parsed(server):
    sock = raw_session(server.address)
    nested = b"[" * 40_000 + b"]" * 40_000  # 80 KB of nesting: over the 64 KiB header cap
    sock.sendall(_frame(nested))
    reply, _ = p.recv_frame(sock)
    assert reply["error"] == "frame" and "frame header of 80000 bytes exceeds" in reply["msg"]
    assert closed(sock)
    _assert_serves(server)


# -- 3. memory of ended sessions --------------------------------------------------------------
def test_a_session_ended_without_bye_frees_its_memory_without_a_gc_pass():
    """Three sessions each cache 120 MiB of constants and vanish without ``bye``; with the
    garbage collector off, the server process holds no more than one session's worth after."""
    limits = Limits(max_frame_bytes=64 << 20, const_cache_bytes=128 << 20)
    const_bytes = 40 << 20
    with ServerThread(SimDevice(HwConfig(), dram_bytes=1 << 28), KEY, limits=limits) as s:
        _assert_serves(s)
        gc.collect()
        gc.disable()
        try:
            before = psutil.Process().memory_info().rss
            for session in range(3):
                dev = _open(s)
                addr = dev.alloc(const_bytes)
                for k in range(3):
                    data = np.full(const_bytes, 16 * session + k + 1, np.uint8)
                    dev.write_const(addr, data.data)
                    del data
                assert dev.session_stats()["cached_consts"] == 3
                dev._sock.close()  # no bye
                dev._sock = None
                del dev
                _assert_serves(s)  # the next session has begun: the last one has ended
            grown = psutil.Process().memory_info().rss - before
        finally:
            gc.enable()
    print(f"server + client RSS grew {grown / 2**20:.0f} MiB over 3 sessions of 360 MiB sent")
    assert grown < 100 << 20


# -- 4. message errors after authentication ---------------------------------------------------
@pytest.mark.parametrize(
    "head, says",
    [
        (b'{"op": []}', "unknown operation []"),
        (b'{"op": {}}', "unknown operation {}"),
        (b'{"op": "alloc", "nbytes": ' + b"9" * 5000 + b"}", "frame header refused"),
        (b'{"op": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "nests too deeply"),
        (b'{"op": "read", "addr": 1e999, "nbytes": 1}', "field 'addr' must be a int"),
        (b'{"op": "alloc", "blobs": [' + b"9" * 30 + b"]}", "does not match its header"),
    ],
    ids=["list-op", "dict-op", "5000-digit-int", "30k-nesting", "infinity", "huge-blob"],
)
def test_every_message_error_is_answered_and_the_session_goes_on(server, head, says, caplog):
    sock = raw_session(server.address)
    sock.sendall(_frame(head))
    reply, _ = p.recv_frame(sock)
    assert reply["ok"] is False and reply["error"] == "bad_request", reply
    assert says in reply["msg"], reply["msg"]
    reply, _ = ask(sock, {"op": "alloc", "nbytes": 64, "align_bytes": 64})
    assert reply["ok"] and reply["addr"] > 0  # the session goes on
    sock.close()
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]


# -- 5. a MAC that is no hex string -----------------------------------------------------------
@pytest.mark.parametrize("mac", ["é" * 64, "\udc80" * 64, 12345, None, ["a"]])
def test_a_mac_of_any_json_value_is_an_auth_error_not_a_crash(server, mac, caplog):
    sock, hello = raw_connect(server.address)
    head = json.dumps({"op": "auth", "client_nonce": "00" * 32, "mac": mac}, ensure_ascii=False)
    sock.sendall(_frame(head.encode("utf-8", "surrogatepass")))
    reply, _ = p.recv_frame(sock)
    assert reply["error"] in ("auth", "bad_request") and closed(sock), reply
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    _assert_serves(server)


def test_mac_matches_takes_any_value():
    want = p.key_mac(KEY, p.AUTH_CLIENT, b"n")
    assert p.mac_matches(want, want) and not p.mac_matches(want, want.upper())
    assert not any(p.mac_matches(want, v) for v in ("é" * 64, None, 3, [want], want[:-1]))


# -- 6. connection slots ----------------------------------------------------------------------
def test_idle_sockets_without_a_key_cannot_lock_key_holders_out():
    """64 connections that never authenticate (the connection limit, which counts key holders
    only): a key holder still gets the device; past 16 waiting, the oldest are cut off with a
    'busy' frame."""
    limits = Limits(request_timeout_s=0.5, max_connections=64, max_unauthenticated=16)
    with ServerThread(SimDevice(HwConfig(), dram_bytes=1 << 24), KEY, limits=limits) as s:
        idle = [raw_connect(s.address)[0] for _ in range(64)]
        try:
            _assert_serves(s)
            cut = 0
            for sock in idle[:48]:
                sock.settimeout(2)
                try:
                    reply, _ = p.recv_frame(sock)
                    cut += reply.get("error") == "busy"
                except (ConnectionError, OSError):
                    cut += 1
            assert cut == 48
        finally:
            for sock in idle:
                sock.close()


def _until_no_connections(s, limit_s: float = 10.0) -> None:
    """Wait until the server has closed every connection (the one slot is free again)."""
    t0 = time.monotonic()
    while s.server._connections and time.monotonic() - t0 < limit_s:
        time.sleep(0.01)


def test_a_refused_connection_says_busy_to_the_client():
    limits = Limits(max_connections=1, queue_timeout_s=0.3)
    busy = "busy: 1 clients hold or wait for the device; try again later"
    device = SimDevice(HwConfig(), dram_bytes=1 << 24)
    with (
        ServerThread(device, KEY, limits=limits) as s,
        _open(s),
        pytest.raises(DeviceError, match=busy),
    ):
        _open(s)


def test_a_burst_of_connect_and_reset_leaves_no_unhandled_error(caplog):
    limits = Limits(max_connections=1, max_unauthenticated=2)
    with ServerThread(SimDevice(HwConfig(), dram_bytes=1 << 24), KEY, limits=limits) as s:
        host, _, port = s.address.rpartition(":")
        with _open(s):  # the one slot is taken: every other connection is refused
            for _ in range(60):
                sock = socket.create_connection((host, int(port)))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()  # an RST at once
        _until_no_connections(s)
        _assert_serves(s)
    bad = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not bad, bad[:3]


# -- 7. a stall inside the length words -------------------------------------------------------
def test_a_stall_inside_the_length_words_is_cut_off_at_the_request_deadline(server):
    sock = raw_session(server.address)
    sock.settimeout(5)  # the idle timeout is 600 s; the request deadline 0.5 s
    sock.sendall(b"\x00\x00\x00")  # 3 of the 8 length bytes, then nothing
    reply, _ = p.recv_frame(sock)
    assert reply["error"] == "timeout" and "not received in time" in reply["msg"]
    assert closed(sock)
    _assert_serves(server)


def test_auth_answer_within_the_handshake_deadline_or_cut_off():
    limits = Limits(handshake_timeout_s=0.3)
    with ServerThread(SimDevice(HwConfig(), dram_bytes=1 << 24), KEY, limits=limits) as s:
        sock, hello = raw_connect(s.address)
        sock.settimeout(5)
        reply, _ = p.recv_frame(sock)
        assert reply["error"] == "busy" and "no authentication within 0.3 s" in reply["msg"]
        assert closed(sock)
        sock, hello = raw_connect(s.address)
        sock.sendall(auth_frame(KEY, hello))
        assert p.recv_frame(sock)[0]["ok"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_non_ascii_mac_over_tls_is_an_auth_error(tmp_path, caplog):
    import ssl

    cert, key = self_signed_cert(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    device = SimDevice(HwConfig(), dram_bytes=1 << 24)
    with ServerThread(device, KEY, limits=FAST, ssl_context=server_ctx) as s:
        host, _, port = s.address.rpartition(":")
        raw = socket.create_connection((host, int(port)), timeout=5)
        sock = client_ctx.wrap_socket(raw, server_hostname=host)
        p.recv_frame(sock)  # hello
        head = json.dumps({"op": "auth", "client_nonce": "00" * 32, "mac": "é" * 64})
        sock.sendall(_frame(head.encode()))
        reply, _ = p.recv_frame(sock)
        assert reply["error"] == "auth" and reply["msg"] == "authentication failed"
        with driver.open(f"tcp://{s.address}", key=KEY, tls_ca=str(cert)) as dev:
            assert dev.alloc(16) > 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
