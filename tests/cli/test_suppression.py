"""Accepting a finding: `# gradviz: ignore[kind]` on its line or the line above, `--allow KIND`, `[tool.gradviz]` in
pyproject.toml (found from the script's folder upwards); suppressed findings counted, listed with --show-suppressed,
in JSON and as SARIF suppressions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradviz.analysis.findings import FindingKind
from gradviz.cli.suppress import EVERY_KIND, comment_kinds

from .conftest import GALLERY, write
from .test_formats import validate

BUG = """\
import torch

w = torch.ones(3, requires_grad=True)
out = (w * 2).tanh()
c = out.data
{above}
c.zero_(){comment}
out.sum().backward()
print(w.grad)
"""
WRITE_LINE = 7


def bug(folder: Path, *, above: str = "", comment: str = "", name: str = "bug.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write(folder, name, BUG.format(above=above, comment=comment))


def test_comment_kinds_reads_the_ways_people_write_it():
    assert comment_kinds("x.zero_()  # gradviz: ignore[cut_edge]") == {"cut_edge"}
    assert comment_kinds("x.zero_()  #gradviz:ignore[cut_edge, dead_parameter]") == {"cut_edge", "dead_parameter"}
    assert comment_kinds("x.zero_()  # the reason  # gradviz: ignore") == EVERY_KIND
    assert comment_kinds("x.zero_()  # GRADVIZ: IGNORE[cut_edge]") == {"cut_edge"}
    assert comment_kinds("x.zero_()  # gradviz: ignored") is None
    assert comment_kinds("x.zero_()  # mypy: ignore[cut_edge]") is None
    assert comment_kinds("x.zero_()") is None


def test_an_ignore_comment_on_the_line_suppresses_and_counts(python_m_gradviz, tmp_path):
    bug(tmp_path, comment="  # gradviz: ignore[silently_corrupted_saved_tensor]")

    text = python_m_gradviz("check", "bug.py", "--show-suppressed")
    as_json = python_m_gradviz("check", "bug.py", "--json")
    sarif = python_m_gradviz("check", "bug.py", "--format", "sarif")

    assert text.returncode == 0, text.stderr  # the only error finding is accepted: the check passes
    lines = text.stdout.splitlines()
    assert "bug.py: no problems found (1 suppressed)" in lines
    (listed,) = [line for line in lines if line.startswith("suppressed")]
    assert listed.startswith(f"suppressed  bug.py:{WRITE_LINE}  silently_corrupted_saved_tensor  by "
                             f"`gradviz: ignore[silently_corrupted_saved_tensor]` at line {WRITE_LINE}: `out`")
    assert as_json.returncode == 0
    document = json.loads(as_json.stdout)
    assert document["findings"] == []
    (accepted,) = document["suppressed"]
    assert (accepted["kind"], accepted["line"], accepted["file"]) == ("silently_corrupted_saved_tensor", WRITE_LINE, "bug.py")
    assert accepted["suppressed_by"] == f"`gradviz: ignore[silently_corrupted_saved_tensor]` at line {WRITE_LINE}"
    log = json.loads(sarif.stdout)
    validate(log)
    (result,) = log["runs"][0]["results"]  # still in the log: code scanning shows it as suppressed
    assert result["suppressions"] == [
        {"kind": "inSource", "justification": f"`gradviz: ignore[silently_corrupted_saved_tensor]` at line {WRITE_LINE}"}
    ]
    assert log["runs"][0]["invocations"][0]["exitCode"] == 0


def test_a_bare_ignore_on_the_line_above_suppresses_and_another_kind_does_not(python_m_gradviz, tmp_path):
    bug(tmp_path / "above", above="# gradviz: ignore")
    bug(tmp_path / "other", comment="  # gradviz: ignore[cut_edge]")

    above = python_m_gradviz("check", "above/bug.py", "-q")
    other = python_m_gradviz("check", "other/bug.py")

    assert above.returncode == 0, above.stdout
    assert above.stdout.count("silently_corrupted_saved_tensor") == 0
    assert other.returncode == 1  # the comment names another kind: the error stands
    assert f"error  other/bug.py:{WRITE_LINE}  silently_corrupted_saved_tensor" in other.stdout
    assert "suppressed" not in other.stdout


def test_allow_option_accepts_a_kind_and_rejects_an_unknown_one(python_m_gradviz, tmp_path):
    bug(tmp_path)

    allowed = python_m_gradviz("check", "bug.py", "--allow", "silently_corrupted_saved_tensor", "--allow", "cut_edge",
                               "--show-suppressed")
    unknown = python_m_gradviz("check", "bug.py", "--allow", "cut_edges")

    assert allowed.returncode == 0, allowed.stderr
    assert "bug.py: no problems found (1 suppressed)" in allowed.stdout
    assert "by --allow silently_corrupted_saved_tensor: `out`" in allowed.stdout
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines()[-1].startswith(
        "gradviz: --allow: unknown finding kind 'cut_edges'; the kinds are cut_edge, dead_parameter,"
    )


def test_tool_gradviz_in_a_parent_pyproject_allows_makes_strict_and_sets_the_window(python_m_gradviz, tmp_path):
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n\n[tool.gradviz]\nallow = ["silently_corrupted_saved_tensor"]\n'
          'strict = true\nsteps = 2\n')
    bug(tmp_path / "src")
    (tmp_path / "src" / "module.py").write_text((GALLERY / "plot_01_testdetach.py").read_text(encoding="utf-8"))
    write(tmp_path / "src", "loop.py", "import torch\nw = torch.ones(2, requires_grad=True)\n"
          "for _ in range(5):\n    (w * 3).sum().backward()\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # run from another folder: the table is found from the script's folder upwards, not from the current one
    accepted = python_m_gradviz("check", "../src/bug.py", "--json", cwd=elsewhere)
    strict = python_m_gradviz("check", "../src/module.py", cwd=elsewhere)
    window = python_m_gradviz("check", "../src/loop.py", "--json", cwd=elsewhere)

    assert accepted.returncode == 0, accepted.stderr
    (suppressed,) = json.loads(accepted.stdout)["suppressed"]
    assert suppressed["suppressed_by"] == (
        f"[tool.gradviz] in {tmp_path / 'pyproject.toml'}: allow silently_corrupted_saved_tensor"
    )
    assert strict.returncode == 1  # strict = true: module.py's dead parameter (a warning) fails the check
    assert f"warning  {tmp_path / 'src' / 'module.py'}:" in strict.stdout
    assert json.loads(window.stdout)["window"]["traced"] == 2  # steps = 2 from the table


def test_output_dir_from_the_table_and_a_bad_table_is_a_usage_error(python_m_gradviz, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.gradviz]\noutput-dir = "drawings"\n')
    bug(tmp_path)
    bug(tmp_path / "bad")
    write(tmp_path / "bad", "pyproject.toml", '[tool.gradviz]\nalow = ["cut_edge"]\n')

    drawn = python_m_gradviz("render", "bug.py", "-q", "-o", "explicit.dot")
    default = python_m_gradviz("render", "bug.py", "--allow", "silently_corrupted_saved_tensor")
    bad = python_m_gradviz("check", "bad/bug.py")

    assert drawn.returncode == 0 and (tmp_path / "explicit.dot").is_file()  # -o wins over output-dir
    assert default.returncode == 0, default.stderr  # render honours --allow too
    assert (tmp_path / "drawings" / "bug.gradviz.svg").is_file()
    assert "gradviz: wrote drawings/bug.gradviz.svg" in default.stdout
    assert "silently_corrupted_saved_tensor" not in default.stdout
    assert "gradviz: 1 suppressed (--show-suppressed lists them)" in default.stdout.splitlines()
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        f"gradviz: [tool.gradviz] in {tmp_path / 'bad' / 'pyproject.toml'}: unknown key 'alow'; "
        "the keys are steps, strict, allow, output-dir"
    )


@pytest.mark.parametrize("line", ["", "# gradviz: ignore[silently_corrupted_saved_tensor]"])
def test_suppression_module_decides_on_a_finding_from_its_own_line(tmp_path, line):
    from gradviz.analysis.findings import Finding, FindingKind
    from gradviz.cli.suppress import split

    source = write(tmp_path, "s.py", f"a = 1\n{line}\nb = 2\n")
    finding = Finding(FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR, str(source), 3, "m", "f")
    kept, suppressed = split([finding])
    assert (len(kept), len(suppressed)) == ((1, 0) if not line else (0, 1))


# ---------------------------------------------------------------------------------------------- comments, not text
STRINGS = '''\
"""The ignore comment is only quoted here: # gradviz: ignore[silently_corrupted_saved_tensor]"""
import torch

