"""Imports point down only, and no module takes part in an import circle.

Every module of the package has one layer below; a module imports (at any depth: function-level
imports count as much as module-level ones) only modules of its own layer or of a layer listed
before it, and the modules import each other in no circle, whatever their layers. There is no
list of exceptions. The layers, from the bottom:

- the engine core, in the order it is built: the base utilities (the profiler and the dtypes); the
  Tensor record and pytrees; the
  Function contract and the one seam that runs a primitive; the recorder (trace) and weak
  numbers; the compiled program, the memory model and the safetensors codec; tape files; the
  frozen Tape;
- ``ops``: every primitive, its rules and traits (a rule never calls a transform);
- the transforms (reverse and forward mode, vmap, jit, checkpoint, custom rules, implicit
  differentiation, linear transposition, debug callbacks, filtered transforms);
- the NumPy layer (``tapegrad.numpy`` with ``.at``, the array API namespace, NumPy's protocols,
  and :mod:`tapegrad.numpy.methods`, the one module that attaches Tensor's methods);
- ``scipy``; ``random`` (keys and samplers, written with the NumPy and SciPy layers);
  ``testing`` beside them; then ``nn`` and ``optim`` (which never import each other) and
  ``distributed``.

The package's ``__init__`` is the public surface that imports them all, and has no layer.
"""

import ast
import fnmatch
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "tapegrad"

LAYERS = [
    ("base", ["tapegrad.core", "tapegrad.core.backend", "tapegrad.core.lazy",
              "tapegrad.core._keywords", "tapegrad.log", "tapegrad.core.profiler",
              "tapegrad.core.dtypes"]),
    ("tensor", ["tapegrad.core.tensor", "tapegrad.core.tree"]),
    ("function", ["tapegrad.core.function"]),
    ("trace", ["tapegrad.core.trace", "tapegrad.core.weak", "tapegrad.core.subprogram"]),
    ("program", ["tapegrad.core.program", "tapegrad.core.fusion", "tapegrad.core.memory",
                 "tapegrad.io"]),
    ("export", ["tapegrad.core.export"]),
    ("tape", ["tapegrad.core.tape"]),
    ("ops", ["tapegrad.ops", "tapegrad.ops.*"]),
    ("transforms", ["tapegrad.transforms", "tapegrad.transforms.*"]),
    ("numpy", ["tapegrad.numpy", "tapegrad.numpy.*"]),
    ("scipy", ["tapegrad.scipy", "tapegrad.scipy.*"]),
    ("random", ["tapegrad.random", "tapegrad.random.*"]),
    ("testing", ["tapegrad.testing", "tapegrad.testing.*", "tapegrad.flatten_util",
                 "tapegrad.mixed_precision"]),
    ("models", ["tapegrad.nn", "tapegrad.nn.*", "tapegrad.optim", "tapegrad.optim.*"]),
    ("distributed", ["tapegrad.distributed"]),
]  # fmt: skip
CORE = [name for name, _ in LAYERS[:LAYERS.index(next(x for x in LAYERS if x[0] == "ops"))]]


def _module(path: pathlib.Path) -> str:
    module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    return module[: -len(".__init__")] if module.endswith(".__init__") else module


MODULES = {_module(p): p for p in SRC.rglob("*.py")}


def _layer(module: str):
    """The index in :data:`LAYERS` of ``module``'s layer (None: it has none)."""
    for i, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatch(module, p) for p in patterns):
            return i
    return None


def _resolve(name: str):
    """The package module an imported name lives in (``tapegrad.ops.Sum`` ->
    ``tapegrad.ops``), or None for the package itself."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name if name and name != "tapegrad" else None


def _imports(path: pathlib.Path) -> set:
    """Every package module ``path`` imports, at any depth (functions included):
    ``from tapegrad.ops import movement`` names ``tapegrad.ops.movement``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("tapegrad"):
                continue
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(_resolve(full if full in MODULES else node.module))
        elif isinstance(node, ast.Import):
            out.update(_resolve(a.name) for a in node.names if a.name.startswith("tapegrad"))
    return {m for m in out if m is not None}


GRAPH = {m: {t for t in _imports(p) if t != m} for m, p in MODULES.items() if m != "tapegrad"}


def test_every_module_has_a_layer():
    assert not [m for m in GRAPH if _layer(m) is None]


def test_imports_point_down_only():
    bad = []
    for m, targets in GRAPH.items():
        for t in targets:
            if _layer(t) > _layer(m):
                bad.append(f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})")
    assert not bad, "imports that point up:\n" + "\n".join(sorted(bad))


def test_no_import_circle_between_modules():
    """Every circle, of any length and in any layer (Tarjan's strongly connected components);
    a package importing its own submodules is no circle, a submodule importing its package
    is."""
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w.startswith(v + "."):
                continue  # a package importing its own submodules
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for m in sorted(GRAPH):
        if m not in index:
            visit(m)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_core_never_imports_ops_numpy_nn_or_optim_and_nn_and_optim_never_meet():
    core = {i for i, (name, _) in enumerate(LAYERS) if name in CORE}
    for m, targets in GRAPH.items():
        layers = {LAYERS[_layer(t)][0] for t in targets}
        if _layer(m) in core:
            assert not layers - set(CORE), m
        if m.startswith("tapegrad.nn"):
            assert not any(t.startswith("tapegrad.optim") for t in targets), m
        if m.startswith("tapegrad.optim"):
            assert not any(t.startswith("tapegrad.nn") for t in targets), m
        if m.startswith("tapegrad.testing"):
            assert "models" not in layers, m


def test_the_checks_see_function_level_imports_and_circles():
    """The parser itself: a function-level import counts, and a two-module circle is one."""
    src = "def f():\n    from tapegrad.ops import movement\n"
    tree = ast.parse(src)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert node.module == "tapegrad.ops" and f"{node.module}.movement" in MODULES
    assert "tapegrad.ops.reduction" in GRAPH and "tapegrad.ops.movement" in GRAPH
