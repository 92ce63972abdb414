"""What the accelerator computes: a conv2d (dense is the 1x1, 1-pixel case) with a fused
integer epilogue, on the packed layouts.

Layouts (batch 1; ``b`` = block = ``HwConfig.block_in`` channels, zero-padded; 16 by default):
    data      (ci_blocks, H, W, b)               int8   NCHW1n16c without the batch axes
    weights   (co_blocks, red_blocks, KH, KW, b_out, b_in)   int8   OIHW16o16i
              (red_blocks = ci_blocks / groups: the block groups of a grouped conv)
    bias      (co_blocks, b)                     int32
    residual  (co_blocks, OH, OW, b)             int8   (optional)
    output    (co_blocks, OH, OW, b)             int8

Epilogue arithmetic, exactly (int32 wrapping, arithmetic shifts):
    acc = sum_{ci,kh,kw} data * weights          (int32)
    acc = acc + bias                             (if bias)
    acc = acc >> channel_shift[co]               (if channel_shift; per output channel, 0..31)
    acc = acc + (residual << residual_shift)     (if residual)
    acc = acc >> shift                           (arithmetic; shift 0..31)
    out = int8(min(max(acc, lo), hi))            (relu: lo = 0)

``channel_shift`` (per-channel weight scales): the shifts are int32 rows (co_blocks, b), held in
ACC after the bias rows, applied by an ALU SHR with them as the vector operand.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyvta.isa import DEFAULT_CONFIG, PyvtaError
from pyvta.isa.layout import MEMOP_PAD_BITS

MAX_PAD = (1 << MEMOP_PAD_BITS) - 1  # the LOAD instruction's pad fields


class WorkloadError(PyvtaError, ValueError):
    """A workload the accelerator cannot run as described."""


def _pos(name: str, v: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise WorkloadError(f"{name} must be a positive int, got {v!r}")
    return v


@dataclass(frozen=True)
class ConvWorkload:
    height: int
    width: int
    in_channels: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride: int = 1
    pad: int = 0  # top (and left, bottom, right unless given)
    block: int = DEFAULT_CONFIG.block_in
    pad_bottom: int | None = None
    pad_right: int | None = None
    pad_left: int | None = None  # (the LOAD's x_pad_0; None: ``pad``)
    # images per launch: data (batch, ci_blocks, H, W, b), output (batch, co_blocks, OH, OW, b);
    # the template tiles them as one image of batch * OH output rows (tiles never straddle two)
    batch: int = 1
    # block groups: output blocks [j*co_blocks/groups, ...) read input blocks
    # [j*ci_blocks/groups, ...) only (a grouped or depthwise conv as block-diagonal GEMMs: its
    # weights are (co_blocks, red_blocks, KH, KW, b, b), dense within a block group)
    groups: int = 1
    dilation: int = 1  # the kernel taps' spacing, rows and columns

    def __post_init__(self):
        for name in (
            "height",
            "width",
            "in_channels",
            "out_channels",
            "kernel_h",
            "kernel_w",
            "stride",
            "block",
            "batch",
            "groups",
            "dilation",
        ):
            _pos(name, getattr(self, name))
        if self.ci_blocks % self.groups or self.co_blocks % self.groups:
            raise WorkloadError(
                f"groups {self.groups} must divide the input and output blocks"
                f" ({self.ci_blocks}, {self.co_blocks})"
            )
        for name in ("pad", "pad_bottom", "pad_right", "pad_left"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or not 0 <= v <= MAX_PAD):
                raise WorkloadError(
                    f"{name} must be an int in 0..{MAX_PAD} (the {MEMOP_PAD_BITS}-bit pad fields),"
                    f" got {v!r}"
                )
        if self.out_h <= 0 or self.out_w <= 0:
            raise WorkloadError(
                f"kernel {self.ext_h}x{self.ext_w} is larger than the padded input"
                f" {self.height + self.pad + self.pad_b}x{self.width + self.pad_l + self.pad_r}"
            )

    @classmethod
    def dense(
        cls, in_features: int, out_features: int, block: int = DEFAULT_CONFIG.block_in
    ) -> ConvWorkload:
        return cls(1, 1, in_features, out_features, 1, 1, 1, 0, block)

    @property
    def out_h(self) -> int:
        return (self.height + self.pad + self.pad_b - self.ext_h) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.width + self.pad_l + self.pad_r - self.ext_w) // self.stride + 1

    @property
    def ext_h(self) -> int:
        """Rows the (dilated) kernel spans."""
        return (self.kernel_h - 1) * self.dilation + 1

    @property
    def ext_w(self) -> int:
        return (self.kernel_w - 1) * self.dilation + 1

    def to_dict(self) -> dict:
        """The fields, without ``pad_left`` when it is None (``pad``): the records of tuning
        logs written before it existed keep their keys."""
        d = dataclasses.asdict(self)
        if d["pad_left"] is None:
            del d["pad_left"]
        for k in ("batch", "groups", "dilation"):
            if d[k] == 1:
                del d[k]
        return d

    @property
    def pad_l(self) -> int:
        return self.pad if self.pad_left is None else self.pad_left

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """(top, left, bottom, right), the graph's order."""
        return (self.pad, self.pad_l, self.pad_b, self.pad_r)

    @property
    def pad_b(self) -> int:
        return self.pad if self.pad_bottom is None else self.pad_bottom

    @property
    def pad_r(self) -> int:
        return self.pad if self.pad_right is None else self.pad_right

    @property
    def ci_blocks(self) -> int:
        return -(-self.in_channels // self.block)

    @property
    def co_blocks(self) -> int:
        return -(-self.out_channels // self.block)

    @property
    def red_blocks(self) -> int:
        """Input blocks each output block reduces over (all of them without block groups)."""
        return self.ci_blocks // self.groups

    @property
    def group_co_blocks(self) -> int:
        """Output blocks of one block group."""
        return self.co_blocks // self.groups

    def input_block(self, co: int, ci: int) -> int:
        """The input block of output block ``co``'s ``ci``-th reduction block."""
        return co // self.group_co_blocks * self.red_blocks + ci

    @property
    def macs(self) -> int:
        """MACs of the padded (block-aligned) problem: what the GEMM core performs."""
        return (
            self.batch
            * self.co_blocks
            * self.red_blocks
            * self.block
            * self.block
            * self.kernel_h
            * self.kernel_w
            * self.out_h
            * self.out_w
        )

    @property
    def gemm_uops(self) -> int:
        """GEMM micro-ops of the whole layer: its ideal cycles at one micro-op per cycle."""
        return self.macs // (self.block * self.block)

    @property
    def useful_macs(self) -> int:
        return (
            self.batch
            * self.out_channels
            * self.in_channels
            // self.groups
            * self.kernel_h
            * self.kernel_w
            * self.out_h
            * self.out_w
        )

    def __str__(self) -> str:
        pads = self.pads
        p = f"p{self.pad}" if len(set(pads)) == 1 else "p" + ",".join(map(str, pads))
        return (
            f"conv {self.height}x{self.width} {self.in_channels}->{self.out_channels}"
            f" k{self.kernel_h}x{self.kernel_w} s{self.stride} {p}"
            + (f" n{self.batch}" if self.batch > 1 else "")
            + (f" g{self.groups}" if self.groups > 1 else "")
            + (f" d{self.dilation}" if self.dilation > 1 else "")
        )


@dataclass(frozen=True)
class Epilogue:
    """The fused integer epilogue (see the module docstring for the exact arithmetic)."""

    bias: bool = True
    shift: int = 0
    lo: int = -128
    hi: int = 127
    residual: bool = False
    residual_shift: int = 0
    # Lowering choices (not arithmetic): add the bias with one GEMM pass over "bias digit"
    # weights instead of an ALU ADD (possible when |bias| is small enough, see bias_digits).
    bias_via_gemm: bool = False
    # Split the shift around the residual: (acc >> a) + (res << (k - a)), then >> (s - a) with
    # a = min(k, s). Equal to the contract when the int32 sum cannot wrap (the caller checks).
    residual_after_shift: bool = False
    # A per-channel right shift after the bias (rows of shift amounts beside the bias rows in
    # ACC); the bias is then added on the ALU and the residual by the ALU path.
    channel_shift: bool = False

    # The residual is added by a GEMM against 2^e * identity weights (e <= 6, in 2^(e - 6)
    # passes above that) when e is at most this (cheaper than the ALU path); else by the ALU.
    RESIDUAL_GEMM_MAX_SHIFT = 8

    @property
    def residual_gemm_shift(self) -> int:
        """The power of two the residual is multiplied by in the GEMM path."""
        if self.residual_after_shift:
            return self.residual_shift - self.residual_pre_shift
        return self.residual_shift

    @property
    def residual_pre_shift(self) -> int:
        """With ``residual_after_shift``: the part of the shift applied before the residual."""
        return min(self.residual_shift, self.shift)

    @property
    def residual_via_gemm(self) -> bool:
        if self.channel_shift:  # a GEMM pass would add it before the channel shift
            return False
        return self.residual and 0 <= self.residual_gemm_shift <= self.RESIDUAL_GEMM_MAX_SHIFT

    @property
    def residual_passes(self) -> int:
        return 1 << max(self.residual_gemm_shift - 6, 0)

    def __post_init__(self):
        if not 0 <= self.shift <= 31:
            raise WorkloadError(f"shift must be in 0..31, got {self.shift}")
        if not 0 <= self.residual_shift <= 31:
            raise WorkloadError(f"residual_shift must be in 0..31, got {self.residual_shift}")
        if not -128 <= self.lo <= self.hi <= 127:
            raise WorkloadError(
                f"clip bounds must satisfy -128 <= lo <= hi <= 127, got {self.lo}, {self.hi}"
            )

    def to_dict(self) -> dict:
        """The fields as a dict, ``channel_shift`` only when set: a tuning task's key (so the
        keys of logs written before the field existed still match)."""
        d = dataclasses.asdict(self)
        if not self.channel_shift:
            del d["channel_shift"]
        return d

    @classmethod
    def requant(cls, shift: int, relu: bool = False, bias: bool = True, **kw) -> Epilogue:
        return cls(bias=bias, shift=shift, lo=0 if relu else -128, hi=127, **kw)


def resnet18_workload(name: str, block: int = DEFAULT_CONFIG.block_in) -> ConvWorkload:
    """The VTA workload of a ResNet-18 layer ("C2".."C12", see ``compiler.workloads``), packed to
    ``block`` channels (``HwConfig.block_in``)."""
    from pyvta.compiler.workloads import RESNET18_LAYERS

    try:
        s = RESNET18_LAYERS[name]
    except KeyError:
        raise WorkloadError(
            f"unknown layer {name!r} (known: {', '.join(RESNET18_LAYERS)})"
        ) from None
    return ConvWorkload(
        s.height, s.width, s.in_channels, s.out_channels, s.kernel, s.kernel, s.stride, s.pad, block
    )
