"""The page's script as modules: every file of assets/panels/ is inlined once, in order, each in a function of its own
and under 400 lines; the panels keep the panel rule (a panel uses the helpers, the core, the store and itself, and
nothing else; it writes only the store fields it owns); the pure helpers pass their `node --test` unit tests (a
missing node is a skip on a laptop, a failure under CI=true)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import gradviz.explorer
from gradviz.explorer.page import CORE, FILES, HELPERS, PANELS, page_script

HERE = Path(__file__).resolve().parent
PANEL_DIR = Path(gradviz.explorer.__file__).resolve().parent / "assets" / "panels"
NODE_TESTS = (("test_helpers.js", 10), ("test_page_helpers.js", 14))

#: what a panel may name besides `h`, `core`, `store` and its own declarations: the language and the browser
PLATFORM = frozenset(
    ["Array", "Boolean", "Error", "Infinity", "JSON", "Map", "Math", "NaN", "Node", "Number", "Object", "Set", "String", "TypeError", "arguments", "console", "document", "history", "isNaN", "location", "module", "parseFloat", "parseInt", "undefined", "window"])
KEYWORDS = frozenset(
    ["break", "case", "catch", "const", "continue", "default", "delete", "do", "else", "false", "finally", "for", "function", "if", "in", "instanceof", "let", "new", "null", "of", "return", "switch", "this", "throw", "true", "try", "typeof", "var", "void", "while"])
_TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<comment>//[^\n]*|/\*.*?\*/) | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>\d+(?:\.\d+)?(?:e[-+]?\d+)?|\.\d+) | (?P<name>[A-Za-z_$][\w$]*)
  | (?P<punct>=>|===|!==|==|!=|<=|>=|&&|\|\||\+\+|--|\+=|-=|\*=|/=|\.\.\.|[-+*/%<>=!&|^~?:;,.()\[\]{}])
""", re.VERBOSE | re.DOTALL)
_REGEX = re.compile(r"/(?:\\.|\[(?:\\.|[^\]\\\n])*\]|[^/\\\n\[])+/[a-z]*")
_BEFORE_REGEX = frozenset(["(", ",", "=", ":", "[", "!", "&", "|", "?", "{", "}", ";", "return", "typeof", "&&", "||", "=="])


def tokens(text: str) -> list[tuple[str, str]]:
    """The JavaScript of one file as (kind, text) tokens, comments and white space dropped; regular expression
    literals are told from division by the token before them."""
    out: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        if text[at] == "/" and (not out or out[-1][1] in _BEFORE_REGEX) and text[at:at + 2] not in ("//", "/*"):
            literal = _REGEX.match(text, at)
            if literal:
                out.append(("regex", literal.group()))
                at = literal.end()
                continue
        match = _TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"cannot read the script at {text[at:at + 40]!r}")
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            out.append((kind, match.group()))
        at = match.end()
    return out


def declared(toks: list[tuple[str, str]]) -> set[str]:
    """The names a file declares anywhere in it: functions, their parameters, `var` names, `catch` names."""
    names: set[str] = set()
    for k, (kind, text) in enumerate(toks):
        if text == "function":
            j = k + 1
            if toks[j][0] == "name":
                names.add(toks[j][1])
                j += 1
            while toks[j][1] != ")":
                if toks[j][0] == "name":
                    names.add(toks[j][1])
                j += 1
        elif text == "catch":
            names.add(toks[k + 2][1])
        elif text == "var":
            depth, j, expect = 0, k + 1, True
            while j < len(toks) and not (depth == 0 and toks[j][1] == ";"):
                t = toks[j][1]
                if expect and depth == 0 and toks[j][0] == "name":
                    names.add(t)
                    if toks[j + 1][1] in ("in", "of"):
                        break
                depth += t in "([{" and len(t) == 1
                depth -= t in ")]}" and len(t) == 1
                if depth < 0:
                    break
                expect = depth == 0 and t == ","
                j += 1
    return names


def used(toks: list[tuple[str, str]]) -> set[str]:
    """The names a file reads or calls: not a property (`x.name`), not an object literal's key (`{name: ...}`)."""
    out: set[str] = set()
    for k, (kind, text) in enumerate(toks):
        if kind != "name" or text in KEYWORDS:
            continue
        before = toks[k - 1][1] if k else ""
        after = toks[k + 1][1] if k + 1 < len(toks) else ""
        if before == "." or (after == ":" and before in ("{", ",")):
            continue
        out.add(text)
    return out


