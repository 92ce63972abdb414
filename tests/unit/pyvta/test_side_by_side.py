"""``pyvta.testing.side_by_side.rotated``: the order the benchmarks time their runs in, round by
round."""

from __future__ import annotations

from collections import Counter

from pyvta.testing.side_by_side import rotated


def test_each_run_comes_first_equally_often():
    names = ["onnxruntime", "default", "tuned"]
    rounds = [rotated(names, r) for r in range(9)]
    assert rounds[:4] == [
        ["onnxruntime", "default", "tuned"],
        ["default", "tuned", "onnxruntime"],
        ["tuned", "onnxruntime", "default"],
        ["onnxruntime", "default", "tuned"],
    ]
    assert all(sorted(r) == sorted(names) for r in rounds)
    assert Counter(r[0] for r in rounds) == {n: 3 for n in names}
    assert rotated(["only"], 5) == ["only"]
