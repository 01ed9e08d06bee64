"""No function in gradviz/ is longer than 60 lines (issue 37: functions a newcomer can read).

A function's length is counted as Python reports it, from its `def` line (decorators excluded) to its last line,
comments and blank lines included; a nested function counts in its own right and within its parent. Ruff has no rule
that counts lines (PLR0915 counts statements, so a 60-line function of long calls passes it): this test is the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gradviz"
LIMIT = 60

#: Functions still over the limit (none now; issue 37): "module.py:Qualified.name". Emptied as
#: they are shortened; an entry that is no longer over the limit fails the test too, so the list only shrinks.
ALLOWED: set[str] = set()


def function_lengths(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines) of every function in `tree`, nested ones and methods included."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            found.append((name, node.end_lineno - node.lineno + 1))  # type: ignore[operator]  # (set by ast.parse)
            found += function_lengths(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            found += function_lengths(node, prefix + node.name + ".")
        else:
            found += function_lengths(node, prefix)
    return found


def too_long() -> dict[str, int]:
    over = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for name, lines in function_lengths(ast.parse(path.read_text(encoding="utf-8"))):
            if lines > LIMIT:
                over[f"{module}:{name}"] = lines
    return over


def test_no_function_over_the_limit() -> None:
    over = {name: lines for name, lines in too_long().items() if name not in ALLOWED}
    assert over == {}, f"functions over {LIMIT} lines (split them into functions with one job each): {over}"


def test_allowed_list_only_names_functions_still_over() -> None:
    assert sorted(ALLOWED - set(too_long())) == []


def test_lengths_count_methods_and_nested_functions() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n\n        return g\n")
    assert function_lengths(tree) == [("A.f", 5), ("A.f.g", 2)]
