"""``tuner.in_network_confirm.round_order``: the order the benchmarks time their runs in,
round by round."""

from __future__ import annotations

from collections import Counter

from pyvta.tuner.in_network_confirm import round_order


def test_each_run_comes_in_each_place_and_after_each_other_about_equally_often():
    """Seeded by the round (the same order again for the same round); over 600 rounds of four
    runs each run comes first, and each follows each other one in the stream of runs, within
    a third of the even share (rotated, some pairs never occur and others 2.4x their share)."""
    names = ["onnxruntime", "default", "default again", "tuned"]
    rounds = [round_order(names, r) for r in range(600)]
    assert rounds[7] == round_order(names, 7) and rounds[7] != rounds[8]
    assert all(sorted(r) == sorted(names) for r in rounds)
    first = Counter(r[0] for r in rounds)
    assert all(abs(first[n] - 150) < 50 for n in names), first
    stream = [n for r in rounds for n in r]
    after = Counter(zip(stream, stream[1:], strict=False))
    n = len(names)  # b right after a: 1/n of the rounds within one, 1/n^2 across two
    even = len(rounds) * (1 / n + 1 / n**2)
    for a in names:
        for b in names:
            if a != b:
                assert abs(after[a, b] - even) < even / 3, (a, b, after[a, b], even)
    assert round_order(["only"], 5) == ["only"]
