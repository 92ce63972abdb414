"""The accelerator's analytic default configs kept on disk (``compiler.backend.vta.default``):
a fresh process reads the choice instead of ranking the layer's space again, and the layers
a network will ask for are ranked in worker processes first."""

from __future__ import annotations

import pytest

from pyvta import workers
from pyvta.compiler.backend.vta import default
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import HwConfig

LAYERS = [  # small layers: each ranks in well under a second
    ConvWorkload(14, 14, 32, 32, 3, 3, 1, 1),
    ConvWorkload(14, 14, 32, 64, 1, 1, 2, 0),
    ConvWorkload(8, 8, 64, 64, 3, 3, 1, 1),
]


def _no_ranking(*args):
    raise AssertionError("a layer was ranked again")


def test_a_layers_default_is_ranked_once_and_read_back(tmp_path, monkeypatch):
    """The choice equals a fresh ranking, is read back without ranking, and a damaged file is
    ranked again."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    hw, ep = HwConfig(), Epilogue.requant(8, relu=True)
    wl = LAYERS[0]
    want = default._chosen_config(wl, ep, hw, None, None, 1, 0, 0, None)
    assert default.default_config(wl, ep, hw) == want
    kept = list((tmp_path / "vta-configs").glob("*.json"))
    assert len(kept) == 1
    with monkeypatch.context() as m:
        m.setattr(default, "_chosen_config", _no_ranking)
        assert default.default_config(wl, ep, hw) == want
    kept[0].write_text("{not json")
    assert default.default_config(wl, ep, hw) == want  # ranked again
    other = Epilogue.requant(7, relu=True)  # another epilogue: another choice, another file
    default.default_config(wl, other, hw)
    assert len(list((tmp_path / "vta-configs").glob("*.json"))) == 2


def test_a_networks_layers_are_ranked_in_workers(tmp_path, monkeypatch):
    """``rank_missing`` on two workers leaves every layer's choice on disk, the same as ranked
    in this process; a second call starts none."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    hw, ep = HwConfig(), Epilogue.requant(8, relu=True)
    layers = [(wl, ep, hw) for wl in LAYERS]
    assert default.rank_missing(layers) == 2
    assert len(list((tmp_path / "vta-configs").glob("*.json"))) == len(LAYERS)
    assert default.rank_missing(layers) == 0
    with monkeypatch.context() as m:
        m.setattr(default, "_chosen_config", _no_ranking)
        got = [default.default_config(*layer) for layer in layers]
    assert got == [default._chosen_config(wl, ep, hw, None, None, 1, 0, 0, None) for wl in LAYERS]


@pytest.mark.parametrize("env", ["0", "1"])
def test_no_workers_where_the_environment_says_so(tmp_path, monkeypatch, env):
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(workers.WORKERS_ENV, env)
    hw, ep = HwConfig(), Epilogue.requant(8, relu=True)
    assert default.rank_missing([(wl, ep, hw) for wl in LAYERS]) == 0
    assert not (tmp_path / "vta-configs").exists()
