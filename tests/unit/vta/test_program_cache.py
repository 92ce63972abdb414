"""The accelerator's lowered layer programs kept on disk (``compiler.backend.vta.operator``,
cache folder ``vta-programs``): a network compiled again reads each layer's instructions,
micro-ops and relocation table instead of lowering the layer again, and gets the same kernel
byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from pyvta.compiler.backend.vta import conv_pool, operator
from pyvta.compiler.backend.vta.config import ConvConfig
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import HwConfig

SEED = 7
WL = ConvWorkload(8, 8, 32, 32, 3, 3, 1, 1)
EP = Epilogue(bias=True, shift=6)
_LOWERED = operator.lowered_program  # unpatched: the reference lowers through it, never kept


@pytest.fixture
def layer():
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    w = rng.integers(-8, 8, (2, 2, 3, 3, 16, 16), dtype=np.int8)
    b = rng.integers(-500, 500, (2, 16), dtype=np.int32)
    return w, b


def _no_lowering(*args, **kwargs):
    raise AssertionError("the layer was lowered again")


def _same(a, b) -> None:
    assert (a.config_tag, a.regions, a.insn_count, a.info) == (
        b.config_tag, b.regions, b.insn_count, b.info,
    )  # fmt: skip
    assert dict(a.consts) == dict(b.consts)
    assert a.relocs.dtype == b.relocs.dtype and np.array_equal(a.relocs, b.relocs)


def _programs(root):
    return sorted((root / "vta-programs").glob("*.npz"))


def test_a_layers_program_is_lowered_once_and_read_back(tmp_path, monkeypatch, layer):
    """The kept program gives the kernel lowered without the cache, byte for byte; it is read
    back without lowering, and a damaged file is lowered again."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    hw = HwConfig()
    with monkeypatch.context() as m:  # the reference: never kept
        m.setattr(operator, "lowered_program", lambda *a: _LOWERED(*a[:-1], False))
        want = operator.build_kernel(WL, EP, *layer, hw)
    assert _programs(tmp_path) == []
    _same(operator.build_kernel(WL, EP, *layer, hw), want)
    kept = _programs(tmp_path)
    assert len(kept) == 1
    with monkeypatch.context() as m:
        m.setattr(operator, "lower_conv2d", _no_lowering)
        _same(operator.build_kernel(WL, EP, *layer, hw), want)
        other_weights = (-layer[0], layer[1])  # the same program serves other weights
        assert (
            dict(operator.build_kernel(WL, EP, *other_weights, hw).consts)["insns"]
            == (want.consts["insns"])
        )
    kept[0].write_bytes(b"PK\x03\x04 cut short")
    _same(operator.build_kernel(WL, EP, *layer, hw), want)  # lowered again
    assert len(_programs(tmp_path)) == 1


def test_another_config_or_epilogue_is_another_program(tmp_path, monkeypatch, layer):
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    hw = HwConfig()
    a = operator.build_kernel(WL, EP, *layer, hw, config=ConvConfig(8, 8, 1, 1, vthreads=1))
    b = operator.build_kernel(WL, EP, *layer, hw, config=ConvConfig(4, 8, 2, 1, vthreads=2))
    c = operator.build_kernel(
        WL, Epilogue(bias=True, shift=5), *layer, hw, config=ConvConfig(8, 8, 1, 1, vthreads=1)
    )
    assert len(_programs(tmp_path)) == 3
    assert a.consts["insns"] != b.consts["insns"] and a.consts["insns"] != c.consts["insns"]


def test_a_tuning_candidates_program_is_not_kept(tmp_path, monkeypatch):
    """A tuner lowers thousands of candidates: ``measurement_kernel`` keeps none."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    kernel = operator.measurement_kernel(WL, EP, ConvConfig(8, 8, 1, 1, vthreads=1), HwConfig())
    assert kernel.insn_count > 0 and _programs(tmp_path) == []


def test_a_fused_stems_program_is_kept_too(tmp_path, monkeypatch):
    """The conv + max pool kernel (``conv_pool``, a network's stem) goes through the same
    cache: built again with ``lower_conv_pool`` patched to fail, the same kernel."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(SEED)
    wl = ConvWorkload(23, 20, 48, 64, 4, 1, 1, 0)
    ep = Epilogue(bias=True, shift=10, lo=0, hi=127)
    w = rng.integers(-128, 128, (4, 3, 4, 1, 16, 16), dtype=np.int8)
    b = rng.integers(-20000, 20000, (4, 16)).astype(np.int32)
    first = conv_pool.build_conv_pool_kernel(wl, ep, w, b, HwConfig())
    assert first.info["kind"] == "conv_pool" and len(_programs(tmp_path)) == 1
    monkeypatch.setattr(conv_pool, "lower_conv_pool", _no_lowering)
    _same(conv_pool.build_conv_pool_kernel(wl, ep, w, b, HwConfig()), first)
