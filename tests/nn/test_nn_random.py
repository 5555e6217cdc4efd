"""tapegrad.random keys and tapegrad.nn.init initializers."""

import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import random as tr
from tapegrad.nn import init


def test_keys_are_deterministic_uint32_pairs():
    k = tr.key(0)
    assert k.dtype == np.uint32 and k.shape == (2,)
    np.testing.assert_array_equal(k.numpy(), tr.key(0).numpy())
    assert not np.array_equal(k.numpy(), tr.key(1).numpy())
    # pinned values: the same on every run and platform for this NumPy version
    expected = np.random.SeedSequence(0).generate_state(2, np.uint32)
    np.testing.assert_array_equal(k.numpy(), expected)


def test_split_is_deterministic_prefix_stable_and_distinct():
    k = tr.key(3)
    a, b = tr.split(k)
    three = tr.split(k, 3)
    np.testing.assert_array_equal(a.numpy(), three[0].numpy())
    np.testing.assert_array_equal(b.numpy(), three[1].numpy())
    words = {tuple(x.numpy()) for x in (k, *three, tr.fold_in(k, 0), tr.fold_in(k, 1))}
    assert len(words) == 6
    np.testing.assert_array_equal(tr.fold_in(k, 5).numpy(), tr.fold_in(k, 5).numpy())


def test_draws_are_reproducible_and_have_the_right_distribution():
    k = tr.key(11)
    u = tr.uniform(k, (20000,), np.float64, -2.0, 3.0)
    np.testing.assert_array_equal(u.numpy(), tr.uniform(k, (20000,), np.float64, -2.0, 3.0).numpy())
    assert u.numpy().min() >= -2 and u.numpy().max() < 3
    assert abs(u.numpy().mean() - 0.5) < 0.05
    n = tr.normal(k, (20000,), mean=1.0, std=2.0)
    assert n.dtype == np.float32
    assert abs(n.numpy().mean() - 1.0) < 0.05 and abs(n.numpy().std() - 2.0) < 0.05
    b = tr.bernoulli(k, 0.3, (20000,))
    assert b.dtype == np.bool_ and abs(b.numpy().mean() - 0.3) < 0.02
    r = tr.randint(k, (1000,), 2, 5)
    assert r.dtype == np.int32 and set(np.unique(r.numpy())) == {2, 3, 4}
    p = tr.permutation(k, 10)
    np.testing.assert_array_equal(np.sort(p.numpy()), np.arange(10))
    x = tg.Tensor(np.arange(12.0).reshape(6, 2))
    px = tr.permutation(k, x)
    np.testing.assert_array_equal(np.sort(px.numpy()[:, 0]), x.numpy()[:, 0])
    g = tg.grad(lambda v: (tr.permutation(k, v) * tg.Tensor(np.arange(12.0).reshape(6, 2))).sum())(
        x
    )
    assert sorted(g.numpy().ravel().tolist()) == list(np.arange(12.0))


def test_random_errors():
    with pytest.raises(TypeError, match="random.uniform: key must be a uint32 Tensor"):
        tr.uniform(tg.Tensor([1.0, 2.0]), (2,))
    with pytest.raises(TypeError, match="seed must be an int"):
        tr.key(1.5)
    with pytest.raises(ValueError, match="non-negative"):
        tr.key(-1)
    with pytest.raises(ValueError, match="num must be a positive int"):
        tr.split(tr.key(0), 0)
    with pytest.raises(ValueError, match="p must lie in"):
        tr.bernoulli(tr.key(0), 1.5)
    with pytest.raises(ValueError, match="minval < maxval"):
        tr.randint(tr.key(0), (2,), 3, 3)
    with pytest.raises(TypeError, match="floating dtype"):
        tr.normal(tr.key(0), (2,), np.int32)


def test_seeds_fan_counts_and_xavier_bounds():
    assert init.compute_in_out_tensor_count(tg.Tensor(np.empty((5, 10)))) == (5, 10)
    assert init.compute_in_out_tensor_count((16, 3, 3, 3)) == (144, 27)
    with pytest.raises(ValueError, match="at least 2 dims"):
        init.compute_in_out_tensor_count((3,))
    k = tr.key(0)
    w = init.xavier_uniform(k, (300, 200))
    limit = math.sqrt(6 / 500)
    assert np.abs(w.numpy()).max() <= limit and np.abs(w.numpy()).max() > 0.95 * limit
    t = tg.Tensor(np.zeros((3, 4), np.float64))
    w2 = init.xavier_uniform(k, t)  # the seeds' xavier_uniform(tensor), functionally
    assert w2.shape == (3, 4) and w2.dtype == np.float64
    assert not np.any(t.numpy())  # the argument is not modified


def test_initializer_statistics():
    k = tr.key(1)
    xn = init.xavier_normal(k, (400, 600)).numpy()
    assert abs(xn.std() - math.sqrt(2 / 1000)) < 0.002
    ku = init.kaiming_uniform(k, (500, 300), nonlinearity="relu").numpy()
    assert np.abs(ku).max() <= math.sqrt(6 / 500)
    kn = init.kaiming_normal(k, (64, 8, 3, 3), nonlinearity="relu").numpy()
    assert abs(kn.std() - math.sqrt(2 / 72)) < 0.01
    kn_out = init.kaiming_normal(k, (64, 8, 3, 3), mode="fan_out", nonlinearity="relu").numpy()
    assert abs(kn_out.std() - math.sqrt(2 / 576)) < 0.003
    assert not init.zeros(k, (2, 3)).numpy().any()
    assert init.ones(k, 3).numpy().tolist() == [1, 1, 1]
    assert abs(init.normal(k, (10000,), std=3.0).numpy().std() - 3.0) < 0.1
    u = init.uniform(k, (1000,), a=2.0, b=4.0).numpy()
    assert u.min() >= 2 and u.max() < 4
    assert init.calculate_gain("tanh") == 5 / 3
    with pytest.raises(ValueError, match="mode must be"):
        init.kaiming_normal(k, (2, 2), mode="fan")
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        init.calculate_gain("swish")


