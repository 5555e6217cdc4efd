"""``tapegrad.random``'s samplers against their anchors.

- Deterministic parts exactly (float64): each continuous sampler is its distribution's quantile
  function (SciPy's ``ppf``) at the uniforms of ``uniform(key, shape, float64)``; gamma is
  ``gammaincinv``; multivariate normal and orthogonal are the factorizations of ``normal``'s
  draws; JAX's own formulas where they take the same numbers.
- Distributions: Kolmogorov-Smirnov tests against SciPy's CDFs (always) and two-sample tests
  against ``jax.random``'s draws (skipped without JAX), chi-square tests for the discrete ones,
  with fixed keys and thresholds that a wrong parameter fails (checked below).
- Gradients: pathwise derivatives against finite differences with a fixed key (the sample is a
  smooth function of the parameters given the key), to second order; gamma's implicit
  reparameterization gradient against its formula and ``jax.lax.random_gamma_grad``.
- JAX's argument conventions: output shapes and dtypes for ``shape=None`` and given shapes,
  errors for shapes that do not fit, key validation, ``jit`` replays and ``vmap`` over keys.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import random as tr
from tapegrad.random._samplers import _truncated_normal_icdf
from tapegrad.testing import check_grads

TINY = np.finfo(np.float64).tiny
N = 4000
P_MIN = 1e-3  # KS / chi-square p-values below this fail (fixed keys: the tests are reproducible)


def unit(k, shape):
    """The uniforms on (0, 1) that the inversion samplers transform."""
    return np.maximum(tr.uniform(k, shape, np.float64).numpy(), TINY)


def f64(x):
    return tg.Tensor(np.asarray(x, np.float64))


@pytest.fixture
def jr():
    """``jax.random`` with float64 enabled inside the test (skipped without JAX)."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax.random


# -- the transforms of one uniform --------------------------------------------------------------
SIMPLE = {
    "exponential": st.expon,
    "laplace": st.laplace,
    "logistic": st.logistic,
    "gumbel": st.gumbel_r,
    "cauchy": st.cauchy,
}


@pytest.mark.parametrize("name", sorted(SIMPLE))
def test_simple_samplers_are_the_quantile_function_at_the_uniforms(name):
    k = tr.key(7)
    x = getattr(tr, name)(k, (N,), np.float64)
    assert x.dtype == np.float64 and x.shape == (N,)
    np.testing.assert_allclose(x.numpy(), SIMPLE[name].ppf(unit(k, (N,))), rtol=1e-12,
                               atol=1e-14)
    assert st.kstest(x.numpy(), SIMPLE[name].cdf).pvalue > P_MIN


@pytest.mark.parametrize("name", sorted(SIMPLE))
def test_simple_samplers_match_jax_in_distribution(name, jr):
    ours = getattr(tr, name)(tr.key(1), (N,), np.float64).numpy()
    theirs = np.asarray(getattr(jr, name)(jr.key(1), (N,), dtype="float64"))
    assert st.ks_2samp(ours, theirs).pvalue > P_MIN


def test_the_extreme_uniforms_give_finite_samples():
    # the uniforms avoid 0 (and 1, with 53 random bits), as JAX's samplers do
    u = np.array([TINY, 0.5, 1 - 2**-53])
    for name, dist in SIMPLE.items():
        assert np.isfinite(dist.ppf(u)).all(), name
    x = tr.gumbel(tr.key(0), (200000,), np.float32)
    assert x.dtype == np.float32 and np.isfinite(x.numpy()).all()


# -- truncated normal ---------------------------------------------------------------------------
BOUNDS = [(-1.0, 2.0), (-3.0, -0.5), (0.2, 1.7), (4.0, 6.0), (-np.inf, 0.0), (1.0, np.inf),
          (-9.0, -8.0)]  # fmt: skip


@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_truncated_normal_is_scipys_quantile_function(lo, hi):
    k = tr.key(3)
    x = tr.truncated_normal(k, lo, hi, (N,), np.float64).numpy()
    np.testing.assert_allclose(x, st.truncnorm.ppf(unit(k, (N,)), lo, hi), rtol=1e-9)
    assert ((x > lo) & (x < hi)).all()
    assert st.kstest(x, st.truncnorm(lo, hi).cdf).pvalue > P_MIN


