"""The boards pyvta builds bitstreams for: part, processing system and the ports the accelerator
uses on it. Defined once here; the Vivado recipe (``hw.recipe``), its manifest and the docs read it.

Zynq-7000 boards (PS7) attach the accelerator's AXI4-Lite slave to ``M_AXI_GP0`` and its AXI4
master to ``S_AXI_HP0`` (or the coherent ``S_AXI_ACP``); Zynq UltraScale+ boards to
``M_AXI_HPM0_FPD`` and ``S_AXI_HP0_FPD`` (or the coherent ``S_AXI_HPC0_FPD``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyvta.isa.errors import PyvtaError


@dataclass(frozen=True)
class PsKind:
    """A processing-system family: its Vivado IP, ports, PL clock and interrupt pins."""

    name: str
    ip: str  # Vivado IP VLNV
    cell: str  # instance name in the block design
    control_port: str  # PS master the AXI4-Lite slave hangs off
    memory_ports: dict[str, str]  # memory port choice -> PS slave port
    coherent: tuple[str, ...]  # the memory port choices that snoop the CPU caches
    clock_pin: str  # PL clock output
    reset_pin: str  # PL reset output (active low)
    irq_pin: str  # PL-to-PS interrupt input
    base_address: int  # where the control registers are assigned
    clock_property: str  # CONFIG property of the PL clock frequency (MHz)
    cpu: str  # its application CPU (compiler.backend.llvm.target.BOARD_CPUS names it)


PS7 = PsKind(
    name="ps7",
    ip="xilinx.com:ip:processing_system7:5.5",
    cell="ps7",
    control_port="M_AXI_GP0",
    memory_ports={"hp0": "S_AXI_HP0", "acp": "S_AXI_ACP"},
    coherent=("acp",),
    clock_pin="FCLK_CLK0",
    reset_pin="FCLK_RESET0_N",
    irq_pin="IRQ_F2P",
    base_address=0x43C0_0000,
    clock_property="PCW_FPGA0_PERIPHERAL_FREQMHZ",
    cpu="cortex-a9",
)

ZYNQ_ULTRA = PsKind(
    name="zynq_ultra_ps_e",
    ip="xilinx.com:ip:zynq_ultra_ps_e:3.5",
    cell="zynq_ultra_ps",
    control_port="M_AXI_HPM0_FPD",
    memory_ports={"hp0": "S_AXI_HP0_FPD", "hpc0": "S_AXI_HPC0_FPD"},
    coherent=("hpc0",),
    clock_pin="pl_clk0",
    reset_pin="pl_resetn0",
    irq_pin="pl_ps_irq0",
    base_address=0xA000_0000,
    clock_property="PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ",
    cpu="cortex-a53",
)


@dataclass(frozen=True)
class Board:
    """A board: its FPGA part, its processing system, and the PL clock PYNQ starts it at."""

    name: str
    part: str
    ps: PsKind
    clock_mhz: float = 100.0
    board_part: str | None = None  # Vivado board file, when its presets are wanted


BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        Board(
            "pynq-z1", "xc7z020clg400-1", PS7, board_part="www.digilentinc.com:pynq-z1:part0:1.0"
        ),
        Board("pynq-z2", "xc7z020clg400-1", PS7, board_part="tul.com.tw:pynq-z2:part0:1.0"),
        Board(
            "ultra96v2",
            "xczu3eg-sbva484-1-e",
            ZYNQ_ULTRA,
            board_part="avnet.com:ultra96v2:part0:1.2",
        ),
        Board(
            "zcu104", "xczu7ev-ffvc1156-2-e", ZYNQ_ULTRA, board_part="xilinx.com:zcu104:part0:1.1"
        ),
    )
}


class BoardError(PyvtaError, ValueError):
    """A board pyvta has no recipe for."""


def board(name: str) -> Board:
    """The board called ``name``; the error lists the boards there are."""
    if name not in BOARDS:
        raise BoardError(f"unknown board {name!r} (boards: {', '.join(BOARDS)})")
    return BOARDS[name]
