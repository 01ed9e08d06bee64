"""gallery/notebook.ipynb executed in a real Jupyter kernel: every example displays its annotated graph."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "gallery" / "notebook.ipynb"


def texts_of(output) -> list[str]:
    svg = output["data"]["image/svg+xml"]
    return [html.unescape(t).replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def cell_starting(nb, first_line: str, nth: int = 0):
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(first_line)]
    return cells[nth]


def kinds(cell) -> list[str]:
    out = []
    for output in cell.outputs:
        if output.output_type == "error":
            out.append(f"error:{output.ename}")
        elif output.output_type == "stream":
            out.append("stream")
        elif "image/svg+xml" in output.get("data", {}):
            out.append("svg")
        elif output.get("data", {}).get("text/html", "").startswith('<details class="gradviz-findings"'):
            out.append("findings")  # the findings' text under the picture
        else:
            out.append(output.output_type)
    return out


def test_the_committed_notebook_has_no_outputs():
    nbformat = pytest.importorskip("nbformat")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert code[0].source.startswith("%load_ext gradviz\n")
    assert sum(c.source.startswith("%%gradviz") for c in code) == 3
    assert sum(c.source.startswith(("with gradviz.trace() as", "try:\n    with gradviz.trace() as")) for c in code) == 3


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    folder = tmp_path_factory.mktemp("notebook")
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(folder)}}
    )
    client.execute()
    return nb


@pytest.mark.kernel
@pytest.mark.dot
def test_only_the_last_magic_cell_raises(executed):
    errors = [c.source.splitlines()[0] for c in executed.cells if any(o.output_type == "error" for o in c.get("outputs", []))]
    assert errors == ["%%gradviz"]
    assert executed.cells[-1].source.startswith("%%gradviz")
    # the diagram first, its findings under it, then the error
    assert kinds(executed.cells[-1]) == ["svg", "findings", "error:RuntimeError"]


@pytest.mark.kernel
@pytest.mark.dot
def test_data_example_shows_the_silently_corrupted_saved_tensor_through_the_magic_and_trace(executed):
    magic = cell_starting(executed, "%%gradviz", 0)
    traced = cell_starting(executed, "t_data")

    assert kinds(magic) == ["stream", "svg", "findings"]
    assert "tensor([1., 1., 1.])" in magic.outputs[0]["text"]
    for output in (magic.outputs[1], traced.outputs[0]):
        texts = texts_of(output)
        assert "TanhBackward0" in texts
        assert "bytes changed via c = out.data, line 5;" in texts
        assert "version unchanged (v0)" in texts
        # nodes say where they were made as IPython names cells, not by the kernel's temporary file
        assert any(re.match(r"In\[\d+\]:\d+: ", t) for t in texts), texts
        assert not any("ipykernel" in t for t in texts)
    namespace = cell_starting(executed, "print(out, c, a.grad")
    # (under load the kernel may send one print as several stream messages: read them all)
    printed = "".join(o.get("text", "") for o in namespace.outputs if o.get("output_type") == "stream")
    assert printed.splitlines()[-1] == "tensor([1., 1., 1.])"  # the magic's variables stayed


@pytest.mark.kernel
@pytest.mark.dot
def test_testdetach_shows_the_cut_edge_and_the_parameter_without_gradient(executed):
    magic = cell_starting(executed, "%%gradviz", 1)
    traced = cell_starting(executed, "t_module")

    assert "layer1.weight.grad: None" in magic.outputs[0]["text"]
    picture = next(o for o in magic.outputs if "image/svg+xml" in o.get("data", {}))
    for output in (picture, traced.outputs[0]):
        texts = texts_of(output)
        assert any(t.startswith("✂ x.detach()") for t in texts), texts
        assert "model.layer1.weight" in texts and "model.layer2.weight" in texts
        assert "no gradient" in texts


@pytest.mark.kernel
@pytest.mark.dot
def test_draw_shows_an_existing_tensors_graph_without_the_cut_off_layer(executed):
    drawn = cell_starting(executed, "gradviz.draw(")

    assert kinds(drawn) == ["svg"]
    texts = texts_of(drawn.outputs[0])
    assert "layer2.weight" in texts and "MeanBackward0" in texts
    assert "model.layer1.weight" not in texts


@pytest.mark.kernel
@pytest.mark.dot
def test_detach_example_shows_the_poisoned_saved_tensor_and_the_error(executed):
    magic = executed.cells[-1]
    traced = cell_starting(executed, "t_detach")

    for output, backward_line in ((magic.outputs[0], 6), (traced.outputs[0], 7)):
        texts = texts_of(output)
        assert "saved v0, now v1," in texts
        assert f"written at line {backward_line - 1} via c" in texts
        assert any(t.startswith(f"raised RuntimeError at line {backward_line}") for t in texts), texts
    error = magic.outputs[2]
    assert error.ename == "RuntimeError"
    # the traceback names the cell as it is numbered, In [N], not the next cell's number
    plain = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    assert f"In[{magic.execution_count}]" in plain or f"In [{magic.execution_count}]" in plain, plain
    assert f"In[{magic.execution_count + 1}]" not in plain
    assert "is at version 1; expected version 0 instead" in error.evalue
    frames = "\n".join(error.traceback)
    assert "/gradviz/" not in re.sub(r"\x1b\[[0-9;]*m", "", frames)
