"""The accelerator top level: fetch, load, compute and store units, command and token queues,
INP/WGT/OUT buffers, an AXI4 master for DRAM and an AXI4-Lite control slave (``isa.regmap``).

Ports: ``m_axi__*`` (AXI4 master, data width ``cfg.bus_width_bits``, INCR bursts, one ID),
``s_axil__*`` (AXI4-Lite slave, 32-bit), ``irq``; clock ``clk``, synchronous reset ``rst``.
"""

from __future__ import annotations

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.axi import AXI_BURST_INCR, axi4_signature, axil_signature
from pyvta.hw.burst import ReadArbiter
from pyvta.hw.compute import ComputeUnit
from pyvta.hw.fetch import Fetch
from pyvta.hw.fields import INSN_WORD_BITS
from pyvta.hw.queues import TokenQueue, connect_tokens
from pyvta.hw.sram import ACC_BANKS, BankedMemory, clear_rows
from pyvta.hw.units import LoadUnit, StoreUnit
from pyvta.isa import regmap

CMD_QUEUE_DEPTH = 512


class Vta(wiring.Component):
    def __init__(
        self,
        cfg: isa.HwConfig = isa.DEFAULT_CONFIG,
        dsp_products: int | None = None,
        cmd_queue_depth: int = CMD_QUEUE_DEPTH,
    ):
        self.cfg = cfg
        self.dsp_products = dsp_products
        self.cmd_queue_depth = cmd_queue_depth
        super().__init__(
            {
                "m_axi": Out(axi4_signature(cfg.bus_width_bits)),
                "s_axil": In(axil_signature(regmap.ADDR_BITS)),
                "irq": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        # CTRL.START also returns the units and their command queues to reset, so a run that
        # stopped at a fault or a deadlock leaves no stale work behind (DONE: none moves data).
        # ``start`` is a register (the cycle after the AXI4-Lite write, with the B response): as
        # a combinational decode of the write it put every unit's next-state logic on the
        # control port's inputs (a fan-out from the port to each unit's reset, and in Verilator
        # the whole datapath in the input-combinational region: see driver/rtl_build.py).
        start = Signal()
        m.submodules.fetch = fetch = Fetch(cfg)
        m.submodules.load = load = ResetInserter(start)(LoadUnit(cfg))
        m.submodules.compute = compute = ResetInserter(start)(ComputeUnit(cfg, self.dsp_products))
        m.submodules.store = store = ResetInserter(start)(StoreUnit(cfg))
        units = {"load": load, "compute": compute, "store": store}

        # Command queues between fetch and the units.
        levels = {}
        for name, unit in units.items():
            q = ResetInserter(start)(
                fifo.SyncFIFOBuffered(width=INSN_WORD_BITS, depth=self.cmd_queue_depth)
            )
            m.submodules[f"{name}_cmdq"] = q
            src = getattr(fetch, f"{name}_q")
            m.d.comb += [
                q.w_data.eq(src.payload),
                q.w_en.eq(src.valid),
                src.ready.eq(q.w_rdy),
                unit.cmd.payload.eq(q.r_data),
                unit.cmd.valid.eq(q.r_rdy),
                q.r_en.eq(unit.cmd.ready),
            ]
            levels[name] = q.level

        # Dependency-token queues.
        tokens = {}
        ends = {
            isa.DepQueue.L2C: (load, compute),
            isa.DepQueue.C2L: (compute, load),
            isa.DepQueue.C2S: (compute, store),
            isa.DepQueue.S2C: (store, compute),
        }
        for queue, (pusher, popper) in ends.items():
            tq = TokenQueue()
            m.submodules[f"tq_{queue.value}"] = tq
            connect_tokens(m, tq, getattr(popper, queue.value), getattr(pusher, queue.value))
            m.d.comb += tq.clear.eq(start)
            tokens[queue] = tq.count

        # Buffers shared between units.
        shapes = {"inp": compute.inp, "wgt": compute.wgt}
        load_shapes = {s.name: s for s in load.shapes.values()}
        mems = {}
        for name, shape in shapes.items():
            mems[name] = mem = memory.Memory(shape=shape.row_bits, depth=shape.depth, init=[])
            m.submodules[f"{name}_mem"] = mem
        zero_request = Signal()
        zeroing, zero_addr = self._zeroing(m, zero_request)
        m.d.comb += [compute.zero.eq(zeroing), compute.zero_addr.eq(zero_addr)]
        for name in ("inp", "wgt"):
            wr = mems[name].write_port(granularity=load_shapes[name].granularity_bits)
            src = getattr(load, f"{name}_wr")
            rd = mems[name].read_port()
            req = getattr(compute, f"{name}_rd")
            with m.If(zeroing):
                m.d.comb += [wr.addr.eq(zero_addr), wr.data.eq(0), wr.en.eq(-1)]
            with m.Else():
                m.d.comb += [wr.addr.eq(src.addr), wr.data.eq(src.data), wr.en.eq(src.en)]
            m.d.comb += [
                rd.addr.eq(req.addr),
                rd.en.eq(req.en),
                getattr(compute, f"{name}_data").eq(rd.data),
            ]
        m.submodules.out_mem = out_mem = BankedMemory(compute.out)  # a bank per compute lane
        for b in range(ACC_BANKS):
            wiring.connect(m, compute.out_wr[b], out_mem.wr[b])
        wiring.connect(m, store.out_rd, out_mem.rd)
        m.d.comb += store.out_data.eq(out_mem.data)

        # DRAM: reads arbitrated between fetch, load and compute; the store unit writes.
        m.submodules.arbiter = arb = ReadArbiter(3, cfg.bus_width_bits)
        for i, client in enumerate((fetch.rd, load.rd, compute.rd)):
            wiring.connect(m, client, getattr(arb, f"c{i}"))
        self._connect_axi(m, arb, store)

        # Control and status.
        self._control(m, start, (zero_request, zeroing), fetch, units, compute, levels, tokens)
        return m

    def _zeroing(self, m, request):
        """CTRL.CLEAR: write zeros to every row of every buffer, one row per cycle (max depth)."""
        rows = clear_rows(self.cfg)
        zeroing = Signal()
        addr = Signal(16)
        with m.If(request):
            m.d.sync += [zeroing.eq(1), addr.eq(0)]
        with m.Elif(zeroing):
            m.d.sync += addr.eq(addr + 1)
            with m.If(addr == rows - 1):
                m.d.sync += zeroing.eq(0)
        return zeroing, addr

    def _connect_axi(self, m, arb, store):
        axi = self.m_axi
        m.d.comb += [
            axi.arid.eq(0),
            axi.araddr.eq(arb.down.ar.payload.addr),
            axi.arlen.eq(arb.down.ar.payload.len),
            axi.arsize.eq(arb.down.ar.payload.size),
            axi.arburst.eq(AXI_BURST_INCR),
            axi.arvalid.eq(arb.down.ar.valid),
            arb.down.ar.ready.eq(axi.arready),
            arb.down.r.payload.data.eq(axi.rdata),
            arb.down.r.payload.last.eq(axi.rlast),
            arb.down.r.valid.eq(axi.rvalid),
            axi.rready.eq(arb.down.r.ready),
            axi.awid.eq(0),
            axi.awaddr.eq(store.wr.aw.payload.addr),
            axi.awlen.eq(store.wr.aw.payload.len),
            axi.awsize.eq(store.wr.aw.payload.size),
            axi.awburst.eq(AXI_BURST_INCR),
            axi.awvalid.eq(store.wr.aw.valid),
            store.wr.aw.ready.eq(axi.awready),
            axi.wdata.eq(store.wr.w.payload.data),
            axi.wstrb.eq(store.wr.w.payload.strb),
            axi.wlast.eq(store.wr.w.payload.last),
            axi.wvalid.eq(store.wr.w.valid),
            store.wr.w.ready.eq(axi.wready),
            store.wr.b.payload.eq(axi.bresp),
            store.wr.b.valid.eq(axi.bvalid),
            axi.bready.eq(store.wr.b.ready),
        ]

    def _control(self, m, start, clear, fetch, units, compute, levels, tokens):
        """Registers (``isa.regmap``) behind the AXI4-Lite slave; ``clear``: (request, busy)."""
        s = self.s_axil
        zero_request, zeroing = clear
        regs = {r.name: Signal(32, name=f"reg_{r.name.lower()}") for r in regmap.REGISTERS}
        irq_en = Signal()
        done = Signal()
        running = Signal()
        all_idle = fetch.done
        quiet = fetch.halted  # after a fault: every unit idle or waiting for a token
        for name, unit in units.items():
            all_idle = all_idle & unit.idle & (levels[name] == 0)
            quiet = quiet & ((unit.idle & (levels[name] == 0)) | unit.stalled)
        with m.If(running & ((compute.finished & all_idle) | quiet)):
            m.d.sync += [done.eq(1), running.eq(0)]
        # In the START cycle ``done`` still holds the last run's: neither irq nor STATUS shows it.
        m.d.comb += self.irq.eq(done & irq_en & ~start)

        def sat8(v):
            return v[:8] | (v[8:] != 0).replicate(8) if len(v) > 8 else v

        def put(name, **values):
            """Drive the named fields of register ``name`` (bits from ``isa.regmap``)."""
            reg = regmap.register(name)
            return [regs[name][f.lsb : f.lsb + f.width].eq(values[f.name]) for f in reg.fields]

        unit_fields = {}
        for n, u in units.items():
            unit_fields |= {
                f"LEVEL_{n.upper()}": sat8(levels[n]),
                f"STALLED_{n.upper()}": u.stalled,
                f"IDLE_{n.upper()}": u.idle,
            }
        m.d.comb += [
            *put("CTRL", START=0, IRQ_EN=irq_en, CLEAR=0),
            *put(
                "STATUS",
                DONE=done & ~start,
                BUSY=running | start,
                CLEARING=zeroing,
                ERROR=fetch.fault != 0,
            ),
            *put("ERROR_INDEX", INDEX=fetch.fault_index, KIND=fetch.fault),
            regs["ID"].eq(regmap.id_value()),
            regs["CONFIG_HASH"].eq(self.cfg.config_hash),
            regs["FETCHED"].eq(fetch.dispatched),
            regs["GEMM_UOPS"].eq(compute.gemm_uops),
            regs["ALU_UOPS"].eq(compute.alu_uops),
            *put("TOKENS", **{q.value.upper(): sat8(tokens[q]) for q in isa.DepQueue}),
            *put("QUEUES", **unit_fields, FETCH_DONE=fetch.done, FINISHED=compute.finished),
        ]
        counters = {"CYCLES": running}
        for name, unit in units.items():
            counters[f"{name.upper()}_BUSY"] = unit.executing
            counters[f"{name.upper()}_STALL"] = unit.stalled
        for name, cond in counters.items():
            with m.If(start):
                m.d.sync += regs[name].eq(0)
            with m.Elif(running & cond):
                m.d.sync += regs[name].eq(regs[name] + 1)

        # AXI4-Lite writes: address and data together, then the response.
        bvalid = Signal()
        take_w = s.awvalid & s.wvalid & ~bvalid
        m.d.comb += [
            s.awready.eq(take_w),
            s.wready.eq(take_w),
            s.bvalid.eq(bvalid),
            s.bresp.eq(0),
        ]
        with m.If(bvalid & s.bready):
            m.d.sync += bvalid.eq(0)
        m.d.sync += start.eq(0)  # a one-cycle pulse
        with m.If(take_w):
            m.d.sync += bvalid.eq(1)
            ctrl, status = regmap.register("CTRL"), regmap.register("STATUS")

            def wfield(reg, name):
                f = reg.field(name)
                return s.wdata[f.lsb : f.lsb + f.width]

            with m.Switch(s.awaddr[2:]):
                with m.Case(ctrl.offset // regmap.REG_BYTES):
                    m.d.sync += start.eq(wfield(ctrl, "START"))
                    m.d.comb += zero_request.eq(wfield(ctrl, "CLEAR"))
                    m.d.sync += irq_en.eq(wfield(ctrl, "IRQ_EN"))
                with m.Case(status.offset // regmap.REG_BYTES), m.If(wfield(status, "DONE")):
                    m.d.sync += done.eq(0)
                for name in ("INSN_COUNT", "INSN_ADDR"):
                    with m.Case(regmap.offset(name) // regmap.REG_BYTES):
                        m.d.sync += regs[name].eq(s.wdata)
        with m.If(start):
            m.d.sync += [done.eq(0), running.eq(1)]
        m.d.comb += [
            fetch.start.eq(start),
            fetch.insn_addr.eq(regs["INSN_ADDR"]),
            fetch.insn_count.eq(regs["INSN_COUNT"]),
            compute.clear.eq(start),
        ]

        # AXI4-Lite reads.
        rvalid = Signal()
        rdata = Signal(32)
        m.d.comb += [
            s.arready.eq(~rvalid),
            s.rvalid.eq(rvalid),
            s.rdata.eq(rdata),
            s.rresp.eq(0),
        ]
        with m.If(rvalid & s.rready):
            m.d.sync += rvalid.eq(0)
        with m.If(s.arvalid & ~rvalid):
            m.d.sync += [rvalid.eq(1), rdata.eq(0)]
            with m.Switch(s.araddr[2:]):
                for r in regmap.REGISTERS:
                    if r.access == "wo":
                        continue
                    with m.Case(r.offset // regmap.REG_BYTES):
                        m.d.sync += rdata.eq(regs[r.name])
