"""`gradviz check --format {text,json,sarif,github}`: SARIF 2.1.0 for code scanning, GitHub workflow commands."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema

from gradviz.analysis.findings import Finding, FindingKind
from gradviz.cli import formats
from gradviz.model import Trace

from .conftest import GALLERY, ROOT

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
DATA = GALLERY / "plot_02_data_silent.py"
DETACH = GALLERY / "plot_03_detach_raises.py"
MODULE = GALLERY / "plot_01_testdetach.py"


def line_of(path: Path, needle: str) -> int:
    hits = [i + 1 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()) if line.strip().startswith(needle)]
    assert len(hits) == 1, f"{needle!r} is on lines {hits} of {path.name}"
    return hits[0]


def copy_example(source: Path, folder: Path) -> Path:
    """The example under `folder/src/`, so paths relative to `folder` have a directory part."""
    (folder / "src").mkdir(exist_ok=True)
    return Path(shutil.copy(source, folder / "src" / source.name))


def validate(document: dict) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(document)


def test_sarif_of_the_data_example_validates_and_points_at_the_write_the_save_and_the_backward(python_m_gradviz, tmp_path):
    copy_example(DATA, tmp_path)
    result = python_m_gradviz("check", "src/plot_02_data_silent.py", "--format", "sarif")

    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)  # stdout is the log alone: the script's prints went to stderr
    validate(document)
    assert "tensor([1., 1., 1.])" in result.stderr
    assert document["version"] == "2.1.0"
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gradviz" and driver["version"] == "0.1.0"
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert set(rules) == {kind.value for kind in FindingKind}
    rule = rules["silently_corrupted_saved_tensor"]
    assert rule["defaultConfiguration"] == {"level": "error"}
    assert rules["dead_parameter"]["defaultConfiguration"] == {"level": "warning"}
    assert rules["cut_edge"]["defaultConfiguration"] == {"level": "note"}
    assert rule["fullDescription"]["text"].startswith("A saved tensor's bytes changed through an alias with its own")
    # SARIF's text is plain: no Markdown backticks (the markdown field keeps them)
    assert "Fix: Use .detach() (so PyTorch catches it) and .clone()" in rule["help"]["text"]
    assert "**Fix:** Use `.detach()` (so PyTorch catches it) and `.clone()`" in rule["help"]["markdown"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]

    (found,) = run["results"]
    assert found["ruleId"] == "silently_corrupted_saved_tensor"
    assert driver["rules"][found["ruleIndex"]]["id"] == found["ruleId"]
    assert found["level"] == "error"
    text, markdown = found["message"]["text"], found["message"]["markdown"]
    assert text.startswith("out, saved by TanhBackward0 for backward at v0, had its bytes changed") and "`" not in text
    assert markdown.startswith("`out`, saved by TanhBackward0 for backward at v0, had its bytes changed")
    assert "\nFix: " in text and "\n\n**Fix:** " in markdown
    # the message links its related locations by id, so code scanning shows the save and the backward lines
    assert "([saved for backward by TanhBackward0 here](1), [backward here](2))" in text
    assert "([saved for backward by TanhBackward0 here](1), [backward here](2))" in markdown
    assert set(found["partialFingerprints"]) == {"gradviz/v1"}
    (location,) = found["locations"]
    physical = location["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "src/plot_02_data_silent.py", "uriBaseId": "%SRCROOT%"}
    assert physical["region"]["startLine"] == line_of(DATA, "c.zero_()") == 24
    assert physical["region"]["snippet"]["text"].startswith("c.zero_()")
    related = {(r["physicalLocation"]["region"]["startLine"], r["message"]["text"]) for r in found["relatedLocations"]}
    assert related == {
        (line_of(DATA, "out = a.tanh()"), "saved for backward by TanhBackward0 here"),
        (line_of(DATA, "out.sum().backward()"), "backward here"),
    }
    assert [r["id"] for r in found["relatedLocations"]] == [1, 2]


def test_sarif_levels_follow_severity_and_the_scripts_error_is_a_notification(python_m_gradviz, tmp_path):
    copy_example(MODULE, tmp_path)
    copy_example(DETACH, tmp_path)

    module = python_m_gradviz("check", "src/plot_01_testdetach.py", "--format", "sarif")
    detach = python_m_gradviz("check", "src/plot_03_detach_raises.py", "--format", "sarif")

    assert module.returncode == 0, module.stderr
    document = json.loads(module.stdout)
    validate(document)
    levels = {(r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in document["runs"][0]["results"]}
    detach_line = line_of(MODULE, "x = x.detach()")
    assert levels == {("cut_edge", "note", detach_line), ("dead_parameter", "warning", detach_line)}
    dead = next(r for r in document["runs"][0]["results"] if r["ruleId"] == "dead_parameter")
    assert dead["properties"] == {"parameter": "model.layer1: weight"}  # grouped by module

    assert detach.returncode == 1
    assert "Traceback" not in detach.stderr  # the script's error is in the log, not printed over it
    document = json.loads(detach.stdout)
    validate(document)
    (result,) = document["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("poisoned_saved_tensor", "error")
    (notification,) = document["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert notification["message"]["text"].startswith("the script raised RuntimeError: one of the variables needed")
    where = notification["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"] == "src/plot_03_detach_raises.py"
    assert where["region"]["startLine"] == line_of(DETACH, "out.sum().backward()")


def _escape(text: str, *, prop: bool = False) -> str:
    """GitHub's workflow-command escaping, written out independently of gradviz's."""
    table = {"%": "%25", "\r": "%0D", "\n": "%0A"} | ({":": "%3A", ",": "%2C"} if prop else {})
    return "".join(table.get(ch, ch) for ch in text)


def test_github_commands_are_one_per_finding_with_githubs_escaping(python_m_gradviz, tmp_path):
    copy_example(DETACH, tmp_path)
    result = python_m_gradviz("check", "src/plot_03_detach_raises.py", "--format", "github")
    as_json = python_m_gradviz("check", "src/plot_03_detach_raises.py", "--format", "json")

    assert result.returncode == 1
    (finding,) = json.loads(as_json.stdout)["findings"]
    raised = json.loads(as_json.stdout)["exception"]
    write_line, backward_line = line_of(DETACH, "c.zero_()"), line_of(DETACH, "out.sum().backward()")
    assert finding["line"] == write_line
    assert result.stdout.splitlines() == [
        f"::error file=src/plot_03_detach_raises.py,line={write_line},title=poisoned_saved_tensor::"
        + _escape(finding["message"] + "\nfix: " + finding["fix"]),
        f"::error file=src/plot_03_detach_raises.py,line={backward_line},title=the script raised RuntimeError::"
        + _escape(raised["message"]),
    ]
    assert "%0Afix: " in result.stdout and "\r" not in result.stdout
    assert "Traceback" not in result.stderr


def test_github_escaping_and_notice_for_info_exactly():
    trace = Trace()
    findings = [
        Finding(FindingKind.CUT_EDGE, "/elsewhere/a,b:c.py", 7, "100% cut\r\nhere", "keep it"),
        Finding(FindingKind.DEAD_PARAMETER, None, None, "w: no gradient", ""),
    ]

    assert formats.github_commands(findings, trace) == [
        "::notice file=/elsewhere/a%2Cb%3Ac.py,line=7,title=cut_edge::100%25 cut%0D%0Ahere%0Afix: keep it",
        "::warning title=dead_parameter::w: no gradient",
    ]


def test_json_is_the_long_form_of_the_json_flag(python_m_gradviz, tmp_path):
    copy_example(MODULE, tmp_path)
    short = python_m_gradviz("check", "src/plot_01_testdetach.py", "--json")
    long = python_m_gradviz("check", "src/plot_01_testdetach.py", "--format", "json")

    assert short.returncode == long.returncode == 0
    assert json.loads(short.stdout) == json.loads(long.stdout)
    assert {f["kind"] for f in json.loads(long.stdout)["findings"]} == {"cut_edge", "dead_parameter"}


def test_unknown_format_is_one_usage_error(python_m_gradviz, tmp_path):
    copy_example(MODULE, tmp_path)
    result = python_m_gradviz("check", "src/plot_01_testdetach.py", "--format", "xml")

    assert result.returncode == 2
    assert "argument --format: invalid choice: 'xml' (choose from " in result.stderr
    assert "'sarif'" in result.stderr and "Traceback" not in result.stderr


def test_rule_texts_are_the_readme_table():
    """SARIF's help text and README's "what happened / fix" table say the same thing."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # | kind | severity | what happened | the PyTorch fact it rests on | fix |
    rows = {kind: (happened, fix) for kind, happened, fix in
            re.findall(r"^\| `(\w+)` \| [^|]+? \| (.+?) \| .+? \| (.+?) \|$", readme, re.M)}
    assert set(formats.RULES) == set(FindingKind)  # every kind has a rule
    for kind, rule in formats.RULES.items():
        assert rows[kind.value] == rule, kind


