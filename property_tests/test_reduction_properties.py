"""Property tests of the reductions: forward equals NumPy/SciPy (dtype included) over drawn
shapes (scalars, size-1 and size-0 dims), axes (None, int, negative, tuples) and keepdims;
reverse-mode derivatives of orders 1 and 2 match finite differences in float64; cotangents
have the input's shape and dtype.

Values for max/min/std/norms are drawn distinct (and away from 0 for the norms), so there are
no ties or kinks under the finite-difference step; the conventions at ties and kinks are
pinned by example tests in tests/ops/test_reduction_ops.py.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import floats_in, shapes


@dataclass(frozen=True)
class Spec:
    name: str
    fn: object  # (Tensor, axis, keepdims, **extra) -> Tensor
    ref: object  # (ndarray, axis, keepdims, **extra) -> ndarray
    axes: str = "multi"  # "multi": None/int/tuple; "single": None/int; "scan": None/int
    needs_nonempty: bool = False  # raises ValueError when a reduced axis has size 0
    dtypes: tuple = (np.float32, np.float64)
    values: str = "any"  # "any" | "distinct" (no ties, spread >= 0.15, |x| >= 0.25)
    differentiable: bool = True
    exact: bool = True  # forward bitwise equal to the reference
    extra: dict = field(default_factory=dict)  # name -> strategy of extra keyword arguments
    # gradient checks draw "any" values in [-bound, bound]: high-degree polynomials (prod,
    # cumprod) need a smaller range and step, or the finite differences lose the digits
    bound: float = 3.0
    eps: float = 1e-4


def _lse_ref(a, axis, keepdims):
    shape = np.sum(a, axis=axis, keepdims=keepdims).shape
    if axis == ():  # reducing over no axes is the identity (SciPy mishandles axis=())
        return a
    if a.size == 0:  # the log of an empty sum (SciPy fails on some empty shapes)
        return np.full(shape, -np.inf, dtype=a.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = scipy.special.logsumexp(a, axis=axis, keepdims=keepdims)
    # SciPy returns shape (1,) for a 0-d input with keepdims; NumPy's reductions give ().
    return np.reshape(out, shape)


def _norm2_ref(a, axis, keepdims):
    return np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))


def _norm_p_ref(a, axis, keepdims, p):
    """``sum(|x|**p)**(1/p)`` in float64 (exact enough to judge float32), in ``a``'s dtype."""
    with np.errstate(all="ignore"):  # 0**(1/p) for p < 0 over an empty axis: inf
        s = np.sum(np.abs(a.astype(np.float64)) ** p, axis=axis, keepdims=keepdims)
        return np.asarray(s ** (1.0 / p)).astype(a.dtype)


def _norm_p(x, axis, keepdims, p):
    return tg.ops.NormP.apply(x, axis=axis, keepdims=keepdims, p=p)


#: Orders p of the vector p-norm: the common ones, and any real with 1/4 <= |p| <= 6.
P_ORDERS = st.one_of(
    st.sampled_from([0.5, 1.5, 3.0, 4.0, -1.0, -2.0, 1.0, 2.0]),
    st.floats(0.25, 6.0),
    st.floats(-6.0, -0.25),
)


def _scan(fn):
    return lambda x, axis, keepdims: fn(x, axis=axis)


