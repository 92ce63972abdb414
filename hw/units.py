"""The load unit (INP/WGT loads) and the store unit (OUT stores).

Each runs its command queue in order: pop tokens, run the DMA, push tokens (``hw.queues.sequence``).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.axi import read_client_signature, write_client_signature
from pyvta.hw.dma import DmaLoad, DmaStore
from pyvta.hw.fields import INSN_WORD_BITS, insn_view
from pyvta.hw.queues import sequence, token_port
from pyvta.hw.sram import sram_read_signature, sram_shape, sram_write_signature

LOAD_UNIT_TYPES = tuple(m for m, mod in isa.LOAD_MODULE.items() if mod is isa.Module.LOAD)


def _status_members():
    return {"idle": Out(1), "executing": Out(1), "stalled": Out(1)}


class LoadUnit(wiring.Component):
    def __init__(self, cfg: isa.HwConfig):
        self.cfg = cfg
        self.shapes = {t: sram_shape(cfg, t.sram, (t,)) for t in LOAD_UNIT_TYPES}
        members = {
            "cmd": In(stream.Signature(INSN_WORD_BITS)),
            "rd": Out(read_client_signature(cfg.bus_width_bits)),
            "c2l": Out(token_port()),
            "l2c": Out(token_port()),
            **_status_members(),
        }
        for shape in self.shapes.values():
            members[f"{shape.name}_wr"] = Out(sram_write_signature(shape))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = dma = DmaLoad(self.cfg, self.shapes)
        wiring.connect(m, dma.rd, wiring.flipped(self.rd))
        for shape in self.shapes.values():
            wiring.connect(
                m,
                getattr(dma, f"{shape.name}_wr"),
                wiring.flipped(getattr(self, f"{shape.name}_wr")),
            )
        _sequence_dma(
            m, self, dma, isa.Module.LOAD, {isa.DepQueue.C2L: self.c2l, isa.DepQueue.L2C: self.l2c}
        )
        return m


class StoreUnit(wiring.Component):
    def __init__(self, cfg: isa.HwConfig):
        self.cfg = cfg
        self.out = sram_shape(cfg, "out")
        super().__init__(
            {
                "cmd": In(stream.Signature(INSN_WORD_BITS)),
                "wr": Out(write_client_signature(cfg.bus_width_bits)),
                "c2s": Out(token_port()),
                "s2c": Out(token_port()),
                "out_rd": Out(sram_read_signature(self.out)),
                "out_data": In(self.out.row_bits),
                **_status_members(),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = dma = DmaStore(self.cfg, self.out)
        wiring.connect(m, dma.wr, wiring.flipped(self.wr))
        wiring.connect(m, dma.out_rd, wiring.flipped(self.out_rd))
        m.d.comb += dma.out_data.eq(self.out_data)
        _sequence_dma(
            m, self, dma, isa.Module.STORE, {isa.DepQueue.C2S: self.c2s, isa.DepQueue.S2C: self.s2c}
        )
        return m


def _sequence_dma(m: Module, unit, dma, module: isa.Module, queues: dict) -> None:
    """Run ``unit``'s command queue through the token sequencer, one DMA per instruction."""
    insn = Signal(INSN_WORD_BITS)
    start = Signal()
    idle, executing, stalled = sequence(
        m,
        unit.cmd,
        insn,
        insn_view("mem", unit.cfg, insn),
        module,
        queues,
        start=start,
        finished=~dma.busy,
    )
    m.d.comb += [
        dma.insn.eq(insn),
        dma.start.eq(start),
        unit.idle.eq(idle),
        unit.executing.eq(executing),
        unit.stalled.eq(stalled),
    ]
