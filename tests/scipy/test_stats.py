"""Example tests of ``tapegrad.scipy.stats``: values against SciPy (invalid parameters and
points outside the support included), derivatives against closed forms, ``vmap`` of the
argument checks, and the errors raised."""

import numpy as np
import pytest
import scipy.stats as sst

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy import special, stats
from tapegrad.testing import check_grads, check_vmap

X = np.array([-1.5, 0.0, 0.3, 1.0, 2.5])


@pytest.mark.parametrize("dist, params", [
    ("norm", (0.5, 2.0)), ("t", (3.0, 0.2, 1.5)), ("gamma", (2.5, -0.5, 1.5)),
    ("chi2", (3.0,)), ("beta", (2.0, 3.0, -2.0, 5.0)),
])
@pytest.mark.parametrize("method", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"])
def test_continuous_values_match_scipy(dist, params, method):
    got = getattr(getattr(stats, dist), method)(X, *params)
    want = getattr(getattr(sst, dist), method)(X, *params)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-300)


def test_invalid_parameters_give_nan_as_scipy():
    for dist, params in [("norm", (0.0, -1.0)), ("t", (-1.0,)), ("gamma", (0.0,)),
                         ("beta", (1.0, -2.0)), ("chi2", (-3.0,))]:
        got = getattr(stats, dist).logpdf(X, *params).numpy()
        want = getattr(sst, dist).logpdf(X, *params)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=dist)
        assert np.isnan(got).all(), dist
    mu = np.array([-1.0, 2.0])
    np.testing.assert_array_equal(stats.poisson.logpmf(np.array([1.0, 1.0]), mu).numpy(),
                                  sst.poisson.logpmf([1.0, 1.0], mu))


def test_norm_quantiles():
    q = np.array([0.0, 1e-10, 0.25, 0.5, 0.9, 1.0])
    np.testing.assert_allclose(stats.norm.ppf(q, 1.0, 2.0).numpy(), sst.norm.ppf(q, 1.0, 2.0),
                               rtol=1e-12)
    np.testing.assert_allclose(stats.norm.isf(q, 1.0, 2.0).numpy(), sst.norm.isf(q, 1.0, 2.0),
                               rtol=1e-12)
    # d ppf / dq = 1 / pdf(ppf(q)); ppf and cdf are inverse to first and second order
    q0 = tg.Tensor(np.array([0.1, 0.6]))
    d = tg.grad(lambda p: tnp.sum(stats.norm.ppf(p, 1.0, 2.0)))(q0)
    want = 1.0 / sst.norm.pdf(sst.norm.ppf(q0.numpy(), 1, 2), 1, 2)
    np.testing.assert_allclose(d.numpy(), want, rtol=1e-12)
    check_grads(lambda p, s: stats.norm.isf(p, 0.5, s), (q0, tg.Tensor(np.array([0.7, 1.3]))),
                order=2, modes=("rev", "fwd"))
    check_grads(lambda x: stats.norm.cdf(stats.norm.ppf(x)), (q0,), order=2)


def test_discrete_and_multivariate_values_match_scipy():
    k = np.array([-1.0, 0.0, 1.0, 2.5, 3.0, 10.0])
    for method in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"):
        np.testing.assert_allclose(getattr(stats.poisson, method)(k, 2.5, 1).numpy(),
                                   getattr(sst.poisson, method)(k, 2.5, 1), rtol=1e-12,
                                   atol=1e-300, err_msg=method)
    alpha = np.array([1.5, 2.0, 0.7])
    x = np.array([[0.2, 0.5], [0.3, 0.1], [0.5, 0.4]])
    np.testing.assert_allclose(stats.dirichlet.pdf(x, alpha).numpy(),
                               sst.dirichlet.pdf(x, alpha), rtol=1e-12)
    np.testing.assert_allclose(stats.dirichlet.logpdf(x[:2, 0], alpha).numpy(),
                               sst.dirichlet.logpdf(x[:2, 0], alpha), rtol=1e-12)
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    pts = np.array([[0.1, -0.2], [1.0, 2.0], [0.0, 0.0]])
    np.testing.assert_allclose(stats.multivariate_normal.pdf(pts, [0.5, 0.0], cov).numpy(),
                               sst.multivariate_normal.pdf(pts, [0.5, 0.0], cov), rtol=1e-12)
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(pts[0], None, cov).numpy(),
                               sst.multivariate_normal.logpdf(pts[0], None, cov), rtol=1e-12)
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(X, 0.3, 2.0).numpy(),
                               sst.multivariate_normal.logpdf(X, 0.3, 2.0), rtol=1e-12)


