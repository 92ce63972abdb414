"""Fuzz the device server: random and mutated frames, then hostile clients against a live server.

    python benchmarks/remote_fuzz.py [--frames 10000] [--seed 0]
    python benchmarks/remote_fuzz.py --mode hostile [--seconds 60] [--clients 64] [--seed 0]

Frames (``--mode frames``): a sim-backed ``DeviceServer`` on 127.0.0.1 (simulator limits small,
so a random instruction stream is refused rather than run for hours) receives ``--frames``
frames, each one of: a valid request with one field mutated (wrong type, negative, huge,
dropped, an extra field, an unknown op), a frame with random bytes flipped, truncated or padded
(the sender then closes its side), random bytes, a non-object or non-UTF-8 header, a blob count
that does not match, a random instruction stream launched, and the same garbage before
authentication. Printed: frames sent, answers by kind, connections the server closed, the
server's internal errors (a session that failed in an unforeseen way) and whether a good client
is served every 500 frames and at the end. Passes when internal errors are 0 and every
good-client check passed.

Hostile (``--mode hostile``): ``pyvta serve`` in its own process; ``--clients`` keyless threads
attack it for ``--seconds`` (classes: idle sockets held, auth frames of 64 MiB announced and fed,
16 MiB nested headers, non-ASCII MACs, garbage, slow auth byte by byte, connect-and-reset) while
one key holder ends sessions without ``bye`` after caching 96 MiB, sends malformed frames after
auth and stalls inside length words, and one valid client opens sessions, checks that fresh
memory reads zero (never the key holder's secret) and times every request. The server's RSS
is sampled every 50 ms (/proc). Printed: frames by class, answers by kind, RSS before, max and
after, memory held per unauthenticated client, the valid client's p50/p99/max request latency
and session-open latency, isolation checks. Passes when max RSS < 512 MB, every isolation
check held, the valid client was never refused, and the server logged no internal error.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

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


# -- hostile clients against a live `pyvta serve` ------------------------------------------------
SECRET = 0xA5  # what the hostile key holder writes; the valid client must never read it


def _serve(key_file: str, log_path: str) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "pyvta.cli", "serve", "--device", "sim"]
    cmd += ["--listen", "127.0.0.1:0", "--key-file", key_file, "--request-timeout", "2"]
    log = open(log_path, "w")  # noqa: SIM115 - the server's whole life
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"pyvta serve did not start: {line!r}")
    return proc, line.split()[-1]


def _connect(address: str, timeout_s: float = 5.0) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=timeout_s)


def _drain(sock: socket.socket, tally: collections.Counter, lock: threading.Lock) -> None:
    """Read answers until the server closes; count them."""
    while True:
        try:
            reply, _ = p.recv_frame(sock)
        except (ConnectionError, OSError, p.ProtocolError):
            with lock:
                tally["closed by server"] += 1
            return
        kind = "ok" if reply.get("ok") else f"refused: {reply.get('error')}"
        with lock:
            tally[kind] += 1


def _keyless(address: str, rng, cls: str) -> None:
    """One keyless attack of class ``cls``; returns when the server has ended it."""
    sock = _connect(address, timeout_s=15)
    try:
        if cls == "connect-reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        hello, _ = p.recv_frame(sock)
        if hello.get("op") != "hello":
            return
        if cls == "idle":
            sock.recv(1 << 16)  # held until the server cuts it off
        elif cls == "auth-64MiB":
            sock.sendall(struct.pack(">II", 64 << 20, 200))
            chunk = bytes(1 << 16)
            for _ in range(1023):  # one frame short of 64 MiB, as long as the server reads
                sock.sendall(chunk)
        elif cls == "nested-16MiB":
            sock.sendall(struct.pack(">II", (16 << 20) + 4, 16 << 20) + b"[" * (1 << 20))
        elif cls == "non-ascii-mac":
            head = json.dumps({"op": "auth", "client_nonce": "00" * 32, "mac": "é" * 64})
            sock.sendall(struct.pack(">II", 4 + len(head.encode()), len(head.encode())))
            sock.sendall(head.encode())
        elif cls == "slow-auth":
            for b in auth_frame(b"not-the-key-0123456789", hello):
                sock.sendall(bytes([b]))
                time.sleep(0.05)
        else:  # garbage
            n = int(rng.integers(1, 600))
            sock.sendall(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        sock.recv(1 << 16)
    except (ConnectionError, OSError, p.ProtocolError):
        pass
    finally:
        sock.close()


KEYLESS = ("idle", "auth-64MiB", "nested-16MiB", "non-ascii-mac", "slow-auth", "garbage")
KEYLESS += ("connect-reset",)


def _key_holder_round(address: str, rng, tally, lock) -> None:
    """A session of a key holder gone bad: 96 MiB of constants cached, a secret written, malformed
    frames after auth, then a stall inside the length words or a drop without bye."""
    sock = raw_session_or_none(address)
    if sock is None:
        return
    try:
        addr = p_ask(sock, {"op": "alloc", "nbytes": 32 << 20, "align_bytes": 64})[0]["addr"]
        for _k in range(3):
            blob = bytes([int(rng.integers(1, 256))]) * (32 << 20)
            p_ask(sock, {"op": "write", "addr": addr, "cache": True}, [blob])
        p_ask(sock, {"op": "write", "addr": addr}, [bytes([SECRET]) * (32 << 20)])
        for head in (
            b'{"op": []}',
            b'{"op": {}}',
            b'{"op": "alloc", "nbytes": ' + b"9" * 5000 + b"}",
            b'{"op": ' + b"[" * 30000 + b"]" * 30000 + b"}",
        ):
            sock.sendall(struct.pack(">II", 4 + len(head), len(head)) + head)
            reply, _ = p.recv_frame(sock)
            with lock:
                tally[f"after auth: {reply.get('error')}"] += 1
        if rng.integers(2):
            sock.sendall(b"\x00\x00\x00")  # a stall inside the length words
            _drain(sock, tally, lock)
    except (ConnectionError, OSError, p.ProtocolError):
        pass
    finally:
        sock.close()  # no bye


def raw_session_or_none(address: str):
    try:
        sock, hello = raw_connect(address, timeout_s=60)
        sock.sendall(auth_frame(KEY, hello))
        if not p.recv_frame(sock)[0].get("ok") or not p.recv_frame(sock)[0].get("ready"):
            sock.close()
            return None
        return sock
    except (ConnectionError, OSError, p.ProtocolError):
        return None


def p_ask(sock, header, blobs=()):
    sock.sendall(p.encode_frame(header, blobs))
    reply = p.recv_frame(sock, 1 << 27)
    if not reply[0].get("ok"):
        raise ConnectionError(f"refused: {reply[0]}")
    return reply


def _timed(out: dict, fn, *args):
    t0 = time.perf_counter()
    result = fn(*args)
    out["request_s"].append(time.perf_counter() - t0)
    return result


def _valid_client(address: str, stop: threading.Event, out: dict) -> None:
    """Sessions of 20 requests each: fresh memory must read zero; every request timed."""
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            dev = open_device(f"tcp://{address}", key=KEY, timeout_s=30, queue_timeout_s=60)
        except Exception as e:  # noqa: BLE001 - counted
            out["refused"].append(str(e))
            continue
        out["open_s"].append(time.perf_counter() - t0)
        try:
            for k in range(20):
                a = _timed(out, dev.alloc, 4096)
                fresh = _timed(out, dev.read, a, 4096)
                _timed(out, dev.write, a, np.full(4096, k, np.uint8))
                back = _timed(out, dev.read, a, 4096)
                out["isolation"].append(not fresh.any() and not (back != k).any())
        except Exception as e:  # noqa: BLE001 - counted
            out["refused"].append(str(e))
        finally:
            dev.close()


def _unauth_memory(proc, address: str, n: int) -> float:
    """Bytes of server RSS per unauthenticated client feeding a 64 MiB auth frame."""
    server = psutil.Process(proc.pid)
    before = server.memory_info().rss
    socks = []
    for _ in range(n):
        sock = _connect(address)
        p.recv_frame(sock)
        sock.sendall(struct.pack(">II", 64 << 20, 200) + bytes(500))
        socks.append(sock)
    time.sleep(0.5)
    held = server.memory_info().rss - before
    for sock in socks:
        sock.close()
    return held / n


def hostile(seconds: float, n_clients: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    tmp = tempfile.mkdtemp(prefix="pyvta-hostile-")
    key_file = str(Path(tmp) / "key")
    Path(key_file).write_bytes(KEY)
    proc, address = _serve(key_file, str(Path(tmp) / "server.log"))
    try:
        time.sleep(0.5)
        server = psutil.Process(proc.pid)
        rss0 = server.memory_info().rss
        per_unauth = _unauth_memory(proc, address, 16)
        stop, lock = threading.Event(), threading.Lock()
        tally: collections.Counter = collections.Counter()
        rss = [rss0]
        out = {"open_s": [], "request_s": [], "isolation": [], "refused": []}

        def sample():
            while not stop.is_set():
                rss.append(server.memory_info().rss)
                time.sleep(0.05)

        def attacker(i: int):
            r = np.random.default_rng([seed, i])
            while not stop.is_set():
                cls = KEYLESS[int(r.integers(len(KEYLESS)))]
                _keyless(address, r, cls)
                with lock:
                    tally[f"keyless {cls}"] += 1

        def key_holder():
            r = np.random.default_rng([seed, 999])
            while not stop.is_set():
                _key_holder_round(address, r, tally, lock)
                with lock:
                    tally["key holder sessions without bye"] += 1
                time.sleep(0.5)

        threads = [threading.Thread(target=sample, daemon=True)]
        threads += [
            threading.Thread(target=attacker, args=(i,), daemon=True) for i in range(n_clients)
        ]
        threads.append(threading.Thread(target=key_holder, daemon=True))
        threads.append(
            threading.Thread(target=_valid_client, args=(address, stop, out), daemon=True)
        )
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join(30)
        time.sleep(1.0)
        rss_after = server.memory_info().rss
        alive = proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
    log = (Path(tmp) / "server.log").read_text()
    shutil.rmtree(tmp)
    del rng
    return {
        "tally": tally,
        "rss0": rss0,
        "rss_max": max(rss),
        "rss_after": rss_after,
        "per_unauth": per_unauth,
        "alive": alive,
        "out": out,
        "internal": log.count("internal error")
        + log.count("Unhandled exception")
        + log.count("Traceback"),
    }


def _report_hostile(r: dict, seconds: float, n_clients: int) -> bool:
    mb = 1e6
    print(
        f"hostile run: {n_clients} keyless clients + 1 bad key holder + 1 valid client,"
        f" {seconds:g} s"
    )
    for k, v in sorted(r["tally"].items(), key=lambda kv: -kv[1]):
        print(f"  {k:40s} {v:7d}")
    print("  (keyless: connections of each class, each one to a few frames; the others: answers)")
    out = r["out"]
    req = np.array(out["request_s"]) * 1e3
    opens = np.array(out["open_s"]) * 1e3
    print(
        f"server RSS: before {r['rss0'] / mb:.0f} MB, max {r['rss_max'] / mb:.0f} MB,"
        f" after {r['rss_after'] / mb:.0f} MB (bound 512 MB)"
    )
    print(
        f"memory per unauthenticated client feeding a 64 MiB auth frame:"
        f" {r['per_unauth'] / 1e3:.1f} kB"
    )
    if req.size:
        print(
            f"valid client: {req.size} requests, latency p50 {np.percentile(req, 50):.2f} ms,"
            f" p99 {np.percentile(req, 99):.2f} ms, max {req.max():.2f} ms;"
            f" {opens.size} sessions opened, open p50 {np.percentile(opens, 50):.0f} ms,"
            f" p99 {np.percentile(opens, 99):.0f} ms (includes waiting for the key holder)"
        )
    iso = out["isolation"]
    print(
        f"isolation checks (fresh memory reads zero, never the key holder's secret):"
        f" {sum(iso)}/{len(iso)} held; valid client refused {len(out['refused'])} times"
        f"{': ' + out['refused'][0] if out['refused'] else ''}"
    )
    print(f"server internal errors / tracebacks logged: {r['internal']}; alive: {r['alive']}")
    return (
        r["rss_max"] < 512 * mb
        and iso
        and all(iso)
        and not out["refused"]
        and r["internal"] == 0
        and r["alive"]
        and req.size > 0
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("frames", "hostile", "both"), default="both")
    ap.add_argument("--frames", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=60.0, help="hostile: how long")
    ap.add_argument("--clients", type=int, default=64, help="hostile: keyless clients")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ok = True
    if args.mode in ("hostile", "both"):
        print(f"hostile clients against pyvta serve (seed {args.seed})")
        ok = _report_hostile(
            hostile(args.seconds, args.clients, args.seed), args.seconds, args.clients
        )
        print("PASS" if ok else "FAIL")
        if args.mode == "hostile":
            return 0 if ok else 1
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
    return 0 if passed and ok else 1


if __name__ == "__main__":
    sys.exit(main())
