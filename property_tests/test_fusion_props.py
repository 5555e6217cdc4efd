"""Random elementwise programs: ``tg.jit(f, fuse=True)`` equals ``tg.jit(f)`` and the eager run.

Values and gradients, float32/float64/complex128, broadcasting with size-0 and size-1 axes.
Exact (array_equal, NaN equal to NaN) where the kernel computes arithmetic only; within a few
ulp per op where it computes a transcendental function with the C math library (arrays of at
most ``tapegrad.core.fusion.SMALL`` elements; larger ones keep those ops as NumPy calls). The op
choices are few, so that the examples share a handful of compiled kernels. Skipped without
numba.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.core.fusion as fusion
import tapegrad.numpy as tnp

pytestmark = pytest.mark.skipif(not fusion.available(), reason="numba is not installed")

BINARY = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b}
UNARY = {"neg": lambda a: -a, "tanh": tnp.tanh, "sqrt_abs": lambda a: tnp.sqrt(tnp.abs(a))}
LAST = {"max": lambda a, b: tnp.maximum(a, b), "div": lambda a, b: a / (b * b + 1.0),
        "mul": lambda a, b: a * b}
TRANSCENDENTAL = {"tanh"}
RTOL = {np.float32: 2e-5, np.float64: 1e-12, np.complex128: 1e-12}


def program(op1, un, op2):
    def f(x, b):
        y = BINARY[op1](x, b)
        y = UNARY[un](y)
        return LAST[op2](y, x) * 0.5

    return f


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64, np.complex128]))
    real = dtype != np.complex128
    op1 = draw(st.sampled_from(sorted(BINARY)))
    un = draw(st.sampled_from(sorted(UNARY) if real else ["neg", "tanh"]))
    op2 = draw(st.sampled_from(sorted(LAST) if real else ["mul"]))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3,
                                                    min_side=0, max_side=4))
    xs, bs = shapes.input_shapes
    out = shapes.result_shape
    if xs != out:  # x is read at the result's shape; b may broadcast
        xs, bs = out, bs
    elems = st.floats(-3, 3, width=32)
    x = draw(hnp.arrays(np.float64, xs, elements=elems))
    b = draw(hnp.arrays(np.float64, bs, elements=elems))
    if not real:
        x = x + 1j * x[::-1] if x.ndim else x + 0.5j
        b = b - 0.25j
    return dtype, (op1, un, op2), x.astype(dtype), b.astype(dtype)


def _check(got, want, exact, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=RTOL[dtype] * 1e-3)


@settings(max_examples=min(12, settings.default.max_examples))
@given(cases())
def test_fused_equals_unfused_and_eager(case):
    dtype, ops, x, b = case
    f = program(*ops)
    X, B = tg.Tensor(x), tg.Tensor(b)
    exact = (ops[1] not in TRANSCENDENTAL or x.size > fusion.SMALL) and dtype != np.complex128
    jf = tg.jit(f, fuse=True)
    jf(X, B)
    assert jf.lower(X, B).groups  # the program is fused
    got = jf(X, B).numpy()
    _check(got, f(X, B).numpy(), exact, dtype)
    plain = tg.jit(f)
    plain(X, B)
    np.testing.assert_array_equal(plain(X, B).numpy(), f(X, B).numpy())  # unfused: bit-exact
    _check(got, plain(X, B).numpy(), exact, dtype)
    if dtype == np.complex128:
        return
    grad = tg.grad(lambda x, b: tnp.sum(f(x, b) * x), argnums=(0, 1))
    jg = tg.jit(grad, fuse=True)
    jg(X, B)
    fused_g = jg(X, B)
    for a, e, u in zip(fused_g, grad(X, B), tg.jit(grad)(X, B)):
        _check(a.numpy(), e.numpy(), exact, dtype)
        _check(a.numpy(), u.numpy(), exact, dtype)


@st.composite
def reduced_cases(draw):
    """A real case of :func:`cases`, then a trailing ``sum``/``mean`` over all axes or one."""
    dtype, ops, x, b = draw(cases().filter(lambda c: c[0] != np.complex128))
    kind = draw(st.sampled_from(["sum", "mean"]))
    axis = draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    keepdims = draw(st.booleans())
    return dtype, ops, x, b, kind, axis, keepdims


@settings(max_examples=min(12, settings.default.max_examples))
@given(reduced_cases())
def test_a_trailing_reduction_fuses_and_sums_in_numpys_order(case):
    """The reduction joins the kernel (unless it covers no element), and the result equals
    the eager and unfused ones to the bit where the kernel's ops are exact: the kernel sums in
    NumPy's order. Gradients through the fused reduction agree as well."""
    dtype, ops, x, b, kind, axis, keepdims = case
    f0 = program(*ops)
    red = getattr(tnp, kind)

    def f(x, b):
        return red(f0(x, b), axis=axis, keepdims=keepdims)

    X, B = tg.Tensor(x), tg.Tensor(b)
    n = x.size if axis is None else x.shape[axis]
    exact = ops[1] not in TRANSCENDENTAL or x.size > fusion.SMALL
    jf = tg.jit(f, fuse=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # a mean over no element is NaN
        if kind == "mean" and n == 0:
            with pytest.raises(ValueError):
                f(X, B)
            return
        jf(X, B)
        groups = jf.lower(X, B).groups
        assert groups and (groups[-1].ops[-1] == kind) == (x.size > 0)
        got = jf(X, B).numpy()
        _check(got, f(X, B).numpy(), exact, dtype)
        np.testing.assert_array_equal(tg.jit(f)(X, B).numpy(), f(X, B).numpy())
        grad = tg.grad(lambda x, b: tnp.sum(f(x, b) * 2.0), argnums=(0, 1))
        jg = tg.jit(grad, fuse=True)
        jg(X, B)
        for a, e in zip(jg(X, B), grad(X, B)):
            _check(a.numpy(), e.numpy(), exact, dtype)
