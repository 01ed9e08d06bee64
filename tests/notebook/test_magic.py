"""The `%%gradviz` cell magic in an in-process IPython shell: tracing, display, namespace, line numbers, errors."""

from __future__ import annotations

import html
import re
import subprocess
import sys

import pytest

pytest.importorskip("IPython")

DATA_CELL = """\
%%gradviz{options}
a = torch.tensor([1, 2, 3.], requires_grad=True)
out = a.tanh()
c = out.data
c.zero_()
out.sum().backward()
"""

DETACH_CELL = """\
%%gradviz
a = torch.tensor([1, 2, 3.], requires_grad=True)
out = a.tanh()
c = out.detach()
c.zero_()
out.sum().backward()
"""


@pytest.fixture(scope="module")
def shell():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    ip = get_ipython() or start_ipython()
    ip.run_line_magic("load_ext", "gradviz.integrations.notebook")
    ip.run_cell("import torch")
    return ip


def run(shell, cell):
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = shell.run_cell(cell, store_history=True)  # (as a notebook runs a cell: numbered on every IPython)
    return result, captured


def svgs(captured) -> list[list[str]]:
    """The text of every SVG the cell displayed, one list of strings per display."""
    return [
        [html.unescape(t).replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", out.data["image/svg+xml"])]
        for out in captured.outputs
        if "image/svg+xml" in out.data
    ]


@pytest.mark.dot
def test_magic_displays_the_annotated_graph_and_keeps_the_cells_variables(shell):
    shell.user_ns.pop("c", None)
    result, captured = run(shell, DATA_CELL.format(options=""))

    assert result.success, result.error_in_exec
    (texts,) = svgs(captured)
    assert "TanhBackward0" in texts
    # line 5 of the cell as shown, counting the %%gradviz line
    assert "bytes changed via c = out.data, line 5;" in texts
    assert "version unchanged (v0)" in texts
    assert shell.user_ns["c"].tolist() == [0.0, 0.0, 0.0]
    assert shell.user_ns["a"].grad.tolist() == [1.0, 1.0, 1.0]


def test_findings_point_at_cell_lines_and_tensors_get_the_cells_names(shell):
    from gradviz.analysis import diagnose
    from gradviz.integrations.notebook import run_cell_traced

    body = DATA_CELL.format(options="").split("\n", 1)[1]
    trace, value, error = run_cell_traced(shell, body)

    assert error is None and value is None
    (finding,) = diagnose(trace)
    assert finding.kind.value == "silently_corrupted_saved_tensor"
    assert finding.line == 5
    assert finding.code == "c.zero_()"
    assert trace.tensor("c").origin == "data"
    assert trace.tensor("out").grad_fn is not None
    assert finding.file in trace.sources and trace.sources[finding.file].splitlines()[4] == "c.zero_()"


@pytest.mark.dot
def test_an_error_in_the_cell_comes_after_its_diagram_with_the_cells_own_traceback(shell):
    result, captured = run(shell, DETACH_CELL)

    assert isinstance(result.error_in_exec, RuntimeError)
    assert "is at version 1; expected version 0" in str(result.error_in_exec)
    (texts,) = svgs(captured)
    assert "saved v0, now v1," in texts
    assert "written at line 5 via c" in texts
    assert any(t.startswith("raised RuntimeError at line 6") for t in texts)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", captured.stdout)
    assert "----> 6 out.sum().backward()" in shown
    frames = re.findall(r"^File (\S+?):\d+, in ([\w.]+)", shown, re.M)
    # IPython 8 also shows its own run_cell_magic frame, IPython 9 hides it; gradviz's frames never show
    names = [name for _, name in frames if name != "InteractiveShell.run_cell_magic"]
    assert names == ["Tensor.backward", "backward", "_engine_run_backward"], shown
    assert not any("/gradviz/" in path for path, _ in frames), shown
    assert shell.user_ns["c"].tolist() == [0.0, 0.0, 0.0]  # what ran before the error stays defined


@pytest.mark.dot
def test_options_are_the_clis_and_output_is_saved(shell, tmp_path):
    target = tmp_path / "cell.dot"
    result, captured = run(shell, DATA_CELL.format(options=f" --view memory --max-nodes 5 -o {target}"))

    assert result.success, result.error_in_exec
    assert len(svgs(captured)) == 1
    assert target.read_text().startswith("digraph")
    assert "storage" in target.read_text().lower()


def test_bad_options_stop_the_cell_with_a_usage_error(shell):
    shell.user_ns.pop("never", None)
    result, captured = run(shell, "%%gradviz --view sideways\nnever = 1\n")
    result_suffix, _ = run(shell, "%%gradviz -o picture.gif\nnever = 1\n")

    assert type(result.error_in_exec).__name__ == "UsageError"
    assert "argument --view: invalid choice: 'sideways'" in str(result.error_in_exec)
    assert "cannot tell the output format of 'picture.gif'" in str(result_suffix.error_in_exec)
    assert "never" not in shell.user_ns


@pytest.mark.dot
def test_the_value_of_a_final_expression_is_displayed_before_the_diagram(shell):
    result, captured = run(shell, "%%gradviz\nw = torch.ones(2, requires_grad=True)\n(w * 2).sum()\n")

    assert result.success
    kinds = ["svg" if "image/svg+xml" in out.data else out.data.get("text/plain") for out in captured.outputs]
    assert kinds == ["tensor(4., grad_fn=<SumBackward0>)", "svg"]
    _, silenced = run(shell, "%%gradviz\nw = torch.ones(2, requires_grad=True)\n(w * 2).sum();\n")
    assert len(silenced.outputs) == 1 and "image/svg+xml" in silenced.outputs[0].data


@pytest.mark.dot
def test_an_unwritable_output_is_reported_without_hiding_the_diagram(shell, tmp_path):
    result, captured = run(shell, f"%%gradviz -o {tmp_path}/missing/cell.svg\nv = torch.ones(2) * 2\n")

    assert result.success
    assert len(svgs(captured)) == 1
    assert captured.stderr.startswith(f"gradviz: could not write '{tmp_path}/missing/cell.svg': ")


def test_magic_options_parser_is_the_clis():
    from gradviz.cli.options import Options
    from gradviz.cli.runner_options import OptionsError, parse_magic_line

    def render_kwargs(line: str) -> dict[str, object]:
        return Options.from_magic_line(line).render_kwargs()

    assert render_kwargs("--view timeline --max-nodes 40 --collapse-modules --no-show-saved") == {
        "view": "timeline", "max_nodes": 40, "collapse_modules": True, "depth": None, "show_saved": False,
        "step": None, "show_all": False,
    }
    assert render_kwargs("") == {
        "view": "graph", "max_nodes": None, "collapse_modules": False, "depth": None, "show_saved": True,
        "step": None, "show_all": False,
    }
    assert render_kwargs("--view memory --show-all")["show_all"] is True
    assert render_kwargs("--step 3")["step"] == 3
    assert render_kwargs("--depth 2")["depth"] == 2
    assert render_kwargs("--depth all")["depth"] == "all"
    with pytest.raises(OptionsError, match="--depth: expected a whole number or 'all', got 'deep'"):
        parse_magic_line("--depth deep")
    with pytest.raises(OptionsError, match="--max-nodes: expected a whole number, got 'many'"):
        parse_magic_line("--max-nodes many")
    with pytest.raises(OptionsError, match="usage: %%gradviz"):
        parse_magic_line("--help")
    with pytest.raises(OptionsError, match="unrecognized arguments: --col$"):  # no silent abbreviation
        parse_magic_line("--col")


def test_importing_gradviz_and_its_notebook_module_does_not_import_ipython():
    code = "import gradviz, gradviz.integrations.notebook, sys; print('IPython' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]



def test_cells_are_named_as_ipython_names_them(shell) -> None:
    """Code in a cell lives in a file IPython names (`<ipython-input-…>`, `/tmp/ipykernel_…/….py` under Jupyter):
    diagrams say `In[N]:line`, as IPython's tracebacks do, for the magic and for `with gradviz.trace()`."""
    from gradviz import Trace

    result, captured = run(shell, DATA_CELL.format(options=" --view graph"))
    number = result.execution_count
    labels = [t for texts in svgs(captured) for t in texts if t.startswith("In[")]
    assert f"In[{number}]:3: out = a.tanh()" in labels, labels
    assert not [t for texts in svgs(captured) for t in texts if "ipython-input" in t or "ipykernel" in t]

    result = shell.run_cell(
        "import gradviz\nwith gradviz.trace() as traced:\n    b = torch.ones(2, requires_grad=True).exp()\n", store_history=True
    )
    trace = shell.user_ns["traced"]
    (file,) = {n.created.file for n in trace.nodes.values()}
    assert trace.file_labels == {file: f"In[{result.execution_count}]"}
    assert trace.where(file, 3) == f"In[{result.execution_count}]:3"
    assert Trace.from_dict(trace.to_dict()).file_labels == trace.file_labels


VALIDATION_CELL = """\
%%gradviz --view graph-memory
model = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
val_loss = 0.0
for _ in range(4):
    out = model(torch.randn(16, 4))
    val_loss = val_loss + out.pow(2).mean()
"""


def test_magic_shows_the_graph_memory_chart(shell):
    result, captured = run(shell, VALIDATION_CELL)
    assert result.success, result.error_in_exec
    charts = [out.data["image/svg+xml"] for out in captured.outputs if "image/svg+xml" in out.data]
    assert len(charts) == 1
    # the chart's title names the cell line that keeps the graphs (line 6 counting the %%gradviz line)
    assert "held by line 6" in charts[0]
    assert float(shell.user_ns["val_loss"]) > 0


def test_messages_name_each_line_with_its_cell(shell) -> None:
    """In a notebook "line 5" alone does not say which cell: every line a message names carries its cell, as
    IPython's tracebacks name it (`cell In[3], line 5`), through the magic and through `with gradviz.trace()`."""
    result, captured = run(shell, DATA_CELL.format(options=" --view graph"))
    cell = f"In[{result.execution_count}]"
    shown = "\n".join(out.data.get("text/plain", "") for out in captured.outputs)
    # the write (line 5 of the cell: the magic's own line is line 1) and the backward (line 6)
    assert f"had its bytes changed at cell {cell}, line 5 through `c`" in shown, shown
    assert f"The backward at cell {cell}, line 6 used the changed values" in shown, shown
    assert "at line" not in shown

    import gradviz

    result = shell.run_cell(
        "import gradviz\nwith gradviz.trace() as traced:\n    a = torch.tensor([1, 2, 3.], requires_grad=True)\n"
        "    out = a.tanh()\n    c = out.detach()\n    c.zero_()\n    out.sum().backward()\n",
        store_history=True,
    )
    cell = f"In[{result.execution_count}]"
    (finding,) = gradviz.diagnose(shell.user_ns["traced"])
    assert finding.kind.value == "poisoned_saved_tensor" and finding.line == 6
    assert f"written in place at cell {cell}, line 6 through `c`" in finding.message, finding.message
    assert f"The backward at cell {cell}, line 7 raised" in finding.message, finding.message
