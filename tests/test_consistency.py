"""Every medium states the same facts: a count, a line, a step set, a name or a version that the text, the static
pictures, the page's document, the JSON and the SARIF log all show must be the same in each (issue 26).

Runs every gallery example and realistic programs through every view, drawn from one picture model: among them
multi-step ones (issue 35): a tied-weight LM for 20 steps with a `.data` write in each, and a CNN traced with a
10-step window whose validation after step 25 the sentinel traces again, with the steps after it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis.findings import CutEvidence, SavedTensorEvidence, version_text
from gradviz.cli.formats import findings_text
from gradviz.cli.sarif import sarif_results
from gradviz.explorer.document import explorer_document
from gradviz.picture.palette import PALETTE, SEVERITIES, css_variables
from gradviz.render import Picture, render
from gradviz.render.graph_dot import LEGEND
from gradviz.render.memory_boxes import FINDING_COLOURS
from gradviz.render.timeline import SEVERITY_COLOURS

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
REALISTIC = ROOT / "tests" / "programs" / "realistic"
PROGRAMS = sorted((ROOT / "gallery").glob("plot_*.py")) + [
    REALISTIC / name for name in ("dcgan.py", "lstm_lm.py", "actor_critic.py", "tied_lm_data_renorm.py",
                                  "cnn_late_validation.py")
]
#: how a program is traced, where not as a plain run: (argv, step window)
SETTINGS: dict[str, tuple[list[str], int | None]] = {
    "tied_lm_data_renorm": (["20"], None),  # 20 steps, every one writing the tied weight through `.data`
    "cnn_late_validation": (["40", "25"], 10),  # the window ends at step 10; the validation after step 25 re-arms
}
#: Spellings of an unknown version that must not appear: the one spelling is version_text(None).
FORBIDDEN = ("vNone", "a later version", "at version None", "v-")


class Run:
    """One program through every medium, each drawn from the same picture model."""

    def __init__(self, path: Path) -> None:
        argv, steps = SETTINGS.get(path.stem, ([], None))
        self.trace = gradviz.trace_script(path, argv, steps=steps)
        self.findings = list(gradviz.diagnose(self.trace))
        self.picture = Picture(self.trace, self.findings)
        kwargs = {"findings": self.findings, "picture": self.picture}
        self.graph = render(self.trace, "graph", max_nodes=400, **kwargs).source
        self.memory = render(self.trace, "memory", **kwargs).source
        self.timeline = render(self.trace, "timeline", **kwargs).source
        self.json = json.loads(render(self.trace, "graph", max_nodes=400, **kwargs).to_json())
        self.document = explorer_document(self.trace, self.findings, picture=self.picture)
        self.sarif = sarif_results(self.findings, self.trace)
        self.text = findings_text(self.findings)


@pytest.fixture(scope="module", params=PROGRAMS, ids=[p.stem for p in PROGRAMS])
def run(request: pytest.FixtureRequest) -> Run:
    return Run(request.param)


def test_each_finding_has_one_kind_line_and_count_everywhere(run: Run) -> None:
    ordered = run.picture.findings
    expected = [(f.kind.value, f.line, f.count) for f in ordered]
    assert [(f["kind"], f["line"], f["count"]) for f in run.document["findings"]] == expected
    assert sorted((f["kind"], f["line"], f["count"]) for f in run.json["findings"]) == sorted(expected)
    sarif = [
        (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"] if "locations" in r else None,
         r.get("occurrenceCount", 1))
        for r in run.sarif
    ]
    assert sorted(sarif, key=repr) == sorted(expected, key=repr)
    heads = re.findall(r"^(error|warning|info)  \S+?:(\d+)  (\w+)", run.text, re.M)
    assert sorted((kind, int(line)) for _sev, line, kind in heads) == sorted(
        (f.kind.value, f.line) for f in ordered if f.line is not None
    )


def test_the_scrubber_counts_the_events_the_header_counts(run: Run) -> None:
    facts = run.document["facts"]
    assert facts["events"] == len(run.trace.events)
    rows = [e for e in run.document["events"] if e["kind"] != "omitted"]
    numbers = [e["number"] for e in rows]
    assert numbers == sorted(set(numbers)) and all(1 <= n <= facts["events"] for n in numbers)
    omitted = any(e["kind"] == "omitted" for e in run.document["events"])
    if rows and not omitted:  # the rows stand for every event the header counts, and the last is the last
        assert sum(e["count"] for e in rows) <= facts["events"]
        assert max(e["last"] for e in rows) == run.trace.events[-1].seq


def test_the_graph_marks_the_steps_each_finding_occurred_in(run: Run) -> None:
    steps = run.picture.steps
    step_of = {nid: s.number for s in steps for nid in s.nodes}
    occurred = {step_of[e.node] for f in run.findings for e in f.evidence
                if isinstance(e, SavedTensorEvidence) and e.node in step_of}
    marked = set()
    for text in re.findall(r"finding in steps? ([\d, \-]+)", run.graph):
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            marked.update(range(int(low), int(high or low) + 1))
    assert marked <= occurred  # never a step the analysis did not find it in
    for roll in run.picture.rolls[0]:
        if len(roll.numbers) > 1 and set(roll.numbers) <= occurred:
            assert not marked & set(roll.numbers), "a finding in every step of a roll singles none out"


def test_names_and_versions_are_the_picture_models(run: Run) -> None:
    namer = run.picture.namer
    table = run.document["tensors"]
    for f, shown, result in zip(run.picture.findings, run.document["findings"], _by_document_order(run)):
        if not f.evidence:
            continue
        evidence = f.evidence[0]
        if isinstance(evidence, SavedTensorEvidence):
            name = namer.tensor(evidence.tensor)
            assert shown["evidence"]["tensor"] == result["properties"]["evidence"]["tensor"] == name
            assert shown["evidence"]["saved_version"] == version_text(evidence.saved_version)
            index = next((i for i, t in enumerate(table) if t and t.get("name") == name), None)
            if evidence.tensor in run.trace.tensors and index is not None:
                assert table[index]["name"] == name
            if f.kind.value == "poisoned_saved_tensor":
                assert f"saved {version_text(evidence.saved_version)}, now {version_text(evidence.version_now)}" in run.graph
        elif isinstance(evidence, CutEvidence):
            assert evidence.alias_expression in run.graph  # the scissors label on the cut edge
            assert shown["evidence"]["alias_expression"] == evidence.alias_expression
    for text in [run.graph, run.memory, run.timeline, json.dumps(run.document), run.text]:
        assert not any(bad in text for bad in FORBIDDEN)


def test_a_leaf_is_made_where_its_tensor_was(run: Run) -> None:
    tensors = run.document["tensors"]
    for node in run.document["nodes"]:
        if node.get("var") is not None and node.get("line") is not None:
            made = tensors[node["var"]].get("made")
            if made:
                assert (node["file"], node["line"]) == (made[0], made[1]), node["label"]


def _by_document_order(run: Run) -> list[dict]:  # type: ignore[type-arg]
    """The SARIF results in the document's (report) order, matched by kind, line and message."""
    results = list(run.sarif)
    ordered = []
    for f in run.picture.findings:
        match = next(r for r in results if r["ruleId"] == f.kind.value and r["message"]["markdown"].startswith(
            f.message[:40].replace("[", "\\[").replace("]", "\\]")) or r["ruleId"] == f.kind.value)
        results.remove(match)
        ordered.append(match)
    return ordered


