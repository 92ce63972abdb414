"""Generated networks (``pyvta.testing.netgen``) compile on every CPU-side target and the
accelerator: ``cpu`` matches onnxruntime to 1e-4 relative, ``cpu-int8`` and ``vta`` give
outputs close to float (cosine above ``MIN_COSINE``).

The seeds are chosen so that together their networks use every feature the generator has
(asserted below): batch 4, an input above 64, kernels 1/3/5/7, stride 2, asymmetric pads,
dilation, groups, depthwise, residual adds, bottlenecks, concats, max/average pooling.

What fails today (found with seeds 0-23 of ``random_network``; the compiler is not changed here):

- ``cpu-int8`` with batch 4: ``compile_model`` succeeds, ``run_model`` raises a plain
  ``ValueError: cannot reshape array of size 77616 into shape (1,44,21,21)`` (seed 0) in
  ``cpu_int8_kernels.py`` (the compiled int8 kernels are built for batch 1); not a
  ``PyvtaError``. Recorded as a strict xfail below; ``cpu-int8`` is otherwise tested on the
  batch-1 version of the same network (``random_network(seed, batch=1)``: same layers).
- Everything else runs: batch 4 on ``cpu`` and ``vta``, dilation and groups on all three targets.

Cosines measured for int8 (``cpu-int8`` and ``vta`` agree bit for bit on these seeds): 0.978
to 0.9993 on the seeds here; the lowest seen in seeds 0-23 is 0.839 (seed 4: 206x206 input,
9 convs), which is why ``MIN_COSINE`` holds for the seeds here, not for every generated net.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from pyvta.compiler.graph.compiled_model import compile_model, run_model
from pyvta.compiler.graph.reference import cosine, run_onnxruntime
from pyvta.testing import netgen

SEEDS = (1, 2, 3, 5, 7, 9)
MAX_REL_ERR = 1e-4
MIN_COSINE = 0.95


def _net(tmp_path_factory, seed: int, batch: int | None = None):
    model = netgen.random_network(seed, batch=batch)
    path = tmp_path_factory.mktemp("netgen") / f"net{seed}.onnx"
    onnx.save(model, path)
    x = netgen.sample_input(model, seed + 100)
    print(f"seed {seed}: {netgen.describe(model)}")
    return model, path, x, run_onnxruntime(model, {"input": x})[0]


def test_the_seeds_cover_every_feature():
    used = set().union(*(netgen.features(netgen.random_network(s)) for s in SEEDS))
    assert used == set(netgen.FEATURES), set(netgen.FEATURES) - used


def test_the_generator_is_seeded_and_describes_its_networks():
    a, b = netgen.random_network(3), netgen.random_network(3)
    assert a.SerializeToString() == b.SerializeToString()
    assert a.SerializeToString() != netgen.random_network(4).SerializeToString()
    line = netgen.describe(a)
    assert line.startswith("netgen3: input 1x3x24x24") and "dilation" in line and "\n" not in line
    # batch=1 keeps the layers of a batch-4 network
    four, one = netgen.random_network(1), netgen.random_network(1, batch=1)
    assert "batch4" in netgen.features(four) and "batch4" not in netgen.features(one)
    assert [n.op_type for n in four.graph.node] == [n.op_type for n in one.graph.node]


@pytest.mark.parametrize("seed", SEEDS)
def test_cpu_matches_onnxruntime(tmp_path_factory, seed):
    _, path, x, ref = _net(tmp_path_factory, seed)
    out = run_model(compile_model(path, "cpu"), {"input": x})[0][0]
    err = float(np.abs(out - ref).max() / np.abs(ref).max())
    print(f"relative error {err:.2e}")
    assert out.shape == ref.shape and err < MAX_REL_ERR


@pytest.mark.parametrize("target", ["cpu-int8", "vta"])
@pytest.mark.parametrize("seed", SEEDS)
def test_int8_targets_are_close_to_float(tmp_path_factory, seed, target):
    batch = 1 if target == "cpu-int8" else None  # cpu-int8 fails at batch 4 (module docstring)
    _, path, x, ref = _net(tmp_path_factory, seed, batch)
    out = run_model(compile_model(path, target), {"input": x})[0][0]
    cos = cosine(out, ref)
    print(f"{target}: cosine {cos:.4f} to onnxruntime float")
    assert out.shape == ref.shape and cos > MIN_COSINE


@pytest.mark.xfail(strict=True, raises=ValueError, reason="cpu-int8 kernels built for batch 1")
def test_cpu_int8_batch4(tmp_path_factory):
    _, path, x, ref = _net(tmp_path_factory, 1)
    assert x.shape[0] == 4
    out = run_model(compile_model(path, "cpu-int8"), {"input": x})[0][0]
    assert cosine(out, ref) > MIN_COSINE
