"""Example tests of tapegrad.numpy's products, convolutions, polynomials and interpolation
(tapegrad.numpy._polynomial and the Roots primitive): values against NumPy,
error messages, the conventions at repeated roots and at knots, and gradient cross-checks
against torch.autograd where torch is installed."""

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap

RNG = np.random.default_rng(1)


def T(a, dtype=None):
    a = np.asarray(a)
    return tg.Tensor(a if dtype is None else a.astype(dtype))


def close(got, want, rtol=1e-12):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            close(g, w, rtol)
        return
    g = got.numpy() if isinstance(got, tg.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert g.shape == want.shape and g.dtype == want.dtype, (g.shape, g.dtype, want.shape,
                                                             want.dtype)
    np.testing.assert_allclose(g, want, rtol=rtol, atol=1e-12, equal_nan=True)


# -- errors ----------------------------------------------------------------------------------
def test_product_errors():
    with pytest.raises(ValueError, match=r"cross: incompatible dimensions for cross product "
                                         r"\(dimension must be 2 or 3\), got 4 and 3"):
        tnp.cross(T(np.ones(4)), T(np.ones(3)))
    with pytest.raises(ValueError, match="cross: axisa=2 is out of bounds"):
        tnp.cross(T(np.ones((2, 3))), T(np.ones(3)), axisa=2)
    with pytest.raises(ValueError, match="convolve: a cannot be empty"):
        tnp.convolve(T(np.ones(0)), T([1.0]))
    with pytest.raises(ValueError, match="correlate: v cannot be empty"):
        tnp.correlate(T([1.0]), T(np.ones(0)))
    with pytest.raises(ValueError, match="convolve: inputs must be 1-D"):
        tnp.convolve(T(np.ones((2, 2))), T([1.0]))
    with pytest.raises(ValueError, match="correlate: mode must be 'valid', 'same' or 'full'"):
        tnp.correlate(T([1.0, 2.0]), T([1.0]), mode="circular")
    with pytest.raises(ValueError, match=r"vecdot: the vector axes differ: 3 \(shape \(2, 3\)\)"):
        tnp.vecdot(T(np.ones((2, 3))), T(np.ones(4)))
    with pytest.raises(ValueError, match=r"matvec: inner sizes differ: \(2, 3\) and \(2,\)"):
        tnp.matvec(T(np.ones((2, 3))), T(np.ones(2)))
    with pytest.raises(ValueError, match="vecmat: need a vector and a matrix"):
        tnp.vecmat(T(np.ones(3)), T(np.ones(3)))
    with pytest.raises(ValueError, match=r"matrix_transpose: input must be at least 2-D"):
        tnp.matrix_transpose(T(np.ones(3)))
    with pytest.raises(TypeError, match="einsum_path: pass the subscripts as a string"):
        tnp.einsum_path(np.ones(2), [0], np.ones(2), [0])


def test_polynomial_errors():
    with pytest.raises(ValueError, match="poly: input must be 1d or non-empty square 2d array"):
        tnp.poly(T(np.ones((2, 3))))
    with pytest.raises(ValueError, match="polyval: p must be 1-D polynomial coefficients"):
        tnp.polyval(T(np.ones((2, 2))), 1.0)
    with pytest.raises(ValueError, match="polyder: order of derivative must be positive"):
        tnp.polyder(T([1.0, 2.0]), -1)
    with pytest.raises(ValueError, match="polyint: order of integral must be positive"):
        tnp.polyint(T([1.0, 2.0]), -1)
    with pytest.raises(ValueError, match="polyint: k must be a scalar or a rank-1 array"):
        tnp.polyint(T([1.0, 2.0]), 3, k=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"roots: input must be a rank-1 array, got shape"):
        tnp.roots(T(np.ones((2, 2))))
    with pytest.raises(ValueError, match="vander: x must be a one-dimensional array"):
        tnp.vander(T(np.ones((2, 2))))
    with pytest.raises(ValueError, match="vander: N must be a non-negative int"):
        tnp.vander(T([1.0]), -1)
    with pytest.raises(ValueError, match="polydiv: empty polynomial coefficients"):
        tnp.polydiv(T([1.0]), T(np.ones(0)))


def test_polyfit_errors_are_numpys():
    x, y = T(np.linspace(0, 1, 5)), T(np.ones(5))
    with pytest.raises(ValueError, match="polyfit: expected deg >= 0"):
        tnp.polyfit(x, y, -1)
    with pytest.raises(TypeError, match="polyfit: expected 1D vector for x"):
        tnp.polyfit(T(np.ones((5, 1))), y, 1)
    with pytest.raises(TypeError, match="polyfit: expected non-empty vector for x"):
        tnp.polyfit(T(np.ones(0)), T(np.ones(0)), 1)
    with pytest.raises(TypeError, match="polyfit: expected 1D or 2D array for y"):
        tnp.polyfit(x, T(np.ones((5, 1, 1))), 1)
    with pytest.raises(TypeError, match=r"polyfit: expected x and y to have same length \(5 and "
                                        r"4\)"):
        tnp.polyfit(x, T(np.ones(4)), 1)
    with pytest.raises(TypeError, match="polyfit: expected w and y to have the same length"):
        tnp.polyfit(x, y, 1, w=np.ones(3))
    with pytest.raises(ValueError, match="polyfit: the number of data points must exceed order"):
        tnp.polyfit(x, y, 4, cov=True)


def test_interp_errors():
    with pytest.raises(ValueError, match=r"interp: fp and xp are not of the same length \(2 and "
                                         r"3\)"):
        tnp.interp(T([0.5]), T([0.0, 1.0, 2.0]), T([1.0, 2.0]))
    with pytest.raises(ValueError, match="interp: array of sample points is empty"):
        tnp.interp(T([0.5]), T(np.ones(0)), T(np.ones(0)))
    with pytest.raises(ValueError, match="interp: period must be a non-zero value"):
        tnp.interp(T([0.5]), T([0.0, 1.0]), T([1.0, 2.0]), period=0)
    with pytest.raises(TypeError, match="interp: x and xp must be real"):
        tnp.interp(T([0.5j]), T([0.0, 1.0]), T([1.0, 2.0]))
    with pytest.raises(ValueError, match="interp: xp and fp must be 1-D"):
        tnp.interp(T([0.5]), T(np.ones((2, 2))), T(np.ones((2, 2))))


# -- values ----------------------------------------------------------------------------------
def test_products_match_numpy():
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 1, 2))
    close(tnp.kron(T(a), T(b)), np.kron(a, b))
    close(tnp.kron(T(a, np.float32), T(b[0], np.float32)), np.kron(a.astype(np.float32),
                                                                   b[0].astype(np.float32)))
    u, v = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    close(tnp.cross(T(u), T(v)), np.cross(u, v))
    close(tnp.cross(T(u.T), T(u.T[::-1]), axisa=0, axisb=0, axisc=0),
          np.cross(u.T, u.T[::-1], axisa=0, axisb=0, axisc=0))
    for na, nb in ((2, 3), (3, 2), (2, 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2: 2-vectors
            want = np.cross(u[:, :na], v[:nb])
        close(tnp.cross(T(u[:, :na]), T(v[:nb])), want)
    z = RNG.normal(size=(2, 3, 4)) + 1j * RNG.normal(size=(2, 3, 4))
    close(tnp.vecdot(T(z), T(z), axis=1), np.vecdot(z, z, axis=1))
    close(tnp.matvec(T(z), T(z[0, 0])), np.matvec(z, z[0, 0]))
    close(tnp.vecmat(T(z[:, :, 0]), T(z)), np.vecmat(z[:, :, 0], z))
    close(tnp.matrix_transpose(T(z)), np.matrix_transpose(z))
    ops_ = (np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))
    got = tnp.einsum_path("ij,jk,kl->il", *[T(o) for o in ops_], optimize="optimal")
    assert got == np.einsum_path("ij,jk,kl->il", *ops_, optimize="optimal")


@pytest.mark.parametrize("n", [1, 2, 3, 6])
@pytest.mark.parametrize("m", [1, 2, 4, 7])
def test_convolve_correlate_every_mode_and_length(n, m):
    a = RNG.normal(size=n) + 1j * RNG.normal(size=n)
    v = RNG.normal(size=m) + 1j * RNG.normal(size=m)
    for mode in ("full", "same", "valid"):
        close(tnp.convolve(T(a), T(v), mode), np.convolve(a, v, mode))
        close(tnp.correlate(T(a), T(v), mode), np.correlate(a, v, mode))
        close(tnp.convolve(T(a.real), T(v.real), mode), np.convolve(a.real, v.real, mode))


def test_polynomials_match_numpy():
    p = np.array([2.0, -1.0, 3.0, 0.5])
    x = RNG.normal(size=(2, 3))
    close(tnp.polyval(T(p), T(x)), np.polyval(p, x))
    close(tnp.polyval(np.poly1d(p), T(x)), np.polyval(p, x))
    close(tnp.polyval(T(p, np.float32), T(x, np.float32)),
          np.polyval(p.astype(np.float32), x.astype(np.float32)), rtol=1e-6)
    for m in (0, 1, 2, 5):
        close(tnp.polyder(T(p), m), np.polyder(p, m))
        close(tnp.polyint(T(p), m, k=1.5), np.polyint(p, m, k=1.5))
    close(tnp.polyint(T(p), 2, k=[1.0, 2.0]), np.polyint(p, 2, k=[1.0, 2.0]))
    close(tnp.polyder(T([1, 2, 3], np.int64)), np.polyder(np.array([1, 2, 3])))
    for a, b in ((p, p[:2]), (p[:2], p), (p, p)):
        close(tnp.polyadd(T(a), T(b)), np.polyadd(a, b))
        close(tnp.polysub(T(a), T(b)), np.polysub(a, b))
        close(tnp.polymul(T(a), T(b)), np.polymul(a, b))
        close(tnp.polydiv(T(a), T(b)), np.polydiv(a, b))
    prod = np.polymul(p, [1.0, -2.0])
    close(tnp.polydiv(T(prod), T([1.0, -2.0])), np.polydiv(prod, [1.0, -2.0]))  # exact division
    close(tnp.poly(T([1.0, 2.0, -3.0])), np.poly([1.0, 2.0, -3.0]))
    close(tnp.poly(T([1 + 2j, 1 - 2j, 3.0 + 0j])), np.poly([1 + 2j, 1 - 2j, 3.0]))  # real
    close(tnp.poly(T([1 + 2j, 3.0 + 0j])), np.poly([1 + 2j, 3.0]))  # complex
    m = RNG.normal(size=(4, 4))
    close(tnp.poly(T(m)), np.poly(m), rtol=1e-10)
    assert tnp.poly(T(np.ones(0))) == np.poly(np.ones(0)) == 1.0
    close(tnp.vander(T([1.0, 2.0, 0.0]), 4), np.vander([1.0, 2.0, 0.0], 4))
    close(tnp.vander(T([1, 2, 3], np.int64), increasing=True),
          np.vander(np.array([1, 2, 3]), increasing=True))
    close(tnp.vander(T([1.0, 2.0]), 0), np.vander([1.0, 2.0], 0))


def test_polymul_drops_leading_zero_coefficients_as_numpy():
    # NumPy's polymul makes each argument a poly1d, which drops exact leading zeros
    for a, b in (([0.0, 1.0], [1.0, 1.0]), ([0.0], [0.0, 0.0]), ([0.0, 0.0, 2.0], [3.0]),
                 ([0.0, 1e-300, 1.0], [2.0, 0.0])):
        close(tnp.polymul(T(a), T(b)), np.polymul(a, b))
    g = tg.grad(lambda a: tnp.sum(tnp.polymul(a, T([1.0, 2.0]))))(T([0.0, 1.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 3.0])  # the dropped zero: no gradient
    # inside vmap each example could drop differently: nothing is dropped
    out = tg.vmap(tnp.polymul)(T([[0.0, 1.0], [1.0, 1.0]]), T([[1.0, 1.0], [1.0, 1.0]]))
    np.testing.assert_array_equal(out.numpy(), [[0.0, 1.0, 1.0], [1.0, 2.0, 1.0]])
    with pytest.raises(ValueError, match="polymul: empty polynomial coefficients"):
        tnp.polymul(T(np.zeros(0)), T([1.0]))


def test_roots_follow_numpy_including_zero_coefficients():
    for p in ([1.0, -6.0, 11.0, -6.0], [0.0, 0.0, 1.0, -3.0, 2.0, 0.0, 0.0], [1, 0, 1],
              [0.0, 0.0], [5.0], [2.0, 0.0], [1 + 1j, 2.0, 3 - 1j]):
        close(tnp.roots(T(p)), np.roots(np.asarray(p)))
    assert tnp.roots(T([1.0, 0.0, 1.0], np.float32)).dtype == np.complex64


def test_polyfit_matches_numpy():
    x = np.linspace(-1, 2, 9)
    y = np.sin(2 * x)
    y2 = np.stack([y, np.cos(x)], axis=1)
    w = np.linspace(1, 2, 9)
    close(tnp.polyfit(T(x), T(y), 3), np.polyfit(x, y, 3), rtol=1e-10)
    close(tnp.polyfit(T(x), T(y2), 2, w=T(w)), np.polyfit(x, y2, 2, w=w), rtol=1e-10)
    close(tnp.polyfit(T(x), T(y), 3, full=True), np.polyfit(x, y, 3, full=True), rtol=1e-10)
    close(tnp.polyfit(T(x), T(y2), 3, cov=True), np.polyfit(x, y2, 3, cov=True), rtol=1e-10)
    close(tnp.polyfit(T(x), T(y), 3, cov="unscaled"), np.polyfit(x, y, 3, cov="unscaled"),
          rtol=1e-10)
    assert tnp.polyfit(T(x, np.float32), T(y, np.float32), 2).dtype == np.float32
    yc = y + 1j * np.cos(3 * x)  # complex values, real sample points
    close(tnp.polyfit(T(x), T(yc), 2, full=True), np.polyfit(x, yc, 2, full=True), rtol=1e-10)
    check_grads(lambda a, b: tnp.polyfit(a, b, 2), (T(x), T(yc)), order=2, modes=("rev", "fwd"))
    with pytest.raises(TypeError, match="polyfit: complex x is not supported"):
        tnp.polyfit(T(x + 0j), T(y), 1)
    # rank deficient (NumPy warns RankWarning): the minimum-norm coefficients
    xr = np.array([0.0, 0.0, 1.0, 1.0])
    with pytest.warns(np.exceptions.RankWarning):
        want = np.polyfit(xr, xr + 1, 3)
    close(tnp.polyfit(T(xr), T(xr + 1), 3), want, rtol=1e-8)


def test_interp_matches_numpy():
    xp, fp = np.array([0.0, 1.0, 2.5, 3.0]), np.array([1.0, -1.0, 2.0, 0.0])
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 4.0, np.nan])
    close(tnp.interp(T(x), T(xp), T(fp)), np.interp(x, xp, fp))
    close(tnp.interp(T(x), T(xp), T(fp), left=-5.0, right=7.0),
          np.interp(x, xp, fp, left=-5.0, right=7.0))
    close(tnp.interp(T(x), T(xp), T(fp + 2j)), np.interp(x, xp, fp + 2j))
    close(tnp.interp(T(x), T(xp[:1]), T(fp[:1])), np.interp(x, xp[:1], fp[:1]))
    ang, kp, kf = np.array([-170.0, -10, 10, 350, 185]), np.array([190.0, -190, 350, -350]), \
        np.array([5.0, 10, 3, 4])
    close(tnp.interp(T(ang), T(kp), T(kf), period=360), np.interp(ang, kp, kf, period=360))
    assert tnp.interp(T(x, np.float32), T(xp, np.float32), T(fp, np.float32)).dtype == \
        np.float32
    assert tnp.interp(T([1, 2], np.int64), T([0, 3], np.int64), T([0, 1], np.int64)).dtype == \
        np.float64


