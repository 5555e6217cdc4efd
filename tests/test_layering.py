"""Imports point down only (STYLE.md): core <- ops <- numpy <- nn, optim, io; testing beside."""

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "tapegrad"
CORE = {
    "tensor",
    "function",
    "tape",
    "transforms",
    "tree",
    "backend",
    "random",
    "forward",
    "checkpoint",
    "custom",
    "lazy",
    "_speedups",  # compiled constructors of the Tensor record (src/tapegrad/_speedups.c)
}


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "tapegrad" or len(parts) == 1:
        return "root"
    top = parts[1]
    if top in CORE:
        return "core"
    return top  # ops, numpy, nn, optim, io, testing, at


def _imports(path: pathlib.Path):
    """Module-level and function-level tapegrad imports, with whether they are function-local."""
    tree = ast.parse(path.read_text())
    out = []

    def visit(node, local):
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module] + [f"{child.module}.{a.name}" for a in child.names]
                out.extend((n, local) for n in names if n.startswith("tapegrad"))
            elif isinstance(child, ast.Import):
                out.extend((a.name, local) for a in child.names if a.name.startswith("tapegrad"))
            visit(child, inner)

    visit(tree, False)
    return out


ALLOWED = {
    "core": {"core"},
    "ops": {"core", "ops"},
    "numpy": {"core", "ops", "numpy"},
    "at": {"core", "ops", "numpy", "at"},
    "nn": {"core", "ops", "numpy", "nn", "at"},
    "optim": {"core", "ops", "numpy", "optim", "at"},
    "io": {"core", "ops", "numpy", "io"},
    "testing": {"core", "ops", "numpy", "testing", "at"},
}


def test_imports_point_down_only():
    bad = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts)
        if module.endswith(".__init__"):
            module = module[: -len(".__init__")]
        layer = _layer(module)
        if layer == "root":
            continue
        for name, local in _imports(path):
            target = _layer(name if name != "tapegrad.numpy" else "tapegrad.numpy")
            if target == "root":
                continue
            if target in ALLOWED.get(layer, set()):
                continue
            # The allowed back-edge: Tensor dunders and backward rules are written in the
            # user-facing op language, reaching tapegrad.numpy through function-local imports.
            if layer in ("core", "ops") and target in ("numpy", "ops") and local:
                continue
            bad.append(f"{module} imports {name}")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(set(bad)))


def test_core_never_imports_nn_or_optim_and_they_never_import_each_other():
    for path in SRC.rglob("*.py"):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        layer = _layer(module)
        names = {_layer(n) for n, _ in _imports(path)}
        if layer in ("core", "ops", "numpy", "testing"):
            assert not names & {"nn", "optim"}, module
        if layer == "nn":
            assert "optim" not in names, module
        if layer == "optim":
            assert "nn" not in names, module
