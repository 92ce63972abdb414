import pytest

from pyvta.isa import (
    AluInsn,
    AluOp,
    DecodeError,
    FieldRangeError,
    FinishInsn,
    GemmInsn,
    HwConfig,
    Load,
    MemType,
    Uop,
    clip_bounds,
    clip_imm,
    decode_insns,
    decode_uops,
    disassemble,
    encode_insns,
    encode_uops,
)

CFG = HwConfig()


def test_stream_round_trip_and_little_endian():
    insns = [
        Load(MemType.WGT, y_size=1, x_size=2, x_stride=2, push_next_dep=True),
        GemmInsn(uop_end=1, iter_out=1, iter_in=1, pop_prev_dep=True),
        FinishInsn(),
    ]
    raw = encode_insns(insns, CFG)
    assert len(raw) == 48
    assert raw[32] == 3  # FINISH opcode in the first byte of the third word
    assert int.from_bytes(raw[:16], "little") == insns[0].encode(CFG)
    assert decode_insns(raw, CFG) == insns


def test_stream_errors_name_the_instruction():
    with pytest.raises(FieldRangeError, match="instruction 1: GemmInsn.iter_in"):
        encode_insns([FinishInsn(), GemmInsn(iter_in=1 << 14)], CFG)
    raw = encode_insns([FinishInsn(), FinishInsn()], CFG) + (6).to_bytes(16, "little")
    with pytest.raises(DecodeError, match="instruction 2: opcode 6 is not valid"):
        decode_insns(raw, CFG)
    with pytest.raises(DecodeError, match="17 bytes is not a multiple of 16"):
        decode_insns(b"\0" * 17, CFG)


def test_uops_bytes():
    uops = [Uop(1, 2, 3), Uop(2047, 0, 1023)]
    assert decode_uops(encode_uops(uops, CFG), CFG) == uops


def test_disassembly_text():
    text = disassemble(
        [
            Load(
                MemType.INP,
                sram_base=1,
                dram_base=2,
                y_size=3,
                x_size=4,
                x_stride=5,
                x_pad_0=1,
                push_next_dep=True,
            ),
            FinishInsn(pop_prev_dep=True),
        ]
    )
    assert text.splitlines() == [
        "     0  load     LOAD INP sram=1 dram=2 y=3 x=4 stride=5 pad(y=0,0 x=1,0) [push:l2c]",
        "     1  compute  FINISH [pop:l2c]",
    ]


def test_disassembly_shows_clip_bounds():
    clip = AluInsn(alu_opcode=AluOp.CLIP, use_imm=True, imm=clip_imm(-128, 127), iter_out=2)
    line = disassemble([clip]).splitlines()[0]
    assert "ALU.CLIP imm=32640 (lo=-128 hi=127)" in line
    assert decode_insns(encode_insns([clip], CFG), CFG) == [clip]  # opcode 5 round-trips
    assert clip_bounds(clip_imm(3, -7)) == (3, -7)
    with pytest.raises(FieldRangeError, match=r"CLIP hi 128 .* \(allowed: -128..127\)"):
        clip_imm(0, 128)


def test_a_streams_decoding_is_kept_and_shared_safely():
    """``decode_insns`` keeps recent streams' decodings (``DECODED_STREAMS``): the same stream
    (bytes or a uint8 array of them) gives the same instructions each time, in a list of its
    own (a caller may change its list); a bad stream raises every time."""
    import numpy as np

    from pyvta.isa import stream

    insns = [Load(MemType.INP, y_size=1, x_size=4, x_stride=4), FinishInsn()]
    raw = encode_insns(insns, CFG)
    first = decode_insns(raw, CFG)
    first.append(FinishInsn())  # the caller's list, not the kept one
    again = decode_insns(np.frombuffer(raw, np.uint8), CFG)
    assert again == insns and again is not first
    assert all(a is b for a, b in zip(again, first, strict=False))  # one decoding, shared
    assert stream._decoded.cache_info().currsize <= stream.DECODED_STREAMS
    bad = raw[:16] + bytes([0xFF] * 16)
    for _ in range(2):
        with pytest.raises(DecodeError, match="instruction 1"):
            decode_insns(bad, CFG)