def store_tables() -> dict[str, dict[str, str]]:
    """The store's fields and requests with their owners, the helpers' names and the core's (what a panel may use)."""
    node = _node()
    helpers = [str(PANEL_DIR / name) for name in HELPERS]
    program = (f"const s = require({str(PANEL_DIR / 'store.js')!r}); const h = {{}};"
               f"for (const f of {json.dumps(helpers)}) Object.assign(h, require(f));"
               "console.log(JSON.stringify([s.FIELDS, s.REQUESTS, Object.fromEntries(Object.keys(h).map(k => [k, k]))]));")
    done = subprocess.run([node, "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    fields, requests, helper_names = json.loads(done.stdout)
    toks = tokens((PANEL_DIR / "core.js").read_text(encoding="utf-8"))
    at = max(k for k, (_, t) in enumerate(toks) if t == "return" and toks[k + 1][1] == "{")  # createCore's last return
    core: dict[str, str] = {}
    depth = 0
    for k in range(at + 1, len(toks)):
        text = toks[k][1]
        depth += text in ("{", "(", "[")
        depth -= text in ("}", ")", "]")
        if depth == 0:
            break
        if depth == 1 and toks[k][0] == "name" and toks[k + 1][1] == ":" and toks[k - 1][1] in ("{", ","):
            core[text] = text
    return {"fields": fields, "requests": requests, "h": helper_names, "core": core}


def panel_violations(folder: Path, names: tuple[str, ...], tables: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """What each panel file in `folder` does against the panel rule: one factory `<name>Panel(h, core, store)` and its
    export, nothing else at the top level; no name but h, core, store, its own and the platform's; of the store,
    only fields and requests that exist, written (`set`) and answered only where this panel owns them."""
    out: dict[str, list[str]] = {}
    for file in names:
        panel = file[:-3]
        toks = tokens((folder / file).read_text(encoding="utf-8"))
        wrong = []
        factory = f"{panel}Panel"
        head = [t for _, t in toks[:9]]
        if head != ["function", factory, "(", "h", ",", "core", ",", "store", ")"]:
            wrong.append(f"does not start as the factory `function {factory}(h, core, store)`")
        tail = [t for _, t in toks[-9:]]
        if tail != ["module", ".", "exports", "=", "{", factory, ":", factory, "}"]:
            tail = [t for _, t in toks[-10:-1]]
        if tail != ["module", ".", "exports", "=", "{", factory, ":", factory, "}"]:
            wrong.append(f"does not end by exporting {factory} alone")
        outside = sorted(used(toks) - declared(toks) - PLATFORM - {"h", "core", "store"})
        if outside:
            wrong.append("uses names of other files: " + ", ".join(outside))
        for k, (_, text) in enumerate(toks[:-2]):
            if (text in ("h", "core") and toks[k + 1][1] == "." and (k == 0 or toks[k - 1][1] != ".")
                    and toks[k + 2][1] not in tables[text]):
                wrong.append(f"{text}.{toks[k + 2][1]}: not in {'the helpers' if text == 'h' else 'the core'}")
        for k, (_, text) in enumerate(toks[:-4]):
            if text != "store" or toks[k + 1][1] != ".":
                continue
            if toks[k + 3][1] != "(":
                wrong.append(f"store.{toks[k + 2][1]} used other than called by name")
                continue
            method, argument = toks[k + 2][1], toks[k + 4]
            if argument[0] != "string":
                wrong.append(f"store.{method} with a computed name")
                continue
            key = argument[1][1:-1]
            table = tables["fields"] if method in ("get", "set", "on") else tables["requests"]
            if key not in table:
                wrong.append(f"store.{method}({key!r}): no such {'field' if table is tables['fields'] else 'request'}")
            elif method in ("set", "answer") and table[key] != panel:
                wrong.append(f"store.{method}({key!r}): {table[key]} owns it")
        if wrong:
            out[file] = wrong
    return out


def test_every_file_is_inlined_once_in_order_in_a_function_of_its_own_and_under_400_lines() -> None:
    files = sorted(p.name for p in PANEL_DIR.glob("*.js"))
    assert sorted(FILES) == files and len(set(FILES)) == len(FILES)
    assert FILES[0] == "helpers.js" and FILES[-1] == "start.js"
    lengths = {name: len((PANEL_DIR / name).read_text(encoding="utf-8").splitlines()) for name in FILES}
    assert max(lengths.values()) < 400, lengths
    script = page_script()
    positions = [script.index((PANEL_DIR / name).read_text(encoding="utf-8").splitlines()[1]) for name in FILES]
    assert positions == sorted(positions)
    assert script.startswith('(function () {\n"use strict";\nvar modules = {};\n') and script.endswith("})();\n")
    for name in FILES:  # each file in a function of its own: its names are not the other files' names
        assert f'}})(modules["{name[:-3]}"] = {{ exports: {{}} }});\n' in script
        assert (PANEL_DIR / name).read_text(encoding="utf-8").startswith("// @ts-check\n"), name
    # the page carries the code, not what only the type checker reads: no @ts-check, no whole-line JSDoc
    assert "@ts-check" not in script and "@typedef" not in script and "\n  /**" not in script
    assert "/** @type {any} */ (T[s.t] || {})" in script  # a cast inside a line stays


def test_a_jsdoc_block_followed_by_code_on_its_line_is_refused() -> None:
    from gradviz.explorer.page import _without_types

    assert _without_types("// @ts-check\n/** a\n * b */\nvar a = 1; /** c */\n") == "var a = 1; /** c */\n"
    with pytest.raises(ValueError, match="code after a JSDoc block"):
        _without_types("/** a\n */ var b = 2;\n")


def test_every_panel_keeps_the_panel_rule() -> None:
    assert panel_violations(PANEL_DIR, PANELS, store_tables()) == {}


def test_the_panel_rule_catches_a_panel_that_reaches_past_its_interface(tmp_path: Path) -> None:
    """The rule reads the script: a shared global, another panel's function, a field it does not own, are caught."""
    good = (PANEL_DIR / "findings.js").read_text(encoding="utf-8")
    cases = {
        "state.finding = i;": "uses names of other files: state",
        "redraw();": "uses names of other files: redraw",
        'store.set("pos", 3);': "store.set('pos'): time owns it",
        'store.ask("graph.nothing");': "store.ask('graph.nothing'): no such request",
        'var a = 1, b = /x/g.test("x") ? c : 2;': "uses names of other files: c",
        "core.state.pos = 1;": "core.state: not in the core",
        "h.redraw();": "h.redraw: not in the helpers",
        "var ask = store.ask;": "store.ask used other than called by name",
    }
    tables = store_tables()
    for line, message in cases.items():
        (tmp_path / "findings.js").write_text(good.replace("  function draw() {", f"  {line}\n  function draw() {{"),
                                             encoding="utf-8")
        assert panel_violations(tmp_path, ("findings.js",), tables) == {"findings.js": [message]}, line
    (tmp_path / "findings.js").write_text("var F = [];\n" + good, encoding="utf-8")
    assert "does not start as the factory" in panel_violations(tmp_path, ("findings.js",), tables)["findings.js"][0]


def test_helpers_and_core_name_no_panel() -> None:
    """The floors below the panels never reach up: helpers and core files name no panel factory and ask nothing."""
    factories = {f"{name[:-3]}Panel" for name in PANELS}
    for name in (*HELPERS, *CORE):
        toks = tokens((PANEL_DIR / name).read_text(encoding="utf-8"))
        assert not (used(toks) & factories), name
        assert "ask" not in {t for _, t in toks} or name == "store.js", name


def test_the_page_script_parses(tmp_path: Path) -> None:
    node = _node()
    (tmp_path / "page.js").write_text(page_script(), encoding="utf-8")
    done = subprocess.run([node, "--check", str(tmp_path / "page.js")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("script", "count"), NODE_TESTS)
def test_the_pure_helpers_pass_node_test(script: str, count: int) -> None:
    node = _node()
    done = subprocess.run([node, "--test", str(HERE / script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout and f"# pass {count}\n" in done.stdout, done.stdout  # every test ran, none failed


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("node is not installed: CI must run the page's JavaScript unit tests")
        pytest.skip("node is not installed (the page's JavaScript unit tests need it)")
    return node


def test_the_page_spells_an_unknown_version_as_the_text_does() -> None:
    """One spelling of "unknown" in every medium: the page's versionText(null) is analysis' UNKNOWN_VERSION."""
    from gradviz.analysis.findings import UNKNOWN_VERSION, version_text

    node = _node()
    helpers = PANEL_DIR / "helpers.js"
    program = f"const h = require({str(helpers)!r}); console.log(JSON.stringify([h.versionText(null), h.versionText(3)]));"
    done = subprocess.run([node, "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [UNKNOWN_VERSION, version_text(3)] == ["v?", "v3"]


def typedef_keys(text: str, name: str) -> set[str]:
    """The property names of the JSDoc object type `@typedef {{ ... }} name` in `text`, at its top level."""
    end = text.index(f"}} {name}\n")
    start = text.rindex("@typedef {{", 0, end) + len("@typedef {{")
    body = re.sub(r"\n\s*\*", " ", text[start:end])
    keys, depth = set(), 0
    for match in re.finditer(r"[{}\[\]()<>]|(\w+)\??:", body):
        token = match.group()
        if token in "{[(<":
            depth += 1
        elif token in "}])>":
            depth -= 1
        elif depth == 0:
            keys.add(match.group(1))
    return keys


def test_the_page_types_name_every_field_of_the_document_schema() -> None:
    """core.js's JSDoc types of the document name each field document.schema.json has, object by object."""
    schema = json.loads((PANEL_DIR.parents[1] / "document.schema.json").read_text(encoding="utf-8"))
    core = (PANEL_DIR / "core.js").read_text(encoding="utf-8")
    types = {"GvDocument": schema["properties"]}
    for kind in ("node", "group", "finding", "event", "tensor", "file"):
        types["Gv" + kind.capitalize()] = schema["$defs"][kind]["properties"]
    for name, properties in types.items():
        missing = set(properties) - typedef_keys(core, name)
        assert not missing, f"{name} does not name {sorted(missing)}"
    assert typedef_keys(core, "GvSaved") >= set(schema["$defs"]["node"]["properties"]["saved"]["items"]["properties"])
