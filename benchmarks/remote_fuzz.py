"""Fuzz the device server: random and mutated frames, before and after authentication.

    python benchmarks/remote_fuzz.py [--frames 10000] [--seed 0]

A sim-backed ``DeviceServer`` on 127.0.0.1 (simulator limits small, so a random instruction
stream is refused rather than run for hours) receives ``--frames`` frames, each one of: a valid
request with one field mutated (wrong type, negative, huge, dropped, an extra field, an unknown
op), a frame with random bytes flipped, truncated or padded (the sender then closes its side),
random bytes, a non-object or non-UTF-8 header, a blob count that does not match, a random
instruction stream launched, and the same garbage before authentication. Printed: frames sent,
answers by kind, connections the server closed, the server's internal errors (a session that
failed in an unforeseen way) and whether a good client is served every 500 frames and at the end.
Passes when internal errors are 0 and every good-client check passed.
"""

from __future__ import annotations

import argparse
import collections
import logging
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pyvta.driver import SimDevice
from pyvta.driver import open as open_device
from pyvta.driver.remote import protocol as p
from pyvta.driver.remote.bitstreams import BitstreamStore
from pyvta.driver.remote.server import Limits, ServerThread
from pyvta.isa import HwConfig
from pyvta.sim import SimLimits
from pyvta.testing.remote import KEY, auth_frame, raw_connect

ODD_VALUES = [-1, 0, 1, 2**31, 2**63, 2**70, 1.5, "x", None, True, [], {}, "A" * 300, [1, 2]]


