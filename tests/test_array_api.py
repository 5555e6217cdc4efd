"""Array API standard (2024.12) conformance of ``tapegrad.numpy.array_api`` and of
``tapegrad.numpy`` (which follows NumPy's main namespace: the same tests pass but where NumPy's
own signatures differ, listed in ``TNP_DEVIATIONS``), checked against the reference
implementation ``array_api_strict`` and run on NumPy's own namespace as a control.

- signatures: every function the namespace has accepts every call the standard allows (the
  standard's positional-only, positional-or-keyword and keyword-only parameters, its defaults);
- values and dtypes: each case runs in the namespace under test and in ``array_api_strict``,
  on the same data, and the results must match (dtypes by name; Python float data gives the
  namespace's default floating dtype, as ``__array_namespace_info__`` reports it); for
  tapegrad also on traced inputs (each floating argument a primal of ``vjp``), as array-API
  code runs inside transforms;
- the data type functions (finfo, iinfo, isdtype, result_type, can_cast) for every dtype;
- the inspection namespace, the ``__array_namespace__`` hook and ``asarray``'s copy rules.

The functions tapegrad does not have yet are listed in ``tapegrad.numpy.array_api.MISSING``; their
cases skip with that reason, and a test checks that the list is exactly what is absent.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.numpy import array_api
from tapegrad.testing import check_grads, check_vmap

strict = pytest.importorskip("array_api_strict")

NAMESPACES = {"tapegrad": array_api, "tapegrad.numpy": tnp, "numpy": np}
DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float32", "float64", "complex64", "complex128"]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _strict_2024_12():
    with strict.ArrayAPIStrictFlags(api_version="2024.12"):
        yield


@pytest.fixture(params=list(NAMESPACES))
def xp(request):
    return NAMESPACES[request.param]


# Where NumPy 2's own namespace departs from the standard (the control run); strict xfails, so
# a NumPy that conforms makes them fail and this list is updated.
NUMPY_DEVIATIONS = {
    "signature:eye": "dtype defaults to float, not None",
    "signature:sort": "no `descending` keyword; `stable` defaults to None",
    "signature:argsort": "no `descending` keyword; `stable` defaults to None",
    **{f"signature:fft.{n}": "norm defaults to None, not 'backward'" for n in
       ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft"]},
    "value:sort-descending": "no `descending` keyword",
    "value:argsort-descending": "no `descending` keyword",
    "signature:fft.fftfreq": "no `dtype` keyword",
    "signature:fft.rfftfreq": "no `dtype` keyword",
    **{f"finfo:{n}": "np.finfo does not accept an array" for n in
       ["float32", "float64", "complex64", "complex128"]},
}  # fmt: skip


# Where tapegrad.numpy keeps NumPy's signature rather than the standard's (array API code gets
# the standard's from tapegrad.numpy.array_api); strict xfails, as above.
TNP_DEVIATIONS = {
    "signature:arange": "NumPy's step=None",
    "signature:sort": "NumPy's signature: `stable` defaults to None",
    "signature:argsort": "NumPy's signature: `stable` defaults to None",
    "signature:std": "NumPy's ddof=0 with correction=None",
    "signature:var": "NumPy's ddof=0 with correction=None",
    "signature:linalg.pinv": "NumPy 2's rcond/rtol pair: rtol's default means 'not given'",
    **{f"signature:fft.{n}": "norm defaults to None, not 'backward' (NumPy's)" for n in
       ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft"]},
}  # fmt: skip


def _numpy_deviation(request, xp, key):
    table = NUMPY_DEVIATIONS if xp is np else TNP_DEVIATIONS if xp is tnp else {}
    if key in table:
        request.applymarker(pytest.mark.xfail(strict=True, reason=table[key]))


def _missing(xp) -> tuple:
    return getattr(xp, "MISSING", ())


def _get(ns, name):
    obj = ns
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _need(xp, name):
    if name in _missing(xp) or (name.startswith("fft.") and "fft (extension)" in _missing(xp)):
        pytest.skip(f"{name}: not in tapegrad.numpy yet "
                    "(listed in tapegrad.numpy.array_api.MISSING)")
    return _get(xp, name)


# -- signatures ------------------------------------------------------------------------------
ALL_NAMES = (
    list(array_api.STANDARD_FUNCTIONS)
    + [f"linalg.{n}" for n in array_api.LINALG_FUNCTIONS]
    + [f"fft.{n}" for n in array_api.FFT_FUNCTIONS]
)
_SIMPLE = (type(None), bool, int, float, str)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def signature_problems(ours, std) -> list:
    """How ``ours`` fails to accept the calls the standard's signature ``std`` allows."""
    problems = []
    mine = list(ours.parameters.values())
    positional = [p for p in mine if p.kind in _POSITIONAL]
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in mine)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in mine)
    by_name = {p.name: p for p in mine if p.kind in _BY_NAME}
    std_params = list(std.parameters.values())
    for i, p in enumerate(std_params):
        if p.kind is p.VAR_POSITIONAL:
            if not var_pos:
                problems.append(f"*{p.name}: no *args")
            continue
        if p.kind is p.VAR_KEYWORD:
            continue
        mine_p = None
        if p.kind in _POSITIONAL:
            if i < len(positional):
                mine_p = positional[i]
            elif not var_pos:
                problems.append(f"{p.name}: not accepted at position {i}")
        if p.kind in _BY_NAME:
            if p.name in by_name:
                mine_p = by_name[p.name]
            elif not var_kw:
                problems.append(f"{p.name}: not accepted as a keyword")
        if p.default is not p.empty and mine_p is not None:
            if mine_p.default is mine_p.empty:
                problems.append(f"{p.name}: the standard's default {p.default!r} is missing")
            elif mine_p.default is np._NoValue:
                pass  # NumPy's "not given" marker: the function behaves as with the default
            elif isinstance(p.default, _SIMPLE) and mine_p.default != p.default:
                problems.append(f"{p.name}: default {mine_p.default!r}, standard {p.default!r}")
    std_names = {p.name for p in std_params}
    for i, p in enumerate(mine):
        required = p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        if required and p.name not in std_names and i >= len(std_params):
            problems.append(f"{p.name}: required here, absent from the standard")
    return problems


