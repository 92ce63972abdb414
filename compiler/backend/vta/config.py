"""The knobs of the VTA conv2d template (the config space a tuner searches) and the fit check."""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import asdict, dataclass

from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import AluOp, HwConfig, PyvtaError, clip_imm
from pyvta.isa.layout import gemm_layout

# (outer, inner) dimensions of the GEMM's two hardware loops; the other dimensions of
# (co, ci, kh, kw, oh, ow) are enumerated in the micro-op kernel.
GEMM_LOOPS = (("ci", "co"), ("oh", "co"), ("ci", "oh"))

# The schedule's loop orders and micro-op modes (``ConvConfig`` fields; the first of each is
# the default, the program the template emitted before these knobs existed):
# the output tiles' loop order: "co" channel tiles outer, spatial tiles inner (a thread's
# weights kept across its spatial tiles); "sp" spatial tiles outer, channel tiles inner (a
# thread's input kept across its channel tiles: its loads skipped, ``keeps_inputs``)
TILE_ORDERS = ("co", "sp")
# the reduction over input-channel chunks: "up" chunk 0 first in every tile; "snake" upwards
# in even groups and downwards in odd ones (the last chunk's weights or input, still in the
# slot, serve the next tile's first chunk)
CHUNK_ORDERS = ("up", "snake")
# the micro-op kernels: "resident" all loaded once at the start (on demand into a ring only
# when they do not fit together); "ring" each loaded into a ring at its first use
UOP_MODES = ("resident", "ring")
# the thread counts the tuner's space offers (``check_fit`` allows 1..4)
TUNED_VTHREADS = (1, 2, 4)


class FitError(PyvtaError, ValueError):
    """A config whose tiles do not fit the on-chip buffers (says what it needs and has)."""


