"""Golden words computed by hand from the field tables of ../shared/reference/vta-isa.md."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyvta.isa import (
    AluInsn,
    AluOp,
    DecodeError,
    FieldRangeError,
    FinishInsn,
    GemmInsn,
    HwConfig,
    Load,
    MemInsn,
    MemType,
    Module,
    Store,
    Uop,
    alu_layout,
    decode,
    gemm_layout,
    mem_layout,
    uop_layout,
)

CFG = HwConfig()


def bits(**fields_at):
    """Build a word from {name: (lsb, value)}: an independent restatement of the tables."""
    word = 0
    for lsb, value in fields_at.values():
        word |= value << lsb
    return word


def test_load_golden_word():
    insn = Load(
        MemType.INP,
        sram_base=0x123,
        dram_base=0xABCDE,
        y_size=7,
        x_size=9,
        x_stride=300,
        y_pad_0=1,
        y_pad_1=2,
        x_pad_0=3,
        x_pad_1=15,
        pop_next_dep=True,
        push_next_dep=True,
    )
    expected = bits(
        op=(0, 0),
        pn=(4, 1),
        psn=(6, 1),
        mt=(7, 2),
        sram=(10, 0x123),
        dram=(26, 0xABCDE),
        y=(64, 7),
        x=(80, 9),
        stride=(96, 300),
        yp0=(112, 1),
        yp1=(116, 2),
        xp0=(120, 3),
        xp1=(124, 15),
    )
    assert insn.encode(CFG) == expected
    assert decode(expected, CFG) == insn


def test_store_golden_word():
    insn = Store(
        sram_base=5,
        dram_base=0xFFFFFFFF,
        y_size=1,
        x_size=65535,
        x_stride=65535,
        pop_prev_dep=True,
        push_prev_dep=True,
    )
    expected = bits(
        op=(0, 1),
        pp=(3, 1),
        psp=(5, 1),
        mt=(7, 4),
        sram=(10, 5),
        dram=(26, 0xFFFFFFFF),
        y=(64, 1),
        x=(80, 65535),
        stride=(96, 65535),
    )
    assert insn.encode(CFG) == expected
    assert decode(expected, CFG) == insn


def test_gemm_golden_word():
    insn = GemmInsn(
        reset_reg=True,
        uop_bgn=8191,
        uop_end=8192,
        iter_out=16383,
        iter_in=3,
        dst_factor_out=2047,
        dst_factor_in=5,
        src_factor_out=6,
        src_factor_in=2047,
        wgt_factor_out=1023,
        wgt_factor_in=9,
        pop_prev_dep=True,
    )
    expected = bits(
        op=(0, 2),
        pp=(3, 1),
        reset=(7, 1),
        bgn=(8, 8191),
        end=(21, 8192),
        io=(35, 16383),
        ii=(49, 3),
        dfo=(64, 2047),
        dfi=(75, 5),
        sfo=(86, 6),
        sfi=(97, 2047),
        wfo=(108, 1023),
        wfi=(118, 9),
    )
    assert insn.encode(CFG) == expected
    assert decode(expected, CFG) == insn


def test_alu_golden_word_with_negative_immediate():
    insn = AluInsn(
        alu_opcode=AluOp.SHR,
        use_imm=True,
        imm=-3,
        uop_bgn=1,
        uop_end=4,
        iter_out=2,
        iter_in=5,
        dst_factor_out=16,
        src_factor_in=1,
        push_next_dep=True,
    )
    expected = bits(
        op=(0, 4),
        psn=(6, 1),
        bgn=(8, 1),
        end=(21, 4),
        io=(35, 2),
        ii=(49, 5),
        dfo=(64, 16),
        sfi=(97, 1),
        aop=(108, 3),
        imm_flag=(111, 1),
        imm=(112, (-3) & 0xFFFF),
    )
    assert insn.encode(CFG) == expected
    assert decode(expected, CFG) == insn


def test_finish_and_uop_golden_words():
    assert FinishInsn().encode(CFG) == 3
    assert FinishInsn(pop_next_dep=True).encode(CFG) == 3 | 1 << 4
    assert Uop(dst=2047, src=1, wgt=1023).encode(CFG) == 2047 | 1 << 11 | 1023 << 22
    assert Uop.decode(2047 | 1 << 11 | 1023 << 22, CFG) == Uop(2047, 1, 1023)


def test_opcode_and_memtype_numbers():
    assert [
        int(x)
        for x in (MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC, MemType.OUT, MemType.ACC_8BIT)
    ] == [0, 1, 2, 3, 4, 5]
    assert [int(x) for x in AluOp] == [0, 1, 2, 3, 4, 5]  # CLIP: a pyvta extension


def test_layouts_match_reference_table():
    g = gemm_layout(CFG).fields
    assert (g["uop_bgn"].lsb, g["uop_bgn"].msb) == (8, 20)
    assert (g["uop_end"].lsb, g["uop_end"].msb) == (21, 34)
    assert (g["iter_in"].lsb, g["iter_in"].msb) == (49, 62)
    assert (g["wgt_factor_in"].lsb, g["wgt_factor_in"].msb) == (118, 127)
    a = alu_layout(CFG).fields
    assert (a["alu_opcode"].lsb, a["use_imm"].lsb, a["imm"].lsb, a["imm"].msb) == (
        108,
        111,
        112,
        127,
    )
    m = mem_layout(CFG).fields
    assert (m["dram_base"].lsb, m["dram_base"].msb, m["x_pad_1"].msb) == (26, 57, 127)
    u = uop_layout(CFG).fields
    assert (u["dst"].width_bits, u["src"].width_bits, u["wgt"].width_bits) == (11, 11, 10)


def test_dispatch_modules():
    assert Load(MemType.INP).module is Module.LOAD
    assert Load(MemType.WGT).module is Module.LOAD
    assert Load(MemType.UOP).module is Module.COMPUTE
    assert Load(MemType.ACC).module is Module.COMPUTE
    assert Load(MemType.ACC_8BIT).module is Module.COMPUTE
    assert Store().module is Module.STORE
    assert GemmInsn().module is Module.COMPUTE
    assert FinishInsn().module is Module.COMPUTE


@pytest.mark.parametrize(
    "insn, message",
    [
        (
            GemmInsn(iter_out=16384),
            "GemmInsn.iter_out = 16384 does not fit its 14-bit field (allowed 0..16383)",
        ),
        (
            GemmInsn(uop_bgn=8192),
            "GemmInsn.uop_bgn = 8192 does not fit its 13-bit field (allowed 0..8191)",
        ),
        (
            AluInsn(imm=40000),
            "AluInsn.imm = 40000 does not fit its 16-bit field (allowed -32768..32767)",
        ),
        (
            Load(MemType.INP, x_pad_0=16),
            "MemInsn.x_pad_0 = 16 does not fit its 4-bit field (allowed 0..15)",
        ),
        (Load(MemType.INP, dram_base=-1), "MemInsn.dram_base = -1 does not fit its 32-bit field"),
        (
            GemmInsn(wgt_factor_in=1024),
            "GemmInsn.wgt_factor_in = 1024 does not fit its 10-bit field",
        ),
    ],
)
def test_field_range_errors(insn, message):
    with pytest.raises(FieldRangeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        insn.encode(CFG)


def test_uop_range_error():
    with pytest.raises(FieldRangeError, match=r"Uop.wgt = 1024 does not fit its 10-bit field"):
        Uop(wgt=1024).encode(CFG)


@pytest.mark.parametrize(
    "word, message",
    [
        (5, "opcode 5 is not valid"),
        (7, "opcode 7 is not valid"),
        (0 | 6 << 7, "memory_type 6 is not valid"),
        (0 | 4 << 7, "LOAD of memory type OUT is not valid"),
        (1 | 2 << 7, "STORE of memory type INP is not valid"),
        (4 | 7 << 108, "alu_opcode 7 is not valid"),
        (1 << 128, "is not a 128-bit value"),
    ],
)
def test_decode_errors(word, message):
    with pytest.raises(DecodeError, match=message):
        decode(word, CFG, index=3)


# ---- property tests: encode/decode round trips ---------------------------------------------


def _u(bits_):
    return st.integers(0, (1 << bits_) - 1)


flags = dict(
    pop_prev_dep=st.booleans(),
    pop_next_dep=st.booleans(),
    push_prev_dep=st.booleans(),
    push_next_dep=st.booleans(),
)
loop = dict(
    reset_reg=st.booleans(),
    uop_bgn=_u(13),
    uop_end=_u(14),
    iter_out=_u(14),
    iter_in=_u(14),
    dst_factor_out=_u(11),
    dst_factor_in=_u(11),
    src_factor_out=_u(11),
    src_factor_in=_u(11),
)
mem_insns = st.builds(
    MemInsn,
    is_store=st.booleans(),
    memory_type=st.sampled_from(list(MemType)),
    sram_base=_u(16),
    dram_base=_u(32),
    y_size=_u(16),
    x_size=_u(16),
    x_stride=_u(16),
    y_pad_0=_u(4),
    y_pad_1=_u(4),
    x_pad_0=_u(4),
    x_pad_1=_u(4),
    **flags,
).filter(lambda i: (i.memory_type is MemType.OUT) == i.is_store)


def _ordered(i):
    return i.uop_bgn <= i.uop_end


gemm_insns = st.builds(
    GemmInsn, wgt_factor_out=_u(10), wgt_factor_in=_u(10), **loop, **flags
).filter(_ordered)
alu_insns = st.builds(
    AluInsn,
    alu_opcode=st.sampled_from(list(AluOp)),
    use_imm=st.booleans(),
    imm=st.integers(-32768, 32767),
    **loop,
    **flags,
).filter(_ordered)
finish_insns = st.builds(FinishInsn, **flags)


@settings(max_examples=400, deadline=None)
@given(st.one_of(mem_insns, gemm_insns, alu_insns, finish_insns))
def test_encode_decode_round_trip(insn):
    word = insn.encode(CFG)
    assert 0 <= word < 1 << 128
    assert decode(word, CFG) == insn
    assert decode(word, CFG).encode(CFG) == word


@settings(max_examples=200, deadline=None)
@given(_u(11), _u(11), _u(10))
def test_uop_round_trip(dst, src, wgt):
    u = Uop(dst, src, wgt)
    assert Uop.decode(u.encode(CFG), CFG) == u


@settings(max_examples=500, deadline=None)
@given(st.integers(0, (1 << 128) - 1))
def test_random_words_decode_or_raise_decode_error(word):
    try:
        insn = decode(word, CFG)
    except DecodeError:
        return
    # Whatever decodes re-encodes (gaps dropped) to a word that decodes to the same instruction.
    assert decode(insn.encode(CFG), CFG) == insn


def test_reversed_uop_range_is_refused_on_encode_and_decode():
    insn = GemmInsn(uop_bgn=5, uop_end=3)
    with pytest.raises(FieldRangeError, match="uop_bgn 5 > uop_end 3"):
        insn.encode(CFG)
    word = GemmInsn(uop_bgn=3, uop_end=5).encode(CFG)
    g = gemm_layout(CFG).fields
    swapped = word & ~(g["uop_bgn"].mask << g["uop_bgn"].lsb) | (5 << g["uop_bgn"].lsb)
    swapped = swapped & ~(g["uop_end"].mask << g["uop_end"].lsb) | (3 << g["uop_end"].lsb)
    with pytest.raises(DecodeError, match="instruction 7: uop_bgn 5 > uop_end 3"):
        decode(swapped, CFG, index=7)
    alu = AluInsn(uop_bgn=9, uop_end=2)
    with pytest.raises(FieldRangeError, match="reversed"):
        alu.encode(CFG)
