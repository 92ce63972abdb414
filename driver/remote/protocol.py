"""The wire format of the device server: frames, the handshake, the operations.

A frame is ``u32 total`` (big-endian, the bytes that follow), ``u32 header`` (the JSON header's
bytes), the header (UTF-8 JSON, an object), then raw byte blobs whose sizes the header lists in
``"blobs"``. Nothing else travels: no pickle, no code, no file paths. A frame larger than the
receiver's ``max_frame_bytes`` is refused before its body is read.

Session: the server sends ``hello`` (protocol version, the device's HwConfig, a fresh 32-byte
nonce, whether a key is required); the client answers ``auth`` with ``HMAC-SHA256(key, AUTH_CLIENT
| server nonce | client nonce)`` and its own nonce; the server checks it (constant time) and
answers with ``HMAC-SHA256(key, AUTH_SERVER | client nonce | server nonce)`` so the client knows
the server holds the key too. Then requests (``{"op": ..., ...}``), each answered by
``{"ok": true, ...}`` or ``{"ok": false, "error": KIND, "msg": ...}``.

Standard library and numpy only: the server runs on the board's Python (>= 3.10).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import struct

from pyvta.isa.errors import PyvtaError

VERSION = 1
DEFAULT_PORT = 9190
MAX_FRAME_BYTES = 64 << 20  # the largest request or reply (a layer's constants are a few MiB)
MAX_HEADER_BYTES = 64 << 10  # a header is a few fields; bytes travel as blobs
AUTH_FRAME_BYTES = 512  # the largest frame before authentication (an auth message is ~190)
NONCE_BYTES = 32
AUTH_CLIENT = b"pyvta-remote-v1 client"
AUTH_SERVER = b"pyvta-remote-v1 server"
_LEN = struct.Struct(">II")  # total bytes after this word, header bytes

# op -> the header fields it takes (name -> type); blobs are listed apart
OPS: dict[str, dict[str, type]] = {
    "info": {},
    "alloc": {"nbytes": int, "align_bytes": int},
    "write": {"addr": int, "cache": bool},
    "write_cached": {"addr": int, "sha256": str},
    "read": {"addr": int, "nbytes": int},
    "launch": {"insn_addr": int, "insn_count": int},
    "reset": {},
    "stats": {},
    "upload_bitstream": {"names": list},
    # a CPU kernel timed on the server's CPU (``pyvta serve --device cpu``): blobs "shared" (the
    # ELF bytes for ``triple``), then one per parameter of ``kernel`` (``cpu_code.KernelSig``)
    "measure_cpu": {
        "names": list,
        "triple": str,
        "kernel": dict,
        "repeats": int,
        "number": int,
        "min_repeat_us": int,
    },
    "bye": {},
}
BLOBS_IN = {"write": 1, "upload_bitstream": None, "measure_cpu": None}  # op -> blobs it carries
# (None: one per name)


class ProtocolError(PyvtaError):
    """A frame or message that breaks the protocol (size, encoding, fields, authentication)."""


def key_mac(key: bytes, label: bytes, *nonces: bytes) -> str:
    """HMAC-SHA256 of ``label`` and the nonces under ``key``, as hex."""
    return hmac.new(key, label + b"".join(nonces), hashlib.sha256).hexdigest()


def mac_matches(want: str, got: object) -> bool:
    """Whether ``got`` (from the wire: any JSON value) is the MAC ``want``, compared in constant
    time; False for anything but a string of ASCII (``compare_digest`` refuses other strings)."""
    if not isinstance(got, str) or not got.isascii():
        return False
    return hmac.compare_digest(want.encode(), got.encode())


def read_key_file(path) -> bytes:
    """The pre-shared key in ``path`` (its bytes, surrounding whitespace stripped; >= 16 bytes)."""
    with open(path, "rb") as f:
        key = f.read().strip()
    if len(key) < 16:
        raise ProtocolError(f"key file {path}: {len(key)} bytes; a key has at least 16")
    return key


def encode_frame(header: dict, blobs: list[bytes] | tuple = ()) -> bytes:
    """One frame: ``header`` (JSON-able; ``"blobs"`` is filled in) followed by ``blobs``."""
    blobs = [memoryview(b).cast("B") for b in blobs]
    head = json.dumps({**header, "blobs": [b.nbytes for b in blobs]}).encode()
    total = 4 + len(head) + sum(b.nbytes for b in blobs)
    return b"".join([_LEN.pack(total, len(head)), head, *blobs])


def decode_body(body: bytes, header_bytes: int) -> tuple[dict, list[bytes]]:
    """The header and blobs of a frame's body (everything after the two length words)."""
    head = body[:header_bytes]
    try:
        header = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"frame header is not UTF-8 JSON ({e})") from None
    except ValueError as e:  # an integer of more digits than int() converts
        raise ProtocolError(f"frame header refused: {e}") from None
    except RecursionError:
        raise ProtocolError("frame header nests too deeply (a header is a flat object)") from None
    if not isinstance(header, dict):
        raise ProtocolError(f"frame header is a JSON {type(header).__name__}, not an object")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes
    ):
        raise ProtocolError("frame header 'blobs' must be a list of byte counts")
    if header_bytes + sum(sizes) != len(body):
        raise ProtocolError(
            f"frame of {len(body)} bytes does not match its header ({header_bytes} header bytes"
            f" + blobs {sizes})"
        )
    blobs, at = [], header_bytes
    for n in sizes:
        blobs.append(body[at : at + n])
        at += n
    return header, blobs