def _ddof_fn(f):
    return lambda x, axis, keepdims, ddof: f(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _numpy_var(a, axis, keepdims, ddof):
    return np.var(a, axis=axis, ddof=ddof, keepdims=keepdims)


def _numpy_std(a, axis, keepdims, ddof):
    return np.std(a, axis=axis, ddof=ddof, keepdims=keepdims)


def _reduce(fn):
    return lambda x, axis, keepdims: fn(x, axis=axis, keepdims=keepdims)


INT = (np.float32, np.float64, np.int32)
SPECS = [
    Spec("sum", _reduce(tnp.sum), _reduce(np.sum), dtypes=INT),
    Spec("mean", _reduce(tnp.mean), _reduce(np.mean), needs_nonempty=True, dtypes=INT),
    Spec("prod", _reduce(tnp.prod), _reduce(np.prod), dtypes=INT, bound=1.5, eps=1e-5),
    Spec("max", _reduce(tnp.max), _reduce(np.max), needs_nonempty=True, values="distinct"),
    Spec("min", _reduce(tnp.min), _reduce(np.min), needs_nonempty=True, values="distinct"),
    Spec(
        "var",
        _ddof_fn(tnp.var),
        _numpy_var,
        needs_nonempty=True,
        extra={"ddof": st.integers(0, 1)},
    ),
    Spec(
        "std",
        _ddof_fn(tnp.std),
        _numpy_std,
        needs_nonempty=True,
        values="distinct",
        extra={"ddof": st.integers(0, 1)},
    ),
    Spec("logsumexp", _reduce(tnp.logsumexp), _lse_ref, exact=False),
    Spec("norm2", _reduce(tg.ops.Norm2.apply), _norm2_ref, values="distinct"),
    Spec("norm_p", _norm_p, _norm_p_ref, values="distinct", exact=False, extra={"p": P_ORDERS}),
    Spec("cumsum", _scan(tnp.cumsum), _scan(np.cumsum), axes="scan", dtypes=INT),
    Spec(
        "cumprod",
        _scan(tnp.cumprod),
        _scan(np.cumprod),
        axes="scan",
        dtypes=INT,
        bound=1.5,
        eps=1e-5,
    ),
    Spec(
        "argmax",
        _reduce(tnp.argmax),
        _reduce(np.argmax),
        axes="single",
        dtypes=INT,
        differentiable=False,
    ),
    Spec(
        "argmin",
        _reduce(tnp.argmin),
        _reduce(np.argmin),
        axes="single",
        dtypes=INT,
        differentiable=False,
    ),
    Spec("any", _reduce(tnp.any), _reduce(np.any), dtypes=INT, differentiable=False),
    Spec("all", _reduce(tnp.all), _reduce(np.all), dtypes=INT, differentiable=False),
]
GRAD_SPECS = [s for s in SPECS if s.differentiable]


# -- strategies -------------------------------------------------------------------------------
def axes_for(ndim: int, kind: str):
    """None, an int (possibly negative) or, for ``multi``, a tuple of distinct axes."""
    options = [st.none()]
    if ndim:
        single = st.integers(-ndim, ndim - 1)
        options.append(single)
        if kind == "multi":
            options.append(st.lists(single, max_size=ndim, unique_by=lambda a: a % ndim).map(tuple))
    return st.one_of(*options)


def _count(shape, axis):
    if axis is None:
        axes = range(len(shape))
    elif isinstance(axis, int):
        axes = [axis]
    else:
        axes = axis
    return math.prod(shape[a] for a in axes)


@st.composite
def distinct_values(draw, shape, dtype=np.float64):
    """Values with distinct magnitudes (gaps >= 0.15), |x| >= 0.25 and random signs."""
    size = math.prod(shape)
    ranks = np.array(draw(st.permutations(range(size))), dtype=np.float64)
    noise = draw(hnp.arrays(np.float64, (size,), elements=st.floats(0.0, 0.1)))
    signs = draw(hnp.arrays(np.bool_, (size,)))
    mag = 0.25 + 0.25 * ranks + noise
    return np.where(signs, mag, -mag).reshape(shape).astype(dtype)


def values_for(spec, shape, dtype, bound=3.0):
    if spec.values == "distinct" and np.dtype(dtype).kind == "f":
        return distinct_values(shape, dtype)
    if np.dtype(dtype).kind == "i":
        return hnp.arrays(dtype, shape, elements=st.integers(-3, 3))
    width = np.dtype(dtype).itemsize * 8
    return hnp.arrays(dtype, shape, elements=floats_in(-bound, bound, width=width))


def _draw_case(data, spec, dtype, max_side, min_side, bound=3.0):
    shape = data.draw(shapes(max_dims=3, min_side=min_side, max_side=max_side), label="shape")
    axis = data.draw(axes_for(len(shape), spec.axes), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims") if spec.axes != "scan" else False
    extra = {k: data.draw(s, label=k) for k, s in spec.extra.items()}
    a = data.draw(values_for(spec, shape, dtype, bound), label="x")
    return a, axis, keepdims, extra


def _raises_empty(spec, shape, axis, extra):
    if spec.axes == "scan":
        return False
    n = _count(shape, axis)
    if spec.name in ("argmax", "argmin"):
        return n == 0 and (axis is not None or len(shape) > 0)
    if spec.needs_nonempty and n == 0:
        return True
    return spec.name in ("var", "std") and n - extra.get("ddof", 0) <= 0


# -- forward ----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@given(data=st.data())
def test_forward_matches_numpy(spec, data):
    dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
    a, axis, keepdims, extra = _draw_case(data, spec, dtype, max_side=4, min_side=0)
    a_before = a.copy()
    x = tg.Tensor(a)
    if _raises_empty(spec, a.shape, axis, extra):
        with pytest.raises(ValueError, match=spec.name if spec.name != "norm2" else "norm"):
            spec.fn(x, axis, keepdims, **extra)
        return
    out = spec.fn(x, axis, keepdims, **extra)
    want = np.asarray(spec.ref(a, axis, keepdims, **extra))
    assert out.shape == want.shape
    assert out.dtype == want.dtype
    if spec.exact:
        np.testing.assert_array_equal(out.numpy(), want)
    else:
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out.numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(a, a_before)  # the input is never modified


# -- gradients --------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", GRAD_SPECS, ids=lambda s: s.name)
@given(data=st.data())
def test_grads_match_finite_differences(spec, data):
    a, axis, keepdims, extra = _draw_case(
        data, spec, np.float64, max_side=3, min_side=1, bound=spec.bound
    )
    if _raises_empty(spec, a.shape, axis, extra):
        return
    f = lambda v: spec.fn(v, axis, keepdims, **extra)  # noqa: E731
    check_grads(f, (tg.Tensor(a),), order=2, eps=spec.eps)


@pytest.mark.parametrize("spec", GRAD_SPECS, ids=lambda s: s.name)
@given(data=st.data())
def test_cotangents_have_input_shape_and_dtype(spec, data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    a, axis, keepdims, extra = _draw_case(data, spec, dtype, max_side=4, min_side=0)
    if _raises_empty(spec, a.shape, axis, extra):
        return
    x = tg.Tensor(a)
    out, vjp_fn = tg.vjp(lambda v: spec.fn(v, axis, keepdims, **extra), x)
    ct = tg.Tensor(np.ones(out.shape, dtype=out.dtype))
    (gx,) = vjp_fn(ct)
    assert gx.shape == x.shape and gx.dtype == x.dtype
    assert np.isfinite(gx.numpy()).all()


# -- norm (numpy.linalg.norm semantics) -------------------------------------------------------
VECTOR_ORDS = [None, 1, 2, np.inf, -np.inf]
MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


@given(data=st.data())
def test_vector_norm_matches_numpy_and_grads(data):
    ord_ = data.draw(st.sampled_from(VECTOR_ORDS), label="ord")
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    a = data.draw(distinct_values(shape, dtype), label="x")
    out = tnp.norm(a, ord=ord_, axis=axis, keepdims=keepdims)
    want = np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims)
    assert out.shape == want.shape and out.dtype == want.dtype
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    f = lambda v: tnp.norm(v, ord=ord_, axis=axis, keepdims=keepdims)  # noqa: E731
    check_grads(f, (tg.Tensor(a.astype(np.float64)),), order=2)


@st.composite
def subset_sum_distinct(draw, shape):
    """Values +-2**k with distinct k: every subset sum of magnitudes is distinct (no ties in
    the matrix 1-/inf-norms), and |x| >= 1/16."""
    size = math.prod(shape)
    ranks = np.array(draw(st.permutations(range(size))), dtype=np.float64)
    signs = draw(hnp.arrays(np.bool_, (size,)))
    mag = 2.0 ** (ranks - 4)
    return np.where(signs, mag, -mag).reshape(shape)


@given(data=st.data())
def test_matrix_norm_matches_numpy_and_grads(data):
    ord_ = data.draw(st.sampled_from(MATRIX_ORDS), label="ord")
    shape = data.draw(shapes(min_dims=2, max_dims=2, min_side=1, max_side=3), label="shape")
    axis = data.draw(st.sampled_from([None, (0, 1), (1, 0), (-1, 0), (-2, -1)]), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    a = data.draw(subset_sum_distinct(shape), label="x")
    out = tnp.norm(a, ord=ord_, axis=axis, keepdims=keepdims)
    want = np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims)
    assert out.shape == want.shape and out.dtype == want.dtype
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    f = lambda v: tnp.norm(v, ord=ord_, axis=axis, keepdims=keepdims)  # noqa: E731
    check_grads(f, (tg.Tensor(a),), order=2)


@given(data=st.data())
def test_batched_matrix_norm_forward(data):
    ord_ = data.draw(st.sampled_from(MATRIX_ORDS), label="ord")
    shape = data.draw(shapes(min_dims=3, max_dims=3, min_side=1, max_side=3), label="shape")
    pair = data.draw(st.permutations(range(3)), label="axes")[:2]
    axis = tuple(a - 3 if data.draw(st.booleans()) else a for a in pair)
    keepdims = data.draw(st.booleans(), label="keepdims")
    a = data.draw(hnp.arrays(np.float32, shape, elements=floats_in(width=32)), label="x")
    out = tnp.norm(a, ord=ord_, axis=axis, keepdims=keepdims)
    want = np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims)
    assert out.shape == want.shape and out.dtype == want.dtype
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


@given(data=st.data())
def test_vector_p_norm_of_any_real_order_matches_numpy_and_grads(data):
    p = data.draw(P_ORDERS, label="p")
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=0, max_side=3), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    a = data.draw(distinct_values(shape, dtype), label="x")
    out = tnp.norm(a, ord=p, axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore"):  # NumPy warns for p < 0 over an empty axis
        want = np.linalg.norm(a, ord=p, axis=axis, keepdims=keepdims)
    assert out.shape == want.shape and out.dtype == want.dtype
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-5 if dtype == np.float32 else 1e-12)
    if a.size:
        f = lambda v: tnp.norm(v, ord=p, axis=axis, keepdims=keepdims)  # noqa: E731
        check_grads(f, (tg.Tensor(a.astype(np.float64)),), order=2)


