"""DRAM: a flat byte array with a bump allocator."""

from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np

from pyvta.sim.errors import OutOfBoundsError


class Dram:
    """A little-endian byte-addressed memory of ``size_bytes`` with a simple bump allocator.

    Address 0 is never handed out (a null pointer stays invalid); allocations are aligned.
    """

    def __init__(self, size_bytes: int, data: np.ndarray | None = None):
        if data is not None:
            data = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
            size_bytes = data.size
        if size_bytes <= 0:
            raise ValueError(f"DRAM size must be positive, got {size_bytes} bytes")
        self.data = np.zeros(size_bytes, dtype=np.uint8) if data is None else data.copy()
        self._next = 64

    @property
    def size_bytes(self) -> int:
        return self.data.size

    @property
    def used_bytes(self) -> int:
        """Bytes up to the end of the last allocation (what a snapshot of a program keeps)."""
        return self._next

    def alloc(self, nbytes: int, align_bytes: int = 64) -> int:
        """Reserve ``nbytes`` and return the byte address; raises when DRAM is full."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative size ({nbytes} bytes)")
        if align_bytes <= 0 or align_bytes & (align_bytes - 1):
            raise ValueError(f"alignment must be a power of two, got {align_bytes}")
        addr = -(-self._next // align_bytes) * align_bytes
        if addr + nbytes > self.size_bytes:
            raise OutOfBoundsError(
                f"DRAM full: cannot allocate {nbytes} bytes at {addr:#x}"
                f" (DRAM is {self.size_bytes} bytes, {self.size_bytes - self._next} free)"
            )
        self._next = addr + nbytes
        return addr

    def release_all(self) -> None:
        """Forget every allocation (the contents stay; the next ``alloc`` starts at the bottom)."""
        self._next = 64

    def scrub(self) -> None:
        """Zero every byte (what any earlier user wrote, inside an allocation or not) and
        forget every allocation. On Linux the whole pages go back to the OS (they read as zero
        again and leave the process's resident memory); the buffer stays the same object at the
        same address (a harness holding its pointer keeps it)."""
        self._next = 64
        if not _discard_pages(self.data):
            self.data[:] = 0

    def _check(self, addr: int, nbytes: int) -> None:
        if addr < 0 or addr + nbytes > self.size_bytes:
            raise OutOfBoundsError(
                f"DRAM access [{addr:#x}, {addr + nbytes:#x}) is outside DRAM of"
                f" {self.size_bytes} bytes"
            )

    def write(self, addr: int, array: np.ndarray | bytes) -> None:
        raw = np.frombuffer(bytes(array), np.uint8) if isinstance(array, bytes) else None
        if raw is None:
            raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        self._check(addr, raw.size)
        self.data[addr : addr + raw.size] = raw

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        self._check(addr, nbytes)
        return self.data[addr : addr + nbytes].copy()

    def put(self, array: np.ndarray, align_bytes: int = 64) -> int:
        """Allocate and write an array (little-endian); returns its byte address."""
        arr = np.ascontiguousarray(array)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        addr = self.alloc(arr.nbytes, align_bytes)
        self.write(addr, arr)
        return addr


def _discard_pages(data: np.ndarray) -> bool:
    """Zero ``data`` (contiguous uint8): ``madvise(MADV_DONTNEED)`` on the pages wholly inside it
    (private anonymous memory reads as zero afterwards), a fill of the partial pages at its ends;
    False where that is not available (then nothing is changed)."""
    page = mmap.PAGESIZE
    if not sys.platform.startswith("linux") or data.nbytes < 4 * page:
        return False
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return False
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    start = data.ctypes.data
    first = -(-start // page) * page
    last = (start + data.nbytes) // page * page
    if madvise(first, last - first, mmap.MADV_DONTNEED) != 0:
        return False
    data[: first - start] = 0
    data[last - start :] = 0
    return True