class FrameError(ProtocolError):
    """The length words of a frame are refused: the stream cannot be read further."""


def check_lengths(
    total: int, header_bytes: int, max_frame_bytes: int, max_header_bytes: int = MAX_HEADER_BYTES
) -> None:
    """``FrameError`` for a frame over ``max_frame_bytes``, a header over ``max_header_bytes``
    or inconsistent lengths."""
    if total > max_frame_bytes:
        raise FrameError(f"frame of {total} bytes exceeds the maximum ({max_frame_bytes})")
    if total < 4 or header_bytes > total - 4:
        raise FrameError(f"frame lengths inconsistent (total {total}, header {header_bytes})")
    if header_bytes > max_header_bytes:
        raise FrameError(
            f"frame header of {header_bytes} bytes exceeds the maximum ({max_header_bytes});"
            " bytes travel as blobs"
        )


LENGTH_BYTES = _LEN.size


def parse_lengths(
    words: bytes, max_frame_bytes: int, max_header_bytes: int = MAX_HEADER_BYTES
) -> tuple[int, int]:
    """A frame's two length words (``LENGTH_BYTES``), checked (``FrameError``)."""
    total, header_bytes = _LEN.unpack(words)
    check_lengths(total, header_bytes, max_frame_bytes, max_header_bytes)
    return total, header_bytes


async def read_exactly(reader: asyncio.StreamReader, nbytes: int) -> bytes:
    """``reader.readexactly``; at EOF its ``IncompleteReadError`` without the partial bytes (the
    error may outlive the connection in a reference cycle; up to a frame of bytes with it)."""
    try:
        return await reader.readexactly(nbytes)
    except asyncio.IncompleteReadError as e:
        e.partial = b""
        raise


async def read_frame(
    reader: asyncio.StreamReader,
    max_frame_bytes: int,
    max_header_bytes: int = MAX_HEADER_BYTES,
    first: bytes = b"",
) -> tuple[dict, list]:
    """Read one frame (``first``: its first bytes, already read); ``FrameError`` for lengths
    refused (read no further), ``ProtocolError`` for a bad header or blobs (the frame was read
    whole), ``asyncio.IncompleteReadError`` at EOF."""
    words = first + await read_exactly(reader, _LEN.size - len(first))
    total, header_bytes = parse_lengths(words, max_frame_bytes, max_header_bytes)
    return decode_body(await read_exactly(reader, total - 4), header_bytes)


def _recv_exactly(sock: socket.socket, nbytes: int) -> bytes:
    buf = bytearray(nbytes)
    view, got = memoryview(buf), 0
    while got < nbytes:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError(f"connection closed after {got} of {nbytes} bytes")
        got += n
    return bytes(buf)


def recv_frame(sock: socket.socket, max_frame_bytes: int = MAX_FRAME_BYTES):
    """Blocking ``read_frame`` for a client socket."""
    total, header_bytes = _LEN.unpack(_recv_exactly(sock, _LEN.size))
    check_lengths(total, header_bytes, max_frame_bytes)
    return decode_body(_recv_exactly(sock, total - 4), header_bytes)


def check_request(header: dict, blobs: list) -> tuple[str, dict]:
    """``(op, fields)`` of a request, each field of the type ``OPS`` gives; ``ProtocolError``
    naming what is wrong and what is allowed."""
    op = header.get("op")
    if not isinstance(op, str) or op not in OPS:
        raise ProtocolError(f"unknown operation {op!r} (operations: {', '.join(OPS)})")
    fields = {}
    for name, kind in OPS[op].items():
        value = header.get(name)
        if kind is bool and value is None:
            value = False
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if not ok:
            raise ProtocolError(f"{op}: field {name!r} must be a {kind.__name__}, got {value!r}")
        if kind is int and value < 0:
            raise ProtocolError(f"{op}: field {name!r} must be >= 0, got {value}")
        fields[name] = value
    want = BLOBS_IN.get(op, 0)
    if want is None:
        want = len(fields.get("names", ()))
    if len(blobs) != want:
        raise ProtocolError(f"{op} carries {want} blobs, got {len(blobs)}")
    return op, fields
