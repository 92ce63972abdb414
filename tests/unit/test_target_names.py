"""No layer tests a target's name (issue 38): the pipeline, executor, artifact, tuner and command
line ask the ``compiler.targets.Target`` object; a target's name string is compared only inside
its own home (``compiler/targets/<name>/``) and in the files listed below with why."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = re.compile(
    r"""target\w*\s*(==|!=)\s*['"]|target\w*\)?\s+(not\s+)?in\s+[\(\[{]\s*['"]"""
    r"""|['"](vta|cpu|gpu|llvm|cuda|vta-sim|cpu-int8)['"]\s*(==|!=|in)\s*[\w.]*target"""
)
# file -> why it may still compare a target string (each a follow-up, not a licence to add more)
ALLOWED = {
    "tuner/cuda.py": "cuda vs cuda-emulated: a device of the gpu target, not a target",
}


def _target_tests() -> list[str]:
    found = []
    for package in ("compiler", "tuner", "pyvta", "driver", "runtime"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("compiler/targets/") or rel in ALLOWED:
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#")[0]
                if TESTS.search(code):
                    found.append(f"{rel}:{i}: {line.strip()}")
    return found


def test_no_layer_tests_a_target_name():
    found = _target_tests()
    assert not found, "ask the Target object (compiler.targets) instead:\n" + "\n".join(found)


def test_the_check_sees_each_form():
    for line in ('if cm.target == "vta":', "if n.target != 'cpu':", 'if target in ("cpu", "gpu"):',
                 'if "llvm" == task.target:'):  # fmt: skip
        assert TESTS.search(line), line
    assert not TESTS.search("if spec.accelerator:")
