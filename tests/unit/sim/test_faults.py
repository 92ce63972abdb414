"""The bad-instruction programs (``sim.faults``): each is refused by the simulator at the
instruction its name gives, with the error its mutation stands for."""

import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import INSN_BYTES, DecodeError
from pyvta.sim.errors import instruction_index
from pyvta.sim.faults import MUTATIONS, faulting_programs, random_faulting_program
from pyvta.sim.random_program import random_program

SEED = 11
EXPECTED = {
    "bad_opcode": DecodeError,
    "bad_memory_type": DecodeError,
    "reversed_uops": DecodeError,
    "bad_alu_opcode": DecodeError,
    "flag_without_queue": sim.QueueUsageError,
    "store_pad": sim.ProgramError,
    "sram_past_end": sim.OutOfBoundsError,
}


def test_every_mutation_has_an_expected_error():
    assert set(EXPECTED) == set(MUTATIONS)


@pytest.mark.parametrize("name", list(faulting_programs()))
def test_directed_fault_is_refused_at_its_instruction(name):
    where, mutation = name.split(":")
    index = int(where.split("@")[1])
    with pytest.raises(EXPECTED[mutation]) as err:
        sim.run(faulting_programs()[name])
    assert instruction_index(err.value) == index


def test_random_faults_are_refused_at_the_mutated_instruction():
    rng = np.random.default_rng(SEED)
    refused = 0
    for _ in range(40):
        program = random_program(rng)
        bad = random_faulting_program(program, rng)
        if bad is None:
            continue
        changed = np.flatnonzero(bad.insn_bytes() != program.insn_bytes())
        with pytest.raises((sim.SimError, DecodeError)) as err:
            sim.run(bad)
        assert instruction_index(err.value) == changed[0] // INSN_BYTES
        refused += 1
    assert refused >= 10