# -- conventions -------------------------------------------------------------------------------
def test_roots_gradient_by_implicit_differentiation_and_at_a_double_root():
    p = T([1.0, -6.0, 11.0, -6.0])  # roots 3, 2, 1
    check_grads(tnp.roots, (p,), order=2, modes=("rev", "fwd"), eps=1e-5)
    jac = tg.jacrev(tnp.roots)(p).numpy()
    r = np.roots(p.numpy())
    dp = np.polyval(np.polyder(p.numpy()), r)
    want = -np.vander(r, 4) / dp[:, None]
    np.testing.assert_allclose(jac, want, rtol=1e-10)
    double = T([1.0, -2.0, 1.0])  # (z - 1)**2
    g = tg.grad(lambda v: tnp.sum(tnp.real(tnp.roots(v))))(double).numpy()
    assert not np.all(np.isfinite(g))  # not differentiable: infinite/NaN
    # a zero cotangent gives 0, even there
    g0 = tg.grad(lambda v: tnp.sum(tnp.real(tnp.roots(v)) * 0.0))(double).numpy()
    np.testing.assert_array_equal(g0, 0.0)


def test_interp_gradient_at_knots_is_one_sided():
    xp, fp = T([0.0, 1.0, 3.0]), T([0.0, 2.0, 3.0])
    g = tg.grad(lambda x: tnp.sum(tnp.interp(x, xp, fp)))(T([0.0, 1.0, 2.0, 3.0, -1.0, 4.0]))
    np.testing.assert_array_equal(g.numpy(), [2.0, 0.5, 0.5, 0.0, 0.0, 0.0])
    gf = tg.grad(lambda f: tnp.sum(tnp.interp(T([0.25, 2.0]), xp, f)))(fp).numpy()
    np.testing.assert_allclose(gf, [0.75, 0.25 + 0.5, 0.5])