@pytest.mark.parametrize("name", ALL_NAMES)
def test_signature_accepts_the_standards_calls(request, xp, name):
    _numpy_deviation(request, xp, f"signature:{name}")
    fn = _need(xp, name)
    try:
        ours = inspect.signature(fn)
    except ValueError:
        pytest.skip(f"{name}: a builtin without a signature in this namespace")
    std = inspect.signature(_get(strict, name))
    assert signature_problems(ours, std) == [], f"{name}{ours} vs standard {name}{std}"


def test_signature_checker_catches_mismatches():
    def std(x, /, *, axis=None, correction=0.0, keepdims=False): ...

    def good(x, axis=None, correction=0.0, keepdims=False, extra=1): ...

    def bad(x, *, axis=None, ddof=0, keepdims=True): ...

    assert signature_problems(inspect.signature(good), inspect.signature(std)) == []
    problems = signature_problems(inspect.signature(bad), inspect.signature(std))
    assert any("correction" in p for p in problems)
    assert any("keepdims" in p for p in problems)


def test_missing_lists_exactly_the_absent_functions():
    absent = [n for n in array_api.STANDARD_FUNCTIONS if not hasattr(array_api, n)]
    absent += [f"linalg.{n}" for n in array_api.LINALG_FUNCTIONS
               if not hasattr(array_api.linalg, n)]  # fmt: skip
    if hasattr(array_api, "fft"):
        absent += [f"fft.{n}" for n in array_api.FFT_FUNCTIONS if not hasattr(array_api.fft, n)]
    else:
        absent.append("fft (extension)")
    assert list(array_api.MISSING) == absent
    for name in array_api.__all__:
        assert hasattr(array_api, name), name


def test_namespace_follows_tapegrad_numpy():
    # a function tapegrad.numpy has with the standard's signature is that very function
    assert array_api.sin is tnp.sin
    assert array_api.matmul is tnp.matmul
    assert array_api.linalg.solve is tnp.linalg.solve


# -- values and dtypes -------------------------------------------------------------------------
rng = np.random.default_rng(0)


def F(*shape, lo=-2.0, hi=2.0, dtype="float64"):
    return rng.uniform(lo, hi, shape).astype(dtype)


def C(*shape):
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype("complex128")


def I(*shape, lo=-5, hi=6, dtype="int64"):  # noqa: E743
    return rng.integers(lo, hi, shape).astype(dtype)


def B(*shape):
    return rng.uniform(size=shape) > 0.5