@dataclass(frozen=True)
class ConvConfig:
    """Tile sizes (output rows/cols in pixels, channels in blocks), virtual threads, and the
    assignment of dimensions to the GEMM's hardware loops."""

    tile_h: int
    tile_w: int
    tile_ci: int
    tile_co: int
    vthreads: int = 2
    gemm_loops: tuple[str, str] = ("ci", "co")
    # the epilogue of one thread beside the others' GEMMs (the ISA's overlap bit), where it
    # applies (``overlapped``); False lowers as VTA v0.0.2 does
    overlap: bool = True
    # the epilogue's clip to [lo, hi] as one ALU CLIP (``isa.opcodes.CLIP_DOC``, ``clip_ops``);
    # False clips with MAX lo, MIN hi as VTA v0.0.2 does
    clip: bool = True
    tile_order: str = TILE_ORDERS[0]
    chunk_order: str = CHUNK_ORDERS[0]
    uop_mode: str = UOP_MODES[0]

    def v002(self) -> ConvConfig:
        """This config lowered with VTA v0.0.2's instructions only: no overlap bit, no CLIP."""
        return dataclasses.replace(self, overlap=False, clip=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["gemm_loops"] = list(self.gemm_loops)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ConvConfig:
        d = dict(d)
        d["gemm_loops"] = tuple(d.get("gemm_loops", ("ci", "co")))
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclass(frozen=True)
class Geometry:
    """Sizes one tile occupies, per virtual thread (rows of each buffer)."""

    pixels: int
    in_h: int
    in_w: int
    inp_rows: int
    wgt_rows: int
    acc_rows: int  # output rows + residual rows (the bias of all blocks is held once, apart)
    # input rows apart of two rows in the INP slot: a 1x1 kernel with a stride and no padding
    # reads every stride-th row only, so only those are loaded (in_h = tile_h)
    row_step: int = 1


def keeps_inputs(c: ConvConfig) -> bool:
    """Whether a thread's chunk skips its input loads when its INP slot already holds that
    input (the loop orders that make this happen: ``TILE_ORDERS`` "sp", ``CHUNK_ORDERS``
    "snake"; the default orders reload, as before these knobs)."""
    return c.tile_order != TILE_ORDERS[0] or c.chunk_order != CHUNK_ORDERS[0]


def chunk_index(c: ConvConfig, group: int, k: int, n_chunks: int) -> int:
    """The input-channel chunk a tile of group ``group`` computes ``k``-th (``CHUNK_ORDERS``)."""
    if c.chunk_order == "snake" and group % 2 == 1:
        return n_chunks - 1 - k
    return k


def skips_rows(wl: ConvWorkload) -> bool:
    """Whether the input loads skip the rows the conv does not read (``Geometry.row_step``)."""
    return wl.kernel_h == 1 and wl.stride > 1 and wl.pad == 0 and wl.pad_b == 0


def geometry(wl: ConvWorkload, ep: Epilogue, c: ConvConfig) -> Geometry:
    s = wl.stride
    step = s if skips_rows(wl) else 1
    in_h = (c.tile_h - 1) * (s // step) + wl.ext_h
    in_w = (c.tile_w - 1) * s + wl.ext_w
    pixels = c.tile_h * c.tile_w
    acc = c.tile_co * pixels * (2 if ep.residual and not ep.residual_via_gemm else 1)
    inp = c.tile_ci * in_h * in_w + (c.tile_co * pixels if ep.residual_via_gemm else 0)
    return Geometry(
        pixels,
        in_h,
        in_w,
        inp,
        c.tile_co * c.tile_ci * wl.kernel_h * wl.kernel_w,
        acc,
        step,
    )


def gemm_dims(wl: ConvWorkload, c: ConvConfig, g: Geometry) -> dict[str, tuple[int, int, int, int]]:
    """dimension -> (extent, dst stride, src stride, wgt stride) inside one thread's buffers."""
    kk = wl.kernel_h * wl.kernel_w
    s, d = wl.stride, wl.dilation
    return {
        "co": (c.tile_co, g.pixels, 0, c.tile_ci * kk),
        "ci": (c.tile_ci, 0, g.in_h * g.in_w, kk),
        "kh": (wl.kernel_h, 0, d * g.in_w, wl.kernel_w),
        "kw": (wl.kernel_w, 0, d, 1),
        "oh": (c.tile_h, c.tile_w, s // g.row_step * g.in_w, 0),
        "ow": (c.tile_w, 1, s, 0),
    }


def reserved_rows(wl: ConvWorkload, ep: Epilogue) -> dict[str, int]:
    """Rows at the top of each buffer that hold constants for the whole program."""
    return {
        "inp": 1 if ep.bias and ep.bias_via_gemm else 0,  # the "ones" row of bias digits
        "wgt": (wl.co_blocks if ep.bias and ep.bias_via_gemm else 0)
        + (1 if ep.residual_via_gemm else 0),  # bias digit blocks, scaled identity
        "acc": bias_acc_rows(wl, ep) + (wl.co_blocks if ep.channel_shift else 0),
    }


def bias_acc_rows(wl: ConvWorkload, ep: Epilogue) -> int:
    """The bias rows among ACC's constants (the ALU path); the channel shift rows follow them."""
    return wl.co_blocks if ep.bias and not ep.bias_via_gemm else 0


def clip_ops(ep: Epilogue, c: ConvConfig) -> tuple[tuple[AluOp, int], ...]:
    """The (opcode, immediate) ALU passes that clip the epilogue's int32 rows to [lo, hi]: one
    CLIP with ``c.clip`` (the ISA extension), else MAX lo then MIN hi (VTA v0.0.2)."""
    if c.clip:
        return ((AluOp.CLIP, clip_imm(ep.lo, ep.hi)),)
    return ((AluOp.MAX, ep.lo), (AluOp.MIN, ep.hi))


def overlapped(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> int:
    """How ``conv2d`` lowers ``c``: 0 without the epilogue overlapped (not asked for, one thread,
    or no room), else the ACC slots per thread (2 where they fit: a thread's next tile need not
    wait for the store of its last). Each ACC bank (the top bit of the row,
    ``isa.layout.OVERLAP_DOC``) holds the slots of alternate threads and a copy of the bias
    rows."""
    if not c.overlap or c.vthreads < 2:
        return 0
    g = geometry(wl, ep, c)
    room = hw.acc_depth // 2 - reserved_rows(wl, ep)["acc"]
    for buffers in (2, 1):
        if -(-c.vthreads * buffers // 2) * g.acc_rows <= room:
            return buffers
    return 0


# GEMM micro-ops per output row from which the ALU pipe, beside them, has room for an ACC reset:
# about what the epilogue's ALU passes take per row (bias, shift, the clip: one cycle each).
ALU_RESET_MIN_GEMM_PER_ROW = 4


def alu_reset(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig, v: int) -> bool:
    """Whether ``conv2d`` resets thread ``v``'s ACC tile on the ALU pipe (MUL by 0) instead of
    the GEMM pipe: with the epilogue overlapped and two ACC slots per thread, for odd threads,
    when the tile starts with no other GEMM pass, so the two pipes carry about the same work (a
    1x1 layer's GEMM pipe would otherwise hold its GEMMs and every reset)."""
    starts_with_gemm = (ep.bias and ep.bias_via_gemm) or (
        ep.residual_via_gemm and not ep.residual_after_shift
    )
    return (
        v % 2 == 1
        and not starts_with_gemm
        and wl.red_blocks * wl.kernel_h * wl.kernel_w >= ALU_RESET_MIN_GEMM_PER_ROW
        and overlapped(wl, ep, c, hw) == 2  # tile starts batched (conv2d_overlap.emit_overlapped)
    )


def same_pixels(wl: ConvWorkload, c: ConvConfig) -> bool:
    """Whether each group of ``conv2d_tile.tile_groups`` is one spatial tile in ``vthreads``
    channel tiles (the channel tiles divide among the threads)."""
    return (wl.co_blocks // c.tile_co) % c.vthreads == 0


def shared_inputs(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> bool:
    """Whether ``conv2d_overlap.emit_overlapped`` loads each chunk's input once for a whole
    group (its threads compute the same pixels, ``same_pixels``), into the INP slot of the
    chunk's turn, and every thread's GEMM reads it; not with the residual rows in the INP slots
    (GEMM path). Only
    for 1x1 kernels, whose input loads weigh most beside their GEMMs (ResNet-18 L9, L14: 4% and
    3% fewer cycles); the threads' weight loads then wait on the shared slot's last reader (the
    in-order load module), which costs more than it saves on a 3x3 layer (14x14 64->64, 7x14 ci2
    co1: 8% more cycles)."""
    return (
        overlapped(wl, ep, c, hw) > 0
        and not ep.residual_via_gemm
        and same_pixels(wl, c)
        and wl.kernel_h * wl.kernel_w == 1
        and wl.groups == 1  # (threads on other block groups read other input blocks)
    )


# The most parts the first group's first chunks are cut into (``first_chunk_parts``).
FIRST_CHUNK_MAX_PARTS = 4


def first_chunk_parts(c: ConvConfig) -> int:
    """In how many runs of output-channel blocks (at least two blocks each: no GEMM hazard)
    ``conv2d_overlap.emit_overlapped`` loads the weights of the first group's first chunks and
    runs their GEMMs: nothing hides the program's first loads, so the GEMM pipe starts after a
    part's weights instead of all the chunk's, and runs beside the next part's load."""
    return max(
        (
            d
            for d in range(1, FIRST_CHUNK_MAX_PARTS + 1)
            if c.tile_co % d == 0 and c.tile_co // d >= 2
        ),
        default=1,
    )


def check_fit(wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig) -> Geometry:
    """Raise FitError unless the config tiles the workload and fits the buffers."""
    problems = []
    if wl.block != hw.block_in:
        problems.append(
            f"the workload is packed to {wl.block}-element blocks but the hardware's BLOCK is"
            f" {hw.block_in} (pack for HwConfig.block_in)"
        )
    for name, n, total in (
        ("tile_h", c.tile_h, wl.out_h),
        ("tile_w", c.tile_w, wl.out_w),
        ("tile_ci", c.tile_ci, wl.red_blocks),
        ("tile_co", c.tile_co, wl.group_co_blocks),  # (a tile within one block group)
    ):
        if n <= 0 or total % n:
            problems.append(f"{name} {n} does not divide {total}")
    if c.vthreads not in (1, 2, 3, 4):
        problems.append(f"vthreads {c.vthreads} not in 1..4")
    if c.gemm_loops not in GEMM_LOOPS:
        problems.append(f"gemm_loops {c.gemm_loops} not one of {GEMM_LOOPS}")
    for name, allowed in (
        ("tile_order", TILE_ORDERS),
        ("chunk_order", CHUNK_ORDERS),
        ("uop_mode", UOP_MODES),
    ):
        if getattr(c, name) not in allowed:
            problems.append(f"{name} {getattr(c, name)!r} not one of {allowed}")
    if problems:
        raise FitError(f"config {c.to_dict()} is invalid for {wl}: " + "; ".join(problems))
    g = geometry(wl, ep, c)
    v = c.vthreads
    fixed = reserved_rows(wl, ep)
    needs = {
        "INP": (v * g.inp_rows + fixed["inp"], hw.inp_depth),
        "WGT": (v * g.wgt_rows + fixed["wgt"], hw.wgt_depth),
        "ACC": (v * g.acc_rows + fixed["acc"], hw.acc_depth),
    }
    over = [f"{b} needs {n} rows, has {have}" for b, (n, have) in needs.items() if n > have]
    if over:
        raise FitError(
            f"config {c.to_dict()} does not fit the buffers for {wl}: "
            + "; ".join(over)
            + f" ({v} virtual thread(s))"
        )
    fields = gemm_field_overflows(wl, c, g, hw)
    if fields:
        raise FitError(f"config {c.to_dict()}: " + "; ".join(fields))
    return g


def gemm_field_overflows(wl: ConvWorkload, c: ConvConfig, g: Geometry, hw: HwConfig) -> list[str]:
    """The GEMM instruction's loop extents and strides that do not fit their fields in ``hw``'s
    layout (``isa.gemm_layout``: the factor widths are the SRAM index widths of the config)."""
    layout = gemm_layout(hw)
    dims = gemm_dims(wl, c, g)
    out = []
    for level, dim in zip(("out", "in"), c.gemm_loops, strict=True):
        extent, *strides = dims[dim]
        values = {f"iter_{level}": extent}
        values |= {
            f"{m}_factor_{level}": s for m, s in zip(("dst", "src", "wgt"), strides, strict=True)
        }
        for name, value in values.items():
            f = layout[name]
            if value > f.max_value:
                out.append(
                    f"{dim} loop {name} = {value} exceeds the {f.width_bits}-bit field"
                    f" (max {f.max_value})"
                )
    return out


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def config_space(wl: ConvWorkload) -> dict[str, list]:
    """Knob name -> candidate values (every combination is a point; some do not fit)."""
    return {
        "tile_h": divisors(wl.out_h),
        "tile_w": divisors(wl.out_w),
        "tile_ci": divisors(wl.red_blocks),
        "tile_co": divisors(wl.group_co_blocks),
        "vthreads": [1, 2],
        "gemm_loops": list(GEMM_LOOPS),
    }


def schedule_space(wl: ConvWorkload) -> dict[str, list]:
    """``config_space`` with the schedule's other choices (the tuner's space): up to four
    threads, the epilogue beside the other threads' GEMMs or after them (``overlap``), the loop
    orders and the micro-op mode. Each new knob's first value is its default: with them the
    points of ``config_space`` lower to the same programs as before."""
    return config_space(wl) | {
        "vthreads": list(TUNED_VTHREADS),
        "overlap": [True, False],
        "tile_order": list(TILE_ORDERS),
        "chunk_order": list(CHUNK_ORDERS),
        "uop_mode": list(UOP_MODES),
    }


def all_configs(wl: ConvWorkload):
    space = config_space(wl)
    for values in itertools.product(*space.values()):
        yield ConvConfig(**dict(zip(space, values, strict=True)))


def fitting_configs(wl: ConvWorkload, ep: Epilogue, hw: HwConfig) -> list[ConvConfig]:
    """The configs of ``all_configs`` that pass ``check_fit`` (they may still not lower:
    a micro-op overflow or hazard shows only then)."""
    out = []
    for c in all_configs(wl):
        try:
            check_fit(wl, ep, c, hw)
        except FitError:
            continue
        out.append(c)
    return out
