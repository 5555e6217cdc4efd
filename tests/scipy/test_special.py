"""Example tests of ``tapegrad.scipy.special``: values against SciPy at chosen points (edges
included), dtype rules, derivatives against closed forms, and the errors raised."""

import numpy as np
import pytest
import scipy.special as sp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy import special
from tapegrad.testing import check_grads

X = np.array([-2.5, -0.5, 0.3, 1.0, 2.0, 7.5])
POS = np.array([0.05, 0.5, 1.0, 3.0, 12.0])


@pytest.mark.parametrize("name", ["gamma", "gammaln", "digamma", "rgamma", "erf", "erfc",
                                  "expit", "ndtr", "log_ndtr", "i0", "i0e", "i1", "i1e",
                                  "j0", "j1"])
def test_one_argument_functions_match_scipy(name):
    got = getattr(special, name)(X)
    want = getattr(sp, name)(X)
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)


@pytest.mark.parametrize("name", ["y0", "y1", "entr", "ndtri", "logit", "erfinv"])
def test_functions_on_restricted_domains_match_scipy(name):
    x = np.array([0.0, 0.1, 0.5, 0.9, 1.0]) if name != "erfinv" else np.array(
        [-1.0, -0.5, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(getattr(special, name)(x).numpy(), getattr(sp, name)(x))
    outside = np.array([-0.5, 1.5]) if name in ("ndtri", "logit") else np.array([-1.0])
    np.testing.assert_array_equal(getattr(special, name)(outside).numpy(),
                                  getattr(sp, name)(outside))  # NaN as SciPy


def test_two_and_three_argument_functions_match_scipy():
    a, b = np.meshgrid(POS, POS)
    x = np.linspace(0.0, 1.0, a.size).reshape(a.shape)
    for name, args in [("beta", (a, b)), ("betaln", (a, b)), ("gammainc", (a, b * 3)),
                       ("gammaincc", (a, b * 3)), ("betainc", (a, b, x)),
                       ("xlogy", (a - 1.0, b)), ("xlog1py", (a - 1.0, b))]:
        np.testing.assert_allclose(getattr(special, name)(*args).numpy(),
                                   getattr(sp, name)(*args), rtol=1e-13, err_msg=name)
    for name, fn, ref in [("polygamma", special.polygamma, sp.polygamma),
                          ("jn", special.jn, sp.jn), ("yn", special.yn, sp.yn),
                          ("iv", special.iv, sp.iv), ("ive", special.ive, sp.ive)]:
        for n in (0, 1, 3):
            np.testing.assert_allclose(fn(n, POS).numpy(), ref(n, POS), rtol=1e-13,
                                       err_msg=name)
    np.testing.assert_allclose(special.multigammaln(POS + 2.0, 4).numpy(),
                               sp.multigammaln(POS + 2.0, 4), rtol=1e-14)
    assert special.psi is special.digamma


def test_dtypes_follow_numpy():
    x32 = X.astype(np.float32)
    assert special.gammaln(x32).dtype == np.float32
    assert special.betainc(np.float32(2.0), 3.0, np.full(2, 0.5, np.float32)).dtype == np.float32
    assert special.erf(np.array([1, 2])).dtype == np.float64  # integers compute in float64
    z = np.array([0.5 + 0.5j, 2.0 - 1.0j])
    assert special.erf(z).dtype == np.complex128
    assert special.erf(z.astype(np.complex64)).dtype == np.complex64
    np.testing.assert_allclose(special.gamma(z).numpy(), sp.gamma(z), rtol=1e-14)
    assert isinstance(special.gamma(2.0), tg.Tensor)


def test_derivatives_match_closed_forms():
    x = tg.Tensor(np.array([0.7, 1.5, 4.0]))
    g = tg.grad(lambda v: tnp.sum(special.gammaln(v)))(x)
    np.testing.assert_allclose(g.numpy(), sp.digamma(x.numpy()), rtol=1e-14)
    g = tg.grad(lambda v: tnp.sum(special.erf(v)))(x)
    np.testing.assert_allclose(g.numpy(), 2 / np.sqrt(np.pi) * np.exp(-x.numpy() ** 2),
                               rtol=1e-14)
    h = tg.grad(tg.grad(lambda v: special.digamma(v)))(tg.Tensor(2.0, dtype="float64"))
    np.testing.assert_allclose(h.item(), sp.polygamma(2, 2.0), rtol=1e-13)
    # d/da of the regularized lower incomplete gamma, against a central difference in mpmath-free
    # form: P(a, x) = gammainc; compare with a high-order finite difference of SciPy's values
    a0, x0, eps = 2.5, 1.7, 1e-5
    fd = (-sp.gammainc(a0 + 2 * eps, x0) + 8 * sp.gammainc(a0 + eps, x0)
          - 8 * sp.gammainc(a0 - eps, x0) + sp.gammainc(a0 - 2 * eps, x0)) / (12 * eps)
    da = tg.grad(special.gammainc)(tg.Tensor(a0, dtype="float64"), x0)
    np.testing.assert_allclose(da.item(), fd, rtol=1e-8)
    check_grads(special.betainc, [tg.Tensor(np.array([0.8, 3.0])), tg.Tensor(np.array([2.0, 0.6])),
                                  tg.Tensor(np.array([0.3, 0.9]))], order=2, modes=("rev", "fwd"),
                rtol=1e-4)


def test_derivative_at_kinks_and_edges():
    # xlogy: 0 * log(0) = 0 and its derivative in y is 0 where x == 0
    gy = tg.grad(lambda y: special.xlogy(0.0, y))(tg.Tensor(0.0, dtype="float64"))
    assert gy.item() == 0.0
    # rgamma has simple zeros at the poles of gamma: a finite derivative there
    d = tg.grad(special.rgamma)(tg.Tensor(np.array(-1.0)))
    np.testing.assert_allclose(d.item(), -1.0, rtol=1e-12)  # d/dx 1/Gamma(x) at -1 is (-1)^(1)


def test_logsumexp_and_softmax():
    a = np.array([[1.0, 2.0, -np.inf], [0.5, 0.5, 0.5]])
    np.testing.assert_allclose(special.logsumexp(a, axis=1).numpy(), sp.logsumexp(a, axis=1))
    b = np.array([[1.0, -3.0, 2.0], [1.0, 1.0, -1.0]])
    got, sign = special.logsumexp(a, axis=-1, b=b, return_sign=True)
    want, wsign = sp.logsumexp(a, axis=-1, b=b, return_sign=True)
    np.testing.assert_allclose(got.numpy(), want)
    np.testing.assert_array_equal(sign.numpy(), wsign)
    np.testing.assert_allclose(special.softmax(a, axis=0).numpy(), sp.softmax(a, axis=0))
    np.testing.assert_allclose(special.log_softmax(a[1]).numpy(), sp.log_softmax(a[1]))
    g = tg.grad(lambda v: special.logsumexp(v))(tg.Tensor(a[1]))
    np.testing.assert_allclose(g.numpy(), np.full(3, 1 / 3))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: special.gammaln(np.array([1 + 1j])), TypeError,
     r"gammaln: x must be real .* complex128"),
    (lambda: special.log_softmax(np.array([1j])), TypeError, "log_softmax"),
    (lambda: special.multigammaln(np.array([0.2]), 3), ValueError,
     r"multigammaln: condition a .* > 0.5 \* \(d-1\)"),
    (lambda: special.multigammaln(np.array([2.0]), 0), TypeError,
     "multigammaln: d must be a positive int"),
    (lambda: special.multigammaln(np.array([2.0]), 2.5), TypeError,
     "multigammaln: d must be a positive int"),
    (lambda: special.betainc(np.ones(2), np.ones(3), np.ones(3) * 0.5), ValueError,
     r"betainc: shapes \(2,\), \(3,\), \(3,\) do not broadcast"),
    (lambda: special.logsumexp(np.ones(3), axis=3), ValueError,
     "logsumexp: axis 3 is out of range"),
    (lambda: special.softmax(np.ones(3), axis=2), ValueError, "axis 2 is out of range"),
])
def test_bad_input_is_explained(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_derivative_in_an_order_raises():
    with pytest.raises(NotImplementedError, match="iv: no derivative with respect to v"):
        tg.grad(lambda v: special.iv(v, 2.0))(tg.Tensor(1.5))
    with pytest.raises(NotImplementedError, match="polygamma"):
        tg.grad(lambda n: special.polygamma(n, 2.0))(tg.Tensor(1.0))
    # a constant order is fine
    g = tg.grad(lambda z: special.iv(1.5, z))(tg.Tensor(2.0, dtype="float64"))
    np.testing.assert_allclose(g.item(), (sp.iv(0.5, 2.0) + sp.iv(2.5, 2.0)) / 2, rtol=1e-13)


def test_torch_cross_check():
    torch = pytest.importorskip("torch")
    x = np.array([0.3, 1.2, 2.5])
    for ours, theirs in [(special.gammaln, torch.lgamma), (special.digamma, torch.digamma),
                         (special.erfinv, torch.erfinv), (special.i0e, torch.special.i0e),
                         (special.ndtr, torch.special.ndtr)]:
        xs = x if ours is not special.erfinv else x / 3
        t = torch.tensor(xs, requires_grad=True)
        theirs(t).sum().backward()
        g = tg.grad(lambda v, f=ours: tnp.sum(f(v)))(tg.Tensor(xs))
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-8)  # torch: ~1e-9


