"""``hw.dma._chunk``: the per-memory-type chunk select of the load DMA (static shifts, issue 19's
logic levels) against the DRAM byte lane it stands for, ``elem * elem_bytes + c * chunk_bytes``
modulo the bus width, on the Amaranth simulator."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from pyvta import isa
from pyvta.hw.dma import _chunk
from pyvta.hw.sram import mem_type_info

pytestmark = pytest.mark.hw
SEED = 19
CONFIGS = {
    "default": isa.DEFAULT_CONFIG,
    "bus32": isa.HwConfig(LOG_BUS_WIDTH=5),
    "bus128": isa.HwConfig(LOG_BUS_WIDTH=7),
    "block8": isa.HwConfig(
        LOG_BLOCK=3, LOG_INP_BUFF_SIZE=14, LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16
    ),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_chunk_is_the_byte_lane_of_the_element_and_chunk(name):
    cfg = CONFIGS[name]
    bus_bytes = cfg.bus_width_bytes
    log_bus = bus_bytes.bit_length() - 1
    lane_bits = max(1, log_bus)
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    m = Module()
    beat, elem_lane, c = Signal(cfg.bus_width_bits), Signal(lane_bits), Signal(6)
    infos = [mem_type_info(cfg, mem) for mem in isa.LOAD_MODULE]
    outs = []
    for info in infos:
        out = Signal(info.chunk_bytes * 8, name=f"chunk_{info.mem.name}")
        m.d.comb += out.eq(_chunk(beat, info, log_bus, elem_lane, c))
        outs.append(out)
    checked = []

    async def bench(ctx):
        for _ in range(4):
            value = int.from_bytes(rng.bytes(bus_bytes), "little")
            ctx.set(beat, value)
            for lane in range(1 << lane_bits):
                ctx.set(elem_lane, lane)
                for info, out in zip(infos, outs, strict=True):
                    for chunk in range(1 << info.log_chunks_per_elem):
                        ctx.set(c, chunk)
                        byte = (lane * info.dram_elem_bytes + chunk * info.chunk_bytes) % bus_bytes
                        want = (value >> (8 * byte)) % (1 << (8 * info.chunk_bytes))
                        assert ctx.get(out) == want, (info.mem, lane, chunk)
                        checked.append(info.mem)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert set(checked) == set(isa.LOAD_MODULE)