def test_one_palette_for_dot_memory_timeline_and_the_page() -> None:
    css = css_variables()
    assert LEGEND["poisoned"][0] == FINDING_COLOURS["poisoned_saved_tensor"] == PALETTE["poisoned"].colour == "#ff6666"
    assert f"--poisoned: {PALETTE['poisoned'].colour};" in css
    assert LEGEND["corrupted"][0] == FINDING_COLOURS["silently_corrupted_saved_tensor"] == "orchid"
    assert "--corrupted: orchid;" in css
    assert "--output: #caff70;" in css and LEGEND["output"][0] == "darkolivegreen1"  # the same green, CSS-spelled
    for severity, swatch in SEVERITIES.items():
        assert SEVERITY_COLOURS[severity] == swatch.colour and f"--{severity}: {swatch.colour};" in css
    page = render(gradviz.Trace(), "report", findings=[]).html()
    assert css in page and "--warning: #b26a00;" in page


# ---------------------------------------------------------------------------------------------- multi-step (issue 35)
def _strings(value: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    if isinstance(value, dict):
        return [hit for key, item in value.items() for hit in _strings(item, (*path, str(key)))]
    if isinstance(value, list):
        return [hit for item in value for hit in _strings(item, path)]
    return [(path, value)] if isinstance(value, str) else []


def test_names_in_json_and_sarif_are_data_without_markup(run: Run) -> None:
    """Backticks are the text medium's Markdown: a name, a tensor or an alias in JSON or SARIF is plain."""
    prose = {"message", "fix", "markdown", "text"}
    documents = [[f.to_dict() for f in run.findings], run.sarif]
    for path, text in [hit for doc in documents for hit in _strings(doc)]:
        if path and path[-1] not in prose:
            assert "`" not in text, (path, text)


def test_a_saved_tensor_is_named_alike_in_text_sarif_and_page(run: Run) -> None:
    """One naming rule: the tensor SARIF and the page name is the one the text names (there with Markdown, and
    `a view of` where the name is `view of`)."""
    for f, shown, result in zip(run.picture.findings, run.document["findings"], _by_document_order(run)):
        for evidence in f.evidence[:1]:
            if isinstance(evidence, SavedTensorEvidence) and evidence.tensor in run.trace.tensors:
                name = run.picture.namer.tensor(evidence.tensor)
                assert shown["evidence"]["tensor"] == result["properties"]["evidence"]["tensor"] == name
                plain = f.message.replace("`", "")
                assert plain.startswith(name) or plain.startswith(f"a {name}"), (name, f.message[:80])


def test_a_saved_version_drawn_names_the_step_it_is_of(run: Run) -> None:
    """A rolled step shows one step's node for all: a version drawn beside it names its step (`v39, step 20`), and
    that step's occurrence in the evidence (what JSON and SARIF list) has that version; the text's is the first's."""
    step_of = {nid: s.number for s in run.picture.steps for nid in s.nodes}
    occurrences = {(step_of.get(e.node), e.saved_version) for f in run.findings for e in f.evidence
                   if isinstance(e, SavedTensorEvidence)}
    drawn = re.findall(r"(?:version unchanged \(|saved )(v\d+)(?:, now v\d+ \(|, )step (\d+)\)", run.graph)
    if len(run.picture.steps) > 1 and occurrences:
        assert drawn, "a multi-step graph draws a saved tensor's versions without their step"
    for version, step in drawn:
        assert (int(step), int(version[1:])) in occurrences, (version, step)
    for f in run.findings:  # the text states the first occurrence's version (the one JSON and SARIF list first)
        first = next((e for e in f.evidence if isinstance(e, SavedTensorEvidence)), None)
        if first is not None and f.kind.value == "silently_corrupted_saved_tensor":
            assert f"at {version_text(first.saved_version)}," in f.message, f.message


def test_steps_traced_again_carry_their_numbers_in_the_run_everywhere(run: Run) -> None:
    """The step numbers the picture, the page and the memory view show are the run's: a step the sentinel traced
    again after the window is `step 26`, never the next after the window's 10."""
    numbers = [s.number for s in run.picture.steps]
    assert numbers == sorted(set(numbers))
    assert [s["number"] for s in run.document["steps"]] == numbers
    window = run.trace.window
    run_steps = run.trace.run_steps()
    for step in run.picture.steps:
        if step.seq in run_steps:
            assert step.number == run_steps[step.seq]
    drawn = {int(n) for n in re.findall(r"\bstep (\d+)[:\s]", run.graph)}
    mentioned = {entry.step for entry in (window.rearmed if window else [])}
    assert drawn <= set(numbers) | mentioned, drawn - set(numbers) - mentioned
    if window is not None and window.rearmed:
        assert all(s.number > window.traced for s in run.picture.steps if s.seq in run_steps)
        last = run.picture.steps[-1].number
        assert f"step {last}" in run.memory and f"step {len(numbers)} of {len(numbers)}" not in run.memory