def test_gammasgn_values_and_zero_derivative():
    x = np.array([0.5, -0.5, -1.5, -2.5, 3.0, 0.0, -0.0, -1.0, np.nan])
    got = special.gammasgn(x)
    np.testing.assert_array_equal(got.numpy(), sp.gammasgn(x))
    assert special.gammasgn(x.astype(np.float32)).dtype == np.float32
    g = tg.grad(lambda v: tnp.sum(special.gammasgn(v) * v))(tg.Tensor(x[:5]))
    np.testing.assert_array_equal(g.numpy(), sp.gammasgn(x[:5]))  # only the product's
    check_grads(special.gammasgn, (tg.Tensor(x[:5]),), order=2, modes=("rev", "fwd"))


def test_functions_take_their_arguments_by_position_or_by_keyword():
    """The functions made from one primitive each (:func:`special._public`) keep the
    signature of the primitive's argument names: keywords work, a wrong call names the
    function, and the real-only ones reject complex input under every argument name."""
    import inspect

    made = [name for name in special.__all__
            if getattr(special, name).__code__ is special._public(special.J0).__code__]
    assert {"gamma", "j0", "logit", "ndtri", "betainc", "iv", "yn"} <= set(made)
    for name in made:
        f = getattr(special, name)
        params = list(inspect.signature(f).parameters)
        vals = [np.array([0.5, 0.75])] * len(params)
        if name in ("polygamma", "jn", "yn", "iv", "ive"):
            vals[0] = np.array([1, 2])
        by_position = f(*vals).numpy()
        np.testing.assert_array_equal(f(**dict(zip(params, vals))).numpy(), by_position)
        with pytest.raises(TypeError, match=rf"^{f.__name__}\(\) "):
            f(*vals, vals[0])
        with pytest.raises(TypeError, match=rf"^{f.__name__}\(\) "):
            f()
    for name in ("j0", "logit", "betainc", "yn"):
        f = getattr(special, name)
        params = list(inspect.signature(f).parameters)
        for bad in params:
            kwargs = {p: 1j if p == bad else 0.5 for p in params}
            with pytest.raises(TypeError, match=rf"{name}: {bad} must be real"):
                f(**kwargs)
