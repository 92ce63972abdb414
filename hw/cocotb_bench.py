"""The cocotb testbench ``hw.runner`` runs inside the simulator (not imported by anything else).

Reads the job file named by ``PYVTA_HW_JOB``, runs each program (reset, DRAM image into AxiRam, launch
through AXI4-Lite, wait for DONE or the watchdog), and writes the final DRAM images and counters.
"""

import json
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from pyvta.hw import regmap

POLL_CYCLES = 200
COUNTERS = (
    "CYCLES",
    "FETCHED",
    "LOAD_BUSY",
    "COMPUTE_BUSY",
    "STORE_BUSY",
    "LOAD_STALL",
    "COMPUTE_STALL",
    "STORE_STALL",
    "GEMM_UOPS",
    "ALU_UOPS",
)
PROGRESS = ("FETCHED", "LOAD_BUSY", "COMPUTE_BUSY", "STORE_BUSY")
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


async def _read(axil, name):
    return await axil.read_dword(regmap.offset(name))


def _describe_stuck(tokens: int, queues: int) -> str:
    tq = {name: (tokens >> (8 * i)) & 0xFF for i, name in enumerate(("l2c", "c2l", "c2s", "s2c"))}
    levels = {n: (queues >> (8 * i)) & 0xFF for i, n in enumerate(("load", "compute", "store"))}
    units = ("load", "compute", "store")
    stalled = [u for i, u in enumerate(units) if (queues >> (24 + i)) & 1]
    idle = [u for i, u in enumerate(units) if (queues >> (27 + i)) & 1]
    return (
        f"tokens {tq}; command queues {levels}; waiting on a token: {stalled or 'none'};"
        f" idle: {idle}; fetch done: {bool(queues >> 30 & 1)}; FINISH seen: {bool(queues >> 31 & 1)}"
    )


async def _run_one(dut, ram, axil, dram, insn_addr, insn_count, job):
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    ram.write(0, bytes(ram.size))
    ram.write(0, dram.tobytes())
    if job["clear_srams"]:
        await axil.write_dword(regmap.offset("CTRL"), 0b100)  # CLEAR
        await ClockCycles(dut.clk, job["clear_cycles"])
        while (await _read(axil, "STATUS")) & 0b100:
            await ClockCycles(dut.clk, 16)
    await axil.write_dword(regmap.offset("INSN_COUNT"), insn_count)
    await axil.write_dword(regmap.offset("INSN_ADDR"), insn_addr)
    await axil.write_dword(regmap.offset("CTRL"), 0b11)  # START, IRQ_EN
    status, message = "timeout", ""
    last, still, waited = None, 0, 0
    while waited < job["max_cycles"]:
        await ClockCycles(dut.clk, POLL_CYCLES)
        waited += POLL_CYCLES
        if dut.irq.value:
            status = "done"
            break
        progress = [await _read(axil, n) for n in PROGRESS]
        still = still + POLL_CYCLES if progress == last else 0
        last = progress
        if still >= job["watchdog_cycles"]:
            status = "deadlock"
            break
    counters = {n: await _read(axil, n) for n in COUNTERS}
    if status != "done":
        tokens = await _read(axil, "TOKENS")
        queues = await _read(axil, "QUEUES")
        message = _describe_stuck(tokens, queues) + f"; counters {counters}"
        dut._log.warning("program stuck (%s): %s", status, message)
    final = np.frombuffer(ram.read(0, len(dram)), dtype=np.uint8).copy()
    return final, {
        "cycles": counters["CYCLES"],
        "status": status,
        "counters": counters,
        "message": message,
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
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for name in INPUTS_AT_ZERO:  # no X/Z into the design before the bus models drive them
        getattr(dut, name).value = 0
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst, size=ram_bytes)
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
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
            dut, ram, axil, dram, job["insn_addr"][i], job["insn_count"][i], job
        )
        out[f"dram_{i}"] = final
        meta.append(info)
    np.savez(job["results"], meta=np.array(json.dumps(meta)), **out)
