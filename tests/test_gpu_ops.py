"""Every kind of op on CuPy arrays against the same op on NumPy arrays: values, gradients (a
vjp with a fixed cotangent), forward mode, vmap and jit. Skips cleanly where CuPy or a CUDA
device is missing (CI never has one)."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.nn import functional as F

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")
if not tg.backend.cupy_available():  # pragma: no cover - depends on the machine
    pytest.skip("no CUDA device", allow_module_level=True)

special = pytest.importorskip("tapegrad.scipy.special")
slinalg = pytest.importorskip("tapegrad.scipy.linalg")

RNG = np.random.default_rng(0)


def pos(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def unit(*shape):
    return RNG.uniform(-0.9, 0.9, shape)


def normal(*shape):
    return RNG.standard_normal(shape)


def spd(n):
    a = RNG.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def cplx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


# name, function of Tensors, its float64 inputs (NumPy arrays)
CASES = [
    # elementwise
    ("exp", tnp.exp, [normal(3, 4)]),
    ("log", tnp.log, [pos(3, 4)]),
    ("log1p", tnp.log1p, [pos(5)]),
    ("sqrt", tnp.sqrt, [pos(3, 4)]),
    ("cbrt", tnp.cbrt, [pos(4)]),
    ("tanh", tnp.tanh, [normal(3, 4)]),
    ("sin_cos", lambda x: tnp.sin(x) * tnp.cos(x), [normal(6)]),
    ("arctan2", tnp.arctan2, [normal(3, 1), pos(4)]),
    ("arcsin", tnp.arcsin, [unit(5)]),
    ("power", lambda a, b: a ** b, [pos(3, 4), normal(4)]),
    ("logaddexp", tnp.logaddexp, [normal(3, 4), normal(3, 4)]),
    ("maximum", tnp.maximum, [normal(3, 4), normal(1, 4)]),
    ("where", lambda a, b: tnp.where(a > 0, a * b, b), [normal(3, 4), normal(3, 4)]),
    ("clip", lambda x: tnp.clip(x, -0.5, 0.5), [normal(10)]),
    ("abs_sign", lambda x: tnp.abs(x) * tnp.sign(x), [normal(7)]),
    ("sinc", tnp.sinc, [normal(6)]),
    ("i0", tnp.i0, [normal(6)]),
    ("hypot", tnp.hypot, [normal(5), normal(5)]),
    ("complex_abs", lambda z: tnp.abs(z), [cplx(5)]),
    ("complex_exp_real", lambda z: tnp.real(tnp.exp(z) * tnp.conj(z)), [cplx(5)]),
    # reductions and statistics
    ("sum_axis", lambda x: tnp.sum(x, axis=1), [normal(3, 4)]),
    ("mean_keepdims", lambda x: tnp.mean(x, axis=0, keepdims=True), [normal(3, 4)]),
    ("max", lambda x: tnp.max(x, axis=-1), [normal(3, 4)]),
    ("prod", lambda x: tnp.prod(x, axis=0), [pos(3, 4)]),
    ("var_std", lambda x: tnp.var(x, axis=1) + tnp.std(x, axis=0).sum(), [normal(3, 4)]),
    ("cumsum", lambda x: tnp.cumsum(x, axis=1), [normal(3, 4)]),
    ("cumprod", lambda x: tnp.cumprod(x), [pos(6)]),
    ("logsumexp", lambda x: special.logsumexp(x, axis=1), [normal(3, 4)]),
    ("nanmean", lambda x: tnp.nanmean(x, axis=0), [normal(3, 4)]),
    ("median", lambda x: tnp.median(x, axis=1), [normal(3, 5)]),
    ("quantile", lambda x: tnp.quantile(x, 0.3, axis=0), [normal(5, 2)]),
    ("norm", lambda x: tnp.linalg.norm(x), [normal(3, 4)]),
    # shape and indexing
    ("reshape_T", lambda x: x.reshape(4, 3).T, [normal(3, 4)]),
    ("concatenate", lambda a, b: tnp.concatenate([a, b], axis=0), [normal(2, 3), normal(4, 3)]),
    ("stack", lambda a, b: tnp.stack([a, b], axis=1), [normal(2, 3), normal(2, 3)]),
    ("getitem", lambda x: x[1:, ::2] * x[0, 0], [normal(3, 4)]),
    ("fancy_index", lambda x: x[np.array([0, 2, 2]), 1:], [normal(3, 4)]),
    ("take", lambda x: tnp.take(x, np.array([3, 0, 3]), axis=1), [normal(3, 4)]),
    ("at_add", lambda x: x.at[np.array([0, 0, 2])].add(x[1]), [normal(3, 4)]),
    ("pad", lambda x: tnp.pad(x, ((1, 0), (0, 2))), [normal(3, 4)]),
    ("roll_flip", lambda x: tnp.flip(tnp.roll(x, 1, axis=1), axis=0), [normal(3, 4)]),
    ("broadcast_to", lambda x: tnp.broadcast_to(x, (2, 3, 4)), [normal(3, 1)]),
    ("tril_triu", lambda x: tnp.tril(x) - tnp.triu(x, 1), [normal(4, 4)]),
    ("sort", lambda x: tnp.sort(x, axis=1), [normal(3, 5)]),
    ("kron", tnp.kron, [normal(2, 2), normal(2, 3)]),
    ("diff", lambda x: tnp.diff(x, axis=1), [normal(3, 5)]),
    # products and linalg
    ("matmul", lambda a, b: a @ b, [normal(2, 3, 4), normal(4, 5)]),
    ("einsum", lambda a, b: tnp.einsum("ij,jk->ik", a, b), [normal(3, 4), normal(4, 2)]),
    ("tensordot", lambda a, b: tnp.tensordot(a, b, axes=2), [normal(2, 3, 4), normal(3, 4)]),
    ("outer", tnp.outer, [normal(3), normal(4)]),
    ("convolve", tnp.convolve, [normal(7), normal(3)]),
    ("inv", tnp.linalg.inv, [spd(4)]),
    ("solve", tnp.linalg.solve, [spd(4), normal(4, 2)]),
    ("det_slogdet", lambda a: tnp.linalg.det(a) + tnp.linalg.slogdet(a)[1], [spd(3)]),
    ("cholesky", tnp.linalg.cholesky, [spd(4)]),
    ("eigh", lambda a: tnp.linalg.eigh(a)[0], [spd(4)]),
    ("svd", lambda a: tnp.linalg.svd(a, compute_uv=False), [normal(4, 3)]),
    ("qr", lambda a: tnp.linalg.qr(a)[1], [normal(4, 3)]),
    ("pinv", tnp.linalg.pinv, [normal(4, 3)]),
    ("lstsq", lambda a, b: tnp.linalg.lstsq(a, b)[0], [normal(5, 3), normal(5)]),
    ("expm", slinalg.expm, [0.3 * normal(3, 3)]),
    ("solve_triangular", lambda a, b: slinalg.solve_triangular(a, b, lower=True),
     [np.tril(spd(3)), normal(3, 2)]),
    # fft
    ("fft", lambda x: tnp.abs(tnp.fft.fft(x)), [normal(8)]),
    ("rfft_irfft", lambda x: tnp.fft.irfft(tnp.fft.rfft(x) * 2.0, n=8), [normal(8)]),
    ("fftn", lambda x: tnp.real(tnp.fft.fftn(x, norm="ortho")), [normal(4, 6)]),
    # special functions
    ("gammaln_digamma", lambda x: special.gammaln(x) + special.digamma(x), [pos(5)]),
    ("erf_erfinv", lambda x: special.erf(x) + special.erfinv(x * 0.5), [unit(5)]),
    ("i0e_i1e", lambda x: special.i0e(x) * special.i1e(x), [normal(5)]),
    ("xlogy", special.xlogy, [pos(5), pos(5)]),
    ("ndtri_log_ndtr", lambda p: special.ndtri(p) + special.log_ndtr(p),
     [RNG.uniform(0.1, 0.9, 5)]),
    # nn.functional
    ("relu_gelu_silu", lambda x: F.relu(x) + F.gelu(x) + F.silu(x), [normal(3, 4)]),
    ("softmax", lambda x: F.softmax(x, axis=-1), [normal(3, 4)]),
    ("log_softmax", lambda x: F.log_softmax(x, axis=-1), [normal(3, 4)]),
    ("cross_entropy", lambda x: F.cross_entropy(x, np.array([0, 3, 1])), [normal(3, 4)]),
    ("mse_huber", lambda a, b: F.mse_loss(a, b) + F.huber_loss(a, b), [normal(6), normal(6)]),
    ("linear", F.linear, [normal(5, 3), normal(3, 4), normal(4)]),
    ("conv2d", lambda x, w: F.conv2d(x, w, padding=1), [normal(2, 3, 6, 6), normal(4, 3, 3, 3)]),
    ("conv1d", lambda x, w: F.conv1d(x, w, stride=2), [normal(2, 3, 9), normal(4, 3, 3)]),
    ("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w, stride=2),
     [normal(1, 2, 4, 4), normal(2, 3, 3, 3)]),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [normal(2, 3, 6, 6)]),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 2), [normal(2, 3, 6, 6)]),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [normal(1, 2, 6, 6)]),
    ("layer_norm", lambda x: F.layer_norm(x, (4,)), [normal(3, 4)]),
    ("group_norm", lambda x: F.group_norm(x, 2), [normal(2, 4, 3, 3)]),
    ("batch_norm", lambda x: F.batch_norm(x, training=True)[0], [normal(5, 3)]),
    ("attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [normal(2, 5, 4), normal(2, 5, 4), normal(2, 5, 4)]),
    ("embedding", lambda w: F.embedding(np.array([[0, 2], [2, 1]]), w), [normal(3, 4)]),
]


def _run(fn, arrays, device):
    xs = [tg.Tensor(a, device=device) for a in arrays]
    out, vjp_fn = tg.vjp(fn, *xs)
    ct = np.random.default_rng(1).standard_normal(out.shape).astype(out.dtype)
    cts = vjp_fn(tg.Tensor(ct, device=device))
    tangents = [tg.Tensor(np.full(a.shape, 0.5, a.dtype), device=device) for a in arrays]
    _, tangent_out = tg.jvp(fn, tuple(xs), tuple(tangents))
    return out, cts, tangent_out


@pytest.mark.parametrize("name, fn, arrays", CASES, ids=[c[0] for c in CASES])
def test_op_on_the_gpu_matches_cpu(name, fn, arrays):
    out_c, cts_c, tan_c = _run(fn, arrays, "cpu")
    out_g, cts_g, tan_g = _run(fn, arrays, "cuda:0")
    assert out_g.device == "cuda:0" and tan_g.device == "cuda:0"
    assert isinstance(out_g._array, cp.ndarray)  # computed there, not copied back
    np.testing.assert_allclose(out_g.numpy(), out_c.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tan_g.numpy(), tan_c.numpy(), rtol=1e-8, atol=1e-11)
    for g, c in zip(cts_g, cts_c):
        assert g.device == "cuda:0" and isinstance(g._array, cp.ndarray)
        assert g.shape == c.shape and g.dtype == c.dtype
        np.testing.assert_allclose(g.numpy(), c.numpy(), rtol=1e-8, atol=1e-11)


def test_second_order_on_the_gpu():
    f = lambda x: tnp.sum(tnp.tanh(x) ** 3 * tnp.log1p(x * x))  # noqa: E731
    x = normal(5)
    h_cpu = tg.hessian(f)(tg.Tensor(x))
    h_gpu = tg.hessian(f)(tg.Tensor(x, device="cuda:0"))
    assert h_gpu.device == "cuda:0"
    np.testing.assert_allclose(h_gpu.numpy(), h_cpu.numpy(), rtol=1e-9, atol=1e-12)


def test_jit_and_vmap_on_the_gpu():
    def loss(w, x, y):
        return tnp.mean((tnp.tanh(x @ w) - y) ** 2)

    w, x, y = normal(3, 2), normal(6, 3), normal(6, 2)
    args_c = [tg.Tensor(a) for a in (w, x, y)]
    args_g = [tg.Tensor(a, device="cuda:0") for a in (w, x, y)]
    step = tg.jit(tg.value_and_grad(loss))
    for _ in range(2):  # the trace, then the compiled replay
        lg, gg = step(*args_g)
    lc, gc = tg.value_and_grad(loss)(*args_c)
    assert gg.device == "cuda:0"
    np.testing.assert_allclose(gg.numpy(), gc.numpy(), rtol=1e-10)
    np.testing.assert_allclose(float(lg), float(lc), rtol=1e-12)
    per_c = tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))(args_c[0], args_c[1][:, None],
                                                           args_c[2][:, None])
    per_g = tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))(args_g[0], args_g[1][:, None],
                                                           args_g[2][:, None])
    assert per_g.device == "cuda:0"
    np.testing.assert_allclose(per_g.numpy(), per_c.numpy(), rtol=1e-10)


def test_training_step_keeps_everything_on_the_gpu():
    from tapegrad import nn, optim

    model = nn.Sequential(nn.Linear(8, 16, key=tg.random.key(0)), nn.ReLU(),
                          nn.Linear(16, 3, key=tg.random.key(1)))
    params = tg.tree.tree_map(lambda p: p.to_device("cuda:0"), model.params)
    x = tg.Tensor(normal(32, 8).astype(np.float32), device="cuda:0")
    y = tg.Tensor(RNG.integers(0, 3, 32), device="cuda:0")
    tx = optim.adam(1e-2)
    opt_state = tx.init(params)

    def loss_fn(p):
        return F.cross_entropy(nn.functional_call(model, p, x)[0], y)

    first = None
    for _ in range(20):
        loss, grads = tg.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optim.apply_updates(params, updates)
        first = float(loss) if first is None else first
    leaves = tg.tree.tree_leaves(params) + tg.tree.tree_leaves(opt_state)
    assert all(leaf.device == "cuda:0" for leaf in leaves if isinstance(leaf, tg.Tensor))
    assert float(loss) < first


def test_cpu_index_tensors_and_numpy_constants_join_the_gpu():
    # as PyTorch takes CPU index tensors for a CUDA tensor: the user's code runs unchanged
    x = tg.Tensor(normal(4, 3), device="cuda:0")
    y = tg.Tensor(np.array([2, 0, 1, 1]), device="cuda:0")

    def loss(x):
        logp = x - tnp.log(tnp.sum(tnp.exp(x), axis=1, keepdims=True))
        picked = logp[tnp.arange(x.shape[0]), y]  # a CPU arange, a GPU target
        return -tnp.mean(picked) + tnp.sum(x.at[tnp.asarray([0, 0])].add(1.0) * np.ones(3))

    g = tg.grad(loss)(x)
    y_cpu = y.to_device("cpu")
    want = tg.grad(lambda v: -tnp.mean((v - tnp.log(tnp.sum(tnp.exp(v), axis=1, keepdims=True)))[
        tnp.arange(4), y_cpu]) + tnp.sum(v.at[tnp.asarray([0, 0])].add(1.0) * np.ones(3)))(
        x.to_device("cpu"))
    assert g.device == "cuda:0"
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="different devices"):  # Tensors still do not mix
        x + tg.Tensor(np.ones(3))