SPD = (lambda a: a @ a.T + 4 * np.eye(4))(F(4, 4))
M = F(3, 4, 5)
CASES = [
    # (id, name, args, kwargs)
    *[(n, n, [F(3, 4)], {}) for n in ["abs", "atan", "ceil", "cos", "cosh", "exp", "expm1",
      "floor", "isfinite", "isinf", "isnan", "negative", "positive", "round", "sign",
      "signbit", "sin", "sinh", "square", "tan", "tanh", "trunc", "asinh", "conj",
      "reciprocal"]],
    *[(n, n, [F(3, 4, lo=-0.9, hi=0.9)], {}) for n in ["acos", "asin", "atanh"]],
    *[(n, n, [F(3, 4, lo=0.1, hi=3.0)], {}) for n in ["log", "log1p", "log2", "log10", "sqrt"]],
    ("acosh", "acosh", [F(3, 4, lo=1.1, hi=3.0)], {}),
    *[(f"{n}-complex", n, [C(3, 2)], {}) for n in ["exp", "sin", "abs", "sqrt", "square",
      "conj", "real", "imag", "log", "tanh"]],
    ("round-int", "round", [I(5)], {}),
    ("logical_not", "logical_not", [B(3, 4)], {}),
    ("bitwise_invert", "bitwise_invert", [I(3, 4)], {}),
    *[(n, n, [F(3, 1, 4), F(4)], {}) for n in ["add", "atan2", "copysign", "divide", "equal",
      "floor_divide", "greater", "greater_equal", "hypot", "less", "less_equal", "logaddexp",
      "maximum", "minimum", "multiply", "nextafter", "not_equal", "remainder", "subtract"]],
    ("pow", "pow", [F(3, 4, lo=0.1, hi=2.0), F(4)], {}),
    ("add-scalar", "add", [F(3, 4), 1.5], {}),
    ("multiply-int-scalar", "multiply", [I(3), 2], {}),
    ("multiply-complex", "multiply", [C(3), C(2, 1)], {}),
    *[(n, n, [I(3, 4), I(4, lo=1, hi=4)], {}) for n in ["bitwise_and", "bitwise_or",
      "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "floor_divide"]],
    *[(n, n, [B(3, 4), B(4)], {}) for n in ["logical_and", "logical_or", "logical_xor"]],
    ("clip", "clip", [F(3, 4)], {"min": -0.5, "max": 0.5}),
    ("clip-positional", "clip", [F(3, 4), -0.5, 0.5], {}),
    ("where", "where", [B(3, 4), F(3, 4), F(4)], {}),
    # reductions
    *[(f"{n}-{axis}-{kd}", n, [M], {"axis": axis, "keepdims": kd})
      for n in ["sum", "prod", "mean", "max", "min", "std", "var"]
      for axis in [None, 0, (0, 2), -1] for kd in [False, True]],
    ("sum-int8", "sum", [I(3, 4, dtype="int8")], {}),
    ("sum-uint8", "sum", [I(3, 4, lo=0, dtype="uint8")], {}),
    ("sum-dtype", "sum", [F(3, 4, dtype="float32")], {"dtype": "float64"}),
    ("prod-int32", "prod", [I(3, lo=1, hi=4, dtype="int32")], {}),
    ("std-correction", "std", [M], {"axis": 1, "correction": 1}),
    ("var-correction", "var", [M], {"correction": 1.5}),
    *[(f"{n}-{axis}", n, [B(3, 4)], {"axis": axis}) for n in ["all", "any"]
      for axis in [None, 0, -1]],
    *[(f"{n}-{axis}-{kd}", n, [M], {"axis": axis, "keepdims": kd})
      for n in ["argmax", "argmin"] for axis in [None, 1] for kd in [False, True]],
    ("count_nonzero", "count_nonzero", [I(3, 4, lo=-1, hi=2)], {"axis": 1}),
    ("count_nonzero-all", "count_nonzero", [I(3, 4, lo=-1, hi=2)], {"keepdims": True}),
    ("cumulative_sum", "cumulative_sum", [F(3, 4)], {"axis": 1}),
    ("cumulative_sum-1d-initial", "cumulative_sum", [F(5)], {"include_initial": True}),
    ("cumulative_sum-int8", "cumulative_sum", [I(5, dtype="int8")], {}),
    ("cumulative_prod", "cumulative_prod", [F(3, 4)], {"axis": 0, "include_initial": True}),
    # dtype= and the standard's integer promotion of sums, products and their scans
    *[(f"{n}-{d}-dtype={o}", n, [I(2, 3, lo=0, hi=3, dtype=d)],
       {"axis": 1} | ({} if o is None else {"dtype": o}))
      for n in ["sum", "prod", "cumulative_sum", "cumulative_prod"]
      for d in ["int8", "uint8", "int32", "uint32", "uint64"]
      for o in [None, d, "int64", "float64"]],
    *[(f"linalg.trace-{d}-dtype={o}", "linalg.trace", [I(2, 3, 3, lo=0, hi=3, dtype=d)],
       {} if o is None else {"dtype": o}) for d in ["uint8", "int16"] for o in [None, d]],
    *[(f"vecdot-{d}", "vecdot", [I(2, 3, lo=0, hi=3, dtype=d), I(3, lo=0, hi=3, dtype=d)], {})
      for d in ["int8", "uint8", "int32", "uint32"]],
    ("linalg.vecdot-uint8", "linalg.vecdot", [I(3, lo=0, hi=3, dtype="uint8")] * 2, {}),
    ("std-correction-fraction", "std", [M], {"axis": 0, "correction": 0.5}),
    ("diff", "diff", [F(3, 5)], {}),
    ("diff-n2-axis0", "diff", [F(4, 3)], {"axis": 0, "n": 2}),
    ("diff-prepend", "diff", [F(3, 5)], {"prepend": F(3, 1), "append": F(3, 2)}),
    # manipulation
    ("broadcast_to", "broadcast_to", [F(3, 1)], {"shape": (2, 3, 4)}),
    ("concat", "concat", [[F(2, 3), F(1, 3)]], {}),
    ("concat-axis1", "concat", [[F(2, 3), F(2, 1)]], {"axis": 1}),
    ("concat-none", "concat", [[F(2, 3), F(4)]], {"axis": None}),
    ("expand_dims", "expand_dims", [F(2, 3)], {"axis": 1}),
    ("expand_dims-neg", "expand_dims", [F(2, 3), -1], {}),
    ("flip", "flip", [M], {"axis": (0, 2)}),
    ("flip-all", "flip", [M], {}),
    ("moveaxis", "moveaxis", [M, 0, -1], {}),
    ("permute_dims", "permute_dims", [M], {"axes": (2, 0, 1)}),
    ("repeat", "repeat", [F(2, 3), 2], {"axis": 1}),
    ("repeat-flat", "repeat", [F(2, 3), 3], {}),
    ("reshape", "reshape", [M], {"shape": (5, -1)}),
    ("roll", "roll", [M], {"shift": (1, -2), "axis": (0, 2)}),
    ("roll-flat", "roll", [M], {"shift": 3}),
    ("squeeze", "squeeze", [F(2, 1, 3, 1)], {"axis": (1, 3)}),
    ("stack", "stack", [[F(2, 3), F(2, 3)]], {"axis": 1}),
    ("tile", "tile", [F(2, 3), (2, 1, 2)], {}),
    ("unstack", "unstack", [M], {"axis": 1}),
    ("unstack-default", "unstack", [F(2, 3)], {}),
    ("unstack-neg", "unstack", [M], {"axis": -1}),
    ("unstack-empty", "unstack", [F(0, 3)], {}),
    ("reshape-copy-none", "reshape", [M], {"shape": (4, 15), "copy": None}),
    ("reshape-copy-true", "reshape", [M], {"shape": (-1,), "copy": True}),
    ("linalg.pinv", "linalg.pinv", [F(2, 3, 4)], {}),
    ("linalg.pinv-rtol", "linalg.pinv", [F(2, 3, 4)], {"rtol": 0.5}),
    ("linalg.pinv-rtol-array", "linalg.pinv", [F(2, 3, 4)], {"rtol": np.array([0.5, 1e-3])}),
    ("matrix_transpose", "matrix_transpose", [M], {}),
    # indexing
    ("take", "take", [M, np.array([2, 0, 1, 2])], {"axis": 1}),
    ("take_along_axis", "take_along_axis", [F(3, 4), I(3, 2, lo=0, hi=4)], {"axis": 1}),
    # linear algebra
    ("matmul", "matmul", [F(2, 3, 4), F(4, 5)], {}),
    ("matmul-vec", "matmul", [F(4), F(3, 4, 2)], {}),
    ("vecdot", "vecdot", [F(3, 4), F(2, 1, 4)], {}),
    ("vecdot-axis", "vecdot", [F(4, 3), F(4, 3)], {"axis": -2}),
    ("vecdot-complex", "vecdot", [C(3), C(3)], {}),
    ("tensordot", "tensordot", [F(3, 4, 5), F(4, 5, 2)], {}),
    ("tensordot-axes", "tensordot", [F(3, 4), F(4, 2)], {"axes": 1}),
    ("linalg.cholesky", "linalg.cholesky", [SPD], {}),
    ("linalg.cholesky-upper", "linalg.cholesky", [SPD], {"upper": True}),
    ("linalg.det", "linalg.det", [F(2, 3, 3)], {}),
    ("linalg.inv", "linalg.inv", [SPD], {}),
    ("linalg.slogdet", "linalg.slogdet", [F(2, 3, 3)], {}),
    ("linalg.solve", "linalg.solve", [SPD, F(4, 2)], {}),
    ("linalg.svdvals", "linalg.svdvals", [F(2, 4, 3)], {}),
    ("linalg.outer", "linalg.outer", [F(3), F(4)], {}),
    ("linalg.matmul", "linalg.matmul", [F(3, 4), F(4)], {}),
    ("linalg.tensordot", "linalg.tensordot", [F(3, 4), F(4, 2)], {"axes": 1}),
    ("linalg.trace", "linalg.trace", [M], {"offset": 1}),
    ("linalg.trace-int", "linalg.trace", [I(3, 3, dtype="int16")], {}),
    ("linalg.diagonal", "linalg.diagonal", [M], {"offset": -1}),
    ("linalg.vecdot", "linalg.vecdot", [F(3, 4), F(4)], {}),
    ("linalg.matrix_transpose", "linalg.matrix_transpose", [M], {}),
    *[(f"linalg.matrix_norm-{o}", "linalg.matrix_norm", [M], {"ord": o, "keepdims": True})
      for o in ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]],
    *[(f"linalg.vector_norm-{o}-{axis}", "linalg.vector_norm", [M],
       {"ord": o, "axis": axis, "keepdims": axis is None})
      for o in [1, 2, np.inf, 3] for axis in [None, 1, (0, 2)]],
    # creation (int64 and float defaults)
    ("arange", "arange", [5], {}),
    ("arange-step", "arange", [1, 7, 2], {}),
    ("arange-float", "arange", [0.0, 1.0, 0.25], {}),
    ("eye", "eye", [3, 4], {"k": 1}),
    ("full", "full", [(2, 3), 1.5], {}),
    ("full-int", "full", [(2,), 3], {}),
    ("full-bool", "full", [(2,), True], {}),
    ("linspace", "linspace", [0, 1], {"num": 5}),
    ("linspace-noend", "linspace", [0.0, 1.0, 4], {"endpoint": False}),
    ("ones", "ones", [(2, 3)], {}),
    ("zeros", "zeros", [(0, 3)], {}),
    ("ones_like", "ones_like", [I(2, 3)], {}),
    ("zeros_like", "zeros_like", [F(2)], {"dtype": "int32"}),
    ("full_like", "full_like", [F(2, 2)], {"fill_value": 7.0}),
    ("meshgrid-xy", "meshgrid", [F(3), F(4), F(2)], {}),
    ("meshgrid-ij", "meshgrid", [F(3), F(4)], {"indexing": "ij"}),
    ("broadcast_arrays", "broadcast_arrays", [F(3, 1), F(4), F(2, 1, 1)], {}),
    ("tril", "tril", [M], {"k": 1}),
    ("triu", "triu", [M], {"k": -1}),
    # sorting, searching, sets
    ("sort", "sort", [F(3, 5)], {}),
    ("sort-descending", "sort", [F(3, 5)], {"axis": 0, "descending": True}),
    ("argsort", "argsort", [np.array([3.0, 1.0, 3.0, 2.0, 1.0])], {"stable": True}),
    ("argsort-descending", "argsort", [np.array([3.0, 1.0, 3.0, 2.0])], {"descending": True}),
    ("searchsorted", "searchsorted", [np.sort(F(6)), F(4)], {}),
    ("searchsorted-right", "searchsorted", [np.array([0.0, 1.0, 1.0, 2.0]),
                                            np.array([1.0, 1.5])], {"side": "right"}),
    ("nonzero", "nonzero", [I(3, 4, lo=-1, hi=2)], {}),
    ("unique_values", "unique_values", [np.array([3.0, 1.0, 3.0, 2.0, 1.0])], {}),
    ("unique_counts", "unique_counts", [np.array([3.0, 1.0, 3.0, 2.0, 1.0])], {}),
    ("unique_inverse", "unique_inverse", [I(7, lo=0, hi=3)], {}),
    # fft extension
    ("fft.fft", "fft.fft", [C(4, 6)], {}),
    ("fft.rfft", "fft.rfft", [F(3, 8)], {"norm": "ortho"}),
    ("fft.irfft", "fft.irfft", [C(5)], {"n": 8}),
    ("fft.fftn", "fft.fftn", [C(3, 4)], {}),
]
_DTYPE_KW = ("dtype",)


def _to(ns, v):
    """An input for namespace ``ns``: arrays go through its asarray; lists of arrays too."""
    if isinstance(v, np.ndarray):
        return ns.asarray(v)
    if isinstance(v, list):
        return [_to(ns, a) for a in v]
    return v


def _kw(ns, kwargs):
    return {k: (getattr(ns, v) if k in _DTYPE_KW else _to(ns, v)) for k, v in kwargs.items()}


def _host(v):
    if isinstance(v, (tuple, list)):
        return [_host(a) for a in v]
    if isinstance(v, tg.Tensor):
        return v.numpy()
    if isinstance(v, np.ndarray | np.generic):
        return np.asarray(v)
    return np.from_dlpack(v)


def _assert_close(got, want):
    """Results (an array, or a tuple of arrays of different shapes) equal to the reference's."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_close(g, w)
        return
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def _dtype_name(ns, v) -> str:
    d = v.dtype
    for n in DTYPE_NAMES:
        if d == getattr(ns, n):
            return n
    raise AssertionError(f"unknown dtype {d!r}")


def _dtypes(ns, v):
    if isinstance(v, (tuple, list)):
        return [_dtypes(ns, a) for a in v]
    return _dtype_name(ns, v)


def _default_dtype(ns, name):
    kind = {"float64": "real floating", "complex128": "complex floating"}.get(name)
    if kind is None:
        return name
    return _dtype_name(ns, ns.empty(0, dtype=ns.__array_namespace_info__().default_dtypes()[kind]))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_dtypes_match_the_reference(request, xp, case):
    _numpy_deviation(request, xp, f"value:{case[0]}")
    _, name, args, kwargs = case
    fn = _need(xp, name)
    got = fn(*[_to(xp, a) for a in args], **_kw(xp, kwargs))
    want = _get(strict, name)(*[_to(strict, a) for a in args], **_kw(strict, kwargs))
    got_h, want_h = _host(got), _host(want)
    _assert_close(got_h, want_h)
    got_dt, want_dt = _dtypes(xp, got), _dtypes(strict, want)
    # creation from Python data gives each library's default floating dtype
    from_python = not any(isinstance(a, (np.ndarray, list)) for a in args)
    if from_python and "dtype" not in kwargs:
        want_dt = _default_dtype(xp, want_dt)
    assert got_dt == want_dt


def _is_floating_input(v) -> bool:
    if isinstance(v, list):
        return bool(v) and all(_is_floating_input(a) for a in v)
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


TRACED_CASES = [c for c in CASES if any(_is_floating_input(a) for a in c[2])]


@pytest.mark.parametrize("case", TRACED_CASES, ids=[c[0] for c in TRACED_CASES])
def test_traced_inputs_give_the_reference_values(case):
    # The same cases on values a transform traces: each floating array argument is a primal of
    # vjp, the function's results come back as aux, and must equal the reference's.
    _, name, args, kwargs = case
    fn = _need(array_api, name)
    where = [i for i, a in enumerate(args) if _is_floating_input(a)]
    primals = [_to(array_api, args[i]) for i in where]
    seen = []

    def f(*traced):
        full = list(args)
        for i, v in zip(where, traced):
            full[i] = v
        leaves = [v for t in traced for v in (t if isinstance(t, list) else [t])]
        seen.extend(v.is_traced for v in leaves)
        out = fn(*[_to(array_api, a) for a in full], **_kw(array_api, kwargs))
        zero = sum(array_api.sum(v) for v in leaves) * 0.0
        return zero, out

    _, _, got = tg.vjp(f, *primals, has_aux=True)
    assert seen and all(seen)
    want = _get(strict, name)(*[_to(strict, a) for a in args], **_kw(strict, kwargs))
    _assert_close(_host(got), _host(want))
    assert _dtypes(array_api, got) == _dtypes(strict, want)


def test_svd_reconstructs(xp):
    a = F(2, 4, 3)
    u, s, vh = _need(xp, "linalg.svd")(xp.asarray(a), full_matrices=False)
    rebuilt = _host(u) @ (_host(s)[..., None] * _host(vh))
    np.testing.assert_allclose(rebuilt, a, rtol=1e-10, atol=1e-12)
    u, s, vh = xp.linalg.svd(xp.asarray(a))
    assert tuple(u.shape) == (2, 4, 4) and tuple(vh.shape) == (2, 3, 3)


# -- data type functions -----------------------------------------------------------------------
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_finfo_iinfo_match_the_reference(request, xp, name):
    _numpy_deviation(request, xp, f"finfo:{name}")
    dt, sdt = getattr(xp, name), getattr(strict, name)
    if name.startswith(("float", "complex")):
        got, want = xp.finfo(dt), strict.finfo(sdt)
        for field in ("bits", "eps", "max", "min", "smallest_normal"):
            assert float(getattr(got, field)) == float(getattr(want, field)), field
        # the real dtype also for complex dtypes: finfo(complex64).dtype is float32
        assert _dtype_name(xp, xp.asarray(np.zeros(1), dtype=got.dtype)) == _dtype_name(
            strict, strict.asarray(np.zeros(1), dtype=want.dtype))  # fmt: skip
        assert xp.finfo(xp.asarray(np.zeros(2, dtype=name))).bits == want.bits
    elif name != "bool":
        got, want = xp.iinfo(dt), strict.iinfo(sdt)
        assert (got.bits, got.min, got.max) == (want.bits, want.min, want.max)


KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
         "complex floating", "numeric", ("bool", "real floating")]  # fmt: skip


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_isdtype_matches_the_reference(xp, name):
    for kind in KINDS:
        assert xp.isdtype(getattr(xp, name), kind) == strict.isdtype(getattr(strict, name), kind)
    assert xp.isdtype(getattr(xp, name), getattr(xp, name))


@pytest.mark.parametrize("a", DTYPE_NAMES)
def test_result_type_and_can_cast_match_the_reference(xp, a):
    for b in DTYPE_NAMES:
        try:
            want = strict.result_type(getattr(strict, a), getattr(strict, b))
        except TypeError:
            continue  # no promotion defined between these kinds
        got = xp.result_type(getattr(xp, a), getattr(xp, b))
        assert str(np.dtype(got)) == str(want).split(".")[-1]
        assert xp.can_cast(getattr(xp, a), getattr(xp, b)) == strict.can_cast(
            getattr(strict, a), getattr(strict, b)), (a, b)  # fmt: skip


# -- tapegrad specifics ----------------------------------------------------------------------
def test_array_namespace_hook_and_version():
    x = tg.Tensor([1.0, 2.0])
    assert x.__array_namespace__() is array_api
    assert x.__array_namespace__(api_version="2024.12") is array_api
    assert x.__array_namespace__(api_version="2022.12") is array_api
    with pytest.raises(ValueError, match="api_version '2030.12' is not supported"):
        x.__array_namespace__(api_version="2030.12")
    assert array_api.__array_api_version__ == "2024.12"


def test_info_reports_tapegrads_defaults():
    info = array_api.__array_namespace_info__()
    d = info.default_dtypes()
    assert d == {"real floating": array_api.float32, "complex floating": array_api.complex64,
                 "integral": array_api.int64, "indexing": array_api.int64}  # fmt: skip
    assert array_api.asarray(1.5).dtype == d["real floating"]
    assert array_api.asarray(1).dtype == d["integral"] == array_api.asarray([1, 2]).dtype
    assert array_api.asarray(1j).dtype == d["complex floating"]
    assert array_api.asarray(True).dtype == array_api.bool
    assert info.default_device() == "cpu" and "cpu" in info.devices()
    assert set(info.dtypes()) == set(DTYPE_NAMES)
    assert set(info.dtypes(kind="signed integer")) == {"int8", "int16", "int32", "int64"}
    caps = info.capabilities()
    assert caps["boolean indexing"] and caps["max dimensions"] == 64
    x = array_api.asarray(np.arange(5.0))
    assert x[x > 2.0].shape == (2,)  # boolean indexing, as advertised


def test_asarray_copy_rules():
    a = np.arange(4.0)
    shared = array_api.asarray(a, copy=False)  # zero-copy, as the standard asks
    assert np.shares_memory(shared.numpy(), a)
    assert not shared.numpy().flags.writeable
    owned = array_api.asarray(a)  # default: a writeable array is copied (Tensors are immutable)
    a[0] = 100.0
    assert owned.numpy()[0] == 0.0 and shared.numpy()[0] == 100.0
    ro = np.arange(3.0)
    ro.flags.writeable = False
    assert np.shares_memory(array_api.asarray(ro).numpy(), ro)
    assert not np.shares_memory(array_api.asarray(ro, copy=True).numpy(), ro)
    t = tg.Tensor([1.0, 2.0])
    assert array_api.asarray(t) is t
    assert array_api.asarray(t, dtype=array_api.float64).dtype == array_api.float64
    with pytest.raises(ValueError, match="copy=False, but casting float32 to float64"):
        array_api.asarray(t, dtype=array_api.float64, copy=False)
    with pytest.raises(ValueError, match="copy=False, but list data must be copied"):
        array_api.asarray([1.0, 2.0], copy=False)
    with pytest.raises(TypeError, match="not one of the array API's dtypes"):
        array_api.asarray([1.0], dtype="float16")


def test_adapters_are_differentiable():
    x = tg.Tensor(F(3, 4))
    xp = x.__array_namespace__()

    def f(x):
        s = xp.std(x, axis=0, correction=1) + xp.linalg.vector_norm(x, axis=1)[:1]
        return xp.sum(s * xp.sum(xp.cumulative_sum(x, axis=1), axis=1)[0]) + xp.sum(
            xp.vecdot(x, x)) + xp.sum(xp.diff(x, n=2) ** 2)  # fmt: skip

    def f_tnp(x):
        s = tnp.std(x, axis=0, ddof=1) + tnp.linalg.norm(x, axis=1)[:1]
        return tnp.sum(s * tnp.sum(tnp.cumsum(x, axis=1), axis=1)[0]) + tnp.sum(
            tnp.sum(x * x, axis=-1)) + tnp.sum((x[:, 2:] - 2 * x[:, 1:-1] + x[:, :-2]) ** 2)

    np.testing.assert_allclose(tg.grad(f)(x).numpy(), tg.grad(f_tnp)(x).numpy(), rtol=1e-12)
    g = tg.grad(lambda x: xp.sum(xp.var(x, correction=0.5)))(x)
    n = x.size
    want = 2 * (x.numpy() - x.numpy().mean()) / (n - 0.5)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("ns", [array_api, tnp], ids=["array_api", "tapegrad.numpy"])
def test_sort_and_argsort_take_descending_and_keep_ties_stable(ns):
    x = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [0.0, 5.0, 5.0, -1.0, 0.0]])
    sx = strict.asarray(x)
    for desc in (False, True):
        for axis in (1, -1, 0):
            got = ns.argsort(tg.Tensor(x), axis=axis, descending=desc, stable=True).numpy()
            want = np.from_dlpack(strict.argsort(sx, axis=axis, descending=desc, stable=True))
            np.testing.assert_array_equal(got, want)
            got = ns.sort(tg.Tensor(x), axis=axis, descending=desc).numpy()
            np.testing.assert_array_equal(got, np.from_dlpack(strict.sort(sx, axis=axis,
                                                                          descending=desc)))
    # the cotangent follows the value to where it was moved, also when descending
    g = tg.grad(lambda v: tnp.sum(ns.sort(v, descending=True) * tnp.arange(5.0)))(
        tg.Tensor(np.array([3.0, 1.0, 4.0, 1.5, 9.0])))
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0, 1.0, 3.0, 0.0])
    assert tg.Tensor(x).argsort(descending=True).numpy()[0].tolist() == [0, 2, 3, 1, 4]


def test_fftfreq_takes_the_standards_dtype():
    assert array_api.fft.fftfreq is tnp.fft.fftfreq
    got = tnp.fft.fftfreq(5, d=0.5, dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), np.fft.fftfreq(5, 0.5))
    assert tnp.fft.rfftfreq(6).dtype == np.float64  # NumPy's default
    with pytest.raises(TypeError, match="rfftfreq: dtype must be a real floating dtype"):
        tnp.fft.rfftfreq(6, dtype=np.int32)


def test_errors_name_the_function():
    with pytest.raises(ValueError, match="cumulative_sum: axis must be specified"):
        array_api.cumulative_sum(array_api.ones((2, 2)))
    with pytest.raises(ValueError, match="vecdot: the vector axes differ: 3"):
        array_api.vecdot(array_api.ones((3,)), array_api.ones((4,)))
    with pytest.raises(ValueError, match="matrix_transpose: expected at least 2 dims"):
        array_api.matrix_transpose(array_api.ones((3,)))
    with pytest.raises(ValueError, match="meshgrid: array 1 must be 1-D"):
        array_api.meshgrid(array_api.ones((3,)), array_api.ones((2, 2)))
    with pytest.raises(TypeError, match="finfo: expected a floating dtype, got int32"):
        array_api.finfo(array_api.int32)
    with pytest.raises(TypeError, match="isdtype: expected a dtype, got Tensor"):
        array_api.isdtype(array_api.ones(2), "numeric")
    with pytest.raises(TypeError, match="result_type: at least one array or dtype"):
        array_api.result_type(1, 2.0)
    with pytest.raises(ValueError, match="diff: order must be non-negative"):
        array_api.diff(array_api.ones((3,)), n=-1)


# -- the inspection namespace, unstack, reshape(copy=), to_device(stream=), axis errors --------
def test_inspection_namespace_is_one_definition_for_both_namespaces():
    assert tnp.__array_namespace_info__ is array_api.__array_namespace_info__
    assert tnp.__array_api_version__ == array_api.__array_api_version__ == "2024.12"
    info = tnp.__array_namespace_info__()
    assert info.default_dtypes(device="cpu") == info.default_dtypes()
    assert tnp.asarray(1.5).dtype == info.default_dtypes()["real floating"]
    assert set(info.dtypes(device="cpu", kind=("bool", "complex floating"))) == {
        "bool", "complex64", "complex128"}  # fmt: skip
    with pytest.raises(ValueError, match=r"dtypes: unknown device 'tpu:0'"):
        info.dtypes(device="tpu:0")
    with pytest.raises(ValueError, match="not a known kind"):
        info.dtypes(kind="fractional")


def test_unstack_is_the_inverse_of_stack_and_differentiable():
    x = tg.Tensor(F(2, 3, 4))
    for axis in (0, 1, 2, -1, -3):
        parts = tnp.unstack(x, axis=axis)
        assert isinstance(parts, tuple) and len(parts) == x.shape[axis]
        np.testing.assert_array_equal(tnp.stack(parts, axis=axis).numpy(), x.numpy())
        for got, want in zip(parts, np.unstack(x.numpy(), axis=axis)):
            np.testing.assert_array_equal(got.numpy(), want)
    assert tnp.unstack(tg.Tensor(F(1, 3)))[0].shape == (3,)
    assert tnp.unstack(tg.Tensor(F(0, 3))) == ()
    check_grads(lambda v: tnp.unstack(v, axis=1)[0] * tnp.unstack(v, axis=1)[2], (x,), order=2,
                modes=("rev", "fwd"))  # fmt: skip
    check_grads(lambda v: tnp.unstack(v, axis=-1), (x,), order=2, modes=("rev", "fwd"))
    check_vmap(lambda v: tnp.unstack(v, axis=0)[1], (tg.Tensor(F(5, 2, 3)),))
    with pytest.raises(ValueError, match="unstack: x must have at least one axis"):
        tnp.unstack(tg.Tensor(1.0))
    with pytest.raises(IndexError, match="unstack: axis 3 is out of range"):
        tnp.unstack(x, axis=3)


def test_reshape_takes_the_copy_keyword():
    x = tg.Tensor(F(2, 6))
    for copy in (None, True, False):
        for xp in (tnp, array_api):
            np.testing.assert_array_equal(xp.reshape(x, (3, 4), copy=copy).numpy(),
                                          x.numpy().reshape(3, 4))  # fmt: skip
    assert tg.grad(lambda v: tnp.sum(tnp.reshape(v, (-1,), copy=True) ** 2))(x).shape == (2, 6)
    with pytest.raises(TypeError, match="reshape: copy must be None, True or False, got 'yes'"):
        tnp.reshape(x, (12,), copy="yes")


def test_to_device_takes_the_standards_stream_keyword():
    x = tg.Tensor([1.0, 2.0])
    assert x.to_device("cpu", stream=None) is x
    assert tnp.to_device(x, "cpu", stream=None) is x
    params = inspect.signature(tg.Tensor.to_device).parameters
    assert params["stream"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["stream"].default is None
    with pytest.raises(ValueError, match="to_device: stream=1 is for a copy to or from a GPU, "
                                         "but this copy is from cpu to cpu"):  # fmt: skip
        x.to_device("cpu", stream=1)


@pytest.mark.parametrize("ns", [array_api, tnp], ids=["array_api", "tapegrad.numpy"])
def test_out_of_range_axes_are_index_errors_as_numpys_axis_error(ns):
    # the standard asks expand_dims for IndexError; NumPy raises AxisError (a ValueError and an
    # IndexError) for every out-of-range axis, and so does tapegrad
    x = ns.asarray(F(2, 3))
    for axis in (3, -4, 10):
        with pytest.raises(IndexError, match=f"expand_dims: axis {axis} is out of range"):
            ns.expand_dims(x, axis=axis)
    for call in (lambda: ns.sum(x, axis=2), lambda: ns.flip(x, axis=-3),
                 lambda: ns.cumulative_sum(x, axis=2), lambda: ns.unstack(x, axis=2),
                 lambda: ns.squeeze(x, axis=5), lambda: ns.fft.fft(x, axis=4),
                 lambda: ns.vecdot(x, x, axis=-3), lambda: ns.moveaxis(x, 0, 7)):
        with pytest.raises(np.exceptions.AxisError):
            call()
    assert ns.expand_dims(x, axis=-3).shape == (1, 2, 3)


def test_pinv_takes_an_array_of_cutoffs():
    a = np.stack([np.diag([1.0, 1e-3, 0.0]), np.diag([1.0, 1e-6, 1e-9])])
    for rtol in (np.array([1e-2, 1e-8]), np.array([[1e-4]]).reshape(1), tg.Tensor([1e-2, 1e-8])):
        want = np.linalg.pinv(a, rtol=np.asarray(rtol))
        np.testing.assert_allclose(tnp.linalg.pinv(a, rtol=rtol).numpy(), want)
        np.testing.assert_allclose(
            array_api.linalg.pinv(array_api.asarray(a), rtol=rtol).numpy(), want)
    with pytest.raises(ValueError, match=r"pinv: rtol of shape \(3,\) does not broadcast to the "
                                         r"stack shape \(2,\)"):  # fmt: skip
        tnp.linalg.pinv(a, rtol=np.ones(3))
    # a cutoff is piecewise constant in rtol: its derivative is zero (as in JAX)
    g = tg.grad(lambda r: tnp.sum(tnp.linalg.pinv(a, rtol=r)))(tg.Tensor([1e-2, 1e-8]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
    assert tnp.linalg.pinv(np.zeros((0, 2, 3)), rtol=np.zeros(0)).shape == (0, 3, 2)
    batched = tg.vmap(lambda m: tnp.linalg.pinv(m, rtol=np.array([1e-2, 1e-8])))(
        tg.Tensor(np.stack([a, 2 * a])))
    np.testing.assert_allclose(batched.numpy()[1], np.linalg.pinv(2 * a, rtol=[1e-2, 1e-8]))
