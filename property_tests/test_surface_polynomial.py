"""Property tests of tapegrad.numpy's products, convolutions, polynomials and interpolation on
drawn shapes and values (size-0 and size-1 axes and broadcasting where NumPy allows them,
complex inputs where NumPy takes them): values and dtypes against NumPy, gradients at orders
1 and 2 in both modes against finite differences, and vmap against a Python loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import broadcastable_shapes, floats_in

VALUES = floats_in(-2.0, 2.0)


def _arr(draw, shape, cplx=False, elements=VALUES):
    a = draw(hnp.arrays(np.float64, shape, elements=elements))
    if cplx:
        a = a + 1j * draw(hnp.arrays(np.float64, shape, elements=elements))
    return a


def _close(got, want, rtol=1e-11):
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                 want.shape, want.dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=1e-11, equal_nan=True)


def _grads(f, *arrays):
    check_grads(f, tuple(tg.Tensor(a) for a in arrays), order=2, modes=("rev", "fwd"))


@given(data=st.data(), cplx=st.booleans())
def test_kron(data, cplx):
    sa = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    sb = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    a, b = _arr(data.draw, sa, cplx), _arr(data.draw, sb)
    _close(tnp.kron(tg.Tensor(a), tg.Tensor(b)), np.kron(a, b))
    if a.size and b.size:
        _grads(tnp.kron, a, b)


@given(data=st.data(), n=st.sampled_from([3, (2, 3), (3, 2)]))
def test_cross_broadcasting(data, n):
    na, nb = (n, n) if isinstance(n, int) else n
    sa, sb = data.draw(broadcastable_shapes(2, max_dims=2, min_side=0, max_side=3))
    a, b = _arr(data.draw, sa + (na,)), _arr(data.draw, sb + (nb,))
    with np.errstate(all="ignore"), pytest.warns(DeprecationWarning) if na == 2 or nb == 2 \
            else _null():
        want = np.cross(a, b)
    _close(tnp.cross(tg.Tensor(a), tg.Tensor(b)), want)
    if a.size and b.size:
        _grads(tnp.cross, a, b)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@given(data=st.data(), n=st.integers(1, 6), m=st.integers(1, 6), cplx=st.booleans(),
       mode=st.sampled_from(["full", "same", "valid"]), op=st.sampled_from(["convolve",
                                                                            "correlate"]))
def test_convolve_correlate(data, n, m, cplx, mode, op):
    a, v = _arr(data.draw, (n,), cplx), _arr(data.draw, (m,), cplx)
    fn = getattr(tnp, op)
    _close(fn(tg.Tensor(a), tg.Tensor(v), mode), getattr(np, op)(a, v, mode))
    _grads(lambda x, y: fn(x, y, mode), a, v)
    b = data.draw(st.integers(0, 2))
    check_vmap(lambda x, y: fn(x, y, mode),
               (tg.Tensor(_arr(data.draw, (b, n))), tg.Tensor(_arr(data.draw, (b, m)))))


@given(data=st.data(), cplx=st.booleans(), which=st.sampled_from(["vecdot", "matvec", "vecmat"]))
def test_vector_matrix_products(data, cplx, which):
    sa, sb = data.draw(broadcastable_shapes(2, max_dims=2, min_side=0, max_side=3))
    n, m = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    if which == "vecdot":
        a, b = _arr(data.draw, sa + (n,), cplx), _arr(data.draw, sb + (n,), cplx)
    elif which == "matvec":
        a, b = _arr(data.draw, sa + (m, n), cplx), _arr(data.draw, sb + (n,), cplx)
    else:
        a, b = _arr(data.draw, sa + (n,), cplx), _arr(data.draw, sb + (n, m), cplx)
    fn = getattr(tnp, which)
    _close(fn(tg.Tensor(a), tg.Tensor(b)), getattr(np, which)(a, b))
    if a.size and b.size:
        _grads(fn, a, b)
    x = _arr(data.draw, (2,) + sa + (n, n), cplx)
    _close(tnp.matrix_transpose(tg.Tensor(x)), np.matrix_transpose(x))


@given(data=st.data(), cplx=st.booleans(), n=st.integers(1, 5), k=st.integers(1, 3))
def test_polynomial_arithmetic(data, cplx, n, k):
    p, q = _arr(data.draw, (n,), cplx), _arr(data.draw, (k,), cplx)
    x = _arr(data.draw, data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)), cplx)
    _close(tnp.polyval(tg.Tensor(p), tg.Tensor(x)), np.polyval(p, x))
    _close(tnp.polyadd(tg.Tensor(p), tg.Tensor(q)), np.polyadd(p, q))
    _close(tnp.polysub(tg.Tensor(q), tg.Tensor(p)), np.polysub(q, p))
    _close(tnp.polymul(tg.Tensor(p), tg.Tensor(q)), np.polymul(p, q))
    m = data.draw(st.integers(0, 3))
    _close(tnp.polyder(tg.Tensor(p), m), np.polyder(p, m))
    _close(tnp.polyint(tg.Tensor(p), m, k=0.5), np.polyint(p, m, k=0.5))
    if x.size:
        _grads(tnp.polyval, p, x)
    if p[0] != 0 and q[0] != 0:  # a zero leading coefficient is dropped (NumPy): the result's
        _grads(lambda a, b: tnp.polymul(a, b), p, q)  # length jumps under finite differences
    _grads(lambda a: tnp.polyint(a, 2, k=[1.0, -1.0]), p)
    if n > 1:
        _grads(lambda a: tnp.polyder(a, 1), p)


@given(data=st.data(), n=st.integers(1, 5), k=st.integers(1, 3))
def test_polydiv(data, n, k):
    u = _arr(data.draw, (n,))
    v = _arr(data.draw, (k,), elements=st.one_of(floats_in(0.5, 2.0), floats_in(-2.0, -0.5)))
    q, r = tnp.polydiv(tg.Tensor(u), tg.Tensor(v))
    wq, wr = np.polydiv(u, v)
    _close(q, wq, rtol=1e-9)
    assume(r.shape == wr.shape)  # NumPy trims remainders within 1e-8 of 0: so do we, mostly
    _close(r, wr, rtol=1e-9)
    _grads(lambda a, b: tnp.polydiv(a, b)[0], u, v)
    if r.shape[0] == max(k - 1, 1) and abs(wr[0]) > 1e-3:
        _grads(lambda a, b: tnp.polydiv(a, b)[1], u, v)


@st.composite
def separated_roots(draw, max_n=4, cplx=False):
    """Distinct roots, at least 0.3 apart, and the polynomial (leading coefficient drawn)."""
    n = draw(st.integers(1, max_n))
    grid = draw(st.lists(st.integers(-6, 6), min_size=n, max_size=n, unique=True))
    r = np.asarray(grid, dtype=np.float64) * 0.35
    if cplx:
        r = r + 1j * np.asarray(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))) * 0.4
    lead = draw(st.sampled_from([1.0, -2.0, 0.5]))
    return r, lead * np.poly(r)


@given(rp=separated_roots(), cplx=st.booleans())
def test_roots_and_poly(rp, cplx):
    r, p = rp
    if cplx:
        p = p * (1 + 0.5j)
    _close(tnp.roots(tg.Tensor(p)), np.roots(p), rtol=1e-9)
    _close(tnp.poly(tg.Tensor(r)), np.poly(r))
    _grads(tnp.poly, r)
    check_grads(tnp.roots, (tg.Tensor(p),), order=2, modes=("rev", "fwd"), eps=1e-6,
                rtol=1e-4, atol=1e-5)


@given(data=st.data())
def test_poly_of_a_matrix(data):
    n = data.draw(st.integers(1, 4))
    a = _arr(data.draw, (n, n))
    _close(tnp.poly(tg.Tensor(a)), np.poly(a), rtol=1e-8)
    _grads(tnp.poly, a)


@given(data=st.data(), increasing=st.booleans())
def test_vander(data, increasing):
    x = _arr(data.draw, (data.draw(st.integers(0, 4)),))
    n = data.draw(st.one_of(st.none(), st.integers(0, 4)))
    _close(tnp.vander(tg.Tensor(x), n, increasing), np.vander(x, n, increasing))
    if x.size:
        _grads(lambda v: tnp.vander(v, n, increasing), x)


@given(data=st.data(), deg=st.integers(0, 3), two=st.booleans(), weighted=st.booleans())
def test_polyfit(data, deg, two, weighted):
    m = data.draw(st.integers(deg + 2, 8))
    x = np.sort(np.asarray(data.draw(st.lists(st.integers(-20, 20), min_size=m, max_size=m,
                                              unique=True)), dtype=np.float64) * 0.1)
    y = _arr(data.draw, (m, 2) if two else (m,))
    w = _arr(data.draw, (m,), elements=floats_in(0.5, 2.0)) if weighted else None
    _close(tnp.polyfit(tg.Tensor(x), tg.Tensor(y), deg, w=w), np.polyfit(x, y, deg, w=w),
           rtol=1e-7)
    check_grads(lambda a, b: tnp.polyfit(a, b, deg, w=w), (tg.Tensor(x), tg.Tensor(y)),
                order=2, modes=("rev", "fwd"), rtol=1e-4, atol=1e-5)


@given(data=st.data(), cplx=st.booleans(), lr=st.booleans())
def test_interp(data, cplx, lr):
    n = data.draw(st.integers(1, 5))
    xp = np.sort(np.asarray(data.draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n,
                                               unique=True)), dtype=np.float64) * 0.2)
    fp = _arr(data.draw, (n,), cplx)
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4))
    # points off the knots (the derivative in x jumps there)
    x = data.draw(hnp.arrays(np.float64, shape, elements=floats_in(-5.0, 5.0).filter(
        lambda v: np.all(np.abs(v - xp) > 1e-3))))
    kw = {"left": -3.0, "right": 3.0} if lr else {}
    _close(tnp.interp(tg.Tensor(x), tg.Tensor(xp), tg.Tensor(fp), **kw),
           np.interp(x, xp, fp, **kw))
    if x.size:
        _grads(lambda a, b, c: tnp.interp(a, b, c, **kw), x, xp, fp)
    b = data.draw(st.integers(0, 3))
    xb = np.stack([x + 0.01 * i for i in range(b)]) if b else np.zeros((0,) + x.shape)
    check_vmap(lambda v: tnp.interp(v, tg.Tensor(xp), tg.Tensor(fp)), (tg.Tensor(xb),))
    check_vmap(tg.grad(lambda f, v: tnp.sum(tnp.real(tnp.interp(v, tg.Tensor(xp), f)))),
               (tg.Tensor(np.stack([fp] * b) if b else np.zeros((0, n), fp.dtype)),
                tg.Tensor(x)), in_axes=(0, None))


@given(data=st.data(), b=st.integers(0, 3))
def test_polynomials_batch(data, b):
    r = np.stack([np.array([1.0, -0.5, 2.0]) + 0.1 * i for i in range(b)]) if b else \
        np.zeros((0, 3))
    p = np.stack([np.poly(v) for v in r]) if b else np.zeros((0, 4))
    check_vmap(tnp.roots, (tg.Tensor(p),))
    check_vmap(tg.grad(lambda v: tnp.sum(tnp.roots(v) ** 2)), (tg.Tensor(p),))
    check_vmap(tnp.poly, (tg.Tensor(r),))
    x = _arr(data.draw, (b, 6))
    check_vmap(lambda v: tnp.polyfit(tg.Tensor(np.linspace(0, 1, 6)), v, 2), (tg.Tensor(x),))
    check_vmap(lambda v: tnp.polyval(v, 0.7), (tg.Tensor(p),))