def test_derivatives_match_closed_forms():
    x, mu, s = 1.3, 0.4, 0.8
    gx, gmu, gs = tg.grad(stats.norm.logpdf, argnums=(0, 1, 2))(
        *[tg.Tensor(v, dtype="float64") for v in (x, mu, s)])
    z = (x - mu) / s
    np.testing.assert_allclose([gx.item(), gmu.item(), gs.item()],
                               [-z / s, z / s, (z * z - 1) / s], rtol=1e-14)
    # Poisson: d logpmf / d mu = k / mu - 1, and no derivative in k (piecewise constant)
    k = tg.Tensor(np.array([0.0, 2.0, 5.0]))
    g = tg.grad(lambda m: tnp.sum(stats.poisson.logpmf(k, m)))(tg.Tensor(np.full(3, 2.5)))
    np.testing.assert_allclose(g.numpy(), k.numpy() / 2.5 - 1.0, rtol=1e-14)
    assert tg.grad(lambda kk: tnp.sum(stats.poisson.logpmf(kk, 2.5)))(k).numpy().tolist() == [
        0.0, 0.0, 0.0]
    # Gamma CDF in its shape parameter: the derivative of gammainc in a
    da = tg.grad(lambda a: stats.gamma.cdf(2.0, a))(tg.Tensor(1.5, dtype="float64"))
    db = tg.grad(lambda a: special.gammainc(a, 2.0))(tg.Tensor(1.5, dtype="float64"))
    np.testing.assert_allclose(da.item(), db.item(), rtol=1e-14)
    # multivariate normal: d/dmean = cov^{-1} (x - mean)
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    xv, mv = np.array([1.0, -0.5]), np.array([0.2, 0.1])
    g = tg.grad(lambda m: stats.multivariate_normal.logpdf(xv, m, cov))(tg.Tensor(mv))
    np.testing.assert_allclose(g.numpy(), np.linalg.solve(cov, xv - mv), rtol=1e-12)
    check_grads(lambda c: stats.multivariate_normal.logpdf(xv, mv, c), (tg.Tensor(cov),),
                order=2, modes=("rev", "fwd"))


def test_torch_cross_check():
    torch = pytest.importorskip("torch")
    xs, df = torch.tensor(X, requires_grad=True), torch.tensor(3.5, dtype=torch.float64,
                                                               requires_grad=True)
    torch.distributions.StudentT(df, 0.2, 1.5).log_prob(xs).sum().backward()
    gx, gdf = tg.grad(lambda x, d: tnp.sum(stats.t.logpdf(x, d, 0.2, 1.5)), argnums=(0, 1))(
        tg.Tensor(X), tg.Tensor(3.5, dtype="float64"))
    np.testing.assert_allclose(gx.numpy(), xs.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gdf.item(), df.grad.item(), rtol=1e-10)


