"""Python's packaging conventions: every module declares its public names.

- every module under ``src/tapegrad`` has an ``__all__`` (a list or tuple of unique strings),
  and every name in it exists in the module, so ``from tapegrad.X import *``, documentation
  tools and type checkers see exactly the public API;
- the package ships its ``py.typed`` marker (PEP 561).
"""

from __future__ import annotations

import importlib
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "tapegrad"


def _module_names() -> list[str]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


MODULES = _module_names()


def test_every_module_is_found():
    assert "tapegrad" in MODULES and "tapegrad.numpy.interop" in MODULES
    assert "tapegrad.numpy._core" in MODULES and "tapegrad.testing.strategies" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_declares_all_and_every_name_exists(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    public = module.__all__
    assert isinstance(public, (list, tuple)), f"{name}.__all__ is a {type(public).__name__}"
    assert all(isinstance(n, str) for n in public), f"{name}.__all__ holds a non-string"
    dupes = sorted({n for n in public if list(public).count(n) > 1})
    assert not dupes, f"{name}.__all__ lists {dupes} twice"
    missing = [n for n in public if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what the module does not define: {missing}"


def test_py_typed_marker_ships():
    assert (SRC / "py.typed").is_file()


# -- declarations for type checkers ------------------------------------------------------------
# The ops layer attaches Tensor's operators and methods, and the elementwise functions of
# tapegrad.numpy come from the op table; both are declared under ``if TYPE_CHECKING:`` so that
# pyright (run by CI over src/ and tests/typecheck/) sees them. These tests keep the declarations
# equal to what exists at run time, parameter names included.
_ATTRS_MADE = {"__attrs_init__", "__attrs_props__", "__delattr__", "__setattr__", "__getstate__",
               "__setstate__", "__dict__", "__module__", "__doc__", "__weakref__",
               "__attrs_attrs__", "__slots__", "__annotations__", "__match_args__",
               "__firstlineno__", "__static_attributes__", "__attrs_own_setattr__",
               "__annotate_func__", "__annotations_cache__", "__annotate__"}  # fmt: skip


def _type_checking_defs(body) -> dict:
    """``name -> ast.FunctionDef`` of the functions under ``if TYPE_CHECKING:`` in ``body``."""
    import ast

    defs = {}
    for node in body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            defs.update({d.name: d for d in node.body if isinstance(d, ast.FunctionDef)})
    return defs


def _param_names(fn_def, skip_self: bool) -> list:
    a = fn_def.args
    names = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    names += [f"*{a.vararg.arg}"] if a.vararg else []
    names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    return names[1:] if skip_self else names


def _runtime_param_names(fn, skip_self: bool) -> list:
    import inspect

    ps = list(inspect.signature(fn).parameters.values())
    ps = ps[1:] if skip_self else ps
    star = [p for p in ps if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    names = [p.name for p in ps if p not in star]
    return names + [("*" if p.kind is p.VAR_POSITIONAL else "**") + p.name for p in star]


def test_tensor_declares_every_attached_method_for_type_checkers():
    import ast

    import tapegrad.numpy  # noqa: F401  (attaches the methods)
    from tapegrad.core.tensor import Tensor

    cls = next(n for n in ast.parse((SRC / "core" / "tensor.py").read_text()).body
               if isinstance(n, ast.ClassDef) and n.name == "Tensor")  # fmt: skip
    declared = _type_checking_defs(cls.body)
    in_body = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    in_body |= {d.name for n in cls.body if isinstance(n, ast.If)
                and isinstance(n.test, ast.UnaryOp) and isinstance(n.test.op, ast.Not)
                for d in n.body if isinstance(d, ast.FunctionDef)}  # fmt: skip
    in_body |= {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}  # fmt: skip
    in_body |= {n.target.id for n in cls.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}  # fmt: skip
    attached = {n for n in vars(Tensor) if n not in in_body and n not in _ATTRS_MADE}
    assert set(declared) == attached, (
        f"declare in tensor.py: {sorted(attached - set(declared))}; "
        f"no longer attached: {sorted(set(declared) - attached)}"
    )
    for name, d in declared.items():
        v = vars(Tensor)[name]
        if isinstance(v, property):
            continue
        static = isinstance(v, staticmethod)
        fn = v.__func__ if static else v
        assert _param_names(d, not static) == _runtime_param_names(fn, not static), name


def _written_out(path, source: str) -> dict:
    """``name -> attribute`` of the module-level lines ``name = <source>.<attribute>`` (or
    ``name = <source>["<key>"]``) in ``path``: the names a module writes out one by one."""
    import ast

    out = {}
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            continue
        v = node.value
        if isinstance(v, ast.Attribute) and getattr(v.value, "id", None) == source:
            out[node.targets[0].id] = v.attr
        elif isinstance(v, ast.Subscript) and getattr(v.value, "id", None) == source:
            out[node.targets[0].id] = v.slice.value  # pyright: ignore[reportAttributeAccessIssue]
    return out


def test_public_names_are_written_out_and_agree_with_their_tables():
    """No module assembles its public names at run time (``globals().update``): the op
    table's classes, ``tapegrad.numpy``'s elementwise functions and ``tapegrad.numpy.random``
    are assigned one name per line, so that they are importable and visible to type checkers;
    these lines are exactly what the tables hold."""
    import numpy.random as npr

    from tapegrad.numpy import _elementwise
    from tapegrad.numpy import random as tnp_random
    from tapegrad.ops import elementwise as ew
    from tapegrad.ops._registry import ns

    for path in SRC.rglob("*.py"):
        assert "globals().update" not in path.read_text(), path
    classes = _written_out(SRC / "ops" / "elementwise.py", "_GENERATED")
    assert classes == {cls.__name__: key for key, cls in ew._GENERATED.items()}
    assert all(getattr(ew, n) is ew._GENERATED[k] for n, k in classes.items())
    own = [c for c in vars(ew).values() if isinstance(c, type) and c.__module__ == ew.__name__]
    table = {n for cls in own for n in getattr(cls, "names", ())}
    names = _written_out(SRC / "numpy" / "_elementwise.py", "_ns")
    assert set(names) == table and all(k == v for k, v in names.items())
    assert all(getattr(_elementwise, n) is getattr(ns, n) for n in names)
    assert set(_elementwise.__all__) == table | {"nan_to_num"}
    rand = _written_out(SRC / "numpy" / "random.py", "_npr")
    assert set(rand) == {n for n in npr.__all__ if not n.startswith("_")}
    assert all(getattr(tnp_random, n) is getattr(npr, n) for n in rand)
    assert sorted(tnp_random.__all__) == sorted(rand)


def test_namespace_name_lists_are_written_out_and_complete():
    """``tapegrad.numpy.__all__`` is the union of its submodules' (in a form type checkers
    follow), and ``tapegrad.numpy.array_api`` assigns one name per standard function it provides,
    each what its adapter finds; the others are listed in ``MISSING``."""
    import tapegrad.numpy as tnp
    import tapegrad.numpy.array_api as xp

    subs = [getattr(tnp, m) for m in dir(tnp) if m.startswith("_") and not m.startswith("__")
            and hasattr(getattr(tnp, m), "__all__") and m not in ("_dlpack",)]
    assert sorted(tnp.__all__) == sorted({n for m in subs for n in m.__all__})
    written = _written_out(SRC / "numpy" / "array_api.py", "_tnp")  # name = _tnp.name
    assert all(k == v for k, v in written.items())
    for name in xp.STANDARD_FUNCTIONS:
        if name in xp._ADAPTERS:  # defined in the module itself
            assert getattr(xp, name) is xp._ADAPTERS[name] and name in xp.__all__, name
        elif name in written:
            assert getattr(xp, name) is xp._pick(name) and name in xp.__all__, name
        else:
            assert xp._pick(name) is None and name in xp.MISSING, name
