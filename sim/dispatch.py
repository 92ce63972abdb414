"""Fetch's dispatch and the dependency-token rules, shared by the functional and cycle models."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyvta.isa import DEP_FLAG_NAMES, DEP_QUEUES, DepQueue, Insn, Module
from pyvta.sim.errors import DeadlockError, QueueUsageError


@dataclass(frozen=True)
class Dispatched:
    """One instruction in its module's command queue, with the token queues it pops and pushes."""

    index: int
    insn: Insn
    pops: tuple[DepQueue, ...]
    pushes: tuple[DepQueue, ...]


def dispatch(insns: list[Insn]) -> dict[Module, list[Dispatched]]:
    """Split the stream into the load, compute and store command queues, checking token flags.

    A flag whose module has no such queue (e.g. a STORE with pop_next_dep) raises QueueUsageError.
    """
    queues: dict[Module, list[Dispatched]] = {m: [] for m in Module}
    for i, insn in enumerate(insns):
        module = insn.module
        targets = DEP_QUEUES[module]
        pops, pushes = [], []
        for flag, queue in zip(DEP_FLAG_NAMES, targets, strict=True):
            if not getattr(insn, flag):
                continue
            if queue is None:
                allowed = [
                    f"{f} ({q.value})" for f, q in zip(DEP_FLAG_NAMES, targets, strict=True) if q
                ]
                raise QueueUsageError(
                    f"instruction {i} ({type(insn).__name__} on the {module.value} module) sets"
                    f" {flag}, but that module has no such queue (allowed: {', '.join(allowed)})"
                )
            (pops if flag.startswith("pop") else pushes).append(queue)
        queues[module].append(Dispatched(i, insn, tuple(pops), tuple(pushes)))
    return queues


@dataclass
class Schedule:
    """The order the modules run a stream in (token rules only: it does not depend on data).

    ``deadlock``: the error to raise after ``order`` ran, when the modules got stuck;
    ``leftover_tokens``: tokens still queued at the end (by queue name).
    """

    order: list[Dispatched]
    deadlock: DeadlockError | None = None
    leftover_tokens: dict[str, int] = field(default_factory=dict)


def schedule(
    queues: dict[Module, list[Dispatched]],
    module_order: tuple[Module, ...] = tuple(Module),
    one_per_turn: bool = False,
) -> Schedule:
    """Interleave the command queues round-robin: each module runs until it blocks on a missing
    token (or, with ``one_per_turn``, one instruction per round)."""
    heads = {m: 0 for m in Module}
    tokens = {q: 0 for q in DepQueue}
    order: list[Dispatched] = []
    remaining = sum(len(q) for q in queues.values())
    while remaining:
        progressed = False
        for module in module_order:
            q = queues[module]
            while heads[module] < len(q):
                d = q[heads[module]]
                if any(tokens[p] == 0 for p in d.pops):
                    break
                for p in d.pops:
                    tokens[p] -= 1
                for p in d.pushes:
                    tokens[p] += 1
                order.append(d)
                heads[module] += 1
                remaining -= 1
                progressed = True
                if one_per_turn:
                    break
        if not progressed:
            return Schedule(order, deadlock_error(queues, heads, tokens))
    return Schedule(order, None, {q.value: n for q, n in tokens.items() if n})


def deadlock_error(
    queues: dict[Module, list[Dispatched]], heads: dict[Module, int], tokens: dict[DepQueue, int]
) -> DeadlockError:
    """Describe every module still holding work and the token it waits for; the error's
    ``waits`` (module -> queues it waits on), ``tokens`` (queue -> tokens waiting) and
    ``pending`` (module -> instructions left) say the same as data."""
    parts, waits, pending = [], {}, {}
    for module in Module:
        q, h = queues[module], heads[module]
        pending[module.value] = len(q) - h
        if h >= len(q):
            parts.append(f"{module.value}: done")
            continue
        d = q[h]
        missing = [p.value for p in d.pops if tokens[p] == 0]
        waits[module.value] = tuple(missing)
        parts.append(
            f"{module.value}: waits at instruction {d.index} ({type(d.insn).__name__})"
            f" for a {'/'.join(missing) or '?'} token"
        )
    error = DeadlockError("deadlock: " + "; ".join(parts))
    error.waits, error.pending = waits, pending
    error.tokens = {q.value: n for q, n in tokens.items()}
    return error