def test_polyfit_gradients_with_orthogonal_columns():
    # symmetric x: the scaled Vandermonde columns are orthonormal, the singular values equal;
    # gradients through an SVD would be unbounded there, the refinement's are exact
    x, y = T([-1.0, 0.0, 1.0]), T([1.0, 2.0, 4.0])
    check_grads(lambda a, b: tnp.polyfit(a, b, 1), (x, y), order=2, modes=("rev", "fwd"))
    jac = tg.jacrev(lambda b: tnp.polyfit(x, b, 1))(y).numpy()
    np.testing.assert_allclose(jac, [[-0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]], atol=1e-12)


def test_roots_and_search_primitives_batch():
    check_vmap(tnp.roots, (T([[1.0, -3.0, 2.0], [1.0, 0.0, 1.0]]),))
    check_vmap(tg.grad(lambda p: tnp.sum(tnp.real(tnp.roots(p)))),
               (T([[1.0, -3.0, 2.0], [2.0, -1.0, -1.0]]),))
    with pytest.raises(ValueError, match="the same number of leading and of trailing zero"):
        tg.vmap(tnp.roots)(T([[1.0, -3.0, 2.0], [0.0, 1.0, 1.0]]))
    x, knots = T(RNG.normal(size=(3, 5))), T(np.sort(RNG.normal(size=(3, 4)), axis=1))
    right = lambda a, k: tnp.searchsorted(k, a, side="right")  # noqa: E731 (interp's search)
    check_vmap(right, (x, knots))
    check_vmap(right, (x, knots[0]), in_axes=(0, None))
    check_vmap(tg.vmap(right),
               (T(RNG.normal(size=(2, 3, 5))), T(np.sort(RNG.normal(size=(2, 3, 4)), axis=-1))))
    check_vmap(lambda a, k: tnp.interp(a, k, T([1.0, 0.0, 2.0, -1.0])), (x, knots))