def test_sarif_of_an_incomplete_analysis_says_execution_failed():
    trace = Trace()
    document = formats.sarif_document([], trace, version="0.1.0", exit_code=3, internal_error="KeyError: 't9'")

    validate(document)
    (invocation,) = document["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 3
    assert invocation["toolExecutionNotifications"] == [
        {"level": "error", "message": {"text": "internal error in gradviz: KeyError: 't9'"}}
    ]
    assert document["runs"][0]["results"] == []


def _lines_github_would_run(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("::") or "##[" in line]


def test_text_output_of_a_saved_trace_escapes_control_characters_and_workflow_commands(python_m_gradviz, tmp_path):
    shutil.copy(DATA, tmp_path / "data.py")
    recorded = python_m_gradviz("render", "data.py", "-q", "-o", "run.json")
    assert recorded.returncode == 0, recorded.stderr
    # a trace whose file name and source line carry an escape sequence and workflow commands, as a hostile or
    # merely odd repository could
    text = (tmp_path / "run.json").read_text(encoding="utf-8")
    text = text.replace("c.zero_()", "\\u001b[2J\\n::error file=x.py::owned ##[error]c.zero_()")
    text = text.replace("data.py", "::warning::data\\u001b]0;title\\u0007.py")
    (tmp_path / "odd.json").write_text(text, encoding="utf-8")

    check = python_m_gradviz("check", "odd.json")
    render = python_m_gradviz("render", "odd.json", "-o", "odd.dot")

    for result in (check, render):
        assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout + result.stderr
        assert _lines_github_would_run(result.stdout) == [] and _lines_github_would_run(result.stderr) == []
    assert check.returncode == 1 and render.returncode == 0
    write_line = line_of(DATA, "c.zero_()")
    assert f"error  \\x3a:warning::data\\x1b]0;title\\x07.py:{write_line}  silently_corrupted_saved_tensor" in check.stdout
    assert f"  {write_line:>5} | \\x1b[2J" in check.stdout
    assert "\\x3a:error file=x.py::owned \\x23#[error]c.zero_()" in check.stdout
    assert f"error  \\x3a:warning::data\\x1b]0;title\\x07.py:{write_line}  silently_corrupted_saved_tensor" in render.stdout


def test_a_file_name_that_is_not_utf8_in_sarif_github_json_and_text(python_m_gradviz, tmp_path):
    (tmp_path / "src").mkdir()
    name = b"bug\xfe.py"
    with open(bytes(tmp_path / "src") + b"/" + name, "wb") as file:
        file.write(DATA.read_bytes())
    script = "src/" + name.decode("utf-8", "surrogateescape")

    sarif = python_m_gradviz("check", script, "--format", "sarif")
    github = python_m_gradviz("check", script, "--format", "github")
    text = python_m_gradviz("check", script)

    assert sarif.returncode == 1, sarif.stderr  # not 3: the log is written
    log = json.loads(sarif.stdout)
    validate(log)
    (found,) = log["runs"][0]["results"]
    # percent-encoded byte for byte: the URI still names the file on disk
    assert found["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "src/bug%FE.py", "uriBaseId": "%SRCROOT%"}
    assert github.stdout.startswith("::error file=src/bug\\xfe.py,line=24,title=silently_corrupted_saved_tensor::")
    assert "\udcfe" not in github.stdout + text.stdout
    assert "error  src/bug\\xfe.py:24  silently_corrupted_saved_tensor" in text.stdout


def test_paths_are_relative_to_the_git_root_in_sarif_github_and_json(python_m_gradviz, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)  # what marks a work tree's root
    (repo / "build").mkdir()
    copy_example(DATA, repo)

    sarif = python_m_gradviz("check", "../src/plot_02_data_silent.py", "--format", "sarif", cwd=repo / "build")
    github = python_m_gradviz("check", "../src/plot_02_data_silent.py", "--format", "github", cwd=repo / "build")
    as_json = python_m_gradviz("check", "../src/plot_02_data_silent.py", "--json", cwd=repo / "build")

    run = json.loads(sarif.stdout)["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    (found,) = run["results"]
    assert found["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "src/plot_02_data_silent.py", "uriBaseId": "%SRCROOT%"
    }
    assert all(r["physicalLocation"]["artifactLocation"]["uri"] == "src/plot_02_data_silent.py"
               for r in found["relatedLocations"])
    assert github.stdout.startswith("::error file=src/plot_02_data_silent.py,line=24,")
    assert json.loads(as_json.stdout)["findings"][0]["file"] == "src/plot_02_data_silent.py"


def test_fingerprints_follow_the_code_not_the_line_number(tmp_path):
    trace = Trace()
    first = Finding(FindingKind.CUT_EDGE, str(tmp_path / "a.py"), 7, "m", "f", code="h = h.detach()")
    moved = Finding(FindingKind.CUT_EDGE, str(tmp_path / "a.py"), 9, "m", "f", code="  h = h.detach()  ")
    other = Finding(FindingKind.CUT_EDGE, str(tmp_path / "a.py"), 7, "m", "f", code="z = z.detach()")

    prints = [formats.sarif_document([f], trace, version="0.1.0")["runs"][0]["results"][0]["partialFingerprints"]
              for f in (first, moved, other)]
    assert prints[0] == prints[1] != prints[2]
    assert re.fullmatch(r"[0-9a-f]{32}:1", prints[0]["gradviz/v1"])


def test_sarif_text_escapes_brackets_so_only_the_links_are_links():
    trace = Trace()
    finding = Finding(FindingKind.CUT_EDGE, "/x/a.py", 3, "`h[0]` is cut", "keep [it]")
    result = formats.sarif_document([finding], trace, version="0.1.0")["runs"][0]["results"][0]

    assert result["message"]["text"] == "h\\[0\\] is cut\nFix: keep \\[it\\]"
    assert result["message"]["markdown"] == "`h[0]` is cut\n\n**Fix:** keep [it]"
