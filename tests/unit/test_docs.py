"""The documentation's Python runs as written, from a folder outside the checkout: every
```python block of the READMEs and docs/te_example.py."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "compiler/README.md")
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
EXAMPLES = [
    pytest.param(block, id=f"{doc}#{i}")
    for doc in DOCS
    for i, block in enumerate(PYTHON_BLOCK.findall((ROOT / doc).read_text()))
] + [pytest.param((ROOT / "docs" / "te_example.py").read_text(), id="docs/te_example.py")]


def test_the_readmes_have_python_examples():
    assert len(EXAMPLES) >= 5, [p.id for p in EXAMPLES]


@pytest.mark.parametrize("source", EXAMPLES)
def test_example_runs(source, tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", source], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