# -- torch cross-checks ------------------------------------------------------------------------
def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 2))
    u, v = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    s, k = RNG.normal(size=7), RNG.normal(size=3)
    cases = [
        (lambda x, y: tnp.kron(x, y), lambda x, y: torch.kron(x, y), (a, b)),
        (lambda x, y: tnp.cross(x, y), lambda x, y: torch.linalg.cross(x, y), (u, v)),
        (lambda x, y: tnp.vecdot(x, y), lambda x, y: torch.linalg.vecdot(x, y), (u, v)),
        (lambda x, y: tnp.convolve(x, y), lambda x, y: torch.nn.functional.conv1d(
            x[None, None], y.flip(0)[None, None], padding=2)[0, 0], (s, k)),
        (lambda x, y: tnp.correlate(x, y), lambda x, y: torch.nn.functional.conv1d(
            x[None, None], y[None, None])[0, 0], (s, k)),
        (lambda x: tnp.vander(x, 4), lambda x: torch.stack([x**3, x**2, x, x**0], 1), (s,)),
    ]
    for ours, theirs, arrays in cases:
        ts = [torch.tensor(arr, requires_grad=True) for arr in arrays]
        out = theirs(*ts)
        cot = RNG.normal(size=tuple(out.shape))
        want = torch.autograd.grad(out, ts, torch.tensor(cot))
        got = tg.vjp(ours, *[T(arr) for arr in arrays])[1](T(cot))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)


def test_polymul_drops_leading_zeros_as_numpy():
    # NumPy reads both factors as poly1d, which drops leading zero coefficients; polymul kept
    # them (a longer result: [0, 1, 1] for NumPy's [1, 1]); a property test drew [0] * [0, 0]
    for p, q in [([0.0, 1.0], [1.0, 1.0]), ([0.0], [0.0, 0.0]), ([0.0, 0.0, 2.0], [3.0, 0.0]),
                 ([1.0, 0.0], [0.0, 0.0, 5.0])]:
        got = tnp.polymul(T(p), T(q))
        want = np.polymul(np.array(p), np.array(q))
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
    g = tg.grad(lambda a: tnp.sum(tnp.polymul(a, T([1.0, 2.0]))))(T([0.0, 3.0, 1.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 3.0, 3.0])  # the dropped zero gets none
    # inside vmap nothing is dropped (one shape for the whole batch)
    out = tg.vmap(lambda a: tnp.polymul(a, T([1.0, 1.0])))(T([[0.0, 1.0], [2.0, 1.0]]))
    np.testing.assert_array_equal(out.numpy(), [[0.0, 1.0, 1.0], [2.0, 3.0, 1.0]])

