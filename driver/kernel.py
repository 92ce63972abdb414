"""Relocatable accelerator kernels: what the compiler writes, what a device places and runs.

A ``Kernel`` is one accelerator layer lowered at base 0: its DRAM regions (constants such as
weights, biases, micro-ops and the instruction stream itself; the input, residual and output
tensors; scratch), laid out from byte 0, and a relocation table naming, for every LOAD/STORE
instruction, the region its ``dram_base`` points into. ``load_kernel`` allocates each region on a
device, rewrites those ``dram_base`` fields for the addresses it got, and uploads the constants
once; ``LoadedKernel.run`` then writes the inputs, launches and reads the outputs. Nothing is
lowered at load or run time.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pyvta.driver.device import Device, DeviceError, RunResult
from pyvta.isa import HwConfig, MemInsn
from pyvta.isa.layout import mem_layout
from pyvta.isa.opcodes import MemType, Opcode

REGION_ALIGN_BYTES = 4096  # a multiple of every DRAM element size of every config


class RegionKind(enum.Enum):
    """How a region's bytes move: uploaded once per load, written or read per run, or neither."""

    CONST = "const"
    INPUT = "input"
    OUTPUT = "output"
    SCRATCH = "scratch"


@dataclass(frozen=True)
class Region:
    """``nbytes`` of DRAM at byte ``offset`` of the kernel's base-0 layout."""

    name: str
    kind: RegionKind
    offset: int
    nbytes: int

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass(frozen=True)
class Kernel:
    """One lowered layer. ``consts`` holds the bytes of every CONST region (the region named
    ``"insns"`` is the instruction stream at base 0, ``insn_count`` instructions); ``relocs`` is
    (n, 2) int32: instruction index, region index. ``config_tag`` is the HwConfig it was lowered
    for; ``info`` is what the compiler wants reported (workload, schedule config)."""

    config_tag: str
    regions: tuple[Region, ...]
    consts: Mapping[str, bytes]
    relocs: np.ndarray
    insn_count: int
    info: dict = field(default_factory=dict)

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        names = [r.name for r in self.regions]
        raise KeyError(f"kernel has no region {name!r} (regions: {names})")

    def regions_of(self, kind: RegionKind) -> list[Region]:
        return [r for r in self.regions if r.kind is kind]