class _Count(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.n = 0

    def emit(self, record):
        self.n += 1


def _session(address: str) -> tuple[socket.socket, int]:
    """An authenticated socket owning the device, and one allocation's address."""
    sock, hello = raw_connect(address)
    sock.sendall(auth_frame(KEY, hello))
    p.recv_frame(sock)
    p.recv_frame(sock)  # ready
    sock.sendall(p.encode_frame({"op": "alloc", "nbytes": 1 << 16, "align_bytes": 64}))
    return sock, p.recv_frame(sock)[0]["addr"]


def _valid(rng, addr: int) -> tuple[dict, list]:
    n = int(rng.integers(1, 4096))
    blob = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    choices = [
        ({"op": "info"}, []),
        ({"op": "alloc", "nbytes": n, "align_bytes": 64}, []),
        ({"op": "write", "addr": addr, "cache": bool(rng.integers(2))}, [blob]),
        ({"op": "write_cached", "addr": addr, "sha256": "00" * 32}, []),
        ({"op": "read", "addr": addr, "nbytes": n}, []),
        ({"op": "launch", "insn_addr": addr, "insn_count": int(rng.integers(1, 64))}, []),
        ({"op": "stats"}, []),
        ({"op": "upload_bitstream", "names": ["a.bit"]}, [blob]),
        ({"op": "upload_bitstream", "names": ["manifest.json", "a.bit", "a.hwh"]}, [blob] * 3),
    ]
    return choices[int(rng.integers(len(choices)))]


def _mutated_header(rng, addr: int) -> bytes:
    header, blobs = _valid(rng, addr)
    fields = [k for k in header if k != "op"]
    kind = int(rng.integers(6))
    if kind == 0 and fields:
        header[fields[int(rng.integers(len(fields)))]] = ODD_VALUES[
            int(rng.integers(len(ODD_VALUES)))
        ]
    elif kind == 1 and fields:
        del header[fields[int(rng.integers(len(fields)))]]
    elif kind == 2:
        header["op"] = ["", "exec", "eval", "open", "__init__", "hello", "auth", 7, None][
            int(rng.integers(9))
        ]
    elif kind == 3:
        header["path"] = "/etc/passwd"
    elif kind == 4:
        blobs = blobs + [b"extra"] if rng.integers(2) else []
    else:
        header[fields[0] if fields else "op"] = int(rng.integers(-(2**40), 2**40))
    return p.encode_frame(header, blobs)


def _odd_header(rng) -> bytes:
    heads = [b"[1, 2]", b"3", b'"op"', b"\xff\xfe{", b"{", b'{"op": "info", "blobs": [-1]}']
    head = heads[int(rng.integers(len(heads)))]
    return p._LEN.pack(4 + len(head), len(head)) + head


def _broken_bytes(rng, addr: int) -> bytes:
    frame = bytearray(p.encode_frame(*_valid(rng, addr)))
    kind = int(rng.integers(4))
    if kind == 0:
        for _ in range(int(rng.integers(1, 8))):
            frame[int(rng.integers(len(frame)))] = int(rng.integers(256))
    elif kind == 1:
        frame = frame[: int(rng.integers(1, len(frame)))]
    elif kind == 2:
        frame += rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
    else:
        frame = bytearray(rng.integers(0, 256, int(rng.integers(1, 512)), dtype=np.uint8).tobytes())
    return bytes(frame)


def _random_stream(rng, addr: int) -> list[bytes]:
    n = int(rng.integers(1, 32))
    insns = rng.integers(0, 256, 16 * n, dtype=np.uint8).tobytes()
    return [
        p.encode_frame({"op": "write", "addr": addr}, [insns]),
        p.encode_frame({"op": "launch", "insn_addr": addr, "insn_count": n}),
    ]


def _answers(sock: socket.socket, n: int, tally: collections.Counter) -> bool:
    """Read up to ``n`` answers; False when the server closed the connection."""
    for _ in range(n):
        try:
            reply, _ = p.recv_frame(sock)
        except (ConnectionError, OSError, p.ProtocolError):
            tally["closed by server"] += 1
            return False
        tally["ok" if reply.get("ok") else f"refused: {reply.get('error')}"] += 1
    return True


def _good_client(address: str) -> bool:
    try:
        with open_device(f"tcp://{address}", key=KEY, timeout_s=10) as dev:
            a = dev.alloc(64)
            dev.write(a, bytes(range(64)))
            return dev.read(a, 64).tobytes() == bytes(range(64))
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        print(f"good client failed: {e}")
        return False


def fuzz(n_frames: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    counter = _Count()
    logging.getLogger("pyvta.remote").addHandler(counter)
    logging.getLogger("pyvta.remote").setLevel(logging.CRITICAL + 1)  # quiet; the counter counts
    logging.getLogger("pyvta.remote").propagate = False
    counter.setLevel(logging.ERROR)
    device = SimDevice(HwConfig(), dram_bytes=1 << 24, limits=SimLimits(max_iters_per_insn=1 << 14))
    limits = Limits(request_timeout_s=2, launch_timeout_s=20, max_frame_bytes=1 << 20)
    tally: collections.Counter = collections.Counter()
    checks = []
    t0 = time.perf_counter()
    store_dir = tempfile.mkdtemp(prefix="pyvta-fuzz-store-")
    store = BitstreamStore(store_dir)  # uploads on: their checks are fuzzed too
    with ServerThread(device, KEY, limits=limits, store=store) as server:
        sock, addr = None, 0
        for i in range(n_frames):
            if sock is None:
                sock, addr = _session(server.address)
            kind = int(rng.integers(10))
            if kind <= 4:
                sock.sendall(_mutated_header(rng, addr))
                ok = _answers(sock, 1, tally)
            elif kind == 5:
                sock.sendall(_odd_header(rng))
                ok = _answers(sock, 1, tally)
            elif kind == 6:
                frames = _random_stream(rng, addr)
                sock.sendall(b"".join(frames))
                ok = _answers(sock, 2, tally)
            elif kind <= 8:  # the stream may now be out of step: the sender gives up after it
                sock.sendall(_broken_bytes(rng, addr))
                sock.shutdown(socket.SHUT_WR)
                while _answers(sock, 1, tally):
                    pass
                ok = False
            else:  # garbage before authentication
                pre, _ = raw_connect(server.address)
                pre.sendall(_broken_bytes(rng, 0) if rng.integers(2) else _mutated_header(rng, 0))
                pre.shutdown(socket.SHUT_WR)
                while _answers(pre, 1, tally):
                    pass
                pre.close()
                ok = True
            tally["frames"] += 1
            if not ok:
                sock.close()
                sock = None
            if (i + 1) % 500 == 0:
                if sock is not None:
                    sock.close()
                    sock = None
                checks.append(_good_client(server.address))
        if sock is not None:
            sock.close()
        checks.append(_good_client(server.address))
        alive = server._thread.is_alive()
    kept = [p.name for p in Path(store_dir).iterdir()]
    shutil.rmtree(store_dir)
    wall = time.perf_counter() - t0
    return {
        "tally": tally,
        "internal_errors": counter.n,
        "checks": checks,
        "alive": alive,
        "wall_s": wall,
        "kept_uploads": kept,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"fuzzing the device server with {args.frames} frames (seed {args.seed})")
    r = fuzz(args.frames, args.seed)
    for k, v in sorted(r["tally"].items(), key=lambda kv: -kv[1]):
        print(f"  {k:32s} {v:7d}")
    good = sum(r["checks"])
    print(
        f"server internal errors: {r['internal_errors']}; server thread alive: {r['alive']};"
        f" good-client checks passed: {good}/{len(r['checks'])}; {r['wall_s']:.1f} s"
        f" ({r['tally']['frames'] / r['wall_s']:.0f} frames/s)"
    )
    print(f"uploads kept by the store: {len(r['kept_uploads'])} (random bytes: 0 expected)")
    passed = (
        not r["kept_uploads"]
        and r["internal_errors"] == 0
        and r["alive"]
        and good == len(r["checks"])
    )
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
