"""Instruction streams and micro-op arrays as bytes, and their disassembly.

An instruction is 16 bytes, little-endian (bit 0 of the word is bit 0 of the first byte);
a micro-op is 4 bytes, little-endian.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from pyvta.isa.errors import DecodeError
from pyvta.isa.insn import Insn, Uop, decode
from pyvta.isa.layout import uop_layout

if TYPE_CHECKING:
    from pyvta.isa.config import HwConfig

INSN_BYTES = 16
UOP_BYTES = 4


def encode_insns(insns: Iterable[Insn], cfg: HwConfig) -> bytes:
    """Encode instructions to consecutive 16-byte little-endian words."""
    out = bytearray()
    for i, insn in enumerate(insns):
        try:
            word = insn.encode(cfg)
        except ValueError as exc:
            raise type(exc)(f"instruction {i}: {exc}") from None
        out += word.to_bytes(INSN_BYTES, "little")
    return bytes(out)


def insn_words(data: bytes | np.ndarray) -> list[int]:
    """Split raw bytes into 128-bit instruction words."""
    raw = (
        bytes(np.asarray(data, dtype=np.uint8).tobytes()) if isinstance(data, np.ndarray) else data
    )
    if len(raw) % INSN_BYTES:
        raise DecodeError(
            f"instruction stream of {len(raw)} bytes is not a multiple of {INSN_BYTES} bytes"
        )
    return [
        int.from_bytes(raw[i : i + INSN_BYTES], "little") for i in range(0, len(raw), INSN_BYTES)
    ]


DECODED_STREAMS = 4
"""Instruction streams whose decoding a process keeps, the most recently used (a launch on the
simulator decodes its stream for the functional run and again for the cycle model, one right
after the other; the instructions are immutable, so both share one decoding). Few: a stream of
20,000 instructions decodes to some 4.6 MB of objects, and a tuner decodes one per candidate."""


def decode_insns(data: bytes | np.ndarray, cfg: HwConfig) -> list[Insn]:
    """Decode a byte stream of instructions; errors name the instruction index."""
    raw = np.asarray(data, dtype=np.uint8).tobytes() if isinstance(data, np.ndarray) else data
    return list(_decoded(bytes(raw), cfg))


@functools.lru_cache(maxsize=DECODED_STREAMS)
def _decoded(raw: bytes, cfg: HwConfig) -> tuple[Insn, ...]:
    return tuple(decode(word, cfg, index=i) for i, word in enumerate(insn_words(raw)))


def encode_uops(uops: Iterable[Uop], cfg: HwConfig) -> bytes:
    words = [u.encode(cfg) for u in uops]
    return np.asarray(words, dtype="<u4").tobytes()


def decode_uop_fields(words: np.ndarray, cfg: HwConfig) -> dict[str, np.ndarray]:
    """Vectorised micro-op decode: uint32 words -> {'dst', 'src', 'wgt'} int64 index arrays."""
    words = np.asarray(words, dtype=np.uint32).astype(np.int64)
    return {f.name: (words >> f.lsb) & f.mask for f in uop_layout(cfg)}


def decode_uops(data: bytes, cfg: HwConfig) -> list[Uop]:
    if len(data) % UOP_BYTES:
        raise DecodeError(f"micro-op data of {len(data)} bytes is not a multiple of {UOP_BYTES}")
    fields = decode_uop_fields(np.frombuffer(data, dtype="<u4"), cfg)
    return [
        Uop(int(d), int(s), int(w))
        for d, s, w in zip(fields["dst"], fields["src"], fields["wgt"], strict=True)
    ]


def disassemble(insns: Sequence[Insn], start_index: int = 0) -> str:
    """Readable text, one instruction a line, prefixed with its index and module."""
    lines = []
    for i, insn in enumerate(insns, start=start_index):
        lines.append(f"{i:6d}  {insn.module.value:<7s}  {insn}")
    return "\n".join(lines)