def layout_regions(sizes: list[tuple[str, RegionKind, int]]) -> tuple[Region, ...]:
    """Regions of the given (name, kind, bytes) placed one after another from 0, each aligned."""
    out, addr = [], 0
    for name, kind, nbytes in sizes:
        out.append(Region(name, kind, addr, int(nbytes)))
        addr += -(-max(int(nbytes), 1) // REGION_ALIGN_BYTES) * REGION_ALIGN_BYTES
    return tuple(out)


def relocation_table(insns, regions: tuple[Region, ...], cfg: HwConfig) -> np.ndarray:
    """For each LOAD/STORE of ``insns`` (lowered at base 0), the region its first byte is in."""
    rows = []
    for i, insn in enumerate(insns):
        if not isinstance(insn, MemInsn):
            continue
        byte = insn.dram_base * cfg.elem_bytes_of(insn.memory_type.dram_elem)
        hits = [k for k, r in enumerate(regions) if r.offset <= byte < r.end]
        if len(hits) != 1:
            raise ValueError(
                f"instruction {i} ({insn}) addresses byte {byte}, which is in no kernel region"
                f" (regions: {[(r.name, r.offset, r.end) for r in regions]})"
            )
        rows.append((i, hits[0]))
    return np.array(rows, np.int32).reshape(-1, 2)


def relocate(kernel: Kernel, bases: Mapping[str, int], cfg: HwConfig) -> bytes:
    """The instruction stream with every relocated ``dram_base`` moved to ``bases[region]``.

    Only the relocated instructions' ``dram_base`` fields change (``isa.mem_layout``), patched in
    the encoded words: about a millisecond for a 20,000-instruction stream (a tuner relocates
    every candidate)."""
    words = np.frombuffer(kernel.consts["insns"], "<u8").reshape(-1, 2).copy()
    if not len(kernel.relocs):
        return words.tobytes()
    layout = mem_layout(cfg)
    base_f, type_f = layout["dram_base"], layout["memory_type"]
    if base_f.msb >= 64 or type_f.msb >= 64:
        raise DeviceError("relocate expects dram_base and memory_type in the first 64-bit word")
    rows, k = kernel.relocs[:, 0], kernel.relocs[:, 1]
    low = words[rows, 0]
    opcode = (low >> np.uint64(layout["opcode"].lsb)) & np.uint64(layout["opcode"].mask)
    if not np.isin(opcode, [Opcode.LOAD, Opcode.STORE]).all():
        raise DeviceError("the relocation table names an instruction that is no LOAD or STORE")
    mtype = ((low >> np.uint64(type_f.lsb)) & np.uint64(type_f.mask)).astype(np.int64)
    elem_of = np.zeros(type_f.mask + 1, np.int64)
    for m in MemType:
        elem_of[m] = cfg.elem_bytes_of(m.dram_elem)
    elem = elem_of[mtype]
    base = ((low >> np.uint64(base_f.lsb)) & np.uint64(base_f.mask)).astype(np.int64)
    starts = np.array([bases[r.name] - r.offset for r in kernel.regions], np.int64)
    byte = starts[k] + base * elem
    bad = np.flatnonzero(byte % elem)
    if len(bad):
        region = kernel.regions[k[bad[0]]]
        raise DeviceError(
            f"region {region.name!r} placed at {bases[region.name]:#x}: not a multiple of"
            f" the {elem[bad[0]]}-byte {MemType(mtype[bad[0]]).name} element"
        )
    new = byte // elem
    if (new < 0).any() or (new > base_f.mask).any():
        raise DeviceError(f"a relocated dram_base does not fit its {base_f.width_bits}-bit field")
    keep = ~np.uint64(base_f.mask << base_f.lsb)
    words[rows, 0] = (low & keep) | (new.astype(np.uint64) << np.uint64(base_f.lsb))
    return words.tobytes()


@dataclass
class LoadedKernel:
    """A kernel placed on a device: region name -> byte address; ``load_s`` what placing took."""

    kernel: Kernel
    device: Device
    addrs: dict[str, int]
    load_s: float

    def run(
        self, inputs: Mapping[str, np.ndarray], recurring: bool = False
    ) -> tuple[dict[str, np.ndarray], RunResult]:
        """Write every INPUT region from ``inputs`` (name -> array of exactly its bytes), launch,
        and read every OUTPUT region back as uint8. ``recurring``: the inputs are the same bytes
        run after run (a tuner's zeros): written with ``write_const``, which a remote device
        sends once per session."""
        for r in self.kernel.regions_of(RegionKind.INPUT):
            if r.name not in inputs:
                raise DeviceError(f"kernel input region {r.name!r} not given")
            data = np.ascontiguousarray(inputs[r.name])
            if data.nbytes != r.nbytes:
                raise DeviceError(
                    f"input {r.name!r} has {data.nbytes} bytes, the region {r.nbytes}"
                )
            if recurring:
                self.device.write_const(self.addrs[r.name], data.tobytes())
            else:
                self.device.write(self.addrs[r.name], data)
        result = self.device.launch(self.addrs["insns"], self.kernel.insn_count)
        outs = {
            r.name: self.device.read(self.addrs[r.name], r.nbytes)
            for r in self.kernel.regions_of(RegionKind.OUTPUT)
        }
        return outs, result


def load_kernel(device: Device, kernel: Kernel) -> LoadedKernel:
    """Allocate the kernel's regions on ``device``, relocate its instructions, upload its
    constants. Refuses a kernel lowered for another HwConfig."""
    cfg = device.config
    if kernel.config_tag != cfg.tag:
        raise DeviceError(
            f"kernel was compiled for HwConfig {kernel.config_tag}, the device is {cfg.tag}"
        )
    t0 = time.perf_counter()
    addrs = {r.name: device.alloc(max(r.nbytes, 1), REGION_ALIGN_BYTES) for r in kernel.regions}
    for r in kernel.regions_of(RegionKind.CONST):
        data = relocate(kernel, addrs, cfg) if r.name == "insns" else kernel.consts[r.name]
        if len(data) != r.nbytes:
            raise DeviceError(f"constant {r.name!r} has {len(data)} bytes, its region {r.nbytes}")
        if r.name == "insns":  # relocated for these addresses: new bytes every load
            device.write(addrs[r.name], np.frombuffer(data, np.uint8))
        else:
            device.write_const(addrs[r.name], data)
    return LoadedKernel(kernel, device, addrs, time.perf_counter() - t0)


def bundle_kernel(program) -> Kernel:
    """A program bundle (``sim.Program``: a DRAM image for address 0 with its instruction stream
    inside) as a relocatable kernel: region ``image``, the whole image (uploaded, and read back
    by :func:`run_relocated`), and region ``insns``, the stream, its LOAD/STORE ``dram_base``
    moved to wherever ``image`` lands. A device whose memory is its own (a board's buffers, a
    served device's allocations) runs it at the addresses it hands out."""
    cfg = program.config
    image = np.ascontiguousarray(program.dram, np.uint8)
    insn_bytes = program.insn_bytes().tobytes()
    regions = layout_regions(
        [("image", RegionKind.CONST, image.size), ("insns", RegionKind.CONST, len(insn_bytes))]
    )
    relocs = relocation_table(program.insns(), regions, cfg)
    consts = {"image": image.tobytes(), "insns": insn_bytes}
    return Kernel(cfg.tag, regions, consts, relocs, program.insn_count, {"bundle": True})


def run_relocated(device: Device, program) -> tuple[np.ndarray, RunResult]:
    """Run a program bundle on ``device`` at addresses it allocates (``bundle_kernel``): (the
    final image, of the bundle's size and layout; the launch's result). ``Device.run_program``
    instead writes the image at address 0, which only a host-memory device (sim, rtl) allows."""
    loaded = load_kernel(device, bundle_kernel(program))
    _, result = loaded.run({})
    return device.read(loaded.addrs["image"], program.dram.size), result