w = torch.ones(3, requires_grad=True)
out = (w * 2).tanh()
c = out.data
HELP = """
# gradviz: ignore
"""
c.zero_(); text = "# gradviz: ignore[silently_corrupted_saved_tensor]"
out.sum().backward()
'''


def test_ignore_words_inside_strings_and_docstrings_accept_nothing(python_m_gradviz, tmp_path):
    """Line 9 holds `# gradviz: ignore` inside a triple-quoted string and line 10 the full comment inside a string
    literal: neither is a comment, so the error on line 10 stands (it was suppressed when the raw text was read)."""
    write(tmp_path, "strings.py", STRINGS)

    done = python_m_gradviz("check", "strings.py", "--json")

    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert [(f["kind"], f["line"]) for f in document["findings"]] == [("silently_corrupted_saved_tensor", 10)]
    assert "suppressed" not in document  # the key appears only when something was accepted


def test_comments_are_read_by_the_tokenizer_and_a_broken_file_keeps_what_came_before():
    from gradviz.cli.suppress import comments

    assert comments(['x = "# not a comment"  # a comment\n', "s = '''\n", "# inside a string\n", "'''  # after\n"]) == {
        1: "# a comment", 4: "# after"}
    # an unterminated string (the file was edited since it ran): the comments before it, none guessed after
    assert comments(["a = 1  # kept\n", 's = """\n', "b = 2  # gradviz: ignore\n"]) == {1: "# kept"}
    assert comments(["if x:\n", "    a = 1  # kept\n", "  b = 2  # bad indent\n"]) == {2: "# kept"}
    assert comments([]) == {}


