"""One client's session on the served device: its allocations, its cached constants, its counts.

Every operation is checked here before the device sees it: reads and writes must lie inside one
of the session's allocations, a launch's instructions too; a constant is cached under the sha256
of its bytes as the server computed it. ``Session.execute`` runs in the server's device thread
(one at a time); it returns ``(reply header, reply blobs)`` or raises ``OpRefused``.
"""

from __future__ import annotations

import bisect
import hashlib
import time
from collections import Counter

import numpy as np

from pyvta.driver.remote.protocol import ProtocolError
from pyvta.isa import INSN_BYTES
from pyvta.isa.errors import PyvtaError

MAX_ALIGN_BYTES = 1 << 16
MAX_REPEATS = 100  # timed repeats of one measure_cpu request


class OpRefused(ProtocolError):
    """A well-formed request the server will not carry out; ``kind`` names why; ``fields`` go
    into the error reply beside it (a launch's fault: ``fault`` kind name and ``index``)."""

    def __init__(self, kind: str, msg: str, fields: dict | None = None):
        super().__init__(msg)
        self.kind = kind
        self.fields = dict(fields or {})


def fault_fields(error: Exception) -> dict:
    """A launch error's fault kind and instruction index, for the client to raise the same
    error (``driver.launch.FAULT_ERRORS``); empty when it is no instruction fault. The served
    device's own error says it: a ``DeviceFault`` (RTL, board) or the simulator's error."""
    from pyvta.driver.launch import DeviceFault, fault_kind
    from pyvta.sim.errors import instruction_index

    kind = fault_kind(error)
    if isinstance(error, DeviceFault) and error.outcome.fault is not None:
        index = error.outcome.fault.index
    else:
        index = instruction_index(error)
    if kind is None or index is None:
        return {}
    return {"fault": kind.name, "index": index}