def test_truncated_normal_equals_jaxs_formula_and_gradient_on_the_same_uniforms(jr):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    lo, hi = np.array([-1.5, -3.0, 0.2, -0.3]), np.array([2.0, -0.5, 1.7, 0.4])
    key = jr.key(4)
    u0 = np.asarray(jr.uniform(key, (4,), dtype="float64"))  # JAX's uniform for this key

    def jax_sample(lo, hi):
        return jr.truncated_normal(key, lo, hi, (4,), "float64")

    np.testing.assert_allclose(
        _truncated_normal_icdf(f64(u0), f64(lo), f64(hi)).numpy(),
        np.asarray(jax_sample(jnp.asarray(lo), jnp.asarray(hi))), rtol=1e-10)
    w = np.array([0.3, -1.0, 0.7, 2.0])
    ours = tg.grad(lambda a, b: tnp.sum(_truncated_normal_icdf(f64(u0), a, b) * f64(w)),
                   argnums=(0, 1))(f64(lo), f64(hi))
    theirs = jax.grad(lambda a, b: jnp.sum(jax_sample(a, b) * w), argnums=(0, 1))(
        jnp.asarray(lo), jnp.asarray(hi))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), np.asarray(b), rtol=1e-8, atol=1e-12)


def test_truncated_normal_gradients_are_pathwise():
    k = tr.key(8)
    lo, hi = f64([-1.0, 0.5, -2.0]), f64([1.5, 2.5, -0.2])
    check_grads(lambda a, b: tr.truncated_normal(k, a, b), (lo, hi), order=2,
                modes=("rev", "fwd"))
    # broadcast bounds: the gradient is summed over the draws that share a bound
    g = tg.grad(lambda a: tnp.sum(tr.truncated_normal(k, a, 3.0, (5, 3))))(lo)
    assert g.shape == (3,) and np.isfinite(g.numpy()).all()


# -- gamma family ----------------------------------------------------------------------------------
@pytest.mark.parametrize("a", [0.05, 0.7, 1.0, 3.5, 60.0])
def test_gamma_is_gammaincinv_at_the_uniforms_and_has_the_gamma_distribution(a):
    k = tr.key(11)
    x = tr.gamma(k, a, (N,), np.float64).numpy()
    np.testing.assert_allclose(x, sp.gammaincinv(a, unit(k, (N,))), rtol=1e-12)
    np.testing.assert_allclose(tr.loggamma(k, a, (N,), np.float64).numpy(), np.log(x),
                               rtol=1e-12, atol=1e-12)
    assert st.kstest(x, st.gamma(a).cdf).pvalue > P_MIN


def test_the_distribution_tests_fail_for_a_wrong_parameter():
    # the thresholds are loose enough to pass and tight enough to catch a 10% error
    x = tr.gamma(tr.key(11), 3.5, (N,), np.float64).numpy()
    assert st.kstest(x, st.gamma(3.5 * 1.1).cdf).pvalue < P_MIN
    y = tr.truncated_normal(tr.key(3), -1.0, 2.0, (N,), np.float64).numpy()
    assert st.kstest(y, st.truncnorm(-0.8, 2.0).cdf).pvalue < P_MIN


def test_loggamma_stays_finite_where_gamma_underflows():
    k = tr.key(2)
    a = 1e-3
    y = tr.loggamma(k, a, (N,), np.float64).numpy()
    assert np.isfinite(y).all() and (np.exp(y) == 0).any()  # gamma itself rounds to 0 there
    u = unit(k, (N,))
    small = y < -230
    np.testing.assert_allclose(y[small], (np.log(u[small]) + sp.gammaln(a + 1)) / a, rtol=1e-14)
    # its distribution: P(a, e^y) is uniform, evaluated in log space where e^y underflows
    cdf = np.where(small, np.exp(a * y - sp.gammaln(a + 1)), sp.gammainc(a, np.exp(y)))
    assert st.kstest(cdf, "uniform").pvalue > P_MIN
    d = tg.grad(lambda a: tnp.sum(tr.loggamma(k, a, (N,))))(f64(a)).numpy()
    assert np.isfinite(d)