def test_a_finding_in_a_file_that_no_longer_tokenizes_stands(tmp_path):
    from gradviz.analysis.findings import Finding, FindingKind
    from gradviz.cli.suppress import split

    source = write(tmp_path, "edited.py", 'HELP = """\n# gradviz: ignore\nc.zero_()\n')  # never closed
    finding = Finding(FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR, str(source), 3, "m", "f", code="c.zero_()")
    assert split([finding]) == ([finding], [])


@pytest.mark.parametrize(
    ("comment", "problem"),
    [
        pytest.param("# gradviz: ignore[CUT_EDGE]", "unknown finding kind 'CUT_EDGE'", id="upper-case"),
        pytest.param("# gradviz: ignore[silently_corrupted_saved_tensors]",
                     "unknown finding kind 'silently_corrupted_saved_tensors'", id="misspelt"),
        pytest.param("# gradviz: ignore[cut_edge, dead_parameters]", "unknown finding kind 'dead_parameters'", id="second"),
        pytest.param("# gradviz: ignore[]", "names no finding kind", id="empty"),
    ],
)
def test_an_ignore_comment_naming_no_real_kind_is_an_error_before_the_script_runs(python_m_gradviz, tmp_path, comment,
                                                                                   problem):
    write(tmp_path, "typo.py", f"print('the script ran')\nx = 1\nx += 1  {comment}\n")

    done = python_m_gradviz("check", "typo.py")

    assert done.returncode == 2
    assert "the script ran" not in done.stdout  # refused before it runs: a typo must not cost a training run
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    written = comment.lstrip("# ")
    assert line.startswith(f"gradviz: typo.py:3: `{written}`")
    assert problem in line
    assert line.endswith(", ".join(sorted(EVERY_KIND, key=[k.value for k in FindingKind].index)))


def test_a_bad_ignore_comment_in_an_imported_file_with_a_finding_is_an_error(python_m_gradviz, tmp_path):
    write(tmp_path, "helper.py", "def spoil(c):\n    c.zero_()  # gradviz: ignore[Silently_Corrupted_Saved_Tensor]\n")
    write(tmp_path, "main.py", "import torch\nfrom helper import spoil\n\nw = torch.ones(3, requires_grad=True)\n"
          "out = (w * 2).tanh()\nspoil(out.data)\nout.sum().backward()\n")

    done = python_m_gradviz("check", "main.py")

    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "gradviz: helper.py:2: `gradviz: ignore[Silently_Corrupted_Saved_Tensor]`: unknown finding kind "
        "'Silently_Corrupted_Saved_Tensor'; the kinds are cut_edge, ")


def test_upper_case_kinds_in_allow_and_in_the_table_are_errors(python_m_gradviz, tmp_path):
    bug(tmp_path)
    bug(tmp_path / "table")
    write(tmp_path / "table", "pyproject.toml", '[tool.gradviz]\nallow = ["SILENTLY_CORRUPTED_SAVED_TENSOR"]\n')

    option = python_m_gradviz("check", "bug.py", "--allow", "Cut_Edge")
    table = python_m_gradviz("check", "table/bug.py")

    assert (option.returncode, table.returncode) == (2, 2)
    assert option.stderr.strip() == (
        "gradviz: --allow: unknown finding kind 'Cut_Edge'; the kinds are " + ", ".join(k.value for k in FindingKind))
    assert table.stderr.strip() == (
        f"gradviz: [tool.gradviz] in {tmp_path / 'table' / 'pyproject.toml'}: allow: unknown finding kind "
        "'SILENTLY_CORRUPTED_SAVED_TENSOR'; the kinds are " + ", ".join(k.value for k in FindingKind))
