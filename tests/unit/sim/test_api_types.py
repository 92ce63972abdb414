"""Public simulator entry points check their arguments' types at the door and raise the
package's ArgumentError naming the argument (never an AttributeError from deep inside)."""

import numpy as np
import pytest

from pyvta import sim
from pyvta.sim.directed import directed_programs
from pyvta.sim.errors import ArgumentError


@pytest.fixture(scope="module")
def program():
    return directed_programs()["matmul_small"]


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"limits": "fast"}, "limits must be a sim.SimLimits or None, got str 'fast'"),
        ({"limits": {"max_iters_per_program": 1}}, "limits must be a sim.SimLimits"),
        ({"engine": 3}, "unknown simulator engine 3"),
        ({"engine": "fast"}, "unknown simulator engine 'fast'"),
        ({"check_races": "yes"}, "check_races must be True or False, got str"),
        ({"in_place": 1}, "in_place must be True or False, got int"),
    ],
)
def test_run_checks_its_arguments(program, kwargs, named):
    with pytest.raises(ArgumentError, match=named):
        sim.run(program, **kwargs)


@pytest.mark.parametrize("bad", ["prog.npz", None, np.zeros(64, np.uint8)])
def test_run_takes_a_program_only(bad):
    with pytest.raises(ArgumentError, match="program must be a sim.Program"):
        sim.run(bad)


def test_run_insns_checks_its_options(program):
    insns = program.insns()
    dram = program.dram.copy()
    with pytest.raises(ArgumentError, match="limits must be a sim.SimLimits"):
        sim.run_insns(insns, dram, program.config, limits=5)
    with pytest.raises(ArgumentError, match="one_per_turn must be True or False"):
        sim.run_insns(insns, dram, program.config, one_per_turn="no")
    assert sim.run(program, limits=sim.SimLimits(), check_races=np.bool_(False)) is not None