def test_mlp_params_are_a_pure_pytree():
    params = init.mlp(tr.key(0), (2, 16, 1))
    assert [(p["weight"].shape, p["bias"].shape) for p in params] == [
        ((2, 16), (16,)),
        ((16, 1), (1,)),
    ]
    again = init.mlp(tr.key(0), (2, 16, 1))
    np.testing.assert_array_equal(params[1]["weight"].numpy(), again[1]["weight"].numpy())
    assert len(tg.tree.tree_leaves(params)) == 4
    with pytest.raises(ValueError, match="at least input and output"):
        init.mlp(tr.key(0), (3,))


# -- orthogonal, trunc_normal ----------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (8, 2, 3), (2, 3, 2, 2)])
def test_orthogonal_is_semi_orthogonal_and_matches_the_numpy_reference(shape):
    k = tr.key(3)
    w = init.orthogonal(k, shape, np.float64, gain=1.5).numpy()
    assert w.shape == shape
    rows, cols = shape[0], math.prod(shape[1:])
    m = w.reshape(rows, cols)
    gram = m.T @ m if rows >= cols else m @ m.T
    np.testing.assert_allclose(gram, 1.5**2 * np.eye(min(rows, cols)), atol=1e-12)
    # reference: QR of the same Gaussian draw with Q's columns sign-corrected by diag(R)
    a = tr.normal(k, (max(rows, cols), min(rows, cols)), np.float64).numpy()
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    ref = q if rows >= cols else q.T
    np.testing.assert_allclose(m, 1.5 * ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(w, init.orthogonal(k, shape, np.float64, gain=1.5).numpy())
    assert init.orthogonal(k, shape).dtype == np.float32


def test_orthogonal_sign_correction_gives_haar_samples():
    """Without the sign correction, LAPACK's Householder QR makes diag(R) negative, so
    Q[0, 0] = a00 / R00 would never be positive; Haar samples have E[Q[0, 0]] = 0."""
    keys = tr.split(tr.key(0), 400)
    q00 = np.array([init.orthogonal(k, (2, 2), np.float64).numpy()[0, 0] for k in keys])
    assert abs(q00.mean()) < 0.1 and (q00 > 0).mean() > 0.4 and (q00 < 0).mean() > 0.4
    # the angle of a Haar 2x2 rotation/reflection is uniform: |Q00| = |cos(theta)|
    assert abs(np.mean(np.abs(q00)) - 2 / np.pi) < 0.05


def test_orthogonal_against_torch_statistics_and_errors():
    with pytest.raises(ValueError, match="orthogonal: needs a shape with at least 2 dims"):
        init.orthogonal(tr.key(0), (4,))
    assert init.orthogonal(tr.key(0), (0, 3)).shape == (0, 3)
    torch = pytest.importorskip("torch")
    t = torch.empty(6, 4, dtype=torch.float64)
    torch.nn.init.orthogonal_(t, gain=2.0)
    ours = init.orthogonal(tr.key(1), (6, 4), np.float64, gain=2.0).numpy()
    np.testing.assert_allclose(ours.T @ ours, t.numpy().T @ t.numpy(), atol=1e-12)


def test_trunc_normal_matches_the_truncated_distribution():
    from scipy import stats

    w = init.trunc_normal(tr.key(5), (20000,), np.float64, mean=1.0, std=2.0, a=-1.0, b=4.0)
    x = w.numpy()
    assert x.min() >= -1.0 and x.max() <= 4.0
    ref = stats.truncnorm((-1.0 - 1.0) / 2.0, (4.0 - 1.0) / 2.0, loc=1.0, scale=2.0)
    assert stats.kstest(x, ref.cdf).pvalue > 1e-3
    assert abs(x.mean() - ref.mean()) < 0.03 and abs(x.std() - ref.std()) < 0.03
    np.testing.assert_array_equal(
        x, init.trunc_normal(tr.key(5), (20000,), np.float64, 1.0, 2.0, -1.0, 4.0).numpy()
    )
    # the bounds are absolute (PyTorch): std 0.02 with the default [-2, 2] is barely cut
    small = init.trunc_normal(tr.key(6), (20000,), std=0.02).numpy()
    assert small.dtype == np.float32 and abs(small.std() - 0.02) < 0.001
    tail = init.trunc_normal(tr.key(7), (1000,), np.float64, a=5.0, b=6.0).numpy()
    assert tail.min() >= 5.0 and tail.max() <= 6.0 and np.isfinite(tail).all()  # far tail
    like = init.trunc_normal(tr.key(0), tg.Tensor(np.zeros((3, 4), np.float64)))
    assert like.shape == (3, 4) and like.dtype == np.float64


def test_trunc_normal_against_torch_and_errors():
    with pytest.raises(ValueError, match="trunc_normal: std must be positive"):
        init.trunc_normal(tr.key(0), (3,), std=0.0)
    with pytest.raises(ValueError, match="trunc_normal: need a < b"):
        init.trunc_normal(tr.key(0), (3,), a=1.0, b=1.0)
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    t = torch.empty(20000, dtype=torch.float64)
    torch.nn.init.trunc_normal_(t, mean=0.5, std=1.0, a=0.0, b=3.0)
    ours = init.trunc_normal(tr.key(1), (20000,), np.float64, 0.5, 1.0, 0.0, 3.0).numpy()
    from scipy import stats

    assert stats.ks_2samp(ours, t.numpy()).pvalue > 1e-3  # the same distribution
