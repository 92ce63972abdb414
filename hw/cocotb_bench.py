"""The cocotb testbench ``hw.runner`` runs inside the simulator (not imported by anything else).

Reads the job file named by ``PYVTA_HW_JOB``, runs each program (reset, DRAM image into AxiRam, then
the launch routine of ``isa.launch`` stepped through AXI4-Lite by ``run_routine``: the same routine
the fast RTL device and a board run synchronously), and writes the final DRAM images and counters.
"""

import json
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from pyvta.isa import launch as protocol

CLOCK_NS = 10

INPUTS_AT_ZERO = (
    tuple(
        f"m_axi__{n}"
        for n in ("awready", "wready", "bid", "bresp", "bvalid", "arready", "rid", "rdata", "rresp")
    )
    + tuple(f"m_axi__{n}" for n in ("rlast", "rvalid"))
    + tuple(
        f"s_axil__{n}"
        for n in ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr", "arvalid")
    )
    + ("s_axil__rready",)
)


def _pauses(rng: random.Random, busy: float):
    while True:
        yield rng.random() < busy


class AxiLitePort:
    """``isa.launch``'s register port on cocotbext-axi's AxiLiteMaster (async)."""

    def __init__(self, dut, axil):
        self.dut, self.axil = dut, axil

    async def read32(self, offset):
        return await self.axil.read_dword(offset)

    async def write32(self, offset, value):
        await self.axil.write_dword(offset, value)

    async def wait(self, cycles):
        """Up to ``cycles`` clock cycles, fewer when ``irq`` rises first."""
        start = get_sim_time("ns")
        if self.dut.irq.value:
            await ClockCycles(self.dut.clk, cycles)
        else:
            await First(ClockCycles(self.dut.clk, cycles), RisingEdge(self.dut.irq))
        return max(1, round((get_sim_time("ns") - start) / CLOCK_NS))


async def run_routine(routine, port):
    """The async twin of ``driver.launch.run``: step an ``isa.launch`` routine against ``port``."""
    try:
        op = next(routine)
        while True:
            if isinstance(op, protocol.Read):
                op = routine.send(await port.read32(op.offset))
            elif isinstance(op, protocol.Write):
                await port.write32(op.offset, op.value)
                op = routine.send(None)
            else:
                op = routine.send(await port.wait(op.cycles))
    except StopIteration as stop:
        return stop.value


async def _run_one(dut, ram, port, dram, insn_addr, insn_count, job):
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    ram.write(0, bytes(ram.size))
    ram.write(0, dram.tobytes())
    routine = protocol.launch(
        insn_addr,
        insn_count,
        clear_cycles=job["clear_cycles"] if job["clear_srams"] else None,
        max_cycles=job["max_cycles"],
        watchdog_cycles=job["watchdog_cycles"],
    )
    outcome = await run_routine(routine, port)
    if outcome.status != "done":
        dut._log.warning("program did not finish (%s): %s", outcome.status, outcome.message)
    final = np.frombuffer(ram.read(0, len(dram)), dtype=np.uint8).copy()
    return final, {
        "cycles": outcome.counters["CYCLES"],
        "status": outcome.status,
        "counters": outcome.counters,
        "message": outcome.message,
        "stuck_words": list(outcome.stuck.words) if outcome.stuck else None,
        "fault": [int(outcome.fault.kind), outcome.fault.index] if outcome.fault else None,
    }


@cocotb.test()
async def run_job(dut):
    await execute_job(dut)


async def execute_job(dut):
    """Run every program of the job file and write the results file."""
    with open(os.environ["PYVTA_HW_JOB"]) as f:
        job = json.load(f)
    programs = np.load(job["programs"])
    drams = [programs[f"dram_{i}"] for i in range(len(job["insn_addr"]))]
    ram_bytes = max(4096, -(-max(len(d) for d in drams) // 4096) * 4096)
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    for name in INPUTS_AT_ZERO:  # no X/Z into the design before the bus models drive them
        getattr(dut, name).value = 0
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst, size=ram_bytes)
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
    port = AxiLitePort(dut, axil)
    if job["backpressure"]:
        rng = random.Random(job["seed"])
        for channel, busy in (
            (ram.read_if.ar_channel, 0.3),
            (ram.read_if.r_channel, 0.3),
            (ram.write_if.aw_channel, 0.3),
            (ram.write_if.w_channel, 0.3),
            (ram.write_if.b_channel, 0.3),
        ):
            channel.set_pause_generator(_pauses(random.Random(rng.random()), busy))
    out, meta = {}, []
    for i, dram in enumerate(drams):
        final, info = await _run_one(
            dut, ram, port, dram, job["insn_addr"][i], job["insn_count"][i], job
        )
        out[f"dram_{i}"] = final
        meta.append(info)
    np.savez(job["results"], meta=np.array(json.dumps(meta)), **out)
