"""DMA engines: 2-D strided, zero-padded loads into the SRAMs, and strided stores from OUT.

Both take one 128-bit LOAD/STORE word (latched on ``start``) and report ``busy`` until it is done.
Throughput: one AXI beat (chunk) or one padding row element per cycle; DRAM rows are requested
ahead of the SRAM writer, as far as the read arbiter allows.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.axi import ADDR_BITS, read_client_signature, write_client_signature
from pyvta.hw.burst import BurstSplitter
from pyvta.hw.fields import INSN_WORD_BITS, insn_view
from pyvta.hw.sram import (
    SramShape,
    mem_type_info,
    sram_read_signature,
    sram_write_signature,
)

ROW_BITS = 18  # rows and columns incl. padding: 16-bit sizes plus two 4-bit pads


def _sel(m, mem_type, infos, attr, width):
    """A signal holding ``getattr(info, attr)`` of the memory type currently in ``mem_type``."""
    sig = Signal(width, name=f"sel_{attr}")
    with m.Switch(mem_type):
        for info in infos:
            with m.Case(info.mem):
                m.d.comb += sig.eq(int(getattr(info, attr)))
    return sig


def _chunk(beat, info, log_bus: int, elem_lane, c):
    """The chunk of ``beat`` that memory type ``info`` writes now: the whole beat where its chunks
    are bus-wide, else the one at DRAM byte lane ``elem_lane * elem_bytes + c * chunk_bytes``
    (static shifts of registers: a short select, no adder of the type's sizes in the path)."""
    bits = info.chunk_bytes * 8
    lanes_log = log_bus - info.log_chunk_bytes  # chunks per beat, log2
    if lanes_log <= 0:
        return beat[:bits]
    index = ((elem_lane << info.log_chunks_per_elem) + c)[:lanes_log]
    return beat.word_select(index, bits)


class DmaLoad(wiring.Component):
    """LOAD of the memory types in ``srams`` ({MemType: SramShape}) from DRAM into SRAM write ports.

    Padded types write y_pad_0 zero rows, then rows of (x_pad_0 zeros, x_size elements, x_pad_1 zeros),
    then y_pad_1 zero rows, densely from sram_base. x_size == 0 moves nothing.
    """

    def __init__(self, cfg: isa.HwConfig, srams: dict[isa.MemType, SramShape]):
        self.cfg = cfg
        self.srams = srams
        self.infos = [mem_type_info(cfg, mem) for mem in srams]
        members = {
            "start": In(1),
            "insn": In(INSN_WORD_BITS),
            "busy": Out(1),
            "rd": Out(read_client_signature(cfg.bus_width_bits)),
        }
        self.targets = {}
        for shape in srams.values():
            self.targets[shape.name] = shape
            members[f"{shape.name}_wr"] = Out(sram_write_signature(shape))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        bus_bytes = cfg.bus_width_bytes
        log_bus = bus_bytes.bit_length() - 1
        m.submodules.split = split = BurstSplitter()
        wiring.connect(m, split.burst, wiring.flipped(self.rd.ar))

        insn = Signal(INSN_WORD_BITS)
        f = insn_view("mem", cfg, insn)
        with m.If(self.start):
            m.d.sync += insn.eq(self.insn)

        infos = self.infos
        log_e = _sel(m, f.memory_type, infos, "log_elem_bytes", 4)
        log_t = _sel(m, f.memory_type, infos, "log_chunk_bytes", 3)
        log_cpe = _sel(m, f.memory_type, infos, "log_chunks_per_elem", 4)
        start_f = insn_view("mem", cfg, self.insn)
        go = (start_f.x_size != 0) & (start_f.y_size != 0)

        # ---- issuer: one request per DRAM row ------------------------------------------------
        iss_busy = Signal()
        # Rows still to request (y_size at start: no subtraction on the start path, where yosys
        # would share one subtractor between start and step and put start in front of its carry).
        iss_y_left = Signal(16)
        iss_row = Signal(ADDR_BITS)
        m.d.comb += [
            split.cmd.valid.eq(iss_busy),
            split.cmd.payload.addr.eq(iss_row << log_e),
            split.cmd.payload.beats.eq(f.x_size << log_cpe),
            split.cmd.payload.size.eq(log_t),
        ]
        with m.If(split.cmd.valid & split.cmd.ready):
            m.d.sync += [iss_y_left.eq(iss_y_left - 1), iss_row.eq(iss_row + f.x_stride)]
            with m.If(iss_y_left == 1):
                m.d.sync += iss_busy.eq(0)

        # ---- writer: walks the padded SRAM rectangle ------------------------------------------
        # The rectangle's bounds are registered at start and the position in it is tracked by
        # flags updated with equality tests (short paths: no comparators or sums per cycle).
        bounds = self._start_bounds(m, start_f)
        w_busy = Signal()
        x = Signal(ROW_BITS)  # the position in the row, from 1
        r = Signal(ROW_BITS)  # the row, from 1
        col_data = Signal()
        row_data = Signal()
        c = Signal(6)
        sram_addr = Signal(16)
        lane_bits = max(1, log_bus)
        row_lane = Signal(lane_bits)  # DRAM element index of the row's first data element, low bits
        elem_lane = Signal(lane_bits)  # ... of the current data element
        is_data = row_data & col_data
        last_chunk = c == bounds["c_last"]
        x_last = x == bounds["x_last"]
        r_last = r == bounds["r_last"]
        beat = self.rd.r.payload.data

        write = Signal()
        advance = Signal()
        with m.If(w_busy):
            with m.If(~is_data):
                m.d.comb += [write.eq(1), advance.eq(1)]
            with m.Elif(self.rd.r.valid):
                m.d.comb += [write.eq(1), self.rd.r.ready.eq(1), advance.eq(last_chunk)]
                m.d.sync += c.eq(Mux(last_chunk, 0, c + 1))
        with m.If(advance):
            m.d.sync += [sram_addr.eq(sram_addr + 1), x.eq(x + 1)]
            with m.If(is_data):
                m.d.sync += elem_lane.eq(elem_lane + 1)
            with m.If(x == bounds["x_enter"]):
                m.d.sync += col_data.eq(1)
            with m.Elif(x == bounds["x_leave"]):
                m.d.sync += col_data.eq(0)
            with m.If(x_last):
                next_lane = Mux(row_data, row_lane + f.x_stride, row_lane)
                m.d.sync += [
                    x.eq(1),
                    r.eq(r + 1),
                    col_data.eq(bounds["x_first"]),
                    row_lane.eq(next_lane),
                    elem_lane.eq(next_lane),
                ]
                with m.If(r == bounds["y_enter"]):
                    m.d.sync += row_data.eq(1)
                with m.Elif(r == bounds["y_leave"]):
                    m.d.sync += row_data.eq(0)
                with m.If(r_last):
                    m.d.sync += w_busy.eq(0)

        for name, shape in self.targets.items():
            port = getattr(self, f"{name}_wr")
            m.d.comb += port.addr.eq(sram_addr >> shape.log_elems_per_row)
            for info in infos:
                if info.sram != name:
                    continue
                chunk = _chunk(beat, info, log_bus, elem_lane, c)
                self._drive_write(
                    m, port, shape, info, chunk, (write, f.memory_type), c, is_data, sram_addr
                )

        # ---- start ----------------------------------------------------------------------------
        with m.If(self.start):
            m.d.sync += [
                iss_busy.eq(go),
                iss_y_left.eq(start_f.y_size),
                iss_row.eq(start_f.dram_base),
                w_busy.eq(go),
                r.eq(1),
                x.eq(1),
                c.eq(0),
                col_data.eq(bounds["x_first_now"]),
                row_data.eq(bounds["y_first_now"]),
                sram_addr.eq(start_f.sram_base),
                row_lane.eq(start_f.dram_base),
                elem_lane.eq(start_f.dram_base),
            ]
        m.d.comb += self.busy.eq(iss_busy | ~split.idle | w_busy)
        return m

    def _start_bounds(self, m, start_f) -> dict:
        """Registers set from the LOAD word at ``start``: where data rows and columns begin and
        end in the padded rectangle, as positions counted from 1 (no -1 in the sums: shorter
        paths). ``*_enter``/``*_leave``: the position *before* the first data
        one / the last data one (0 when data starts at 0: never met); ``*_first``: data
        starts at position 0 (``*_first_now``: the same from the word itself, for ``start``);
        ``x_last``/``r_last``: the rectangle's last column / row; ``c_last``:
        the last chunk of an element."""
        padded = _sel(m, start_f.memory_type, self.infos, "padded", 1)
        pads = {
            name: Mux(padded, getattr(start_f, name), 0)
            for name in ("x_pad_0", "x_pad_1", "y_pad_0", "y_pad_1")
        }
        log_cpe = _sel(m, start_f.memory_type, self.infos, "log_chunks_per_elem", 4)
        c_last = Signal(6, name="bound_c_last")
        with m.If(self.start):
            m.d.sync += c_last.eq(((1 << log_cpe) - 1)[:6])
        bounds = {"c_last": c_last}
        for axis, size in (("x", start_f.x_size), ("y", start_f.y_size)):
            pad_0, pad_1 = pads[f"{axis}_pad_0"], pads[f"{axis}_pad_1"]
            values = {
                f"{axis}_enter": pad_0,
                f"{axis}_leave": pad_0 + size,
                "x_last" if axis == "x" else "r_last": pad_0 + size + pad_1,
            }
            for name, value in values.items():
                reg = Signal(ROW_BITS, name=f"bound_{name}")
                with m.If(self.start):
                    m.d.sync += reg.eq(value)
                bounds[name] = reg
            # Used at start itself (to set the flags) and at each row's start.
            first = Signal(name=f"bound_{axis}_first")
            first_now = pad_0 == 0
            with m.If(self.start):
                m.d.sync += first.eq(first_now)
            bounds[f"{axis}_first"] = first
            bounds[f"{axis}_first_now"] = first_now
        return bounds

    @staticmethod
    def _drive_write(m, port, shape: SramShape, info, chunk, strobe, c, is_data, sram_addr):
        """Drive ``port`` for memory type ``info``: the data whenever the LOAD is of that type
        (it matters only where ``en`` is set; no write strobe in its path), ``en`` on a write
        (``strobe``: the write, the LOAD's memory type)."""
        write, mem_type = strobe
        lanes_per_chunk = info.sram_chunk_bits // shape.granularity_bits
        lanes_per_elem = shape.elem_bits // shape.granularity_bits
        elem_lane = 0
        if shape.elems_per_row > 1:
            elem_lane = sram_addr[: shape.log_elems_per_row] * lanes_per_elem
        copies = shape.row_bits // info.sram_chunk_bits
        raw = chunk[: info.chunk_bytes * 8]
        if info.sign_extend:
            lane_bits = 8 * info.sram_chunk_bits // len(raw)
            raw = Cat(
                *(
                    Cat(raw[i : i + 8], raw[i + 7].replicate(lane_bits - 8))
                    for i in range(0, len(raw), 8)
                )
            )
        lane_mask = Const((1 << lanes_per_chunk) - 1, shape.lanes)
        elem_mask = Const((1 << lanes_per_elem) - 1, shape.lanes)
        with m.If(mem_type == info.mem):
            m.d.comb += port.data.eq(Mux(is_data, raw.replicate(copies), 0))
            with m.If(write):
                m.d.comb += port.en.eq(
                    Mux(
                        is_data,
                        lane_mask << (c * lanes_per_chunk + elem_lane),
                        elem_mask << elem_lane,
                    )
                )


class DmaStore(wiring.Component):
    """STORE of OUT rows to DRAM: y_size rows of x_size elements, read densely from sram_base."""

    def __init__(self, cfg: isa.HwConfig, out: SramShape):
        self.cfg = cfg
        self.out = out
        self.info = mem_type_info(cfg, isa.MemType.OUT)
        super().__init__(
            {
                "start": In(1),
                "insn": In(INSN_WORD_BITS),
                "busy": Out(1),
                "wr": Out(write_client_signature(cfg.bus_width_bits)),
                "out_rd": Out(sram_read_signature(out)),
                "out_data": In(out.row_bits),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        info = self.info
        bus_bytes = cfg.bus_width_bytes
        log_bus = bus_bytes.bit_length() - 1
        cpe = 1 << info.log_chunks_per_elem
        m.submodules.split = split = BurstSplitter()
        m.submodules.lens = lens = fifo.SyncFIFOBuffered(width=8, depth=8)

        insn = Signal(INSN_WORD_BITS)
        f = insn_view("mem", cfg, insn)
        start_f = insn_view("mem", cfg, self.insn)
        go = (start_f.x_size != 0) & (start_f.y_size != 0)
        # The last column and row (sizes minus one, registered at start): the counters are
        # compared with them as they are, not after an increment (short paths).
        x_last = Signal(16)
        y_last = Signal(16)
        with m.If(self.start):
            m.d.sync += [x_last.eq(start_f.x_size - 1), y_last.eq(start_f.y_size - 1)]

        # ---- AW: one request per DRAM row; burst lengths queued for the W side ---------------
        iss_busy = Signal()
        iss_y = Signal(16)
        iss_row = Signal(ADDR_BITS)
        m.d.comb += [
            split.cmd.valid.eq(iss_busy),
            split.cmd.payload.addr.eq(iss_row << info.log_elem_bytes),
            split.cmd.payload.beats.eq(f.x_size << info.log_chunks_per_elem),
            split.cmd.payload.size.eq(info.log_chunk_bytes),
        ]
        with m.If(split.cmd.valid & split.cmd.ready):
            m.d.sync += [iss_y.eq(iss_y + 1), iss_row.eq(iss_row + f.x_stride)]
            with m.If(iss_y == y_last):
                m.d.sync += iss_busy.eq(0)
        aw = self.wr.aw
        m.d.comb += [
            aw.payload.eq(split.burst.payload),
            aw.valid.eq(split.burst.valid & lens.w_rdy),
            split.burst.ready.eq(aw.ready & lens.w_rdy),
            lens.w_en.eq(aw.valid & aw.ready),
            lens.w_data.eq(split.burst.payload.len),
        ]

        # ---- OUT reads: the read port's data register holds the element being sent ------------
        rd_x = Signal(16)
        rd_y = Signal(16)
        rd_left = Signal()
        rd_addr = Signal(16)
        have = Signal()
        elem_sent = Signal()
        issue = rd_left & (~have | elem_sent)
        m.d.comb += [self.out_rd.en.eq(issue), self.out_rd.addr.eq(rd_addr)]
        with m.If(issue):
            m.d.sync += [rd_addr.eq(rd_addr + 1), rd_x.eq(rd_x + 1)]
            with m.If(rd_x == x_last):
                m.d.sync += [rd_x.eq(0), rd_y.eq(rd_y + 1)]
                with m.If(rd_y == y_last):
                    m.d.sync += rd_left.eq(0)
        m.d.sync += have.eq(issue | (have & ~elem_sent))

        # ---- W beats ----------------------------------------------------------------------
        ex = Signal(16)
        c = Signal(6)
        row_elem = Signal(ADDR_BITS)
        beat_n = Signal(8)
        lane_byte = Signal(max(1, log_bus))
        m.d.comb += lane_byte.eq(
            ((row_elem + ex) << info.log_elem_bytes) + (c << info.log_chunk_bytes)
        )
        chunk_bits = info.chunk_bytes * 8
        chunk = (self.out_data >> (c * chunk_bits))[:chunk_bits]
        w = self.wr.w
        m.d.comb += [
            w.valid.eq(have & lens.r_rdy),
            w.payload.data.eq(chunk.replicate(bus_bytes // info.chunk_bytes)),
            w.payload.strb.eq(Const((1 << info.chunk_bytes) - 1, bus_bytes) << lane_byte),
            w.payload.last.eq(beat_n == lens.r_data),
        ]
        last_chunk = c == cpe - 1
        with m.If(w.valid & w.ready):
            m.d.sync += [c.eq(Mux(last_chunk, 0, c + 1)), beat_n.eq(beat_n + 1)]
            with m.If(w.payload.last):
                m.d.sync += beat_n.eq(0)
                m.d.comb += lens.r_en.eq(1)
            with m.If(last_chunk):
                m.d.comb += elem_sent.eq(1)
                m.d.sync += ex.eq(ex + 1)
                with m.If(ex == x_last):
                    m.d.sync += [ex.eq(0), row_elem.eq(row_elem + f.x_stride)]

        # ---- B responses ------------------------------------------------------------------
        outstanding = Signal(16)
        m.d.comb += self.wr.b.ready.eq(1)
        aw_fire = aw.valid & aw.ready
        b_fire = self.wr.b.valid
        m.d.sync += outstanding.eq(outstanding + aw_fire - b_fire)

        with m.If(self.start):
            m.d.sync += [
                insn.eq(self.insn),
                iss_busy.eq(go),
                iss_y.eq(0),
                iss_row.eq(start_f.dram_base),
                rd_left.eq(go),
                rd_x.eq(0),
                rd_y.eq(0),
                rd_addr.eq(start_f.sram_base),
                ex.eq(0),
                c.eq(0),
                row_elem.eq(start_f.dram_base),
            ]
        m.d.comb += self.busy.eq(
            iss_busy | ~split.idle | rd_left | have | lens.r_rdy | (outstanding != 0)
        )
        return m
