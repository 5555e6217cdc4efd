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
    assert "tapegrad" in MODULES and "tapegrad.interop" in MODULES
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
