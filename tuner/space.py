"""Configuration spaces: knobs, their product space, and index <-> config mapping.

A ``ConfigSpace`` is an ordered list of knobs; each knob has a finite list of candidate values.
A point of the space is identified three ways:

- ``choices``: one int per knob (the position of the chosen value in the knob's candidate list),
  as a row of an ``int64`` numpy array ``[n_points, n_knobs]`` for vectorised search;
- ``index``: the mixed-radix number of the choices (knob 0 least significant), a Python int in
  ``[0, space.size)``;
- ``Config``: a mapping knob name -> value, JSON-serialisable with ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence

import numpy as np

MAX_SPACE_SIZE = 2**62  # indices stay exact in int64
MAX_REFUSED_DRAWS = 1000  # refused draws per valid point sought (``sample_unique``)


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    if n < 1:
        raise ValueError(f"divisors of {n} are undefined (need n >= 1)")
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _factorisations(extent: int, n_parts: int) -> list[tuple[int, ...]]:
    if n_parts == 1:
        return [(extent,)]
    out = []
    for d in divisors(extent):
        out.extend((d, *rest) for rest in _factorisations(extent // d, n_parts - 1))
    return out


def _jsonable(v):
    return list(v) if isinstance(v, tuple) else v


class Knob:
    """One tuning decision with a finite list of candidate ``values``.

    ``feature_table`` is a float array ``[len(values), feature_width]`` with a numeric
    description of each value (used as "knob features" by the cost model). ``default`` (one of
    the values, or None): the value a config that does not name this knob has, e.g. a record
    logged before the template had the knob (``ConfigSpace.config``, ``ConfigSpace.legacy``)."""

    kind = "knob"

    def __init__(self, name: str, values: Sequence, default=None):
        if not values:
            raise ValueError(f"knob {name!r} has no candidate values")
        self.name = name
        self.values = list(values)
        self._pos = {self._key(v): i for i, v in enumerate(self.values)}
        if len(self._pos) != len(self.values):
            raise ValueError(f"knob {name!r} has duplicate values: {self.values}")
        if default is not None and self._key(default) not in self._pos:
            raise ValueError(
                f"knob {name!r}: default {default!r} is not one of its values {self.values[:8]}"
            )
        self.default = default
        self.feature_table = np.asarray([self._features(v) for v in self.values], dtype=np.float32)

    def __len__(self) -> int:
        return len(self.values)

    @staticmethod
    def _key(v):
        return json.dumps(_jsonable(v))

    def _features(self, v) -> list[float]:
        raise NotImplementedError

    def encode(self, value) -> int:
        """Position of ``value`` (lists are accepted for tuples, as read back from JSON)."""
        if isinstance(value, list):
            value = tuple(value)
        try:
            return self._pos[self._key(value)]
        except KeyError:
            raise ValueError(
                f"{value!r} is not a candidate of knob {self.name!r} "
                f"({len(self.values)} candidates, e.g. {self.values[:4]})"
            ) from None

    def legacy(self) -> Knob:
        """This knob as an older space of its template had it (``ChoiceKnob`` may have
        gained values since); ``ConfigSpace.legacy`` builds an older space of these."""
        return self

    def describe(self) -> dict:
        d = {"kind": self.kind, "name": self.name, "values": [_jsonable(v) for v in self.values]}
        if self.default is not None:
            d["default"] = _jsonable(self.default)
        return d


class SplitKnob(Knob):
    """Split a loop of ``extent`` into ``n_parts`` factors (outermost first) whose product is
    ``extent``. ``max_inner`` bounds every factor but the outermost (e.g. register tiles).
    Features: log2 of each factor."""

    kind = "split"

    def __init__(self, name: str, extent: int, n_parts: int = 2, max_inner: int | None = None):
        if n_parts < 1:
            raise ValueError(f"split knob {name!r}: n_parts must be >= 1, got {n_parts}")
        self.extent, self.n_parts = int(extent), int(n_parts)
        values = _factorisations(self.extent, self.n_parts)
        if max_inner is not None:
            values = [v for v in values if all(f <= max_inner for f in v[1:])]
        super().__init__(name, values)

    def _features(self, v) -> list[float]:
        return [math.log2(f) for f in v]


class ReorderKnob(Knob):
    """An order of ``axes`` (all permutations unless ``orders`` lists the allowed ones).
    Features: the position of each axis."""

    kind = "reorder"

    def __init__(
        self, name: str, axes: Sequence[str], orders: Sequence[Sequence[str]] | None = None
    ):
        self.axes = tuple(axes)
        perms = itertools.permutations(self.axes) if orders is None else orders
        values = [tuple(p) for p in perms]
        for v in values:
            if sorted(v) != sorted(self.axes):
                raise ValueError(f"reorder knob {name!r}: {v} is not a permutation of {self.axes}")
        super().__init__(name, values)

    def _features(self, v) -> list[float]:
        return [float(v.index(a)) for a in self.axes]


class TileKnob(Knob):
    """A joint choice of several sizes (e.g. a register tile's rows and columns), listing only
    the combinations that make sense together (``parts`` names the components). Features: log2
    of each component."""

    kind = "tile"

    def __init__(
        self,
        name: str,
        parts: Sequence[str],
        values: Sequence[Sequence[int]],
        before: Sequence[Sequence[int]] | TileKnob | None = None,
    ):
        self.parts = tuple(parts)
        older = before if isinstance(before, TileKnob) else None  # itself with a before
        before = None if before is None else older.values if older else before
        vals = [tuple(int(x) for x in v) for v in values]
        bad = [v for v in vals if len(v) != len(self.parts) or min(v) < 1]
        if bad:
            raise ValueError(
                f"tile knob {name!r}: {bad[:3]} are not {len(self.parts)} positive sizes"
                f" ({', '.join(self.parts)})"
            )
        super().__init__(name, vals)
        old = None if before is None else [tuple(int(x) for x in v) for v in before]
        if old is not None and not set(old) <= set(vals):
            raise ValueError(
                f"tile knob {name!r}: the tiles it offered before {old[:4]} must be some of"
                f" its tiles {vals[:4]}"
            )
        self.before = None if old == vals else old
        self._older = older

    def legacy(self) -> Knob:
        """This knob as it was before it gained tiles (``before``: the ones it offered then,
        in their order; given as a ``TileKnob``, that knob, whose own ``legacy`` goes one
        step further back), or itself (see ``ChoiceKnob.legacy``)."""
        if self.before is None:
            return self
        return self._older or TileKnob(self.name, self.parts, self.before)

    def _features(self, v) -> list[float]:
        return [math.log2(f) for f in v]


class ChoiceKnob(Knob):
    """One of ``values`` (ints, floats, bools or strings): unroll depths, virtual threads,
    vector widths, on/off. Features: the value itself if numeric (log2 when all values are
    positive ints ``> 0`` and ``log_scale``), else its position."""

    kind = "choice"

    def __init__(
        self, name: str, values: Sequence, log_scale: bool = True, default=None, before=None
    ):
        vals = list(values)
        self._numeric = all(isinstance(v, int | float) for v in vals)
        self._log = (
            log_scale
            and self._numeric
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in vals)
        )
        super().__init__(name, vals, default)
        if before is not None and not set(map(self._key, before)) < set(self._pos):
            raise ValueError(
                f"knob {name!r}: the values it offered before {list(before)} must be some of"
                f" its values {vals[:8]}"
            )
        self.before = None if before is None else list(before)
        self._log_scale = log_scale

    def legacy(self) -> Knob:
        """This knob as it was before it gained values (``before``: the ones it offered
        then), or itself; ``ConfigSpace.legacy`` builds an older space of these."""
        if self.before is None:
            return self
        return ChoiceKnob(self.name, self.before, log_scale=self._log_scale)

    def _features(self, v) -> list[float]:
        if self._log:
            return [math.log2(v)]
        if self._numeric:
            return [float(v)]
        return [float(self.values.index(v))]


class BoolKnob(ChoiceKnob):
    """On/off."""

    kind = "bool"

    def __init__(self, name: str, default: bool | None = None):
        super().__init__(name, [False, True], log_scale=False, default=default)


class Config(Mapping):
    """A point of a ``ConfigSpace``: knob name -> value, plus its ``index``."""

    __slots__ = ("index", "_values")

    def __init__(self, index: int, values: dict):
        self.index, self._values = int(index), dict(values)

    def __getitem__(self, k):
        return self._values[k]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return f"Config({self.index}, {self._values})"

    def __eq__(self, other):
        return isinstance(other, Config) and other.index == self.index and dict(other) == dict(self)

    def __hash__(self):
        return hash(self.index)

    def to_dict(self) -> dict:
        return {k: _jsonable(v) for k, v in self._values.items()}

    def as_dict(self) -> dict:
        """A copy of the knob values as they are (``to_dict``: made JSON-able); faster than
        ``dict(config)``, which goes through the ``Mapping`` protocol key by key."""
        return dict(self._values)


class ConfigSpace:
    """The product of ``knobs`` (ordered, names unique). ``problem_fn(config) -> str | None``
    (optional, a module-level function or a ``functools.partial`` of one, so the space pickles):
    why a point cannot be built, found cheaply (no lowering), or None; measurers refuse such a
    point as invalid before building it (``problem``)."""

    def __init__(self, knobs: Sequence[Knob], problem_fn=None):
        names = [k.name for k in knobs]
        if len(set(names)) != len(names):
            raise ValueError(f"knob names must be unique, got {names}")
        self.knobs = list(knobs)
        self.radix = np.asarray([len(k) for k in self.knobs], dtype=np.int64)
        size = math.prod(len(k) for k in self.knobs)
        if size > MAX_SPACE_SIZE:
            raise ValueError(f"space of {size} points exceeds {MAX_SPACE_SIZE}; coarsen some knobs")
        self.size = size
        self._place = np.cumprod(np.concatenate([[1], self.radix[:-1]])).astype(np.int64)
        self._feat_slices = []
        off = 0
        for k in self.knobs:
            w = k.feature_table.shape[1]
            self._feat_slices.append(slice(off, off + w))
            off += w
        self.knob_feature_width = off
        self._legacy: dict = {}  # knob names -> their older spaces (``legacies``)
        self.problem_fn = problem_fn

    def problem(self, config: Mapping) -> str | None:
        """Why ``config`` cannot be built (``problem_fn``), or None (also without one)."""
        return None if self.problem_fn is None else self.problem_fn(config)

    def __len__(self) -> int:
        return self.size

    def __repr__(self):
        inner = ", ".join(f"{k.name}:{k.kind}[{len(k)}]" for k in self.knobs)
        return f"ConfigSpace(size={self.size}, {inner})"

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(f"no knob {name!r} (knobs: {[k.name for k in self.knobs]})")

    def signature(self) -> str:
        """A short hash of the knob definitions: logs of a changed space are told apart."""
        text = json.dumps([k.describe() for k in self.knobs], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    # ---- index <-> choices <-> config
    def to_choices(self, indices) -> np.ndarray:
        """``int64 [n]`` indices -> ``int64 [n, n_knobs]`` choices."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise IndexError(f"index out of range [0, {self.size})")
        return (idx[:, None] // self._place[None, :]) % self.radix[None, :]

    def to_index(self, choices) -> np.ndarray:
        """``int64 [n, n_knobs]`` choices -> ``int64 [n]`` indices."""
        ch = np.asarray(choices, dtype=np.int64).reshape(-1, len(self.knobs))
        return ch @ self._place

    def get(self, index: int) -> Config:
        """The config at ``index``."""
        ch = self.to_choices([index])[0]
        return Config(index, {k.name: k.values[c] for k, c in zip(self.knobs, ch, strict=True)})

    def configs(self, indices) -> list[Config]:
        """The configs at ``indices``: ``get`` for many points at once (one ``to_choices``
        call; a model's search checks tens of thousands of points per batch)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        names = [k.name for k in self.knobs]
        vals = [k.values for k in self.knobs]
        return [
            Config(i, dict(zip(names, [v[c] for v, c in zip(vals, row, strict=True)], strict=True)))
            for i, row in zip(idx.tolist(), self.to_choices(idx).tolist(), strict=True)
        ]

    def config(self, values: Mapping) -> Config:
        """The config with knob ``values`` (a dict as from ``Config.to_dict``); a knob it does
        not name takes its ``default`` (a knob without one must be named)."""
        missing = [k.name for k in self.knobs if k.name not in values and k.default is None]
        if missing:
            raise ValueError(f"config {dict(values)} lacks knobs {missing}")
        ch = [k.encode(values.get(k.name, k.default)) for k in self.knobs]
        return self.get(int(self.to_index([ch])[0]))

    def legacy(self, names) -> ConfigSpace | None:
        """The space of the knobs ``names`` only (in this space's order), each with the values
        it offered then (``Knob.legacy``), if every other knob has a default: the space a config
        of a template from before those knobs or values (a record logged then) lies in, its
        points this space's with the defaults (``config``). None if a knob outside ``names``
        has no default, or the older space would be this one. The first of :meth:`legacies`."""
        older = self.legacies(names)
        return older[0] if older else None

    def legacies(self, names) -> list[ConfigSpace]:
        """The older spaces of the knobs ``names`` (see :meth:`legacy`), newest first: each
        takes every knob one ``Knob.legacy`` step further back than the one before, while one
        still changes (a tile knob that gained tiles twice: both older spaces)."""
        names = frozenset(names)
        if names not in self._legacy:
            rest = [k for k in self.knobs if k.name not in names]
            kept = [k for k in self.knobs if k.name in names]
            out: list[ConfigSpace] = []
            fits = all(k.default is not None for k in rest)
            if fits and names <= {k.name for k in self.knobs}:
                while True:
                    older = [k.legacy() for k in kept]
                    changed = any(o is not k for o, k in zip(older, kept, strict=True))
                    if not changed and (out or not rest):
                        break
                    out.append(ConfigSpace(older))
                    kept = older
            self._legacy[names] = out
        return self._legacy[names]

    # ---- sampling and moves
    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` uniformly random indices (with replacement)."""
        return self.to_index(rng.integers(0, self.radix, size=(n, len(self.knobs))))

    def sample_unique(self, rng: np.random.Generator, n: int, exclude=()) -> list[int]:
        """Up to ``n`` distinct random indices not in ``exclude``; with a ``problem_fn``, of
        points it accepts only (uniform over those: random search spends no trial on a point
        refused without building it), up to ``MAX_REFUSED_DRAWS`` refused draws per point."""
        if self.problem_fn is not None:
            return self._sample_valid(rng, n, exclude)
        exclude = set(exclude)
        left = self.size - len(exclude)
        n = min(n, left)
        if n <= 0:
            return []
        if self.size <= 4 * (n + len(exclude)) and self.size <= 1 << 22:
            pool = np.setdiff1d(np.arange(self.size), np.fromiter(exclude, np.int64, len(exclude)))
            return [int(i) for i in rng.choice(pool, size=n, replace=False)]
        out: list[int] = []
        seen = set(exclude)
        while len(out) < n:
            for i in self.sample(rng, 2 * (n - len(out))):
                i = int(i)
                if i not in seen:
                    seen.add(i)
                    out.append(i)
                    if len(out) == n:
                        break
        return out

    def _sample_valid(self, rng: np.random.Generator, n: int, exclude) -> list[int]:
        seen = set(exclude)
        out: list[int] = []
        budget = MAX_REFUSED_DRAWS * max(n, 1)
        while len(out) < n and budget > 0 and len(seen) < self.size:
            for i in self.sample(rng, 2 * (n - len(out))):
                i = int(i)
                if i in seen:
                    continue
                seen.add(i)
                if self.problem(self.get(i)) is None:
                    out.append(i)
                    if len(out) == n:
                        break
                else:
                    budget -= 1
        return out

    def valid_mask(self, indices) -> np.ndarray:
        """``bool [n]``: which of ``indices`` the ``problem_fn`` accepts (all without one)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if self.problem_fn is None:
            return np.ones(idx.shape, bool)
        return np.fromiter((self.problem(c) is None for c in self.configs(idx)), bool, idx.size)

    def neighbours(
        self, choices: np.ndarray, rng: np.random.Generator, local_prob: float = 0.5
    ) -> np.ndarray:
        """One random move per row: one knob (chosen among knobs with >1 value) changes to a
        different value; with probability ``local_prob`` to an adjacent one (the candidate
        lists are ordered: split factors, numeric choices), else to any other.
        ``choices`` ``[n, n_knobs]`` -> new ``[n, n_knobs]``."""
        ch = np.array(choices, dtype=np.int64, copy=True).reshape(-1, len(self.knobs))
        movable = np.flatnonzero(self.radix > 1)
        if movable.size == 0:
            return ch
        n = ch.shape[0]
        rows = np.arange(n)
        which = movable[rng.integers(0, movable.size, size=n)]
        r = self.radix[which]
        cur = ch[rows, which]
        jump = (cur + rng.integers(1, np.maximum(r, 2))) % r  # never the same value
        step = np.where(rng.random(n) < 0.5, -1, 1)
        adj = cur + step
        adj = np.where((adj < 0) | (adj >= r), cur - step, adj)  # bounce at the ends
        ch[rows, which] = np.where(rng.random(n) < local_prob, adj, jump)
        return ch

    # ---- features
    def knob_features(self, choices: np.ndarray) -> np.ndarray:
        """``float32 [n, knob_feature_width]``: the knobs' feature tables looked up."""
        ch = np.asarray(choices, dtype=np.int64).reshape(-1, len(self.knobs))
        out = np.empty((ch.shape[0], self.knob_feature_width), dtype=np.float32)
        for j, k in enumerate(self.knobs):
            out[:, self._feat_slices[j]] = k.feature_table[ch[:, j]]
        return out
