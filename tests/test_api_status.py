"""The status tables of docs/api.md (NumPy's and SciPy's names, issue 18): every listed name
exists in the tapegrad namespace its table names, no row says "missing", every name of the
issue's lists is in a table, and the tables are what ``tools/api_status.py`` finds by running
the names today (so a change of behaviour cannot leave them stale). The generator itself is
checked to refuse a wrong claim."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re
import warnings

import numpy as np
import pytest

import tapegrad as tg

ROOT = pathlib.Path(__file__).resolve().parents[1]
API_MD = ROOT / "docs" / "api.md"


def _tool():
    spec = importlib.util.spec_from_file_location("api_status", ROOT / "tools" / "api_status.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()
GROUP = re.compile(r"^\*\*(?P<title>[^*]+)\*\* \(`(?P<module>[\w.]+)`\)$")
ROW = re.compile(r"^\| (?P<names>(`[\w]+` ?)+) \| (?P<status>.+) \|$")


def parse(text: str) -> list[tuple[str, str, str, str]]:
    """``(group title, module, name, status)`` for every name of the generated block."""
    block = text[text.index(TOOL.BEGIN):text.index(TOOL.END)]
    rows, group = [], None
    for line in block.splitlines():
        if m := GROUP.match(line):
            group = (m["title"], m["module"])
        elif m := ROW.match(line):
            assert group is not None, f"a row before any group header: {line!r}"
            for name in re.findall(r"`(\w+)`", m["names"]):
                rows.append((*group, name, m["status"]))
        elif line.startswith("|") and not line.startswith(("| names |", "|---|")):
            raise AssertionError(f"docs/api.md: a table line that does not parse: {line!r}")
    return rows


ROWS = parse(API_MD.read_text())


def test_the_tables_parse_and_list_every_group():
    titles = {r[0] for r in ROWS}
    assert titles == {g[0] for g in TOOL.GROUPS}
    assert len(ROWS) == sum(len(g[2].split()) for g in TOOL.GROUPS)  # each name once


@pytest.mark.parametrize("group,module,name,status", ROWS,
                         ids=[f"{r[1]}.{r[2]}" for r in ROWS])
def test_every_listed_name_exists_and_none_is_missing(group, module, name, status):
    assert hasattr(importlib.import_module(module), name), f"{module} has no {name!r}"
    assert "missing" not in status.lower()
    assert status.split(";")[0] in {TOOL.REAL, TOOL.COMPLEX, TOOL.ZERO, TOOL.NODIFF, TOOL.META,
                                    TOOL.CONST, TOOL.DTYPE, TOOL.NAMESPACE, TOOL.CONSTANT,
                                    TOOL.INPLACE, TOOL.NUMPY_OWN, TOOL.TEXT, TOOL.FILES,
                                    TOOL.DATES, TOOL.ARRAY_TYPE, TOOL.SUBMODULE}


def test_every_name_of_the_issue_lists_is_in_the_tables():
    listed = {(r[1], r[2]) for r in ROWS}
    for _, module, names in TOOL.GROUPS:
        for name in names.split():
            assert (module, name) in listed, f"{module}.{name} is not in docs/api.md"


def test_the_tables_are_current():
    # the generator runs every name again (a few seconds); python tools/api_status.py --write
    text = API_MD.read_text()
    assert TOOL.replace_block(text, TOOL.block()) == text, (
        "docs/api.md's status tables differ from what the names do now: run "
        "python tools/api_status.py --write and review the diff")


def test_statuses_agree_with_what_the_functions_do():
    # spot checks, independent of the generator
    status = {(r[1], r[2]): r[3] for r in ROWS}
    assert status[("tapegrad.numpy", "exp2")].startswith(TOOL.COMPLEX)
    assert status[("tapegrad.numpy", "argsort")] == TOOL.NODIFF
    assert status[("tapegrad.numpy", "trunc")] == TOOL.ZERO
    assert status[("tapegrad.numpy", "ndim")] == TOOL.META
    assert status[("tapegrad.numpy.fft", "rfft")].startswith(TOOL.REAL)
    g = tg.grad(lambda z: tg.numpy.sum(tg.numpy.abs(tg.numpy.exp2(z)) ** 2))(
        tg.Tensor(np.array([0.3 + 0.2j])))
    assert g.dtype == np.complex128
    with pytest.raises(TypeError):
        tg.numpy.fft.rfft(tg.Tensor(np.array([1j, 2.0])))


REFERENCE = {"tapegrad.numpy": "numpy", "tapegrad.numpy.linalg": "numpy.linalg",
             "tapegrad.numpy.fft": "numpy.fft", "tapegrad.scipy.special": "scipy.special",
             "tapegrad.scipy.linalg": "scipy.linalg", "tapegrad.scipy.signal": "scipy.signal"}


def _direct_probes():
    """``(module, name, reference function, arrays)`` for every name whose probe is a direct
    call of the function (not a wrapper) and that NumPy/SciPy has under the same name."""
    out = []
    status = {(r[1], r[2]): r[3] for r in ROWS}
    for _, module, names in TOOL.GROUPS:
        if module not in REFERENCE:
            continue
        ref, mod = importlib.import_module(REFERENCE[module]), importlib.import_module(module)
        for name in names.split():
            if (TOOL.PREFIX.get(module, "") + name in TOOL.KINDS
                    or status[(module, name)] == TOOL.META):
                continue  # not arrays: NumPy's objects, text, files, Python values
            obj = getattr(mod, name)
            if not hasattr(ref, name) or not callable(obj) or isinstance(obj, type):
                continue
            fn, arrays = TOOL.probe_for(module, name)
            if fn is obj:
                out.append((module, name, getattr(ref, name), arrays))
    return out


DIRECT = _direct_probes()


@pytest.mark.parametrize("module,name,ref,arrays", DIRECT, ids=[f"{d[0]}.{d[1]}" for d in DIRECT])
def test_values_shapes_and_dtypes_equal_numpy_and_scipy_on_the_probes(module, name, ref, arrays):
    fn = getattr(importlib.import_module(module), name)
    compared = 0
    for arrs in (arrays, TOOL._complexify(arrays)):  # complex where NumPy/SciPy takes it
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = ref(*arrs)
        except (TypeError, ValueError):
            continue
        got = fn(*[tg.Tensor(a) for a in arrs])
        got = [got] if isinstance(got, tg.Tensor) else tg.tree.tree_leaves(got)
        want = list(want) if isinstance(want, tuple) else [want]
        for g, w in zip(got, want, strict=True):
            g, w = (g.numpy() if isinstance(g, tg.Tensor) else np.asarray(g)), np.asarray(w)
            assert (g.shape, g.dtype) == (w.shape, w.dtype), (name, g.shape, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
        compared += 1
    assert compared, f"{module}.{name}: the reference took neither probe"


def test_the_generator_refuses_a_wrong_claim(monkeypatch):
    assert TOOL.status("tapegrad.numpy", "no_such_function") == TOOL.MISSING

    @tg.custom_vjp
    def off(x):
        return x * x

    off.defvjp(lambda x: (x * x, x), lambda x, g: (3.0 * x * g,))  # wrong: 2 x
    monkeypatch.setitem(TOOL.PROBES, "square", (off, [np.array([0.5, 0.7])]))
    with pytest.raises(TOOL.ProbeError, match="tapegrad.numpy.square: derivatives fail"):
        TOOL.status("tapegrad.numpy", "square")
    monkeypatch.setitem(TOOL.PROBES, "square", (lambda x: tg.numpy.floor(x * 3.0),
                                                 [np.array([0.5, 0.7])]))
    assert TOOL.status("tapegrad.numpy", "square") == TOOL.ZERO
