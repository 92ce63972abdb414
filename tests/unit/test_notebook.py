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

    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "the notebook has one cell tagged 'parameters'"
    overrides = (
        "from pyvta.testing.board_model import ModelBoard\n"
        f"ARTIFACT = {json.dumps(str(tmp_path / 'r18.npz'))}\n"
        f"BITSTREAM = {json.dumps(str(tmp_path / 'bit'))}\n"
        "PYNQ = ModelBoard().pynq\n"
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
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", [])), (
        "the time plot is drawn"
    )
