"""Fetch's dispatch and the dependency-token rules, shared by the functional and cycle models."""

from __future__ import annotations

from dataclasses import dataclass

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