def test_vmap_of_parameters_and_checks():
    mus = tg.Tensor(np.array([[0.0, 0.5], [1.0, -1.0], [0.3, 0.3]]))
    cov = tg.Tensor(np.array([[2.0, 0.3], [0.3, 1.0]]))
    check_vmap(lambda m: stats.multivariate_normal.logpdf(np.array([0.1, 0.2]), m, cov), (mus,))
    alphas = tg.Tensor(np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]]))
    x = tg.Tensor(np.array([0.2, 0.3, 0.5]))
    check_vmap(stats.dirichlet.logpdf, (x, alphas), in_axes=(None, 0))
    check_vmap(tg.grad(lambda a: stats.dirichlet.logpdf(x, a)), (alphas,))
    bad = tg.Tensor(np.array([[1.0, 2.0, 3.0], [0.5, -0.5, 0.5]]))
    with pytest.raises(ValueError, match="dirichlet: all parameters alpha must be greater"):
        tg.vmap(lambda a: stats.dirichlet.logpdf(x, a))(bad)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: stats.dirichlet.logpdf(np.array([0.5, 0.6]), np.array([1.0, 1.0])), ValueError,
     r"dirichlet: x must lie on the simplex: its entries must sum to 1"),
    (lambda: stats.dirichlet.logpdf(np.array([1.5, -0.5]), np.array([1.0, 1.0])), ValueError,
     "dirichlet: each entry of x must be greater than or equal to 0"),
    (lambda: stats.dirichlet.logpdf(np.array([0.0, 1.0]), np.array([0.5, 1.0])), ValueError,
     "dirichlet: each entry of x must be greater than 0 where its alpha is below 1"),
    (lambda: stats.dirichlet.logpdf(np.array([0.5, 0.5]), np.array([[1.0, 1.0]])), ValueError,
     r"dirichlet: alpha must be one-dimensional, got shape \(1, 2\)"),
    (lambda: stats.dirichlet.logpdf(np.ones((4, 2)) / 4, np.ones(2)), ValueError,
     r"dirichlet: x must have shape \(K,\) or \(K, N\) with K = 2"),
    (lambda: stats.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), -np.eye(2)),
     np.linalg.LinAlgError, r"multivariate_normal: cov \(shape \(2, 2\)\) is not positive "
                            "definite"),
    (lambda: stats.multivariate_normal.logpdf(np.zeros(3), np.zeros(2), np.eye(2)), ValueError,
     r"multivariate_normal: x must have 2 components along its last axis, got shape \(1, 3\)"),
    (lambda: stats.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.eye(3)), ValueError,
     r"multivariate_normal: cov must be a \(2, 2\) matrix for mean of length 2"),
    (lambda: stats.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.ones(3)), ValueError,
     r"multivariate_normal: a 1-D cov holds the variances and needs length 2"),
    (lambda: stats.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.array([1.0, -1.0])),
     ValueError, "multivariate_normal: the variances"),
    (lambda: stats.norm.logpdf(np.ones(2), np.ones(3)), ValueError, "do not broadcast"),
])
def test_bad_input_is_explained(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_t_cdf_derivatives_at_the_center():
    # the z**2 form of the t CDF has 0 * inf derivatives at z = 0 (it gave NaN there)
    for df in (1.0, 3.5):
        x = tg.Tensor(np.array([0.0, 1e-170, 0.7]))
        g = tg.grad(lambda v, d=df: tnp.sum(stats.t.cdf(v, d, 0.0, 1.0)))(x)
        np.testing.assert_allclose(g.numpy(), sst.t.pdf(x.numpy(), df), rtol=1e-12)
        g = tg.grad(lambda v, d=df: tnp.sum(stats.t.sf(v, d)))(x)
        np.testing.assert_allclose(g.numpy(), -sst.t.pdf(x.numpy(), df), rtol=1e-12)
        args = [tg.Tensor(np.array(v)) for v in (0.0, df, 0.0, 1.5)]
        for method in ("cdf", "sf", "logcdf", "logsf"):
            check_grads(getattr(stats.t, method), args, order=2, modes=("rev", "fwd"),
                        rtol=1e-5)


def test_multivariate_normal_entropy_values_gradient_and_errors():
    from tapegrad.scipy.stats import multivariate_normal as mvn

    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    np.testing.assert_allclose(float(mvn.entropy(np.zeros(2), cov)),
                               sst.multivariate_normal.entropy(np.zeros(2), cov), rtol=1e-14)
    np.testing.assert_allclose(float(mvn.entropy(None, np.array(2.5))),
                               sst.multivariate_normal.entropy(None, 2.5), rtol=1e-14)
    g_mean, g_cov = tg.grad(mvn.entropy, argnums=(0, 1))(tg.Tensor(np.ones(2)), tg.Tensor(cov))
    assert not np.any(g_mean.numpy())
    np.testing.assert_allclose(g_cov.numpy(), 0.5 * np.linalg.inv(cov), rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match="multivariate_normal: cov .* not positive"):
        mvn.entropy(np.zeros(2), -np.eye(2))
    with pytest.raises(ValueError, match="multivariate_normal: cov must be a \\(2, 2\\) matrix"):
        mvn.entropy(np.zeros(2), np.eye(3))


@pytest.mark.parametrize("dist", ["t", "gamma", "beta", "chi2", "poisson"])
def test_composed_methods_keep_the_signature_and_keywords_of_what_they_compose(dist):
    """``pdf``/``pmf``, ``logcdf`` and ``logsf`` made by ``_util.composed`` from ``logpdf``,
    ``cdf`` and ``sf``: the same signature (keywords work) and ``exp``/``log`` of it."""
    import inspect

    mod = getattr(stats, dist)
    pairs = [("logcdf", "cdf", tnp.log), ("logsf", "sf", tnp.log)]
    if dist != "poisson":
        pairs.append(("pdf", "logpdf", tnp.exp))
    for name, inner, outer in pairs:
        f, g = getattr(mod, name), getattr(mod, inner)
        assert f.__name__ == name and f.__module__ == mod.__name__
        assert inspect.signature(f) == inspect.signature(g)
        params = list(inspect.signature(f).parameters)
        vals = [X + 2.0] + [np.array(0.7 + i) for i in range(len(params) - 1)]
        if dist == "beta":
            vals[0] = np.linspace(0.05, 0.95, 5)
        kwargs = dict(zip(params, vals))
        np.testing.assert_array_equal(f(**kwargs).numpy(), outer(g(*vals)).numpy())
