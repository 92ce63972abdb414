"""docs/notebooks/resnet18_on_pynq.ipynb runs end to end (nbclient) against the model board, so
the notebook PYNQ users start from cannot rot."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "notebooks" / "resnet18_on_pynq.ipynb"
SEED = 2


def test_resnet18_notebook_runs_on_the_model_board(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from pyvta.compiler.graph.compile import compile_model
    from pyvta.compiler.graph.zoo import save_model
    from pyvta.testing.board_model import write_model_bitstream

    onnx_path = tmp_path / "r18.onnx"
    save_model("resnet18", str(onnx_path), size=32, classes=10, width=16, seed=SEED)
    cm = compile_model(onnx_path, "vta")
    cm.save(tmp_path / "r18.npz")
    write_model_bitstream(tmp_path / "bit", cm.hw)
    # the CPU-only model with its kernels in a shared object for this host's CPU, as
    # `pyvta compile --target cpu --board ...` makes one for a board's
    from pyvta.compiler.backend.llvm.target import CpuTarget
    from pyvta.compiler.graph.cpu_cross import cross_compile_cpu

    cpu = compile_model(onnx_path, "cpu")
    cpu.cpu_code = cross_compile_cpu(cpu.graph, CpuTarget.host(1))
    cpu.save(tmp_path / "r18-cpu.npz")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "the notebook has one cell tagged 'parameters'"
    overrides = (
        "from pyvta.testing.board_model import ModelBoard\n"
        f"ARTIFACT = {json.dumps(str(tmp_path / 'r18.npz'))}\n"
        f"BITSTREAM = {json.dumps(str(tmp_path / 'bit'))}\n"
        "PYNQ = ModelBoard().pynq\n"
        f"CPU_ARTIFACT = {json.dumps(str(tmp_path / 'r18-cpu.npz'))}\n"
    )
    nb.cells.insert(params[0] + 1, nbformat.v4.new_code_cell(overrides))
    nbclient.NotebookClient(
        nb, timeout=300, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    text = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    print(text[-2000:])
    assert "accelerator kernels for" in text and "top-5 classes" in text
    assert "bit-exact with the golden model: True" in text
    assert "CPU layers: numpy" in text  # the whole network's CPU ops (quantize, unpack): numpy
    n = len(cpu.cpu_code.kernels)
    assert f"{n} CPU kernels from the shared object for x86_64" in text and n > 0
    assert "top-5 classes (float, CPU only)" in text
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", [])), (
        "the time plot is drawn"
    )
