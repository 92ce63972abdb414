"""The confirmation that ends a re-ranking in the network (``tuner.in_network``): the network
with the ranked choices against the one of defaults, timed interleaved, paired round by round,
and the rule that decides which layers keep their choice (:func:`confirmed_layers`); the order
and the pairing of runs timed in turn (:func:`round_order`, :func:`paired_ratio`), which the
side-by-side benchmarks use too."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from pyvta.isa.errors import PyvtaError
from pyvta.tuner.host_load import HostLoad


class InNetworkError(PyvtaError, ValueError):
    """A re-ranking that cannot run or a choices file that cannot be read."""


def round_order(names: list, r: int) -> list:
    """The order of round ``r`` of runs timed in turn: a permutation of ``names`` drawn with seed
    ``r``, so over the rounds each run comes in each place, and after each other, about equally
    often. In a fixed order the last of a round was favoured (ResNet-18's tuned network, the
    default's code, ran 1.009-1.017x the default timed before it, ``benchmarks/cpu_network.py``);
    rotated (``names`` from the ``r``-th on) each run still followed the same one in most rounds,
    and the same MobileNet built three times ran 1.019x and 1.023x paired between the first and
    the third, 60 rounds each, against 1.007x both in random orders (Zen 5)."""
    if len(names) < 2:
        return list(names)
    return [names[i] for i in np.random.default_rng(r).permutation(len(names))]


def paired_ratio(base_ms, new_ms) -> float:
    """The median over rounds of ``base / new`` (> 1: new is faster), both timed in the same
    round: steadier than a ratio of medians while the host's speed moves."""
    if len(base_ms) != len(new_ms) or not base_ms:
        raise InNetworkError(
            f"paired times need equal, non-zero counts: {len(base_ms)}, {len(new_ms)}"
        )
    return statistics.median(b / n for b, n in zip(base_ms, new_ms, strict=True))


@dataclass
class Confirmation:
    """The network with the changed layers' choices ("chosen") against the one with every
    layer's default ("default"), timed interleaved after the ranking, ``rounds`` rounds: per
    round each network's ms per inference (all nodes) and each changed layer's (all its
    launches); and the default network built a second time ("control"), which says what the
    timing gives for no change: a speed-up must pass 1 by more than the control strays from
    it. Two builds of the same default network (ResNet-18, MobileNet) on a Zen 1 host ran
    0.986-1.010x each other, and a confirmation's 1.025x was 0.990x in the next run.

    ``pick``: each changed layer's candidate index; ``incumbent``: the network timed is the
    one the pass started from (the last pass's choices), not the ranking's."""

    rounds: int
    network_ms: dict  # "default" | "chosen" | "control" (if timed) -> [ms per round]
    layer_ms: dict  # changed layer's workload key -> {"default": [ms per round], "chosen": [...]}
    pick: dict = field(default_factory=dict)  # changed layer's workload key -> candidate index
    incumbent: bool = False
    host: HostLoad | None = None  # what else had the CPUs over its rounds (``tuner.host_load``)

    @property
    def default_ms(self) -> float:
        """The default network's median ms: how fast the host ran it in these rounds."""
        return statistics.median(self.network_ms["default"])

    @property
    def speedup(self) -> float:
        """The chosen network's paired speed-up over the default one (> 1: faster)."""
        return paired_ratio(self.network_ms["default"], self.network_ms["chosen"])

    @property
    def control(self) -> float | None:
        """The second build of the default network against the first (paired); None where
        it was not timed."""
        again = self.network_ms.get("control")
        return None if again is None else paired_ratio(self.network_ms["default"], again)

    @property
    def margin(self) -> float:
        """How far the control strayed from 1 (0 without one)."""
        return 0.0 if self.control is None else abs(self.control - 1)

    @property
    def beats_control(self) -> bool:
        """The chosen network faster than the default by more than the control's margin."""
        return self.speedup > 1 + self.margin

    def faster(self) -> set[str]:
        """The changed layers faster than their default (paired)."""
        return {k for k, t in self.layer_ms.items() if paired_ratio(t["default"], t["chosen"]) > 1}

    @property
    def borne_out(self) -> bool:
        """The network faster (beyond the control's margin), and every changed layer."""
        return self.beats_control and self.faster() == set(self.layer_ms)

    def to_json(self) -> dict:
        faster = self.faster()
        return {
            **({"incumbent": True} if self.incumbent else {}),
            "rounds": self.rounds,
            "speedup": self.speedup,
            "control": self.control,
            "network_ms": self.network_ms,
            "layers": {k: {**t, "faster": k in faster} for k, t in self.layer_ms.items()},
            **({"host": self.host.to_json()} if self.host is not None else {}),
        }


SAME_HOST_SPEED = 1.15
"""Confirmations are compared only where the default network ran within this factor of its
fastest median among them (``comparable``). The host runs in two speeds: in a descent on
MobileNetV2 (Zen 5, 2 threads, 14 passes) the default network's median was 2.14-2.40 ms in
most confirmations and 2.97-3.22 ms in passes 6-8 and 13-14, and there the same kind of
choices ran 1.06-1.10x the defaults against 1.00-1.04x at the normal speed; the descent kept
a slow-speed 1.079x that ran 1.012x side by side (``cpu_network.py``, docs/measurements.md)."""


def comparable(confirmations: list[Confirmation]) -> list[Confirmation]:
    """The confirmations timed while the host ran at the speed of the fastest of them: the
    default network's median within ``SAME_HOST_SPEED`` of the least (a paired ratio from
    a slower spell is not one of the normal speed's)."""
    if not confirmations:
        return []
    least = min(c.default_ms for c in confirmations)
    return [c for c in confirmations if c.default_ms <= least * SAME_HOST_SPEED]


def fastest(confirmations: list[Confirmation]) -> Confirmation | None:
    """Of the :func:`comparable` confirmations, the one whose network was the fastest against
    the default (paired), if faster beyond its control's margin; else None."""
    best = max(comparable(confirmations), key=lambda c: c.speedup, default=None)
    return best if best is not None and best.beats_control else None


def confirmed_layers(confirmations: list[Confirmation]) -> set[str]:
    """The layers that keep their ranked choice: those of the :func:`fastest` confirmation."""
    best = fastest(confirmations)
    return set() if best is None else set(best.layer_ms)
