"""A raw device-server client that can misbehave (tests and benchmarks of ``driver.remote``)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile

from pyvta.driver.remote import protocol as p

KEY = b"0123456789abcdef-test-key"


def raw_connect(address: str, timeout_s: float = 5.0) -> tuple[socket.socket, dict]:
    """A socket to the server and its hello."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    hello, _ = p.recv_frame(sock)
    return sock, hello


def auth_frame(key: bytes, hello: dict) -> bytes:
    mine = secrets.token_bytes(p.NONCE_BYTES)
    mac = p.key_mac(key, p.AUTH_CLIENT, bytes.fromhex(hello["nonce"]), mine)
    return p.encode_frame({"op": "auth", "client_nonce": mine.hex(), "mac": mac})


def raw_session(address: str, key: bytes = KEY) -> socket.socket:
    """A socket authenticated and owning the device (after the server's "ready")."""
    sock, hello = raw_connect(address)
    sock.sendall(auth_frame(key, hello))
    assert p.recv_frame(sock)[0]["ok"]
    ready, _ = p.recv_frame(sock)
    assert ready.get("ready"), ready
    return sock


def ask(sock: socket.socket, header: dict, blobs=()) -> tuple[dict, list]:
    sock.sendall(p.encode_frame(header, blobs))
    return p.recv_frame(sock)


def closed(sock: socket.socket) -> bool:
    """Whether the server has closed the connection (EOF, or a reset)."""
    try:
        return sock.recv(1) == b""
    except (ConnectionError, OSError):
        return True


def start_server(
    key_file: str, device: str = "sim", own_session: bool = True
) -> tuple[subprocess.Popen, str]:
    """``pyvta serve`` on 127.0.0.1 (a free port) and its address.

    ``own_session``: in a session of its own, as a service is started. Where the kernel shares the
    CPU by session (Linux autogroups, ``/proc/sys/kernel/sched_autogroup_enabled``), servers in
    this script's session would share one session's CPU however many there are; in their own,
    each competes like a separate machine (with the weight of any other session)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyvta.cli", "serve", "--device", device]
        + ["--listen", "127.0.0.1:0", "--key-file", key_file],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=own_session,
    )
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"pyvta serve did not start: {line!r}")
    return proc, line.split()[-1]


def key_file() -> str:
    """A temporary file holding the test key ``KEY`` (for ``--key-file``)."""
    fd, path = tempfile.mkstemp(prefix="pyvta-key-")
    os.write(fd, KEY)
    os.close(fd)
    return path


def self_signed_cert(folder) -> tuple[str, str]:
    """``(certificate, key)`` PEM files in ``folder`` for a TLS server on 127.0.0.1 (one day,
    made with the ``openssl`` command)."""
    from pathlib import Path

    cert, key = Path(folder) / "c.pem", Path(folder) / "k.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key)]
        + ["-out", str(cert), "-days", "1", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)
