"""The launch sequence of the accelerator, written once, sans-IO, against ``isa.regmap``.

A routine is a generator that yields register operations and receives their results:

    Read(offset)          -> the 32-bit value read
    Write(offset, value)  -> None
    Wait(cycles)          -> cycles actually waited (a driver may return early once ``irq`` rises;
                             returning None means all of them)

and returns its outcome (``StopIteration.value``). Drivers step it: a sync one for the fast RTL
device and a board's MMIO (``driver.launch.run``), an async one in the cocotb testbench
(``hw.cocotb_bench``). The routine decides nothing about IO, the driver nothing about registers.
It lives in ``isa`` (beside the register map it speaks) so the RTL's testbench, which may not
import ``driver``, runs the same code as every host. Pure Python: a board's runtime imports it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from pyvta.isa import regmap
from pyvta.isa.config import HwConfig
from pyvta.isa.errors import PyvtaError

DEFAULT_POLL_CYCLES = 200
DEFAULT_WATCHDOG_CYCLES = 20_000
DEFAULT_MAX_CYCLES = 50_000_000
# Registers that grow while a unit makes progress: none changing for ``watchdog_cycles`` is a deadlock.
PROGRESS = ("FETCHED", "LOAD_BUSY", "COMPUTE_BUSY", "STORE_BUSY")
# Which token queues each unit pops (waits on) and who pushes them.
POPS = {"load": ("c2l",), "compute": ("l2c", "s2c"), "store": ("c2s",)}
PUSHER = {"l2c": "load", "c2l": "compute", "c2s": "compute", "s2c": "store"}


@dataclass(frozen=True)
class Read:
    offset: int


@dataclass(frozen=True)
class Write:
    offset: int
    value: int


@dataclass(frozen=True)
class Wait:
    cycles: int


Op = Read | Write | Wait
Routine = Generator[Op, int | None, object]


@dataclass(frozen=True)
class StuckReport:
    """The token and command-queue state of a program that did not finish, decoded."""

    tokens: dict[str, int]  # tokens waiting per queue ("l2c", ...)
    levels: dict[str, int]  # command-queue level per unit
    stalled: tuple[str, ...]  # units waiting for a token
    idle: tuple[str, ...]
    fetch_done: bool
    finished: bool  # compute executed FINISH
    words: tuple[int, int] = (0, 0)  # the TOKENS and QUEUES words decoded

    @classmethod
    def from_registers(cls, tokens_word: int, queues_word: int) -> StuckReport:
        t = regmap.register("TOKENS").decode(tokens_word)
        q = regmap.register("QUEUES").decode(queues_word)
        units = regmap.UNITS
        return cls(
            tokens={name: t[name.upper()] for name in regmap.TOKEN_QUEUES},
            levels={u: q[f"LEVEL_{u.upper()}"] for u in units},
            stalled=tuple(u for u in units if q[f"STALLED_{u.upper()}"]),
            idle=tuple(u for u in units if q[f"IDLE_{u.upper()}"]),
            fetch_done=bool(q["FETCH_DONE"]),
            finished=bool(q["FINISHED"]),
            words=(tokens_word, queues_word),
        )

    def waits(self) -> dict[str, tuple[str, ...]]:
        """Stalled unit -> the empty token queues it may be waiting on."""
        out = {}
        for unit in self.stalled:
            empty = tuple(q for q in POPS[unit] if self.tokens[q] == 0)
            out[unit] = empty or POPS[unit]
        return out

    def describe(self) -> str:
        lines = []
        for unit, queues in self.waits().items():
            alts = " or ".join(f"{q} (pushed by {PUSHER[q]})" for q in queues)
            lines.append(f"{unit} waits for a token on {alts}")
        if not lines:
            lines.append("no unit waits for a token")
        lines.append(
            f"tokens {self.tokens}; command queues {self.levels}; idle: {list(self.idle)};"
            f" fetch done: {self.fetch_done}; FINISH seen: {self.finished}"
        )
        return "; ".join(lines)


@dataclass(frozen=True)
class FaultReport:
    """STATUS.ERROR's detail: the first faulting instruction's index and why (ERROR_INDEX)."""

    kind: regmap.Fault
    index: int

    @classmethod
    def from_register(cls, word: int) -> FaultReport:
        fields = regmap.register("ERROR_INDEX").decode(word)
        try:
            kind = regmap.Fault(fields["KIND"])
        except ValueError:
            raise PyvtaError(
                f"ERROR_INDEX reads 0x{word:08X}: fault kind {fields['KIND']} is none this host"
                f" knows (allowed: {', '.join(f'{f.value} {f.name}' for f in regmap.Fault)})"
            ) from None
        return cls(kind, fields["INDEX"])

    def describe(self) -> str:
        return f"instruction {self.index}: {self.kind.description}"


@dataclass(frozen=True)
class Outcome:
    """What a launch ended with: ``status`` "done", "fault" (fetch stopped at a bad instruction:
    ``fault``), "deadlock" (no progress for the watchdog's window) or "timeout" (``max_cycles``
    passed); the counter registers; the stuck report when it did not reach DONE."""

    status: str
    counters: dict[str, int]
    waited_cycles: int
    stuck: StuckReport | None = None
    fault: FaultReport | None = None

    @property
    def message(self) -> str:
        if self.fault is not None:
            return self.fault.describe()
        if self.stuck is None:
            return ""
        return f"{self.stuck.describe()}; counters {self.counters}"


def _read(name: str) -> Routine:
    return (yield Read(regmap.offset(name)))


def read_registers(names) -> Routine:
    """Read registers by name; returns {name: value}."""
    values = {}
    for name in names:
        values[name] = yield Read(regmap.offset(name))
    return values


def read_id() -> Routine:
    """Read ID and CONFIG_HASH; returns (id_word, hash_word)."""
    id_word = yield Read(regmap.offset("ID"))
    hash_word = yield Read(regmap.offset("CONFIG_HASH"))
    return id_word, hash_word


def check_id(config: HwConfig) -> Routine:
    """Returns None when the device is a pyvta accelerator of ``config``, else what differs."""
    id_word, hash_word = yield from read_id()
    return regmap.id_mismatch(id_word, hash_word, config)


def clear(clear_cycles: int) -> Routine:
    """CTRL.CLEAR: zero every on-chip buffer; ``clear_cycles`` = ``hw.sram.clear_rows(cfg)``."""
    ctrl, status = regmap.register("CTRL"), regmap.register("STATUS")
    yield Write(ctrl.offset, ctrl.encode(CLEAR=1))
    yield Wait(clear_cycles)
    while status.field("CLEARING").get((yield Read(status.offset))):
        yield Wait(16)


def launch(
    insn_addr: int,
    insn_count: int,
    clear_cycles: int | None = None,
    max_cycles: int = DEFAULT_MAX_CYCLES,
    watchdog_cycles: int = DEFAULT_WATCHDOG_CYCLES,
    poll_cycles: int = DEFAULT_POLL_CYCLES,
) -> Routine:
    """Run ``insn_count`` instructions at ``insn_addr`` to DONE; returns an ``Outcome``.

    ``clear_cycles``: clear the on-chip buffers first (the state ``sim.run`` assumes); None keeps them.
    Polls STATUS every ``poll_cycles`` (or when the driver sees ``irq``); DONE with STATUS.ERROR
    is "fault" (ERROR_INDEX read into ``Outcome.fault``); gives up when nothing progresses for
    ``watchdog_cycles`` ("deadlock") or after ``max_cycles`` ("timeout").
    """
    ctrl, status = regmap.register("CTRL"), regmap.register("STATUS")
    if clear_cycles is not None:
        yield from clear(clear_cycles)
    yield Write(regmap.offset("INSN_COUNT"), insn_count)
    yield Write(regmap.offset("INSN_ADDR"), insn_addr)
    yield Write(ctrl.offset, ctrl.encode(START=1, IRQ_EN=1))
    state, waited, still, last = "timeout", 0, 0, None
    while waited < max_cycles:
        step = yield Wait(min(poll_cycles, max_cycles - waited))
        step = poll_cycles if step is None else step
        waited += step
        word = yield Read(status.offset)
        if status.field("DONE").get(word):
            state = "fault" if status.field("ERROR").get(word) else "done"
            break
        progress = yield from read_registers(PROGRESS)
        still = still + step if progress == last else 0
        last = progress
        if still >= watchdog_cycles:
            state = "deadlock"
            break
    counters = yield from read_registers(regmap.COUNTERS)
    stuck = fault = None
    if state == "fault":
        fault = FaultReport.from_register((yield from _read("ERROR_INDEX")))
    elif state != "done":
        stuck = StuckReport.from_registers(
            (yield from _read("TOKENS")), (yield from _read("QUEUES"))
        )
    return Outcome(state, counters, waited, stuck, fault)
