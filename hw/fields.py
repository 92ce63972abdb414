"""Amaranth views of the ISA bit layouts, built from the ``isa`` tables (never restated here).

``flexible_layout(isa.gemm_layout(cfg))`` gives an ``amaranth.lib.data.FlexibleLayout`` whose fields sit
at the ``Field.lsb`` / ``Field.width_bits`` the ``isa`` package defines, so a 128-bit instruction word can
be viewed as ``data.View(layout, word)`` and read by field name.
"""

from __future__ import annotations

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from pyvta import isa
from pyvta.isa.layout import INSN_BITS, finish_layout


def flexible_layout(layout: isa.Layout) -> data.FlexibleLayout:
    """An Amaranth layout with every field of ``layout`` at its ISA bit position."""
    fields = {}
    for f in layout:
        shape = signed(f.width_bits) if f.signed else unsigned(f.width_bits)
        fields[f.name] = data.Field(shape, f.lsb)
    return data.FlexibleLayout(layout.total_bits, fields)


def insn_view(kind: str, cfg: isa.HwConfig, word) -> data.View:
    """View a 128-bit instruction ``word`` as ``kind`` in {'mem', 'gemm', 'alu', 'finish'}."""
    make = {
        "mem": isa.mem_layout,
        "gemm": isa.gemm_layout,
        "alu": isa.alu_layout,
        "finish": finish_layout,
    }[kind]
    return data.View(flexible_layout(make(cfg)), word)


def uop_view(cfg: isa.HwConfig, word) -> data.View:
    return data.View(flexible_layout(isa.uop_layout(cfg)), word)


def dispatch_module(word, cfg: isa.HwConfig) -> dict[isa.Module, object]:
    """Combinational predicates: which command queue fetch sends ``word`` to (per ``LOAD_MODULE``)."""
    mem = insn_view("mem", cfg, word)
    is_load = mem.opcode == isa.Opcode.LOAD
    is_store = mem.opcode == isa.Opcode.STORE
    to_load = is_load & any_of(
        mem.memory_type == t for t, mod in isa.LOAD_MODULE.items() if mod is isa.Module.LOAD
    )
    return {
        isa.Module.LOAD: to_load,
        isa.Module.STORE: is_store,
        isa.Module.COMPUTE: ~to_load & ~is_store,
    }


def any_of(terms):
    """The OR of boolean Amaranth values (0 for none)."""
    out = 0
    for t in terms:
        out = out | t
    return out


INSN_WORD_BITS = INSN_BITS
