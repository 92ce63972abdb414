"""The int8 targets' calibration kept on disk (``compiler.graph.calibrate``, cache folder
``calibration``): a process that calibrates the same graph on the same samples reads the result
back instead of running the samples again, and any change to the graph's constants or the
samples calibrates anew."""

from __future__ import annotations

import numpy as np
import pytest

from pyvta.compiler.graph import calibrate as cal_mod
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.testing import netgen

SEED = 5  # a small generated network (convs, pools, a classifier)


@pytest.fixture
def graph_and_samples(tmp_path):
    model = netgen.random_network(SEED)
    print(f"seed {SEED}: {netgen.describe(model)}")
    path = tmp_path / "net.onnx"
    path.write_bytes(model.SerializeToString())
    samples = [{"input": netgen.sample_input(model, SEED + i)} for i in range(2)]
    return import_onnx(str(path)), samples


def _equal(a, b) -> None:
    assert a.frac_bits == b.frac_bits
    assert a.channel_means.keys() == b.channel_means.keys()
    for k, v in a.channel_means.items():
        assert v.dtype == b.channel_means[k].dtype and np.array_equal(v, b.channel_means[k])
    assert a.channel_ranges.keys() == b.channel_ranges.keys()
    for k, (lo, hi) in a.channel_ranges.items():
        assert np.array_equal(lo, b.channel_ranges[k][0])
        assert np.array_equal(hi, b.channel_ranges[k][1])


def _no_runs(*args, **kwargs):
    raise AssertionError("the samples were run again")


def _kept(root):
    return sorted((root / "calibration").glob("*.npz"))


def test_a_calibration_is_kept_and_read_back(tmp_path, monkeypatch, graph_and_samples):
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path / "cache"))
    graph, samples = graph_and_samples
    want = cal_mod._calibrate(graph, samples, 2)  # never kept
    assert want.channel_means and _kept(tmp_path / "cache") == []
    _equal(cal_mod.calibrate(graph, samples, 2), want)
    kept = _kept(tmp_path / "cache")
    assert len(kept) == 1
    with monkeypatch.context() as m:
        m.setattr(cal_mod, "_calibrate", _no_runs)
        _equal(cal_mod.calibrate(graph, samples, 2), want)
    kept[0].write_bytes(kept[0].read_bytes()[:100])  # cut short: calibrated again
    _equal(cal_mod.calibrate(graph, samples, 2), want)
    assert len(_kept(tmp_path / "cache")) == 1


def test_other_samples_constants_or_bits_are_another_calibration(
    tmp_path, monkeypatch, graph_and_samples
):
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(tmp_path / "cache"))
    graph, samples = graph_and_samples
    cal_mod.calibrate(graph, samples, 2)
    cal_mod.calibrate(graph, samples[:1], 2)
    cal_mod.calibrate(graph, samples, 1)
    changed = graph.copy()
    name = next(k for k, v in changed.constants.items() if v.ndim == 4)  # a conv's weights
    changed.constants[name] = changed.constants[name] * np.float32(1.5)
    got = cal_mod.calibrate(changed, samples, 2)
    assert len(_kept(tmp_path / "cache")) == 4
    _equal(got, cal_mod._calibrate(changed, samples, 2))
