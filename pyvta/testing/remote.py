"""A raw device-server client that can misbehave (tests and benchmarks of ``driver.remote``)."""

from __future__ import annotations

import secrets
import socket

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
