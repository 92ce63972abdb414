"""A deliberately naive reference executor: one Python step per element and micro-op iteration,
in stream order. Written from the ISA text independently of ``pyvta.sim``, for small serialised
programs: ``execute(insns, dram, cfg)`` returns the final DRAM image."""

import numpy as np

from pyvta.isa import AluInsn, AluOp, FinishInsn, GemmInsn, MemInsn, MemType, Uop, clip_bounds


def _wrap32(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def _low8(x: int) -> int:
    return (x + 128) % 256 - 128


def alu_op(op: AluOp, a: int, b: int) -> int:
    if op is AluOp.MIN:
        return min(a, b)
    if op is AluOp.MAX:
        return max(a, b)
    if op is AluOp.ADD:
        return _wrap32(a + b)
    if op is AluOp.MUL:
        return _wrap32(a * b)
    if op is AluOp.CLIP:  # bounds: the signed bytes of b's low half-word
        lo, hi = clip_bounds(b)
        return min(max(a, lo), hi)
    if b >= 0:
        return a >> min(b, 31)
    return _wrap32(a << min(-b, 31))


def execute(insns, dram: np.ndarray, cfg) -> np.ndarray:
    dram = dram.copy()
    bat, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    uop = [Uop() for _ in range(cfg.uop_depth)]
    inp = np.zeros((cfg.inp_depth, bat, bi), np.int64)
    wgt = np.zeros((cfg.wgt_depth, bo, bi), np.int64)
    acc = np.zeros((cfg.acc_depth, bat, bo), np.int64)
    out = np.zeros((cfg.acc_depth, bat, bo), np.int64)
    for insn in insns:
        if isinstance(insn, FinishInsn):
            continue
        if isinstance(insn, MemInsn) and insn.is_store:
            eb = cfg.out_elem_bytes
            for y in range(insn.y_size):
                for x in range(insn.x_size):
                    row = out[insn.sram_base + y * insn.x_size + x].reshape(-1)
                    addr = (insn.dram_base + y * insn.x_stride + x) * eb
                    dram[addr : addr + eb] = (row % 256).astype(np.uint8)
        elif isinstance(insn, MemInsn):
            mt = insn.memory_type
            if insn.x_size == 0 or insn.y_size == 0:
                continue
            padded = mt in (MemType.INP, MemType.ACC, MemType.ACC_8BIT)
            y0, y1, x0, x1 = (
                (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1) if padded else (0,) * 4
            )
            width = x0 + insn.x_size + x1
            eb = cfg.elem_bytes_of(mt.dram_elem)
            sram = {MemType.INP: inp, MemType.WGT: wgt, MemType.ACC: acc, MemType.ACC_8BIT: acc}
            for y in range(y0 + insn.y_size + y1):
                for x in range(width):
                    dst = insn.sram_base + y * width + x
                    inside = y0 <= y < y0 + insn.y_size and x0 <= x < x0 + insn.x_size
                    addr = (insn.dram_base + (y - y0) * insn.x_stride + (x - x0)) * eb
                    raw = dram[addr : addr + eb] if inside else np.zeros(eb, np.uint8)
                    if mt is MemType.UOP:
                        uop[dst] = Uop.decode(int.from_bytes(raw.tobytes(), "little"), cfg)
                    elif mt is MemType.ACC:
                        acc[dst] = raw.view("<i4").reshape(bat, bo)
                    elif mt is MemType.ACC_8BIT:
                        acc[dst] = raw.view(np.int8).reshape(bat, bo)
                    else:
                        sram[mt][dst] = raw.view(np.int8).reshape(sram[mt].shape[1:])
        else:
            for i in range(insn.iter_out):
                for j in range(insn.iter_in):
                    for k in range(insn.uop_bgn, insn.uop_end):
                        u = uop[k]
                        d = u.dst + i * insn.dst_factor_out + j * insn.dst_factor_in
                        s = u.src + i * insn.src_factor_out + j * insn.src_factor_in
                        if isinstance(insn, GemmInsn):
                            w = u.wgt + i * insn.wgt_factor_out + j * insn.wgt_factor_in
                            if insn.reset_reg:
                                acc[d] = 0
                            else:
                                for b in range(bat):
                                    for o in range(bo):
                                        acc[d, b, o] = _wrap32(
                                            int(acc[d, b, o]) + int(inp[s, b] @ wgt[w, o])
                                        )
                        else:
                            assert isinstance(insn, AluInsn)
                            for b in range(bat):
                                for o in range(bo):
                                    other = insn.imm if insn.use_imm else int(acc[s, b, o])
                                    acc[d, b, o] = alu_op(insn.alu_opcode, int(acc[d, b, o]), other)
                        out[d] = [[_low8(int(v)) for v in row] for row in acc[d]]
    return dram
