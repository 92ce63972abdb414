"""Masking CPUID for a fair baseline (pyvta.testing.cpuid_mask): the level's bits come from the
one table of feature levels, a masked process reads them cleared (its threads too), a real
segfault still kills it, and masking after the library loaded is refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pyvta.host_cpu import CpuFeatureError
from pyvta.testing.cpuid_mask import CPUID_BITS, MASKED_REGISTERS, level_masks


def _bit(feature: str) -> tuple[int, int]:
    leaf, sub, reg, bit = CPUID_BITS[feature]
    return MASKED_REGISTERS.index((leaf, sub, reg)), 1 << bit


@pytest.mark.parametrize(
    "level, hidden, kept",
    [
        ("avx2", ("avx512f", "avx512vnni", "avxvnni", "amx-int8", "avx512fp16"), ()),
        ("avxvnni", ("avx512f", "amx-tile"), ("avxvnni",)),
        ("avx512", ("avx512vnni", "avxvnni"), ("avx512f", "avx512bw", "avx512vl")),
        ("avx512vnni", (), ("avx512f", "avx512vnni", "avxvnni", "amx-int8")),
    ],
)
def test_level_masks_hide_what_the_level_hides(level, hidden, kept):
    masks = level_masks(level)
    for f in hidden:
        i, bit = _bit(f)
        assert masks[i] & bit, f"{level} must hide {f}"
    for f in kept:
        i, bit = _bit(f)
        assert not masks[i] & bit, f"{level} must keep {f}"
    with pytest.raises(CpuFeatureError, match="allowed: avx512vnni"):
        level_masks("avx3")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-P", "-c", textwrap.dedent(code)], capture_output=True, text=True
    )


def _needs_masking() -> None:
    info = Path("/proc/cpuinfo")
    if sys.platform != "linux" or "cpuid_fault" not in info.read_text().split():
        pytest.skip("needs x86-64 Linux with CPUID faulting (/proc/cpuinfo flag cpuid_fault)")


def test_a_masked_process_and_its_threads_read_the_level():
    _needs_masking()
    done = _run(
        """
        import threading
        from pyvta.testing.cpuid_mask import cpuid_leaf7, level_masks, mask_cpuid
        before = cpuid_leaf7()
        mask_cpuid("avx2")
        after = cpuid_leaf7()
        seen = []
        t = threading.Thread(target=lambda: seen.append(cpuid_leaf7()))
        t.start(); t.join()
        b70, c70, d70 = level_masks("avx2")[:3]
        assert after == (before[0], before[1] & ~b70, before[2] & ~c70, before[3] & ~d70), after
        assert seen[0] == after, seen
        assert after[1] & (1 << 5), "AVX2 (leaf 7 EBX bit 5) must stay"
        import onnxruntime  # loads with the masked CPUID
        print("ok", hex(before[1]), hex(after[1]))
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok"), done.stdout


def test_a_real_segfault_still_kills_a_masked_process():
    _needs_masking()
    done = _run(
        """
        import ctypes
        from pyvta.testing.cpuid_mask import mask_cpuid
        mask_cpuid("avx2")
        ctypes.string_at(0)
        """
    )
    assert done.returncode == -11, (done.returncode, done.stderr[-500:])


def test_masking_after_the_library_loaded_is_refused():
    done = _run(
        """
        import onnxruntime
        from pyvta.testing.cpuid_mask import CpuidMaskError, mask_cpuid
        try:
            mask_cpuid("avx2")
        except CpuidMaskError as e:
            print(e)
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mask CPUID before importing onnxruntime" in done.stdout
