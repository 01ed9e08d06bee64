"""Trace JSON: a lossless round trip, and clear ValueErrors (never code execution) for malformed or hostile files."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import gradviz
from gradviz import Trace
from gradviz.model import FORMAT_NAME, FORMAT_VERSION
from gradviz.render import render

GALLERY = Path(__file__).resolve().parents[2] / "gallery"


@pytest.fixture(scope="module")
def seed_traces() -> dict[str, Trace]:
    names = ("plot_01_testdetach.py", "plot_02_data_silent.py", "plot_03_detach_raises.py")
    return {name: gradviz.trace_script(GALLERY / name) for name in names}


@pytest.fixture(scope="module")
def valid(seed_traces: dict[str, Trace]) -> dict[str, Any]:
    """A real trace as a plain dict: every bad file below is this one with one thing broken."""
    return seed_traces["plot_03_detach_raises.py"].to_dict()


def load_dict(data: Any, tmp_path: Path) -> Trace:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return Trace.load(path)


# ---------------------------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("name", ["plot_01_testdetach.py", "plot_02_data_silent.py", "plot_03_detach_raises.py"])
def test_round_trip(name: str, seed_traces: dict[str, Trace], tmp_path: Path) -> None:
    trace = seed_traces[name]
    path = tmp_path / "t.json"
    text = trace.to_json(path, indent=1)
    assert path.read_text(encoding="utf-8") == text
    loaded = Trace.load(path)
    assert loaded.to_dict() == trace.to_dict()
    assert loaded == trace  # dataclass equality: enums, tuples and Locations come back as they were
    # the exception is data (never the live object): it comes back whole, and reraise() raises the same kind
    assert loaded.exception == trace.exception
    assert type(loaded.error) is type(trace.error)
    assert loaded.to_json(indent=1) == text


def test_round_trip_keeps_the_facts(seed_traces: dict[str, Trace], tmp_path: Path) -> None:
    original = seed_traces["plot_02_data_silent.py"]
    original.to_json(tmp_path / "t.json")
    loaded = Trace.load(tmp_path / "t.json")
    write = loaded.events_of("inplace_write")[0]
    assert write.kind is gradviz.EventKind.INPLACE_WRITE
    assert [(v.tensor, v.before, v.after) for v in write.versions] == [
        (loaded.tensor("c").id, 0, 1),
        (loaded.tensor("out").id, 0, 0),
    ]
    assert write.location.code.strip().startswith("c.zero_()")
    assert loaded.tensor("c").byte_range == (0, 12)
    assert loaded.sources[loaded.script].count("\n") == original.sources[original.script].count("\n")
    assert loaded.torch_version == torch.__version__


def test_to_dict_and_from_dict_share_nothing_with_the_trace(seed_traces: dict[str, Trace]) -> None:
    trace = seed_traces["plot_02_data_silent.py"]
    before = trace.to_json()
    document = trace.to_dict()
    document["ops"]["inputs"][0].append("t99")
    document["events"]["data"][0]["source_requires_grad"] = "changed"
    assert trace.to_json() == before
    again = Trace.from_dict(trace.to_dict())
    document = again.to_dict()
    loaded = Trace.from_dict(document)
    document["tensors"]["names"][0].append("changed")
    assert loaded.tensors["t0"].names == again.tensors["t0"].names


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_and_saving_leave_the_collector_as_found(valid: dict[str, Any], enabled: bool) -> None:
    import gc

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        text = Trace.loads(json.dumps(valid)).to_json()
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError):
            Trace.loads(text.replace('"gradviz-trace"', '"other"'))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_columns_with_a_default_may_be_left_out(valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    for column in ("names", "parameter", "freed", "is_inference"):
        del data["tensors"][column]
    loaded = Trace.loads(json.dumps(data))
    assert all(t.names == [] and t.parameter is None and t.freed is None for t in loaded.tensors.values())
    assert len({id(t.names) for t in loaded.tensors.values()}) == len(loaded.tensors)  # not one shared list


def test_trailing_fields_of_saved_tensors_may_be_left_out(valid: dict[str, Any]) -> None:
    """A saved tensor written before a field with a default was added still loads (that field gets its default)."""
    data = copy.deepcopy(valid)
    index = next(i for i, saved in enumerate(data["nodes"]["saved"]) if saved)
    data["nodes"]["saved"][index][0] = data["nodes"]["saved"][index][0][:3]  # name, tensor, saved_version
    saved = Trace.loads(json.dumps(data)).nodes[data["nodes"]["id"][index]].saved[0]
    assert (saved.is_output, saved.original) == (False, False)
    data["nodes"]["saved"][index][0] = data["nodes"]["saved"][index][0][:2]
    with pytest.raises(ValueError, match=r"nodes\[\d+\]\.saved\[0\] must be a list of \d+ values \(name, tensor, saved_version"):
        Trace.loads(json.dumps(data))


def test_document_header(valid: dict[str, Any]) -> None:
    assert valid["format"] == FORMAT_NAME == "gradviz-trace"
    assert valid["format_version"] == FORMAT_VERSION == 2


def test_round_trip_with_inference_meta_and_complex(tmp_path: Path) -> None:
    with gradviz.trace() as t:
        with torch.inference_mode():
            i = torch.ones(2) * 2
        m = torch.ones(2, device="meta", requires_grad=True).exp()
        z = torch.ones(2, dtype=torch.complex64).real
    t.to_json(tmp_path / "t.json")
    assert Trace.load(tmp_path / "t.json").to_dict() == t.to_dict()


# ---------------------------------------------------------------------------------------------- bad files
def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{'format': 'gradviz-trace',", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json is not a gradviz trace: invalid JSON"):
        Trace.load(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "binary.json"
    path.write_bytes(b'{"format": "\xff\xfe garbage"}')
    with pytest.raises(ValueError, match="not UTF-8"):
        Trace.load(path)
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match=r"binary\.json is not a gradviz trace: it does not start with a JSON object"):
        Trace.load(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read trace file .*missing.json"):
        Trace.load(tmp_path / "missing.json")


def test_pickle_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = tmp_path / "trace.json"
    path.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ValueError, match="not a gradviz trace"):
        Trace.load(path)
    assert not marker.exists()


def test_code_in_strings_is_just_text(valid: dict[str, Any], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = copy.deepcopy(valid)
    payload = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    data["script"] = payload
    data["tensors"]["names"][0] = [payload]
    loaded = load_dict(data, tmp_path)
    assert loaded.script == payload and loaded.tensors["t0"].names == [payload]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        pytest.param(lambda d: [], r"is not a gradviz trace: it does not start with a JSON object", id="top-level-list"),
        pytest.param(lambda d: {**d, "format": "pytorch-trace"}, r"'format' must be 'gradviz-trace', got 'pytorch-trace'", id="format-name"),
        pytest.param(lambda d: {k: v for k, v in d.items() if k != "format"}, r"'format' must be 'gradviz-trace', got None", id="format-missing"),
        pytest.param(lambda d: {**d, "format_version": 3}, r"unsupported format_version 3 \(this gradviz reads versions 1, 2; a newer gradviz wrote this file\)", id="version-3"),
        pytest.param(lambda d: {**d, "format_version": "1"}, r"unsupported format_version '1'", id="version-string"),
        pytest.param(lambda d: {**d, "tensors": []}, r"'tensors' must be an object of columns, got list", id="tensors-not-columns"),
        pytest.param(lambda d: _set(d, ["tensors", "id"], 7), r"tensors\.id must be a list \(one value per record\), got int", id="column-not-list"),
        pytest.param(lambda d: _set(d, ["tensors", "dtype"], d["tensors"]["dtype"][:-1]), r"tensors\.dtype holds \d+ values, the other fields \d+", id="short-column"),
        pytest.param(lambda d: _set(d, ["tensors", "colour"], ["red"] * len(d["tensors"]["id"])), r"'tensors' has unknown field\(s\) \['colour'\]", id="unknown-tensor-field"),
        pytest.param(lambda d: _drop(d, ["tensors", "dtype"]), r"tensors\.dtype is missing", id="missing-field"),
        pytest.param(lambda d: _set(d, ["tensors", "grad_fn", 1], "n99"), r"tensor t1 points at unknown node 'n99'", id="dangling-node"),
        pytest.param(lambda d: _set(d, ["tensors", "storage", 1], "s99"), r"unknown storage 's99'", id="dangling-storage"),
        pytest.param(lambda d: _set(d, ["nodes", "next", 0], ["n42"]), r"node n0 points at unknown node 'n42'", id="dangling-next"),
        pytest.param(lambda d: _set(d, ["nodes", "saved", 0, 0, 1], "t77"), r"node n0 saved unknown tensor 't77'", id="dangling-saved"),
        pytest.param(lambda d: _set(d, ["events", "versions", 1, 0, 0], "t55"), r"unknown tensor 't55'", id="dangling-version-change"),
        pytest.param(lambda d: _set(d, ["version_counters", "tensors", 0], ["t66"]), r"version counter v0 lists unknown tensor 't66'", id="dangling-counter"),
        pytest.param(lambda d: _set(d, ["events", "kind", 0], "explode"), r"events\[0\]\.kind must be one of 'data_get', .*, got 'explode'", id="unknown-event-kind"),
        pytest.param(lambda d: _set(d, ["events", "location", 0], 99), r"events\[0\]\.location must be an index into 'locations' \(0 to \d+\), got int", id="bad-location"),
        pytest.param(lambda d: _set(d, ["locations", 0], {"file": 3, "line": "x"}), r"locations\[0\] must be \[file, line, code\]", id="bad-location-entry"),
        pytest.param(lambda d: _set(d, ["tensors", "byte_range", 0], [0]), r"tensors\[0\]\.byte_range must be a list of 2 values", id="bad-byte-range"),
        pytest.param(lambda d: {**d, "sources": {"a.py": 3}}, r"sources\.a\.py must be a string, got int", id="bad-sources"),
        pytest.param(lambda d: {**d, "held_at_end": {"t88": "names"}}, r"held_at_end names unknown tensor 't88'", id="dangling-held"),
        pytest.param(lambda d: {**d, "held_at_end": {"t0": "graph"}}, r"held_at_end\['t0'\] must be 'names' or 'objects', got 'graph'", id="bad-held-kind"),
        pytest.param(lambda d: {**d, "gone_untraced": {"t88": 3}}, r"gone_untraced names unknown tensor 't88'", id="dangling-gone"),
        pytest.param(lambda d: {**d, "untraced_kin": {"t88": 2}}, r"untraced_kin names unknown tensor 't88'", id="dangling-kin"),
        pytest.param(lambda d: {**d, "untraced_kin": {"t0": 0}}, r"untraced_kin\['t0'\] must be a positive count, got 0", id="bad-kin-count"),
        pytest.param(lambda d: _set(d, ["events", "data", 0], {"extra": _nested(200)}), r"events\[0\]\.data\S* holds a value of unsupported type", id="nested-junk-in-field"),
    ],
)
def test_bad_file_names_the_problem(valid: dict[str, Any], tmp_path: Path, break_it, message: str) -> None:
    broken = break_it(copy.deepcopy(valid))
    with pytest.raises(ValueError, match=message) as raised:
        load_dict(broken, tmp_path)
    assert str(raised.value).startswith(str(tmp_path / "trace.json"))  # the message names the file too



@pytest.mark.parametrize(
    "field",
    ["events", "ops", "exception", "sources", "internal_errors", "script", "torch_version", "tensors", "storages",
     "version_counters", "nodes", "locations"],
)
def test_a_required_field_left_out_is_refused_by_name(valid: dict[str, Any], tmp_path: Path, field: str) -> None:
    """A file without its events (or ops, exception...) is not an empty trace with "no problems found"."""
    broken = {k: v for k, v in valid.items() if k != field}
    with pytest.raises(ValueError) as raised:
        load_dict(broken, tmp_path)
    assert str(raised.value) == (f"{tmp_path / 'trace.json'}: '{field}' is missing (required in format version 2; "
                                 "docs/trace-format.md lists the optional fields)")


def test_the_optional_fields_may_be_left_out(valid: dict[str, Any], tmp_path: Path) -> None:
    optional = ["file_labels", "internal_error_count", "window", "ended", "held_at_end", "untraced_kin",
                "gone_untraced", "view", "findings"]
    loaded = load_dict({k: v for k, v in valid.items() if k not in optional}, tmp_path)
    assert (loaded.file_labels, loaded.window, loaded.ended, loaded.held_at_end, loaded.untraced_kin,
            loaded.gone_untraced) == ({}, None, None, {}, {}, {})
    assert [e.kind for e in loaded.events] == [e.kind for e in Trace.loads(json.dumps(valid)).events]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (3, "unsupported format_version 3 (this gradviz reads versions 1, 2; a newer gradviz wrote this file)"),
        (0, "unsupported format_version 0 (this gradviz reads versions 1, 2)"),
        (-1, "unsupported format_version -1 (this gradviz reads versions 1, 2)"),
        ("3", "unsupported format_version '3' (this gradviz reads versions 1, 2)"),
        (None, "unsupported format_version None (this gradviz reads versions 1, 2)"),
    ],
)
def test_only_a_higher_version_is_said_to_come_from_a_newer_gradviz(valid: dict[str, Any], tmp_path: Path,
                                                                     version: Any, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        load_dict({**valid, "format_version": version}, tmp_path)
    assert str(raised.value) == f"{tmp_path / 'trace.json'}: {message}"
    with pytest.raises(ValueError) as raised:
        load_dict({k: v for k, v in valid.items() if k != "format_version"}, tmp_path)
    assert str(raised.value) == f"{tmp_path / 'trace.json'}: 'format_version' is missing"
    # an unknown field is not a newer version either
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['colour'\] at the top level$"):
        load_dict({**valid, "colour": "red"}, tmp_path)

def test_deeply_nested_document(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ValueError, match="deep.json"):
        Trace.load(path)


def test_unknown_top_level_field(valid: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown field.*'extras'"):
        load_dict({**valid, "extras": {"x": 1}}, tmp_path)


@pytest.mark.parametrize("version", [True, 1.0])
def test_format_version_must_be_an_integer(valid: dict[str, Any], tmp_path: Path, version: Any) -> None:
    with pytest.raises(ValueError, match="format_version"):
        load_dict({**valid, "format_version": version}, tmp_path)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["tensors", "shape", 0], "oops", "shape"),
        (["tensors", "requires_grad", 0], ["yes"], "requires_grad"),
        (["events", "seq", 0], "1", "seq"),
        (["nodes", "next", 0], "n1", "next"),
        (["storages", "nbytes", 0], None, "nbytes"),
        (["ops", "inputs", 0], None, "inputs"),
        (["nodes", "next", 0], None, "next"),
        (["nodes", "next", 0], [[1]], "next"),
        (["version_counters", "tensors", 0], None, "tensors"),
        (["events", "tensor", 0], {}, "tensor"),
        (["events", "versions", 1, 0, 0], [], "versions"),
        (["tensors", "grad_fn", 1], [], "grad_fn"),
    ],
    ids=lambda v: ".".join(map(str, v)) if isinstance(v, list) and v and isinstance(v[0], str) and v[0] != "yes" else None,
)
def test_wrong_field_types(valid: dict[str, Any], tmp_path: Path, path: list[Any], value: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        load_dict(_set(copy.deepcopy(valid), path, value), tmp_path)


# ---------------------------------------------------------------------------------------------- fuzzing
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)



def test_version_1_files_from_before_internal_errors_and_file_labels_still_load() -> None:
    """The first version-1 writers left out `internal_errors` and `file_labels`: those files keep loading."""
    data = json.loads(V1_FILE.read_text(encoding="utf-8"))
    del data["internal_errors"], data["file_labels"]
    old = Trace.from_dict(data)
    assert (old.internal_errors, old.file_labels) == ([], {})
    assert [f.kind.value for f in gradviz.diagnose(old)] == ["silently_corrupted_saved_tensor"]


@pytest.mark.parametrize("field", ["events", "ops", "exception", "sources", "script", "torch_version"])
def test_a_version_1_file_without_a_field_every_version_1_writer_wrote_is_refused(field: str) -> None:
    data = json.loads(V1_FILE.read_text(encoding="utf-8"))
    del data[field]
    with pytest.raises(ValueError, match=rf"^'{field}' is missing \(required in format version 1;"):
        Trace.from_dict(data)

@pytest.mark.slow  # hundreds of traces loaded, diagnosed and drawn
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_corruption_loads_or_gives_value_error(valid: dict[str, Any], data: st.DataObject) -> None:
    """Replace, drop or add one thing anywhere in a real trace: loading succeeds or raises ValueError, nothing else."""
    broken = copy.deepcopy(valid)
    container, key = _random_slot(broken, data)
    action = data.draw(st.sampled_from(["replace", "drop", "add"]))
    if action == "replace":
        container[key] = data.draw(_json_values)
    elif action == "drop":
        del container[key]
    elif isinstance(container, dict):
        container[data.draw(st.text(max_size=6))] = data.draw(_json_values)
    else:
        container.append(data.draw(_json_values))
    text = json.dumps(broken)
    try:
        loaded = Trace.loads(text)
    except ValueError as exc:
        assert str(exc).startswith("<string>")
        return
    # whatever loads must survive another round trip, the analysis and every view
    assert Trace.loads(loaded.to_json()).to_dict() == loaded.to_dict()
    _use(loaded)


_ids = st.sampled_from(["t0", "t1", "t3", "t99", "n0", "n1", "n99", "s0", "s99", "v0", "v99", "", "fresh", "ok"])


@pytest.mark.slow  # hundreds of traces loaded, diagnosed and drawn
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_field_value_loads_or_gives_value_error(seed_traces: dict[str, Trace], data: st.DataObject) -> None:
    """One value of one record replaced (ids that exist or not, wrong types), event data included: loading raises
    ValueError, or the trace diagnoses and renders."""
    name = data.draw(st.sampled_from(sorted(seed_traces)))
    broken = seed_traces[name].to_dict()
    table = data.draw(st.sampled_from(["tensors", "storages", "version_counters", "nodes", "ops", "events"]))
    column = data.draw(st.sampled_from(sorted(broken[table])))
    values = broken[table][column]
    if not values:
        return
    index = data.draw(st.integers(0, len(values) - 1))
    value = data.draw(_ids | _json_values | st.lists(_ids, max_size=3) | st.lists(st.integers(-2, 40), max_size=3))
    target = values[index]
    if isinstance(target, dict) and target and data.draw(st.booleans()):  # event data: one key of it
        target[data.draw(st.sampled_from(sorted(target)))] = value
    elif isinstance(target, list) and target and data.draw(st.booleans()):  # one item of a list field
        target[data.draw(st.integers(0, len(target) - 1))] = value
    else:
        values[index] = value
    try:
        loaded = Trace.loads(json.dumps(broken))
    except ValueError as exc:
        assert str(exc).startswith("<string>: ")
        return
    _use(loaded)


def _use(trace: Trace) -> None:
    """Everything a user does with a loaded trace that needs no `dot`: findings, each view's DOT, the report."""
    findings = gradviz.diagnose(trace)
    for view in ("graph", "memory", "timeline"):
        assert render(trace, view=view, findings=findings).source.startswith("digraph")
    assert "<html" in render(trace, view="report", findings=findings).html().lower()
    for view in ("graph", "memory", "timeline"):  # what `-o x.dot` writes: UTF-8, whatever the trace holds
        render(trace, view=view, findings=findings).source.encode("utf-8")