def _p_norm_grad_with_conventions(a, p):
    """The documented gradient of the p-norm of 1-D ``a`` (0 where the norm is 0, and at zero
    entries for p < 1), evaluated in float64 NumPy."""
    with np.errstate(all="ignore"):
        n = np.sum(np.abs(a) ** p) ** (1.0 / p)
        if n == 0:
            return np.zeros_like(a)
        g = np.sign(a) * (np.abs(a) / n) ** (p - 1)
    return np.where(a == 0, 0.0, g)


@given(data=st.data())
def test_p_norm_gradient_with_zero_entries_is_finite_and_follows_the_convention(data):
    p = data.draw(P_ORDERS, label="p")
    n = data.draw(st.integers(1, 4), label="n")
    elements = st.sampled_from([0.0, -0.0, 0.5, -0.75, 1.0, -2.0, 3.0])
    a = data.draw(hnp.arrays(np.float64, (n,), elements=elements), label="x")
    f = lambda v: tnp.norm(v, ord=p)  # noqa: E731
    with np.errstate(divide="ignore"):  # NumPy warns for 0**p with p < 0
        np.testing.assert_allclose(f(tg.Tensor(a)).item(), np.linalg.norm(a, ord=p), rtol=1e-12)
    g = tg.grad(f)(tg.Tensor(a)).numpy()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, _p_norm_grad_with_conventions(a, p), rtol=1e-10, atol=1e-12)
    assert np.isfinite(tg.hessian(f)(tg.Tensor(a)).numpy()).all()