def _implicit_gradient(a, x):
    """``-(dP/da) / (dP/dx)`` with ``dP/da`` by Richardson-extrapolated central differences."""
    def d(h):
        return (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)

    h = 1e-3 * a
    dpda = (4 * d(h / 2) - d(h)) / 3
    return -dpda / np.exp(sp.xlogy(a - 1, x) - x - sp.gammaln(a))


@pytest.mark.parametrize("a", [0.3, 1.0, 2.5, 10.0, 200.0])
def test_gamma_gradient_is_the_implicit_reparameterization_gradient(a):
    k = tr.key(6)
    at = tg.Tensor(np.full(50, a))
    x = tr.gamma(k, at).numpy()
    g = tg.grad(lambda a: tnp.sum(tr.gamma(k, a)))(at).numpy()
    np.testing.assert_allclose(g, _implicit_gradient(a, x), rtol=1e-7)
    # one shared shape parameter: the draws' gradients add up
    g1 = tg.grad(lambda a: tnp.sum(tr.gamma(k, a, (50,))))(f64(a)).numpy()
    np.testing.assert_allclose(g1, g.sum(), rtol=1e-12)


def test_gamma_gradient_equals_jaxs_for_the_same_sample(jr):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    k = tr.key(9)
    a = np.array([0.02, 0.3, 1.0, 2.5, 10.0, 100.0, 3000.0])
    x = tr.gamma(k, f64(a)).numpy()
    ours = tg.grad(lambda a: tnp.sum(tr.gamma(k, a)))(f64(a)).numpy()
    with jax.enable_x64(True):
        theirs = np.asarray(jax.lax.random_gamma_grad(jnp.asarray(a), jnp.asarray(x)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_gamma_gradients_of_every_order_agree_with_finite_differences():
    k = tr.key(12)
    a = f64([0.4, 1.7, 8.0])
    check_grads(lambda a: tr.gamma(k, a), (a,), order=2, modes=("rev", "fwd"), eps=1e-5)
    check_grads(lambda a: tr.loggamma(k, a, (2, 3)), (a,), order=3, eps=1e-5)


@pytest.mark.parametrize("a,b", [(0.5, 0.5), (2.0, 5.0), (0.05, 3.0), (30.0, 40.0)])
def test_beta_distribution_and_gradients(a, b):
    k = tr.key(13)
    x = tr.beta(k, a, b, (N,), np.float64).numpy()
    assert ((x >= 0) & (x <= 1)).all()
    assert st.kstest(x, st.beta(a, b).cdf).pvalue > P_MIN
    if a > 0.1:
        check_grads(lambda a, b: tr.beta(k, a, b, (3,)), (f64(a), f64(b)), order=2,
                    modes=("rev", "fwd"), eps=1e-5)


def test_beta_is_the_ratio_of_the_split_keys_gamma_samples():
    k = tr.key(14)
    ka, kb = tr.split(k)
    ga = tr.gamma(ka, 1.5, (100,), np.float64).numpy()
    gb = tr.gamma(kb, 4.0, (100,), np.float64).numpy()
    np.testing.assert_allclose(tr.beta(k, 1.5, 4.0, (100,), np.float64).numpy(),
                               ga / (ga + gb), rtol=1e-13)


def test_dirichlet_distribution_and_gradients():
    k = tr.key(15)
    alpha = np.array([0.3, 1.0, 4.0])
    x = tr.dirichlet(k, alpha, (N,)).numpy()
    assert x.shape == (N, 3) and x.dtype == np.float64
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)
    for i in range(3):  # the marginals are Beta(alpha_i, sum - alpha_i)
        assert st.kstest(x[:, i], st.beta(alpha[i], alpha.sum() - alpha[i]).cdf).pvalue > P_MIN
    g = tr.gamma(k, alpha, (N, 3), np.float64).numpy()
    np.testing.assert_allclose(x, g / g.sum(-1, keepdims=True), rtol=1e-12)
    check_grads(lambda al: tr.dirichlet(k, al, (2,)), (f64(alpha),), order=2,
                modes=("rev", "fwd"), eps=1e-5)


def test_dirichlet_with_tiny_concentrations_stays_on_the_simplex():
    x = tr.dirichlet(tr.key(0), np.array([1e-3, 2e-3, 1e-3]), (500,)).numpy()
    assert np.isfinite(x).all()
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("df", [0.8, 3.0, 25.0])
def test_t_distribution_and_gradients(df):
    k = tr.key(16)
    x = tr.t(k, df, (N,), np.float64).numpy()
    assert st.kstest(x, st.t(df).cdf).pvalue > P_MIN
    kn, kg = tr.split(k)
    n = tr.normal(kn, (N,), np.float64).numpy()
    g = tr.gamma(kg, df / 2, (N,), np.float64).numpy()
    np.testing.assert_allclose(x, n * np.sqrt(df / 2 / g), rtol=1e-12)  # JAX's construction
    check_grads(lambda d: tr.t(k, d, (3,)), (f64(df),), order=2, modes=("rev", "fwd"),
                eps=1e-5)


# -- multivariate --------------------------------------------------------------------------------
def _spd(rng, n, batch=()):
    a = rng.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_is_the_factor_times_normals(method):
    rng = np.random.default_rng(0)
    mean, cov = rng.normal(size=(2, 3)), _spd(rng, 3, (2,))
    k = tr.key(17)
    x = tr.multivariate_normal(k, mean, cov, (5, 2), method=method).numpy()
    z = tr.normal(k, (5, 2, 3), np.float64).numpy()
    if method == "cholesky":
        f = np.linalg.cholesky(cov)
    elif method == "eigh":
        w, v = np.linalg.eigh(cov)
        f = v * np.sqrt(w)[..., None, :]
    else:
        u, s, _ = np.linalg.svd(cov)
        f = u * np.sqrt(s)[..., None, :]
    np.testing.assert_allclose(x, mean + np.einsum("...ij,...j->...i", f, z), rtol=1e-12,
                               atol=1e-14)
    big = tr.multivariate_normal(k, mean[0], cov[0], (N,), method=method).numpy()
    np.testing.assert_allclose(np.cov(big.T), cov[0], rtol=0.12, atol=0.12)
    # pathwise gradients through the factorization, on symmetric covariances
    sym = _spd(rng, 3)

    def sample(m, s):
        return tr.multivariate_normal(k, m, tnp.matmul(s, s.T) + 2.0 * tnp.eye(3), (2,),
                                      method=method)

    check_grads(sample, (f64(mean[0]), f64(sym)), order=2, eps=1e-5)


def test_multivariate_normal_value_and_gradient_equal_jaxs_for_the_same_normals(jr):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    rng = np.random.default_rng(1)
    mean, cov, w = rng.normal(size=3), _spd(rng, 3), rng.normal(size=(4, 3))
    k = tr.key(18)
    z = jnp.asarray(tr.normal(k, (4, 3), np.float64).numpy())

    def theirs(m, c):  # JAX's multivariate_normal with these normal draws
        return m + jnp.einsum("...ij,...j->...i", jnp.linalg.cholesky(c), z)

    np.testing.assert_allclose(tr.multivariate_normal(k, mean, cov, (4,)).numpy(),
                               np.asarray(theirs(jnp.asarray(mean), jnp.asarray(cov))),
                               rtol=1e-12)
    ours = tg.grad(lambda m, c: tnp.sum(tr.multivariate_normal(k, m, c, (4,)) * f64(w)),
                   argnums=(0, 1))(f64(mean), f64(cov))
    jax_g = jax.grad(lambda m, c: jnp.sum(theirs(m, c) * w), argnums=(0, 1))(
        jnp.asarray(mean), jnp.asarray(cov))
    for a, b in zip(ours, jax_g):
        np.testing.assert_allclose(a.numpy(), np.asarray(b), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("n,m,batch", [(3, None, ()), (4, 2, (2,)), (2, 5, ()), (1, 1, (3,))])
def test_orthogonal_matrices(n, m, batch):
    k = tr.key(19)
    q = tr.orthogonal(k, n, batch, np.float64, m).numpy()
    cols = n if m is None else m
    assert q.shape == batch + (n, cols)
    small = min(n, cols)
    gram = q.swapaxes(-1, -2) @ q if cols <= n else q @ q.swapaxes(-1, -2)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(small), gram.shape), atol=1e-12)
    # Mezzadri's construction on normal's draws: R with a positive diagonal
    z = tr.normal(k, batch + (max(n, cols), small), np.float64).numpy()
    qz, rz = np.linalg.qr(z)
    want = qz * np.sign(np.diagonal(rz, axis1=-2, axis2=-1))[..., None, :]
    np.testing.assert_allclose(q, want if cols <= n else want.swapaxes(-1, -2), atol=1e-12)


