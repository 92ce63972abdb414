"""The VTA cycle measurer of the search and transfer benchmarks has one home
(``comparison.vta_comparison_measurer`` -> ``tune.vta_cycle_measurer``, also ``pyvta tune``'s
default for VTA tasks): it takes the benchmark's ``--build-timeout`` and measures what the
cycle model says in this process."""

import argparse

from pyvta.tuner.comparison import vta_comparison_measurer
from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.tune import task_backend
from pyvta.tuner.vta import VtaCycleBackend, default_vta_config, vta_conv2d_task


def test_benchmark_measurer_is_the_cycle_model_with_the_build_bound(capsys):
    task = vta_conv2d_task(8, 8, 32, 32, 3, 1, 1)
    configs = [default_vta_config(task)]
    configs += [task.space.get(i) for i in (0, len(task.space) - 1)]
    want = InProcessMeasurer(VtaCycleBackend(), repeats=1).measure(task, configs)
    with vta_comparison_measurer(argparse.Namespace(build_timeout=7.5)) as m:
        assert (m.build_timeout_s, m.run_timeout_s, m.repeats) == (7.5, 300.0, 1)
        got = m.measure(task, configs)
    assert "VTA cycle model" in capsys.readouterr().out
    assert [r.error for r in got] == [r.error for r in want]
    assert [r.cost for r in got] == [r.cost for r in want]
    assert got[0].error is None and got[0].cost > 0  # the default config lowers
    default = task_backend(task).measurer()  # pyvta tune's: same home, its own bounds
    assert (default.build_timeout_s, default.run_timeout_s) == (30.0, 120.0)
    default.close()
