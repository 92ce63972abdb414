"""Config spaces: index <-> config bijection, neighbours stay valid, JSON round trip."""

import json
import math

import numpy as np
import pytest

from pyvta.tuner.space import (
    BoolKnob,
    ChoiceKnob,
    ConfigSpace,
    ReorderKnob,
    SplitKnob,
    TileKnob,
    divisors,
)


@pytest.fixture
def space():
    return ConfigSpace(
        [
            SplitKnob("tile_i", 48, 3),
            SplitKnob("tile_k", 64, 2, max_inner=16),
            ReorderKnob("order", ("i", "j", "k")),
            ChoiceKnob("vthread", [1, 2, 4]),
            ChoiceKnob("unroll", ["none", "inner", "all"]),
            BoolKnob("vectorize"),
        ]
    )


def test_knob_values():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    k = SplitKnob("s", 12, 2)
    assert all(math.prod(v) == 12 for v in k.values) and len(k) == 6
    assert len(SplitKnob("s", 48, 3)) == sum(len(divisors(48 // d)) for d in divisors(48))
    assert all(v[1] <= 16 for v in SplitKnob("s", 64, 2, max_inner=16).values)
    assert len(ReorderKnob("o", ("a", "b", "c"))) == 6
    with pytest.raises(ValueError, match="not a candidate"):
        k.encode((5, 3))
    with pytest.raises(ValueError, match="unique"):
        ConfigSpace([BoolKnob("a"), BoolKnob("a")])


def test_index_config_bijection(space):
    assert space.size == math.prod(len(k) for k in space.knobs)
    idx = np.arange(space.size)
    ch = space.to_choices(idx)
    assert (space.to_index(ch) == idx).all()
    assert len({tuple(r) for r in ch}) == space.size  # injective
    for i in [0, 1, 17, space.size // 2, space.size - 1]:
        cfg = space.get(i)
        text = json.dumps(cfg.to_dict())
        back = space.config(json.loads(text))
        assert back.index == i and back == cfg
    with pytest.raises(IndexError):
        space.get(space.size)


def test_neighbours_are_valid_and_one_knob_away(space, rng):
    ch = space.to_choices(space.sample(rng, 500))
    nb = space.neighbours(ch, rng)
    assert ((nb >= 0) & (nb < space.radix)).all()
    diff = (nb != ch).sum(axis=1)
    assert (diff == 1).all()
    idx = space.to_index(nb)
    assert ((idx >= 0) & (idx < space.size)).all()


def test_sample_unique_excludes(space, rng):
    exclude = set(range(0, space.size, 2))
    got = space.sample_unique(rng, 50, exclude)
    assert len(got) == len(set(got)) == 50 and not set(got) & exclude
    small = ConfigSpace([BoolKnob("a"), ChoiceKnob("b", [1, 2, 3])])
    assert sorted(small.sample_unique(rng, 10, {0})) == [1, 2, 3, 4, 5]


def test_knob_features_and_signature(space, rng):
    idx = space.sample(rng, 7)
    f = space.knob_features(space.to_choices(idx))
    assert f.shape == (7, space.knob_feature_width) and f.dtype == np.float32
    other = ConfigSpace([SplitKnob("tile_i", 48, 2)])
    assert other.signature() != space.signature()


def test_tile_knob_lists_joint_sizes_with_log_features():
    knob = TileKnob("tile", ("bm", "bn"), [(4, 16), (8, 32)])
    assert knob.encode([8, 32]) == 1  # as read back from JSON
    assert knob.feature_table.tolist() == [[2.0, 4.0], [3.0, 5.0]]
    with pytest.raises(ValueError, match="2 positive sizes"):
        TileKnob("tile", ("bm", "bn"), [(4, 0)])


def test_gemm_register_tiles_fit_the_register_file():
    from pyvta.compiler.backend.llvm import CpuTarget
    from pyvta.tuner.cpu import register_tiles

    target = CpuTarget.host()
    lanes = target.vector_lanes("float32")
    room = target.vector_registers - 4
    tiles = register_tiles(512, 512)
    assert tiles and all(bn % lanes == 0 and bm * bn // lanes <= room for bm, bn in tiles)
    assert (1, lanes) in tiles and (room, lanes) in tiles
    assert all(512 % bn == 0 for _, bn in register_tiles(512, 512))
    assert {bn for _, bn in register_tiles(8, 12)} <= {4, 6, 12}  # narrower than a vector