# ---------------------------------------------------------------------------------------------- event data, text
@pytest.mark.parametrize(
    ("kind", "key", "value", "message"),
    [
        ("inplace_write", "byte_range", 5, r"events\[\d+\]\.data\.byte_range must be a list of 2 values \[start, stop\).*got 5"),
        ("inplace_write", "byte_range", [8, 4], r"data\.byte_range must be a list of 2 values \[start, stop\) with 0 <= start <= stop"),
        ("inplace_write", "storage", "s404", r"data\.storage names unknown storage 's404'"),
        ("inplace_write", "counter", 3, r"data\.counter names unknown counter 3"),
        ("inplace_write", "grad_fn", "n404", r"data\.grad_fn names unknown node 'n404'"),
        ("backward", "roots", 5, r"data\.roots must be a list, got int"),
        ("backward", "roots", ["t404"], r"data\.roots\[0\] names unknown tensor 't404'"),
        ("backward", "reached_nodes", ["n0", "n404"], r"data\.reached_nodes\[1\] names unknown node 'n404'"),
        ("backward", "reached_leaves", [None], r"data\.reached_leaves\[0\] names unknown tensor None"),
        ("backward", "retain_graph", "yes", r"data\.retain_graph must be true or false, got str"),
        ("backward", "outcome", "maybe", r"data\.outcome must be 'ok' or 'error', got 'maybe'"),
        ("backward", "error", "boom", r"data\.error must be an object \{type, message\}"),
        ("data_get", "source_grad_fn", "n404", r"data\.source_grad_fn names unknown node 'n404'"),
        ("data_get", "expression", ["out"], r"data\.expression must be a string, got list"),
    ],
)
def test_event_data_is_checked_per_kind(seed_traces: dict[str, Trace], tmp_path: Path, kind: str, key: str, value: Any, message: str) -> None:
    data = _with_event(seed_traces, kind)
    index = data["events"]["kind"].index(kind)
    data["events"]["data"][index][key] = value
    with pytest.raises(ValueError, match=message):
        load_dict(data, tmp_path)


