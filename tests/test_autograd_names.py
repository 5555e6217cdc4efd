"""HIPS autograd's users find its NumPy in tapegrad: every name that NumPy and
``autograd.numpy`` both export (and those of their ``linalg`` and ``fft``) exists in
``tapegrad.numpy`` (``.linalg``, ``.fft``), and docs/api.md's status tables list every one of
them with what tapegrad does with it. Skipped where autograd is not installed."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import tapegrad.numpy as tnp

ag_np = pytest.importorskip("autograd.numpy")

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: NumPy 2.1's ``unstack`` arrives with the array API's ``unstack``; until then it is the one
#: name autograd.numpy re-exports that tapegrad.numpy lacks.
PENDING: set = set()
PAIRS = [("", np, ag_np, tnp), ("linalg", np.linalg, ag_np.linalg, tnp.linalg),
         ("fft", np.fft, ag_np.fft, tnp.fft)]


def _public(module) -> set:
    return {n for n in dir(module) if not n.startswith("_")}


def _shared():
    """``(prefix, name, tapegrad module)`` for every name NumPy and autograd both export."""
    out = []
    for prefix, ref, ag, ours in PAIRS:
        for name in sorted(_public(ref) & _public(ag)):
            if name not in PENDING:
                out.append((prefix, name, ours))
    return out


SHARED = _shared()


def test_the_shared_names_are_the_whole_namespace():
    assert len(SHARED) > 450  # NumPy 2.x: some 480 names, functions, types and constants
    assert {"sin", "linspace", "geomspace", "ndarray", "save", "copyto"} <= {
        n for p, n, _ in SHARED if p == ""}


@pytest.mark.parametrize("prefix,name,ours", SHARED, ids=[f"{p}.{n}".lstrip(".")
                                                          for p, n, _ in SHARED])
def test_every_name_numpy_and_autograd_numpy_export_is_in_tapegrad_numpy(prefix, name, ours):
    assert hasattr(ours, name), f"tapegrad.numpy{'.' + prefix if prefix else ''} lacks {name!r}"


def test_the_status_tables_list_every_shared_name():
    spec = importlib.util.spec_from_file_location("api_status", ROOT / "tools" / "api_status.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = (ROOT / "docs" / "api.md").read_text()
    block = text[text.index(tool.BEGIN):text.index(tool.END)]
    listed: dict = {}
    module = None
    for line in block.splitlines():
        if m := re.match(r"^\*\*[^*]+\*\* \(`([\w.]+)`\)$", line):
            module = m[1]
        elif line.startswith("| `"):
            listed.setdefault(module, set()).update(re.findall(r"`(\w+)`", line.split(" | ")[0]))
    modules = {"": "tapegrad.numpy", "linalg": "tapegrad.numpy.linalg",
               "fft": "tapegrad.numpy.fft"}
    absent = [f"{modules[p]}.{n}" for p, n, _ in SHARED if n not in listed.get(modules[p], ())]
    assert not absent, f"docs/api.md's status tables do not list {absent}"


def test_autograd_only_names_tapegrad_has_too():
    # autograd.numpy's own user-level additions to NumPy's names
    x = tnp.asarray([1.0, 2.0])
    np.testing.assert_array_equal(tnp.make_diagonal(x, axis1=-1, axis2=-2).numpy(),
                                  ag_np.make_diagonal(np.array([1.0, 2.0]), axis1=-1, axis2=-2))
    assert importlib.import_module("tapegrad").flatten is importlib.import_module(
        "tapegrad").ravel_pytree
