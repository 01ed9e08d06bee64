"""In a real Jupyter kernel: `%%gradviz` names its own cell (`In [N]`) in the error and the findings, shows the
findings' text under the picture, and `gradviz.diagnose(t)` displays a table (issue 21.5)."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.kernel, pytest.mark.dot]

SETUP = "%load_ext gradviz\nimport torch\nimport gradviz"
DATA_CELL = """%%gradviz
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
c = out.data
c.zero_()
out.sum().backward()"""
RAISING_CELL = """%%gradviz
b = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = b.tanh()
d = y.detach()
d.zero_()
y.sum().backward()"""
TRACED = """with gradviz.trace() as t:
    e = torch.tensor([1.0, 2.0], requires_grad=True)
    z = e.tanh()
    z.data.zero_()
    z.sum().backward()"""


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    cells = [SETUP, "1 + 1", DATA_CELL, RAISING_CELL, TRACED, "gradviz.diagnose(t)", "print(repr(gradviz.diagnose(t)))"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path_factory.mktemp("nb"))}})
    client.execute()
    return nb.cells


def _html_outputs(cell) -> list[str]:
    """The HTML outputs that are not a picture."""
    return [o["data"]["text/html"] for o in cell.outputs
            if "text/html" in o.get("data", {}) and "image/svg+xml" not in o["data"]]


def test_the_magic_error_points_at_its_own_cell_number(executed):
    cell = executed[3]
    assert cell.execution_count == 4
    error = next(o for o in cell.outputs if o.output_type == "error")
    frames = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    assert "In[4]" in frames or "In [4]" in frames, frames
    assert "In[5]" not in frames and "In [5]" not in frames


def test_findings_text_under_the_picture_names_the_cell(executed):
    cell = executed[2]
    kinds = [("svg" if "image/svg+xml" in o.get("data", {}) else "html" if "text/html" in o.get("data", {})
              else o.output_type) for o in cell.outputs]
    assert kinds[-2:] == ["svg", "html"]  # the picture, then the findings under it
    (details,) = _html_outputs(cell)
    assert details.startswith('<details class="gradviz-findings" open><summary><b>gradviz</b>: 1 finding (1 error): '
                              "In[3]:5 <code>silently_corrupted_saved_tensor</code></summary><pre ")
    assert "error  In[3]:5  silently_corrupted_saved_tensor" in details
    # Markdown code spans as code (shaded in the monospaced text), lines broken between words
    assert 'fix: Use <code style="background:rgba(127,127,127,0.15);border-radius:2px">.detach()</code> instead of' in details
    assert "`" not in details
    assert '<pre style="white-space:pre-wrap;word-break:normal;overflow-wrap:break-word">' in details
    assert "ipykernel" not in details
    plain = cell.outputs[-1]["data"]["text/plain"]
    assert plain.startswith("gradviz: 1 finding (1 error)\n\nerror  In[3]:5  silently_corrupted_saved_tensor")

    raising = executed[3]
    order = [("error" if o.output_type == "error" else "svg" if "image/svg+xml" in o.get("data", {}) else
              "html" if "text/html" in o.get("data", {}) else o.output_type) for o in raising.outputs]
    assert order == ["svg", "html", "error"]
    assert "error  In[4]:5  poisoned_saved_tensor" in _html_outputs(raising)[0]


def test_diagnose_displays_a_table_and_readable_text(executed):
    (table,) = _html_outputs(executed[5])
    assert table.startswith('<table class="gradviz-findings"><caption style="text-align:left"><b>gradviz</b>: '
                            "1 finding (1 error)</caption>")
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    assert len(rows) == 2  # the header and one finding
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[1])
    assert cells[0] == "error" and cells[1].startswith("In[5]:4<br><code>z.data.zero_()</code>")
    assert cells[2] == "<code>silently_corrupted_saved_tensor</code>"
    assert "had its bytes changed at cell In[5], line 4" in cells[3] and cells[4].startswith("Use <code>.detach()</code>")
    assert "`" not in table and "<code>z.data</code>" in cells[3]
    cell_styles = re.findall(r'<td style="([^"]*)">', rows[1])
    assert cell_styles[1:] == ["text-align:left;word-break:normal;overflow-wrap:break-word"] * 4
    text = executed[5].outputs[0]["data"]["text/plain"]
    assert text.startswith("gradviz: 1 finding (1 error)") and "Finding(" not in text  # no wall of dataclass reprs
    assert "Finding(kind=" in executed[6].outputs[0]["text"]  # repr() itself stays the list's own