def test_orthogonal_is_haar_distributed():
    # the first entry of a Haar orthogonal n x n matrix: (q00 + 1) / 2 ~ Beta((n-1)/2, (n-1)/2)
    n = 4
    q00 = tr.orthogonal(tr.key(20), n, (N,), np.float64).numpy()[:, 0, 0]
    assert st.kstest((q00 + 1) / 2, st.beta((n - 1) / 2, (n - 1) / 2).cdf).pvalue > P_MIN
    # without the sign correction the law is not Haar: the test tells the difference
    z = tr.normal(tr.key(20), (N, n, n), np.float64).numpy()
    raw = np.linalg.qr(z)[0][:, 0, 0]
    assert st.kstest((raw + 1) / 2, st.beta((n - 1) / 2, (n - 1) / 2).cdf).pvalue < P_MIN


# -- discrete ------------------------------------------------------------------------------------
def _chi2_ok(counts, probs):
    expected = probs * counts.sum()
    return st.chisquare(counts, expected).pvalue > P_MIN


def test_categorical_frequencies_with_and_without_replacement():
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    c = tr.categorical(tr.key(21), logits, shape=(N,)).numpy()
    assert c.dtype == np.int64
    assert _chi2_ok(np.bincount(c, minlength=4), np.exp(logits))
    # axis 0, a batch of two distributions, several draws each
    two = np.stack([logits, logits[::-1]], axis=1)  # (4, 2): categories on axis 0
    d = tr.categorical(tr.key(22), two, axis=0, shape=(N, 2)).numpy()
    assert d.shape == (N, 2)
    assert _chi2_ok(np.bincount(d[:, 1], minlength=4), np.exp(logits[::-1]))
    # without replacement: distinct categories; the first one follows the probabilities
    draws = np.stack([tr.categorical(tr.fold_in(tr.key(23), i), logits, shape=(3,),
                                     replace=False).numpy() for i in range(600)])
    assert all(len(set(r)) == 3 for r in draws)
    assert _chi2_ok(np.bincount(draws[:, 0], minlength=4), np.exp(logits))
    with pytest.raises(ValueError, match="exceed the 4 categories"):
        tr.categorical(tr.key(0), logits, shape=(5,), replace=False)