class Session:
    """``device``: the served ``driver.Device``; ``const_cache_bytes``: host memory for constants;
    ``store``: a ``BitstreamStore`` (None: uploads refused)."""

    def __init__(self, sid: int, peer: str, device, const_cache_bytes: int, store=None):
        self.sid, self.peer, self.device = sid, peer, device
        self.const_cache_bytes, self.store = const_cache_bytes, store
        self.starts: list[int] = []  # sorted allocation starts
        self.ends: dict[int, int] = {}
        self.consts: dict[str, bytes] = {}
        self.ops: Counter = Counter()
        self.errors: Counter = Counter()
        self.bytes_in = self.bytes_out = 0
        self.device_s = 0.0
        self.t0 = time.monotonic()

    # -- checks ------------------------------------------------------------------------------
    def _inside(self, addr: int, nbytes: int, what: str) -> None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0 or addr + nbytes > self.ends[self.starts[i]]:
            raise OpRefused(
                "outside_allocation",
                f"{what} of {nbytes} bytes at {addr:#x} is outside every allocation of this"
                f" session ({len(self.starts)} allocations; alloc first)",
            )

    def scrub(self) -> None:
        """Erase the device (``Device.scrub``: every byte anyone wrote) and forget the
        allocations: a session starts and ends with it."""
        self.device.scrub()
        self.starts.clear()
        self.ends.clear()

    def close(self) -> None:
        """Drop what the session holds in host memory (its cached constants)."""
        self.consts.clear()

    def summary(self) -> dict:
        return {
            "session": self.sid,
            "ops": dict(self.ops),
            "errors": dict(self.errors),
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "allocations": len(self.starts),
            "cached_consts": len(self.consts),
            "device_s": round(self.device_s, 6),
            "session_s": round(time.monotonic() - self.t0, 3),
        }

    # -- operations --------------------------------------------------------------------------
    def execute(self, op: str, fields: dict, blobs: list) -> tuple[dict, list]:
        self.bytes_in += sum(len(b) for b in blobs)
        t0 = time.perf_counter()
        header, out = getattr(self, f"_op_{op}")(blobs=blobs, **fields)
        self.device_s += time.perf_counter() - t0
        self.bytes_out += sum(len(b) for b in out)
        return {"ok": True, **header}, out

    def _op_info(self, blobs):
        from pyvta.driver.remote.protocol import VERSION

        cfg = self.device.config
        return {
            "version": VERSION,
            "device": type(self.device).__name__,
            "config": cfg.to_dict(),
            "config_tag": cfg.tag,
            "bitstream_upload": self.store is not None,
        }, []

    def _op_alloc(self, blobs, nbytes, align_bytes):
        if nbytes == 0 or align_bytes == 0 or align_bytes > MAX_ALIGN_BYTES:
            raise OpRefused(
                "bad_request",
                f"alloc of {nbytes} bytes aligned to {align_bytes}: both must be > 0, the"
                f" alignment <= {MAX_ALIGN_BYTES}",
            )
        try:
            addr = int(self.device.alloc(nbytes, align_bytes))
        except Exception as e:  # noqa: BLE001 - the device's refusal goes back to the client
            raise OpRefused("device", f"alloc of {nbytes} bytes: {e}") from None
        bisect.insort(self.starts, addr)
        self.ends[addr] = addr + nbytes
        return {"addr": addr}, []

    def _op_write(self, blobs, addr, cache):
        data = blobs[0]
        self._inside(addr, len(data), "write")
        self.device.write(addr, np.frombuffer(data, np.uint8))
        if not cache:
            return {}, []
        digest = hashlib.sha256(data).hexdigest()
        held = sum(len(b) for b in self.consts.values())
        if digest not in self.consts and held + len(data) <= self.const_cache_bytes:
            self.consts[digest] = bytes(data)
        return {"sha256": digest, "cached": digest in self.consts}, []

    def _op_write_cached(self, blobs, addr, sha256):
        data = self.consts.get(sha256)
        if data is None:
            raise OpRefused("unknown_const", f"no constant with sha256 {sha256!r} in this session")
        self._inside(addr, len(data), "write")
        self.device.write(addr, np.frombuffer(data, np.uint8))
        return {}, []

    def _op_read(self, blobs, addr, nbytes):
        self._inside(addr, nbytes, "read")
        return {}, [np.ascontiguousarray(self.device.read(addr, nbytes)).tobytes()]

    def _op_launch(self, blobs, insn_addr, insn_count):
        if insn_count == 0:
            raise OpRefused("bad_request", "launch of 0 instructions")
        self._inside(insn_addr, insn_count * INSN_BYTES, "launch's instruction stream")
        try:
            result = self.device.launch(insn_addr, insn_count)
        except Exception as e:  # noqa: BLE001 - a bad stream is the client's error, not ours
            raise OpRefused(
                "launch_failed", f"launch failed: {type(e).__name__}: {e}", fault_fields(e)
            ) from None
        counters = {k: v for k, v in result.counters.items() if isinstance(v, (int, float))}
        return {
            "stats": result.stats.to_dict() if result.stats else None,
            "counters": counters,
            "wall_s": result.wall_s,
        }, []

    def _op_reset(self, blobs):
        self.device.reset()
        self.starts.clear()
        self.ends.clear()
        return {}, []

    def _op_stats(self, blobs):
        return {"session": self.summary()}, []

    def _op_bye(self, blobs):
        return {"bye": True}, []

    def _op_upload_bitstream(self, blobs, names):
        if self.store is None:
            raise OpRefused(
                "refused",
                "bitstream upload is off (start the server with --allow-bitstream-upload)",
            )
        if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise OpRefused("bad_request", "upload_bitstream: names must be distinct strings")
        try:
            digest, folder, manifest = self.store.put(dict(zip(names, blobs, strict=True)))
        except PyvtaError as e:  # the store's BitstreamError: names, manifest, hashes
            raise OpRefused("bad_bitstream", str(e)) from None
        program = getattr(self.device, "program_bitstream", None)
        if program is None:
            raise OpRefused(
                "cannot_program",
                f"bitstream {digest} kept, but {type(self.device).__name__} cannot be programmed"
                " (it has no program_bitstream(folder) hook)",
            )
        tag = program(folder)
        tag = getattr(tag, "tag", tag)
        if tag != manifest["config_tag"]:
            raise OpRefused(
                "id_mismatch",
                f"programmed {digest}: the ID register reads {tag!r}, the manifest says"
                f" {manifest['config_tag']!r}",
            )
        return {"sha256": digest, "config_tag": tag}, []

    def _op_measure_cpu(self, blobs, names, triple, kernel, repeats, number, min_repeat_us):
        from pyvta.runtime.cpu_code import KernelSig
        from pyvta.runtime.cpu_measure import MAX_NUMBER

        measure = getattr(self.device, "measure_cpu", None)
        if measure is None:
            raise OpRefused(
                "refused",
                f"{type(self.device).__name__} measures no CPU kernels (serve --device cpu)",
            )
        if not 1 <= repeats <= MAX_REPEATS or number > MAX_NUMBER:
            raise OpRefused(
                "bad_request",
                f"measure_cpu: repeats {repeats} (1..{MAX_REPEATS}), number {number}"
                f" (0..{MAX_NUMBER})",
            )
        try:
            sig = KernelSig.from_json(kernel)
            arrays = [
                np.frombuffer(b, np.dtype(p.dtype)).reshape(p.shape)
                for b, p in zip(blobs[1:], sig.params, strict=True)
            ]
        except (KeyError, TypeError, ValueError) as e:
            raise OpRefused("bad_request", f"measure_cpu: kernel or arrays refused: {e}") from None
        if names != ["shared", *(p.name for p in sig.params)]:
            raise OpRefused(
                "bad_request",
                "measure_cpu: blobs are named 'shared' then the kernel's parameters in order",
            )
        try:
            costs, number, outs = measure(
                triple, blobs[0], sig, arrays, repeats, number, min_repeat_us * 1e-3
            )
        except PyvtaError as e:  # another CPU's code, arrays the kernel refuses
            raise OpRefused("cpu_code", str(e)) from None
        except OSError as e:  # the loader refused the shared object
            raise OpRefused("cpu_code", f"cannot load the shared object: {e}") from None
        written = [p.name for p in sig.params if p.name in set(sig.written)]
        reply = {"costs_s": [float(c) for c in costs], "number": number, "written": written}
        return reply, [np.ascontiguousarray(a).tobytes() for a in outs]