def test_optimizer_step_data_is_checked(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace() as t:
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
    data = t.to_dict()
    index = data["events"]["kind"].index("optimizer_step")
    step = data["events"]["data"][index]
    assert len(step["grads"]) == 2  # weight and bias
    for key, value, message in [
        ("changed", ["t404"], r"data\.changed\[0\] names unknown tensor 't404'"),
        ("grads", {"t404": "fresh"}, r"data\.grads names unknown tensor 't404'"),
        ("grads", {next(iter(step["grads"])): "lots"}, r"data\.grads\.t\d+ must be one of \['fresh', 'none', 'nonzero', 'written', 'zero'\], got 'lots'"),
        ("optimizer", None, r"data\.optimizer must be a string, got null"),
    ]:
        broken = copy.deepcopy(data)
        broken["events"]["data"][index][key] = value
        with pytest.raises(ValueError, match=message):
            load_dict(broken, tmp_path)


@pytest.mark.parametrize("kind", ["data_get", "inplace_write"])
def test_events_that_act_on_a_tensor_must_name_one(seed_traces: dict[str, Trace], tmp_path: Path, kind: str) -> None:
    data = _with_event(seed_traces, kind)
    data["events"]["tensor"][data["events"]["kind"].index(kind)] = None
    with pytest.raises(ValueError, match=rf"events\[\d+\]\.tensor must name a tensor for a {kind} event"):
        load_dict(data, tmp_path)


def test_unknown_event_data_keys_are_kept(valid: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(valid)
    data["events"]["data"][0]["note"] = {"from": "a newer recorder", "n": [1, 2]}
    assert load_dict(data, tmp_path).events[0].data["note"] == {"from": "a newer recorder", "n": [1, 2]}


@pytest.mark.parametrize("where", ["names", "code", "sources", "message"])
def test_lone_surrogates_load_back_and_are_drawn_escaped(valid: dict[str, Any], tmp_path: Path, where: str) -> None:
    """Text that is not valid Unicode (an undecodable file name) is saved as a JSON escape and loads back as the same
    text; every view writes it escaped, so a loaded trace with one still diagnoses and renders."""
    data = copy.deepcopy(valid)
    bad = "x\udc80y"
    if where == "names":
        data["tensors"]["names"][0] = [bad]
    elif where == "code":
        data["locations"][0][2] = bad
    elif where == "sources":
        data["sources"][data["script"]] = bad
    else:
        data["exception"]["message"] = bad
    loaded = Trace.loads(json.dumps(data))
    loaded.to_json(tmp_path / "t.json")
    assert b"\\udc80" in (tmp_path / "t.json").read_bytes()
    assert Trace.load(tmp_path / "t.json") == loaded
    _use(loaded)


def test_surrogate_pairs_are_fine(valid: dict[str, Any]) -> None:
    data = copy.deepcopy(valid)
    data["tensors"]["names"][0] = ["\U0001f600"]
    assert Trace.loads(json.dumps(data)).tensors["t0"].names == ["\U0001f600"]


def test_size_limit(valid: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(valid), encoding="utf-8")
    size = path.stat().st_size
    assert Trace.load(path, max_bytes=size).to_dict() == Trace.loads(path.read_text()).to_dict()
    with pytest.raises(ValueError, match=rf"trace\.json is larger than the limit of {size - 1} bytes for a trace file; .*GRADVIZ_MAX_TRACE_SIZE=2G .*max_bytes="):
        Trace.load(path, max_bytes=size - 1)
    assert Trace.load(path, max_bytes=None).script == valid["script"]


def test_dev_zero_is_refused_before_a_byte_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused by what the file is (a device), without opening it: no time limit to tune to the machine's speed."""
    import builtins

    opened: list[str] = []
    real_open = builtins.open

    def watched_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", watched_open)
    with pytest.raises(ValueError, match=r"cannot read trace file '/dev/zero': not a regular file \(a device\)"):
        Trace.load("/dev/zero")
    monkeypatch.undo()
    assert "/dev/zero" not in opened


def test_endless_json_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"format": "' + "x" * 3_000_000 + '"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"big\.json is larger than the limit of 2 MiB"):
        Trace.load(path, max_bytes=2 * 2**20)


def test_binary_after_a_brace_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weird.json"
    path.write_bytes(b"{" + b"\x00" * 1000)
    with pytest.raises(ValueError, match=r"weird\.json is not a gradviz trace: it holds binary data \(NUL bytes\)"):
        Trace.load(path)


# ---------------------------------------------------------------------------------------------- version 1 files
V1_FILE = Path(__file__).parent / "data" / "trace_v1.json"


def test_version_1_files_still_load(tmp_path: Path) -> None:
    assert json.loads(V1_FILE.read_text(encoding="utf-8"))["format_version"] == 1
    old = Trace.load(V1_FILE)
    write = old.events_of("inplace_write")[0]
    assert [(v.tensor, v.before, v.after) for v in write.versions] == [(old.tensor("c").id, 0, 1), (old.tensor("out").id, 0, 0)]
    assert write.location.line == 24 and write.location.code.startswith("c.zero_()")
    assert old.tensor("c").byte_range == (0, 12)
    assert [f.kind.value for f in gradviz.diagnose(old)] == ["silently_corrupted_saved_tensor"]
    # saved again, it is a version 2 file holding the same trace
    old.to_json(tmp_path / "v2.json")
    assert json.loads((tmp_path / "v2.json").read_text())["format_version"] == 2
    assert Trace.load(tmp_path / "v2.json") == old


@pytest.mark.slow  # hundreds of traces loaded, diagnosed and drawn
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_corruption_of_a_version_1_file_loads_or_gives_value_error(data: st.DataObject) -> None:
    broken = json.loads(V1_FILE.read_text(encoding="utf-8"))
    container, key = _random_slot(broken, data)
    action = data.draw(st.sampled_from(["replace", "drop"]))
    if action == "replace":
        container[key] = data.draw(_ids | _json_values)
    else:
        del container[key]
    try:
        loaded = Trace.loads(json.dumps(broken))
    except ValueError as exc:
        assert str(exc).startswith("<string>: ")
        return
    _use(loaded)


def test_the_old_render_json_wrapper_still_loads(tmp_path: Path) -> None:
    """`gradviz render -o x.json` used to write {view, trace, findings} around a version-1 trace."""
    trace = json.loads(V1_FILE.read_text(encoding="utf-8"))
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"view": "graph", "trace": trace, "findings": [{"kind": "cut_edge"}]}), encoding="utf-8")
    assert Trace.load(path) == Trace.load(V1_FILE)
    path.write_text(json.dumps({"view": "graph", "trace": {"format": "other"}}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"old\.json: 'format' must be 'gradviz-trace', got 'other'"):
        Trace.load(path)


def test_version_1_errors_name_the_record() -> None:
    data = json.loads(V1_FILE.read_text(encoding="utf-8"))
    data["tensors"][1]["byte_range"] = 5
    with pytest.raises(ValueError, match=r"tensors\[1\]\.byte_range must be a list of 2 values"):
        Trace.from_dict(data)
    data = json.loads(V1_FILE.read_text(encoding="utf-8"))
    del data["tensors"][2]["dtype"]
    with pytest.raises(ValueError, match=r"tensors\[2\] is missing the field 'dtype'"):
        Trace.from_dict(data)
    data = json.loads(V1_FILE.read_text(encoding="utf-8"))
    data["events"][0]["location"]["line"] = "x"
    with pytest.raises(ValueError, match=r"events\[0\]\.location\.line must be an integer, got str"):
        Trace.from_dict(data)


# ---------------------------------------------------------------------------------------------- helpers
def _with_event(seed_traces: dict[str, Trace], kind: str) -> dict[str, Any]:
    for trace in seed_traces.values():
        data = trace.to_dict()
        if kind in data["events"]["kind"]:
            return copy.deepcopy(data)
    raise LookupError(kind)


def _walk(data: Any, path: list[Any]) -> Any:
    for key in path:
        data = data[key]
    return data


def _set(data: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    _walk(data, path[:-1])[path[-1]] = value
    return data


def _drop(data: dict[str, Any], path: list[Any]) -> dict[str, Any]:
    del _walk(data, path[:-1])[path[-1]]
    return data


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"x": [value]}
    return value


def _random_slot(data: Any, draw: st.DataObject) -> tuple[Any, Any]:
    """A (container, key) pair somewhere inside `data`, chosen by walking down a random number of levels."""
    container, key = data, draw.draw(st.sampled_from(sorted(data)))
    while True:
        value = container[key]
        keys = sorted(value) if isinstance(value, dict) else list(range(len(value))) if isinstance(value, list) else []
        if not keys or draw.draw(st.booleans()):
            return container, key
        container, key = value, draw.draw(st.sampled_from(keys))


def test_step_window_round_trips_and_is_checked(tmp_path):
    """The step window (a small record at the top level) is written as an object and read back field by field."""
    import json

    import torch

    import gradviz

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(steps=2) as t:
        for _ in range(5):
            opt.zero_grad()
            model(torch.randn(4, 3)).sum().backward()
            opt.step()
    assert t.window is not None and t.window.traced == 2 and t.window.closed
    document = json.loads(t.to_json())
    assert document["window"]["limit"] == 2 and document["window"]["unit"] == "step"
    assert gradviz.Trace.from_dict(json.loads(t.to_json())).window == t.window
    document["window"]["traced"] = "two"
    with pytest.raises(ValueError, match=r"window\.traced must be an integer"):
        gradviz.Trace.from_dict(document)
