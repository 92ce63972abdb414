"""Seeded random *valid* programs for differential testing (simulator vs RTL vs board).

Every field is drawn from the ISA's ranges, bounded so that all accesses stay inside the SRAMs and
DRAM and no two consecutive micro-ops write one ACC row. Modules are serialised with dependency
tokens at every hand-over (a LOAD-to-STORE hand-over goes through a token-only compute
instruction), so the result is the same under any timing: a correct RTL must match it bit for bit.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pyvta.isa import (
    DEFAULT_CONFIG,
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    HwConfig,
    Insn,
    Load,
    MemType,
    Module,
    Store,
    Uop,
    decode_uop_fields,
    encode_uops,
)
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.errors import HazardError
from pyvta.sim.loops import check_hazard, expand
from pyvta.sim.program import Program

DATA_BYTES = 1 << 16
OUT_BYTES = 1 << 14

# Which header flags hand a token from one module to the next: (push on prev, pop on next).
_HANDOVER = {
    (Module.LOAD, Module.COMPUTE): ("push_next_dep", "pop_prev_dep"),
    (Module.COMPUTE, Module.LOAD): ("push_prev_dep", "pop_next_dep"),
    (Module.COMPUTE, Module.STORE): ("push_next_dep", "pop_prev_dep"),
    (Module.STORE, Module.COMPUTE): ("push_prev_dep", "pop_next_dep"),
}


class _Gen:
    def __init__(self, cfg: HwConfig, rng: np.random.Generator, max_iters: int):
        self.cfg, self.rng, self.max_iters = cfg, rng, max_iters
        self.pb = ProgramBuilder(cfg, dram_bytes=DATA_BYTES + OUT_BYTES + (1 << 18))
        self.data_addr = self.pb.dram.alloc(DATA_BYTES, 256)
        self.pb.dram.write(self.data_addr, rng.integers(0, 256, DATA_BYTES, dtype=np.uint8))
        self.out_addr = self.pb.dram.alloc(OUT_BYTES, 256)
        self.uop_shadow = np.zeros(cfg.uop_depth, np.uint32)
        self.rows: list[list[tuple[int, int]]] = []  # per GEMM/ALU in order: its ACC/OUT rows

    def r(self, lo: int, hi: int) -> int:
        """An int in [lo, hi] inclusive."""
        return int(self.rng.integers(lo, hi + 1))

    def mem_load(self, mt: MemType) -> Insn:
        cfg = self.cfg
        elem = cfg.elem_bytes_of(mt.dram_elem)
        depth = cfg.depth_of(mt.sram)
        x, y = self.r(1, 6), self.r(1, 4)
        stride = x + self.r(0, 3)
        pads = (
            [self.r(0, 3) for _ in range(4)]
            if mt in (MemType.INP, MemType.ACC, MemType.ACC_8BIT)
            else [0] * 4
        )
        total = (pads[0] + y + pads[1]) * (pads[2] + x + pads[3])
        sram = self.r(0, max(depth - total, 0))
        span = (y - 1) * stride + x
        first = -(-self.data_addr // elem)
        last = (self.data_addr + DATA_BYTES) // elem - span
        return Load(
            mt,
            sram_base=sram,
            dram_base=self.r(first, last),
            y_size=y,
            x_size=x,
            x_stride=stride,
            y_pad_0=pads[0],
            y_pad_1=pads[1],
            x_pad_0=pads[2],
            x_pad_1=pads[3],
        )

    def uop_load(self) -> Insn:
        cfg = self.cfg
        n = self.r(1, 12)
        src_depth = min(cfg.inp_depth, cfg.acc_depth)
        uops = [
            Uop(
                self.r(0, cfg.acc_depth - 1), self.r(0, src_depth - 1), self.r(0, cfg.wgt_depth - 1)
            )
            for _ in range(n)
        ]
        base = self.r(0, min(cfg.uop_depth, 64) - n)
        words = np.frombuffer(encode_uops(uops, cfg), "<u4")
        self.uop_shadow[base : base + n] = words
        addr = self.pb.put_uops(uops)
        return Load(MemType.UOP, sram_base=base, dram_base=addr, y_size=1, x_size=n, x_stride=n)

    def loop_insn(self, gemm: bool) -> Insn | None:
        """A GEMM or ALU whose every iteration stays in bounds without a hazard (None: gave up)."""
        cfg = self.cfg
        for _ in range(20):
            bgn = self.r(0, 60)
            end = bgn + self.r(1, 4)
            kw = dict(
                uop_bgn=bgn,
                uop_end=end,
                iter_out=self.r(1, 6),
                iter_in=self.r(1, 6),
                dst_factor_out=self.r(0, 40),
                dst_factor_in=self.r(0, 40),
                src_factor_out=self.r(0, 40),
                src_factor_in=self.r(0, 40),
            )
            if gemm:
                insn = GemmInsn(
                    reset_reg=self.rng.random() < 0.2,
                    wgt_factor_out=self.r(0, 20),
                    wgt_factor_in=self.r(0, 20),
                    **kw,
                )
                depths = {"dst": cfg.acc_depth, "src": cfg.inp_depth, "wgt": cfg.wgt_depth}
            else:
                op = AluOp(self.r(0, len(AluOp) - 1))
                imm_hi = 40 if op is AluOp.SHR else 300
                insn = AluInsn(
                    alu_opcode=op,
                    use_imm=self.rng.random() < 0.5,
                    imm=self.r(-imm_hi, imm_hi),
                    **kw,
                )
                depths = {"dst": cfg.acc_depth, "src": cfg.acc_depth}
            uops = decode_uop_fields(self.uop_shadow[bgn:end], cfg)
            idx = expand(insn, uops, 0, insn.iter_out)
            if any(idx[k].max() >= d for k, d in depths.items()):
                continue
            if not (gemm and insn.reset_reg):
                try:
                    check_hazard(insn, idx["dst"], 0)
                except HazardError:
                    continue
            rows = [(int(idx["dst"].min()), int(idx["dst"].max()) + 1)]
            if not gemm and not insn.use_imm:
                rows.append((int(idx["src"].min()), int(idx["src"].max()) + 1))
            self.rows.append(rows)
            return insn
        return None

    def store(self) -> Insn:
        cfg = self.cfg
        elem = cfg.out_elem_bytes
        x, y = self.r(1, 8), self.r(1, 4)
        stride = x + self.r(0, 3)
        span = (y - 1) * stride + x
        first = self.out_addr // elem
        last = (self.out_addr + OUT_BYTES) // elem - span
        return Store(
            sram_base=self.r(0, cfg.out_depth - y * x),
            dram_base=self.r(first, last),
            y_size=y,
            x_size=x,
            x_stride=stride,
        )

    def draw(self, compute_heavy: bool = False) -> Insn | None:
        """One instruction; ``compute_heavy``: GEMM/ALU runs more often (fewer compute LOADs)."""
        kind = self.rng.choice(
            ["inp", "wgt", "acc", "acc8", "uop", "gemm", "alu", "store"],
            p=[0.1, 0.1, 0.03, 0.03, 0.06, 0.3, 0.3, 0.08]
            if compute_heavy
            else [0.12, 0.12, 0.08, 0.06, 0.1, 0.22, 0.18, 0.12],
        )
        mem = {"inp": MemType.INP, "wgt": MemType.WGT, "acc": MemType.ACC, "acc8": MemType.ACC_8BIT}
        if kind in mem:
            return self.mem_load(mem[kind])
        if kind == "uop":
            return self.uop_load()
        if kind in ("gemm", "alu"):
            return self.loop_insn(kind == "gemm")
        return self.store()


def _serialise(body: list[Insn]) -> list[Insn]:
    """Insert dependency tokens at every change of module (and a FINISH at the end)."""
    out: list[Insn] = []
    for insn in body + [FinishInsn()]:
        if out and out[-1].module is not insn.module:
            pair = (out[-1].module, insn.module)
            if pair not in _HANDOVER:  # load <-> store: hand over through compute
                out = _serialise_append(out, Load(MemType.UOP))
            out = _serialise_append(out, insn)
        else:
            out.append(insn)
    return out


def _serialise_append(out: list[Insn], insn: Insn) -> list[Insn]:
    push, pop = _HANDOVER[(out[-1].module, insn.module)]
    out[-1] = dataclasses.replace(out[-1], **{push: True})
    out.append(dataclasses.replace(insn, **{pop: True}))
    return out


def _mark_overlaps(
    insns: list[Insn], rows: list[list[tuple[int, int]]], rng: np.random.Generator
) -> list[Insn]:
    """Set ``overlap`` (isa.layout.OVERLAP_DOC) on three in four of the GEMM/ALU instructions
    that may have it: the ACC/OUT rows (``rows``, per GEMM/ALU in order) disjoint from the partner's
    (the other pipe's latest GEMM/ALU, with no compute LOAD between), and no push of their own
    (the serialised program's next module reads everything before it)."""
    out = list(insns)
    latest: dict[bool, tuple[int, list]] = {}  # is GEMM -> (position, rows)
    k = 0
    for i, insn in enumerate(insns):
        if insn.module is not Module.COMPUTE:
            continue
        if not isinstance(insn, GemmInsn | AluInsn):
            latest.clear()
            continue
        mine, is_gemm = rows[k], isinstance(insn, GemmInsn)
        k += 1
        partner = latest.get(not is_gemm)
        latest[is_gemm] = (i, mine)
        pushes = insn.push_prev_dep or insn.push_next_dep
        if partner is None or pushes or rng.random() < 0.25:
            continue
        if all(hi <= lo2 or hi2 <= lo for lo, hi in mine for lo2, hi2 in partner[1]):
            out[i] = dataclasses.replace(insn, overlap=True)
    return out


def random_program(
    rng: np.random.Generator,
    cfg: HwConfig = DEFAULT_CONFIG,
    n_insns: tuple[int, int] = (4, 40),
    max_iters: int = 4096,
    overlap: bool = False,
) -> Program:
    """A random valid program of between n_insns[0] and n_insns[1] body instructions.
    ``overlap``: more GEMM/ALU instructions in a row, and the overlap bit set where it is legal
    (``_mark_overlaps``); another program than the same seed without it."""
    gen = _Gen(cfg, rng, max_iters)
    body: list[Insn] = []
    target = gen.r(*n_insns)
    while len(body) < target:
        insn = gen.draw(compute_heavy=overlap)
        if insn is not None:
            body.append(insn)
    insns = _serialise(body)
    if overlap:
        insns = _mark_overlaps(insns, gen.rows, rng)
    for insn in insns:
        gen.pb.emit(insn)
    return gen.pb.build()
