"""Where the program's source stores a value with its history: questions about loops and the containers that outlive
them, answered from the syntax tree of the traced file (the graph-kept-alive pass asks them)."""

from __future__ import annotations

import ast
import functools

from ..model import Event, Trace

# calls that put a value into a container that outlives the loop body
_STORE_METHODS = frozenset({"append", "extend", "insert", "add", "appendleft", "put", "setdefault", "update"})
# wrapping a value in these drops its history: storing the result keeps no graph
_DROPS_HISTORY = frozenset({"item", "detach", "float", "int", "tolist", "numpy", "cpu_numpy"})


@functools.lru_cache(maxsize=8)
def _parse(text: str) -> ast.Module | None:
    """A source file's syntax tree (read, never changed: one parse serves every question about one file)."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def in_loop_of(trace: Trace, file: str | None, line: int | None, event: Event) -> bool:
    """Whether `event` happened inside the innermost loop around `line` of `file`."""
    where = event.location
    if file is None or line is None or where is None or where.file != file or file not in trace.sources:
        return False
    tree = _parse(trace.sources[file])
    if tree is None:
        return False
    loops = [
        node for node in ast.walk(tree)
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) and node.lineno <= line <= (node.end_lineno or 0)
    ]
    if not loops:
        return False
    loop = min(loops, key=lambda n: (n.end_lineno or 0) - n.lineno)
    return loop.lineno <= where.line <= (loop.end_lineno or 0)


def storing_lines(trace: Trace, file: str | None, line: int | None, names: set[str]) -> list[tuple[int, str]]:
    """The statement that stores a value made at `line` (named one of `names`) into a container that outlives
    the loop: `losses.append(loss)`, `history["recon"].append(recon)`, `self.cache = out`."""
    if file is None or line is None or file not in trace.sources:
        return []
    text = trace.sources[file]
    tree = _parse(text)
    if tree is None:
        return []
    made = None
    loops: list[ast.For | ast.While | ast.AsyncFor] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) and node.lineno <= line <= (node.end_lineno or 0):
            loops.append(node)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.lineno <= line <= (node.end_lineno or 0):
            made = node
    if made is not None:
        targets = made.targets if isinstance(made, ast.Assign) else [made.target]
        names = names | {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    scope: ast.AST = min(loops, key=lambda n: (n.end_lineno or 0) - n.lineno) if loops else tree
    lines = text.splitlines()
    found = [(number, lines[number - 1].strip() if 0 < number <= len(lines) else "")
             for number in _stores_in(tree, scope, names, made)]
    if not found and not loops:
        # made inside a function or a module's forward (`outs.append(model(x))`): the one statement in a loop
        # of this file that stores a call's result, if there is exactly one
        calls = [
            node.lineno
            for loop in ast.walk(tree)
            if isinstance(loop, (ast.For, ast.While, ast.AsyncFor))
            for node in ast.walk(loop)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STORE_METHODS
            and any(_stores_call(arg) for arg in node.args)
        ]
        if len(set(calls)) == 1:
            found.append((calls[0], lines[calls[0] - 1].strip() if 0 < calls[0] <= len(lines) else ""))
    return found


def _stores_in(
    tree: ast.AST, scope: ast.AST, names: set[str], made: ast.AST | None, *, follow: bool = True
) -> list[int]:
    """Lines in `scope` that store one of `names` with its history into something that outlives it; a call passing
    one of them to a function of this file (`rec.log(h)`) is followed once into that function's stores
    (`self.history.append(out)`)."""
    found: list[int] = []
    for node in sorted(ast.walk(scope), key=lambda n: getattr(n, "lineno", 0)):
        stored = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STORE_METHODS:
            stored = list(node.args) + [k.value for k in node.keywords]
        elif isinstance(node, ast.Assign) and any(isinstance(t, (ast.Subscript, ast.Attribute)) for t in node.targets):
            stored = [node.value]
        elif isinstance(node, ast.AugAssign) and node is not made:
            stored = [node.value]
        elif isinstance(node, ast.Call) and follow:
            found += _stores_through_call(tree, node, names)
        if stored and any(_carries(value, names) for value in stored):
            found.append(getattr(node, "lineno", 0))  # (a call or an assignment: both have one)
    return found


def _stores_through_call(tree: ast.AST, call: ast.Call, names: set[str]) -> list[int]:
    """The stores inside a function of this file that `call` passes one of `names` to, by position or keyword."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if not called or called in _DROPS_HISTORY:
        return []
    passed = [i for i, arg in enumerate(call.args) if _carries(arg, names)]
    keywords = {k.arg for k in call.keywords if k.arg and _carries(k.value, names)}
    if not passed and not keywords:
        return []
    methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
    found = []
    for define in ast.walk(tree):
        if not isinstance(define, (ast.FunctionDef, ast.AsyncFunctionDef)) or define.name != called:
            continue
        params = [a.arg for a in define.args.posonlyargs + define.args.args]
        if id(define) in methods and isinstance(func, ast.Attribute) and params:
            params = params[1:]  # `obj.log(h)`: `self` is bound
        named = {a.arg for a in define.args.args + define.args.kwonlyargs}
        inner = {params[i] for i in passed if i < len(params)} | (keywords & named)
        if inner:
            found += _stores_in(tree, define, inner, None, follow=False)
    return found


def _stores_call(value: ast.AST) -> bool:
    """A call's result kept as it is (not through `.item()`, `.detach()`, `float()`...)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return called not in _DROPS_HISTORY


def _carries(value: ast.AST, names: set[str]) -> bool:
    """Whether `value` passes one of `names` on with its history (not through `.item()`, `.detach()`, `float()`)."""
    if isinstance(value, ast.Name):
        return value.id in names
    if isinstance(value, ast.Call):
        func = value.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called in _DROPS_HISTORY:
            return False
        parts = list(value.args) + ([func.value] if isinstance(func, ast.Attribute) else [])
        return any(_carries(p, names) for p in parts)
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return any(_carries(v, names) for v in value.elts)
    if isinstance(value, ast.Dict):
        return any(_carries(v, names) for v in value.values if v is not None)
    if isinstance(value, ast.BinOp):
        return _carries(value.left, names) or _carries(value.right, names)
    if isinstance(value, ast.Attribute):
        return value.attr not in ("data", "shape", "dtype", "device") and _carries(value.value, names)
    if isinstance(value, ast.Subscript):
        return _carries(value.value, names)
    return False