def test_categorical_is_the_gumbel_max_of_the_logits():
    logits = np.array([[0.0, 1.0, -2.0], [3.0, 0.5, 0.5]])
    k = tr.key(24)
    g = tr.gumbel(k, (6, 2, 3), np.float64).numpy()
    np.testing.assert_array_equal(tr.categorical(k, logits, shape=(6, 2)).numpy(),
                                  np.argmax(g + logits, axis=-1))


def test_choice_frequencies_and_shapes():
    k = tr.key(25)
    p = np.array([0.5, 0.0, 0.2, 0.3])
    c = tr.choice(k, 4, (N,), p=p).numpy()
    assert c.dtype == np.int64 and not (c == 1).any()
    assert _chi2_ok(np.bincount(c, minlength=4)[[0, 2, 3]], p[[0, 2, 3]])
    u = tr.choice(k, 5, (N,)).numpy()
    assert _chi2_ok(np.bincount(u, minlength=5), np.full(5, 0.2))
    perm = tr.choice(k, 6, (6,), replace=False).numpy()
    np.testing.assert_array_equal(np.sort(perm), np.arange(6))
    distinct = tr.choice(k, 5, (2, 2), replace=False, p=np.array([0.1, 0.2, 0.3, 0.2, 0.2]))
    assert distinct.shape == (2, 2) and len(set(distinct.numpy().ravel())) == 4
    a = np.arange(24.0).reshape(2, 3, 4)
    rows = tr.choice(k, a, (5,), axis=1).numpy()
    assert rows.shape == (2, 5, 4)
    assert all(any(np.array_equal(rows[:, i], a[:, j]) for j in range(3)) for i in range(5))
    # choosing entries of a Tensor is indexing: differentiable in it
    g = tg.grad(lambda x: tnp.sum(tr.choice(k, x, (3,), replace=False)))(f64([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g.numpy(), np.ones(3))
    assert tr.choice(k, 3, (0,)).shape == (0,)


def test_poisson_counts():
    k = tr.key(26)
    for lam in (0.0, 0.7, 4.0, 30.0, 1e4):
        c = tr.poisson(k, lam, (N,)).numpy()
        assert c.dtype == np.int64
        if lam == 0:
            assert not c.any()
            continue
        assert abs(c.mean() - lam) < 5 * math.sqrt(lam / N)
        if lam < 50:
            top = int(lam * 3 + 10)
            counts = np.bincount(np.minimum(c, top), minlength=top + 1)
            probs = st.poisson.pmf(np.arange(top + 1), lam)
            probs[-1] = st.poisson.sf(top - 1, lam)
            assert _chi2_ok(counts, probs)
    lam = tg.Tensor(np.array([-1.0, np.nan, np.inf, 2.0]))
    out = tr.poisson(k, lam, dtype=np.int32).numpy()  # JAX's -1 for rates out of range
    assert out.dtype == np.int32 and out[:3].tolist() == [-1, -1, -1] and out[3] >= 0


def test_bernoulli_with_array_probabilities():
    k = tr.key(27)
    p = np.array([0.1, 0.5, 0.95])
    b = tr.bernoulli(k, p, (N, 3)).numpy()
    assert b.dtype == np.bool_
    np.testing.assert_allclose(b.mean(0), p, atol=0.03)
    np.testing.assert_array_equal(b, tr.uniform(k, (N, 3), np.float64).numpy() < p)
    np.testing.assert_array_equal(tr.bernoulli(k, 0.5, (N,)).numpy(),
                                  tr.bernoulli(k, np.array(0.5), (N,)).numpy())
    assert tr.bernoulli(k, tg.Tensor(p)).shape == (3,)
    with pytest.raises(TypeError, match="floating"):
        tr.bernoulli(k, np.array([0, 1]))
    with pytest.raises(ValueError, match="lie in"):
        tr.bernoulli(k, np.array([0.5, 1.5]))


# -- JAX's argument conventions ------------------------------------------------------------------
def _samplers():
    """Each sampler as (name, ours(key, shape, dtype), jax(key, shape, dtype), parameter
    shape): the parameters have that shape, so ``shape=None`` gives it."""
    a = np.full((2, 1), 1.5)
    b = np.full((3,), 2.0)
    alpha = np.ones((2, 3))
    mean = np.zeros((2, 1, 3))
    return [
        ("gamma", lambda k, s, d: tr.gamma(k, a, s, d),
         lambda jr, k, s, d: jr.gamma(k, a, s, d)),
        ("loggamma", lambda k, s, d: tr.loggamma(k, a, s, d),
         lambda jr, k, s, d: jr.loggamma(k, a, s, d)),
        ("beta", lambda k, s, d: tr.beta(k, a, b, s, d),
         lambda jr, k, s, d: jr.beta(k, a, b, s, d)),
        ("t", lambda k, s, d: tr.t(k, b, s, d), lambda jr, k, s, d: jr.t(k, b, s, d)),
        ("truncated_normal", lambda k, s, d: tr.truncated_normal(k, -a, b, s, d),
         lambda jr, k, s, d: jr.truncated_normal(k, -a, b, s, d)),
        ("dirichlet", lambda k, s, d: tr.dirichlet(k, alpha, s, d),
         lambda jr, k, s, d: jr.dirichlet(k, alpha, s, d)),
        ("multivariate_normal", lambda k, s, d: tr.multivariate_normal(k, mean, np.eye(3), s, d),
         lambda jr, k, s, d: jr.multivariate_normal(k, mean, np.eye(3), s, d)),
        ("poisson", lambda k, s, d: tr.poisson(k, a, s),
         lambda jr, k, s, d: jr.poisson(k, a, s)),
        ("bernoulli", lambda k, s, d: tr.bernoulli(k, a / 3, s),
         lambda jr, k, s, d: jr.bernoulli(k, a / 3, s)),
        ("categorical", lambda k, s, d: tr.categorical(k, alpha, shape=s),
         lambda jr, k, s, d: jr.categorical(k, alpha, shape=s)),
    ]


SHAPES = [None, (2, 3), (4, 2, 3), (2, 1)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("spec", _samplers(), ids=lambda s: s[0])
def test_shape_rules_are_jaxs(spec, shape, jr):
    import jax

    name, ours, theirs = spec
    try:  # JAX's output shape and dtype, traced without drawing
        want = jax.eval_shape(lambda k: theirs(jr, k, shape, "float64"), jr.key(0))
    except (ValueError, TypeError) as e:  # JAX refuses: so do we, with a ValueError
        with pytest.raises(ValueError, match=f"random.{name}"):
            ours(tr.key(0), shape, np.float64)
        assert str(e)  # JAX refuses too
        return
    got = ours(tr.key(0), shape, np.float64)
    assert got.shape == want.shape
    assert got.dtype.kind == np.dtype(want.dtype).kind


@pytest.mark.parametrize("spec", _samplers(), ids=lambda s: s[0])
def test_shape_errors_name_the_sampler(spec):
    name, ours, _ = spec
    with pytest.raises(ValueError, match=f"random.{name}: .*broadcast"):
        ours(tr.key(0), (5, 7), np.float64)


CONTINUOUS = {
    "exponential": lambda k, s, d=None: tr.exponential(k, s, d),
    "laplace": lambda k, s, d=None: tr.laplace(k, s, d),
    "logistic": lambda k, s, d=None: tr.logistic(k, s, d),
    "gumbel": lambda k, s, d=None: tr.gumbel(k, s, d),
    "cauchy": lambda k, s, d=None: tr.cauchy(k, s, d),
    "truncated_normal": lambda k, s, d=None: tr.truncated_normal(k, -1.0, 1.0, s, d),
    "gamma": lambda k, s, d=None: tr.gamma(k, 2.0, s, d),
    "loggamma": lambda k, s, d=None: tr.loggamma(k, 2.0, s, d),
    "beta": lambda k, s, d=None: tr.beta(k, 2.0, 3.0, s, d),
    "dirichlet": lambda k, s, d=None: tr.dirichlet(k, [1.0, 2.0], s, d),
    "t": lambda k, s, d=None: tr.t(k, 4.0, s, d),
    "multivariate_normal": lambda k, s, d=None: tr.multivariate_normal(
        k, [0.0, 1.0], [[2.0, 0.5], [0.5, 1.0]], s, d),
    "orthogonal": lambda k, s, d=None: tr.orthogonal(k, 2, s, d),
}
DISCRETE = {
    "categorical": lambda k, s: tr.categorical(k, [0.0, 1.0, 2.0], shape=s),
    "choice": lambda k, s: tr.choice(k, 5, s),
    "poisson": lambda k, s: tr.poisson(k, 3.0, s),
    "bernoulli": lambda k, s: tr.bernoulli(k, 0.3, s),
}
ALL = {**CONTINUOUS, **DISCRETE}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_dtypes(name):
    fn = CONTINUOUS[name]
    k = tr.key(0)
    assert fn(k, (3,)).dtype == np.float32  # Python-number parameters: float32, as JAX
    x32, x64 = fn(k, (3,), np.float32), fn(k, (3,), np.float64)
    assert x32.dtype == np.float32 and x64.dtype == np.float64
    np.testing.assert_allclose(x32.numpy(), x64.numpy().astype(np.float32), rtol=1e-6)
    with pytest.raises(TypeError, match=f"random.{name}: dtype must be a floating dtype"):
        fn(k, (3,), np.int32)


def test_default_dtype_follows_the_parameters():
    k = tr.key(0)
    assert tr.gamma(k, np.float64(2.0)).dtype == np.float64
    assert tr.gamma(k, tg.Tensor(np.float32(2.0))).dtype == np.float32
    assert tr.beta(k, np.float32(1.0), np.array(2.0)).dtype == np.float64
    assert tr.multivariate_normal(k, np.zeros(2, np.float32), np.eye(2, dtype=np.float32)
                                  ).dtype == np.float32


@pytest.mark.parametrize("name", sorted(ALL))
def test_keys_are_checked(name):
    with pytest.raises(TypeError, match=f"random.{name}: key must be"):
        ALL[name](tg.Tensor(np.array([1.0, 2.0])), (2,))
    with pytest.raises(TypeError, match=f"random.{name}: key must be"):
        ALL[name](0, (2,))


@pytest.mark.parametrize("name", sorted(ALL))
def test_jit_replays_draw_what_eager_draws(name):
    fn = ALL[name]
    k1, k2 = tr.split(tr.key(3))
    jitted = tg.jit(lambda k: fn(k, (3,)))
    for k in (k1, k2, k1):
        np.testing.assert_array_equal(jitted(k).numpy(), fn(k, (3,)).numpy())


@pytest.mark.parametrize("name", sorted(ALL))
def test_vmap_over_keys_is_the_loop_over_keys(name):
    fn = ALL[name]
    keys = tr.split(tr.key(4), 3)
    got = tg.vmap(lambda k: fn(k, (2,)))(tnp.stack(keys))
    want = np.stack([fn(k, (2,)).numpy() for k in keys])
    np.testing.assert_array_equal(got.numpy(), want)


def test_vmap_over_parameters_with_one_key():
    k = tr.key(5)
    a = f64([0.5, 2.0, 7.0])
    got = tg.vmap(lambda a: tr.gamma(k, a, (4,)))(a).numpy()
    want = np.stack([tr.gamma(k, f64(x), (4,)).numpy() for x in [0.5, 2.0, 7.0]])
    np.testing.assert_allclose(got, want, rtol=1e-14)
    ga = tg.vmap(tg.grad(lambda a: tnp.sum(tr.gamma(k, a, (4,)))))(a).numpy()
    np.testing.assert_allclose(
        ga, [tg.grad(lambda a: tnp.sum(tr.gamma(k, a, (4,))))(f64(x)).numpy()
             for x in [0.5, 2.0, 7.0]], rtol=1e-12)


def test_gradients_under_jit():
    k = tr.key(6)
    grad_beta = tg.jit(tg.grad(lambda a: tnp.sum(tr.beta(k, a, 2.0, (5,)))))
    for a in (0.7, 1.3, 0.7):
        np.testing.assert_allclose(grad_beta(f64(a)).numpy(),
                                   tg.grad(lambda a: tnp.sum(tr.beta(k, a, 2.0, (5,))))(f64(a))
                                   .numpy(), rtol=1e-13)


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_samplers_return_integers(name):
    x = DISCRETE[name](tr.key(0), (4,))
    assert x.dtype.kind in "iub" and x.shape == (4,)


def test_parameter_errors():
    k = tr.key(0)
    with pytest.raises(ValueError, match="random.gamma: a must be > 0"):
        tr.gamma(k, -1.0)
    with pytest.raises(ValueError, match="random.beta: b must be > 0"):
        tr.beta(k, 1.0, np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="random.truncated_normal: need lower < upper"):
        tr.truncated_normal(k, 1.0, 1.0)
    with pytest.raises(TypeError, match="random.t: df must be a real"):
        tr.t(k, "3")
    with pytest.raises(TypeError, match="random.gamma: a must be a real"):
        tr.gamma(k, tg.Tensor(np.array([1 + 1j])))
    with pytest.raises(ValueError, match="random.dirichlet: alpha must have at least 1"):
        tr.dirichlet(k, 1.0)
    with pytest.raises(ValueError, match=r"random.multivariate_normal: cov must have shape"):
        tr.multivariate_normal(k, np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="method must be"):
        tr.multivariate_normal(k, np.zeros(2), np.eye(2), method="qr")
    with pytest.raises(ValueError, match="random.poisson: lam must be >= 0"):
        tr.poisson(k, -1.0)
    with pytest.raises(TypeError, match="random.poisson: dtype must be an integer"):
        tr.poisson(k, 1.0, dtype=np.float32)
    with pytest.raises(ValueError, match="random.choice: cannot take 4 samples from 3"):
        tr.choice(k, 3, (4,), replace=False)
    with pytest.raises(ValueError, match=r"random.choice: p must have shape \(3,\)"):
        tr.choice(k, 3, (2,), p=np.ones(4) / 4)
    with pytest.raises(ValueError, match="random.categorical: axis 2 is out of range"):
        tr.categorical(k, np.zeros((2, 3)), axis=2)
    with pytest.raises(TypeError, match="random.orthogonal: n must be an int"):
        tr.orthogonal(k, 2.0)
    # values inside Tensors are not inspected (they may be traced): NaN, as JAX
    assert np.isnan(tr.gamma(k, tg.Tensor(np.array([-1.0]))).numpy()).all()
