"""Collects a VTA instruction stream with what each instruction reads and writes, and the
deduplicated micro-op kernels it uses (loaded once, at the start of the program)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyvta.isa import AluInsn, GemmInsn, HwConfig, Insn, Load, MemInsn, MemType, Uop
from pyvta.isa.errors import PyvtaError


@dataclass(frozen=True)
class Access:
    """A range [lo, hi) of rows of one space ('inp', 'wgt', 'acc', 'out', 'uop') or bytes of
    'dram', read or written."""

    space: str
    lo: int
    hi: int
    write: bool


class UopOverflowError(PyvtaError, ValueError):
    pass


class Emitter:
    """``dynamic_uops=False``: every distinct kernel gets its own place in the micro-op buffer
    and all are loaded once, first (UopOverflowError if they do not fit together).
    ``dynamic_uops=True``: kernels are placed in the buffer as a ring and loaded on first use
    after they were evicted, so a program may use more micro-ops than the buffer holds. UOP
    loads run on the compute module, in order with the GEMMs, so no token is needed.
    ``self.uops`` is the DRAM image of the distinct kernels in both modes."""

    def __init__(self, hw: HwConfig, dynamic_uops: bool = False):
        self.hw = hw
        self.dynamic = dynamic_uops
        self.insns: list[Insn] = []
        self.accesses: list[list[Access]] = []
        self.uops: list[Uop] = []
        self._kernels: dict[tuple[Uop, ...], int] = {}  # kernel -> offset in self.uops (DRAM)
        self._resident: dict[tuple[Uop, ...], int] = {}  # kernel -> SRAM offset (dynamic mode)
        self._ring = 0
        self._uop_loads: list[int] = []  # indices of UOP loads whose dram_base is relative

    # -- micro-op kernels ----------------------------------------------------------------------
    def kernel(self, uops: list[Uop]) -> int:
        """Offset in the micro-op buffer of this kernel (deduplicated; loaded if needed)."""
        key = tuple(uops)
        if len(key) > self.hw.uop_depth:
            raise UopOverflowError(
                f"a micro-op kernel of {len(key)} entries exceeds the UOP buffer"
                f" ({self.hw.uop_depth})"
            )
        if key not in self._kernels:
            self._kernels[key] = len(self.uops)
            self.uops.extend(uops)
            if not self.dynamic and len(self.uops) > self.hw.uop_depth:
                raise UopOverflowError(
                    f"micro-op kernels need {len(self.uops)} entries, the UOP buffer has"
                    f" {self.hw.uop_depth}"
                )
        if not self.dynamic:
            return self._kernels[key]
        if key not in self._resident:
            n = len(key)
            if self._ring + n > self.hw.uop_depth:
                self._ring = 0
            lo, hi = self._ring, self._ring + n
            for other, off in list(self._resident.items()):  # evict what the new one overlaps
                if off < hi and lo < off + len(other):
                    del self._resident[other]
            self._resident[key] = lo
            self._ring = hi
            self._uop_loads.append(len(self.insns))
            self.emit(
                Load(
                    MemType.UOP,
                    sram_base=lo,
                    dram_base=self._kernels[key],
                    y_size=1,
                    x_size=n,
                    x_stride=n,
                ),
                [Access("uop", lo, hi, True)],
            )
        return self._resident[key]

    # -- instructions ----------------------------------------------------------------------------
    def emit(self, insn: Insn, accesses: list[Access]) -> None:
        self.insns.append(insn)
        self.accesses.append(accesses)

    def load(
        self,
        mem: MemType,
        sram_base: int,
        dram_base: int,
        y: int,
        x: int,
        stride: int,
        pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    ) -> None:
        y0, y1, x0, x1 = pads
        rows = (y0 + y + y1) * (x0 + x + x1)
        elem = self.hw.elem_bytes_of(mem.dram_elem)
        lo = dram_base * elem
        hi = (dram_base + (y - 1) * stride + x) * elem
        self.emit(
            Load(
                mem,
                sram_base=sram_base,
                dram_base=dram_base,
                y_size=y,
                x_size=x,
                x_stride=stride,
                y_pad_0=y0,
                y_pad_1=y1,
                x_pad_0=x0,
                x_pad_1=x1,
            ),
            [Access(mem.sram, sram_base, sram_base + rows, True), Access("dram", lo, hi, False)],
        )

    def store(self, sram_base: int, dram_base: int, y: int, x: int, stride: int) -> None:
        from pyvta.isa import Store

        elem = self.hw.out_elem_bytes
        self.emit(
            Store(sram_base=sram_base, dram_base=dram_base, y_size=y, x_size=x, x_stride=stride),
            [
                Access("out", sram_base, sram_base + y * x, False),
                Access("dram", dram_base * elem, (dram_base + (y - 1) * stride + x) * elem, True),
            ],
        )

    def loop(self, insn: GemmInsn | AluInsn, kernel: list[Uop]) -> None:
        """Emit a GEMM/ALU over ``kernel`` (uop_bgn/uop_end filled in), with its access ranges."""
        off = self.kernel(kernel)
        insn = dataclasses.replace(insn, uop_bgn=off, uop_end=off + len(kernel))
        last_o, last_i = max(insn.iter_out - 1, 0), max(insn.iter_in - 1, 0)

        def span(name: str, f_out: int, f_in: int) -> tuple[int, int]:
            bases = [getattr(u, name) for u in kernel]
            return min(bases), max(bases) + last_o * f_out + last_i * f_in + 1

        d_lo, d_hi = span("dst", insn.dst_factor_out, insn.dst_factor_in)
        s_lo, s_hi = span("src", insn.src_factor_out, insn.src_factor_in)
        acc = [
            Access("uop", off, off + len(kernel), False),
            Access("acc", d_lo, d_hi, True),
            Access("acc", d_lo, d_hi, False),
            Access("out", d_lo, d_hi, True),
        ]
        if isinstance(insn, GemmInsn):
            if not insn.reset_reg:
                w_lo, w_hi = span("wgt", insn.wgt_factor_out, insn.wgt_factor_in)
                acc += [Access("inp", s_lo, s_hi, False), Access("wgt", w_lo, w_hi, False)]
        elif not insn.use_imm:
            acc.append(Access("acc", s_lo, s_hi, False))
        self.emit(insn, acc)

    def finish(self) -> None:
        from pyvta.isa import FinishInsn

        everything = [
            Access(s, 0, self.hw.depth_of(s), False) for s in ("inp", "wgt", "acc", "out")
        ]
        everything.append(Access("dram", 0, 1 << 62, False))
        self.emit(FinishInsn(), everything)

    def program(self, uop_dram_base: int) -> tuple[list[Insn], list[list[Access]]]:
        """The instruction stream, micro-ops at ``uop_dram_base`` (micro-op units): one load of
        every kernel first, or (dynamic mode) the loads placed where kernels were needed."""
        if self.dynamic:
            insns = list(self.insns)
            for i in self._uop_loads:
                insns[i] = dataclasses.replace(
                    insns[i], dram_base=insns[i].dram_base + uop_dram_base
                )
            return insns, list(self.accesses)
        n = len(self.uops)
        head: list[Insn] = []
        head_acc: list[list[Access]] = []
        if n:
            head.append(
                Load(
                    MemType.UOP,
                    sram_base=0,
                    dram_base=uop_dram_base,
                    y_size=1,
                    x_size=n,
                    x_stride=n,
                )
            )
            head_acc.append([Access("uop", 0, n, True)])
        return head + self.insns, head_acc + self.accesses


def is_mem(insn: Insn) -> bool:
    return isinstance(insn, MemInsn)
