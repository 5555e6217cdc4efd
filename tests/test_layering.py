"""Imports point down only (STYLE.md): core <- ops <- numpy <- nn, optim, io; distributed on
optim; random (keys and samplers, written with the NumPy and SciPy layers) under nn and
distributed; testing beside.

Every import is checked, function-level ones included, with no exceptions: the core never
reaches up to the ops or the NumPy layer (the ops layer attaches Tensor's methods and operators
when it is imported), and the modules form no import circle.
"""

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "tapegrad"
CORE = {
    "tensor", "function", "tape", "transforms", "forward", "jit", "tree", "backend",
    "lazy", "checkpoint", "custom", "vmap", "memory", "_keywords", "weak", "profiler",
    "custom_rules", "implicit", "transpose", "debug",
    "filtered", "dtypes",
}  # fmt: skip


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "tapegrad" or len(parts) == 1:
        return "root"
    top = parts[1]
    if top in CORE:
        return "core"
    if top in ("interop", "array_api"):  # NumPy's protocols and the array API standard's
        return "numpy"  # namespace, both onto tapegrad.numpy: the NumPy layer
    return top  # ops, numpy, nn, optim, io, testing, at, log, distributed


def _module(path: pathlib.Path) -> str:
    module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    return module[: -len(".__init__")] if module.endswith(".__init__") else module


def _imports(path: pathlib.Path) -> list:
    """Every tapegrad module ``path`` imports, at any depth (functions included)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "tapegrad":
                out.extend(f"tapegrad.{a.name}" for a in node.names)
            elif node.module.startswith("tapegrad"):
                out.append(node.module)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names if a.name.startswith("tapegrad"))
    return out


ALLOWED = {
    "core": {"core"},
    "ops": {"core", "ops"},
    "at": {"core", "ops", "at"},
    "numpy": {"core", "ops", "numpy", "at"},
    "nn": {"core", "ops", "numpy", "nn", "at", "io", "random"},
    "optim": {"core", "ops", "numpy", "optim", "at"},
    "io": {"core", "ops", "numpy", "io"},
    "testing": {"core", "ops", "numpy", "testing", "at"},
    "log": {"log"},
    "export": {"core", "io", "export"},
    "distributed": {"core", "ops", "numpy", "distributed", "optim", "io", "at", "random"},
    "scipy": {"core", "ops", "numpy", "at", "scipy"},
    # keys and samplers: samplers are transforms written with the NumPy and SciPy layers
    "random": {"core", "ops", "numpy", "at", "scipy", "random"},
    "flatten_util": {"core", "ops", "numpy", "at", "flatten_util"},
    "mixed_precision": {"core", "ops", "numpy", "at", "mixed_precision"},
}


def test_imports_point_down_only():
    bad = []
    for path in SRC.rglob("*.py"):
        module = _module(path)
        layer = _layer(module)
        if layer == "root":
            continue
        for name in _imports(path):
            target = _layer(name)
            if target != "root" and target not in ALLOWED.get(layer, {layer}):
                bad.append(f"{module} ({layer}) imports {name} ({target})")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(set(bad)))


def test_core_never_imports_nn_or_optim_and_they_never_import_each_other():
    for path in SRC.rglob("*.py"):
        module = _module(path)
        layer = _layer(module)
        names = {_layer(n) for n in _imports(path)}
        if layer in ("core", "ops", "numpy", "testing"):
            assert not names & {"nn", "optim"}, module
        if layer == "nn":
            assert "optim" not in names, module
        if layer == "optim":
            assert "nn" not in names, module


def test_no_import_circle_between_modules():
    modules = {_module(p): p for p in SRC.rglob("*.py")}
    graph = {m: set() for m in modules}
    for m, p in modules.items():
        for name in _imports(p):
            target = name
            while target and target not in modules:  # "tapegrad.ops.Sum" -> tapegrad.ops
                target = target.rpartition(".")[0]
            if target and target != m and not m.startswith(target + "."):
                graph[m].add(target)
    # a package's __init__ importing its own submodules is not a circle
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m):] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for t in graph[m]:
            if not t.startswith(m + "."):
                visit(t)
        stack.pop()

    for m in sorted(graph):
        visit(m)
    core_cycles = [c for c in cycles if any(_layer(x) in ("core", "ops") for x in c)]
    assert not core_cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in core_cycles)
