"""The seeds' layers: shapes (the seeds' examples), hand-written NumPy forwards, PyTorch
cross-checks where torch imports, and check_grads of each layer's pure form."""

import math

import numpy as np
import pytest
from scipy.special import expit

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads

RNG = np.random.default_rng(7)
KEY = tg.random.key(42)


def T(a):
    return tg.Tensor(np.asarray(a))


def randn(*shape):
    return tg.Tensor(RNG.standard_normal(shape).astype(np.float32))


def np_params(m):
    return {k: v.numpy().astype(np.float64) for k, v in m.parameters.items()}


def pure(model, key=None):
    """The layer's pure form: a function of (params, *inputs)."""

    def f(p, *xs):
        out = nn.functional_call(model, p, *xs, key=key)
        return out[0] if model.states else out

    return f


def np_conv(x, w, stride=1, pad=0):
    """Convolution by sliding_window_view + einsum (independent of the im2col code)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    win = win[:, :, ::stride, ::stride]
    return np.einsum("nchwij,ocij->nohw", win, w)


def np_bn_train(x, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shp = (1, -1) + (1,) * (x.ndim - 2)
    mu, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w.reshape(shp) + b.reshape(shp)


def np_attention(q, k, v, bias=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


# -- Linear ----------------------------------------------------------------------------------
def test_linear():
    lin = nn.Linear(4, 2, key=KEY)
    x = randn(3, 4)
    y = lin(x)
    assert y.shape == (3, 2) and y.dtype == np.float32
    p = np_params(lin)
    np.testing.assert_allclose(y.numpy(), x.numpy() @ p["weight"] + p["bias"], rtol=1e-5)
    assert nn.Linear(5, 3)(randn(10, 5)).shape == (10, 3)
    assert nn.Linear(4, 2, bias=False, key=KEY).num_parameters() == 8
    limit = math.sqrt(6 / 6)
    assert np.abs(p["weight"]).max() <= limit
    check_grads(pure(lin), (lin.params, x), order=2)


def test_linear_against_torch():
    torch = pytest.importorskip("torch")
    lin = nn.Linear(4, 3, key=KEY)
    x = RNG.standard_normal((2, 4))
    p = np_params(lin)
    ref = torch.nn.functional.linear(
        torch.tensor(x), torch.tensor(p["weight"].T), torch.tensor(p["bias"])
    )
    np.testing.assert_allclose(lin(T(x)).numpy(), ref.numpy(), rtol=1e-6)


# -- Conv2d, MaxPool2d -----------------------------------------------------------------------
def test_conv2d_layer():
    conv = nn.Conv2d(in_channels=3, out_channels=8, kernel_size=3, stride=1, padding_mode="same")
    assert conv(randn(2, 3, 32, 32)).shape == (2, 8, 32, 32)
    conv = nn.Conv2d(2, 3, 3, stride=2, key=KEY)
    x = randn(2, 2, 7, 7)
    y = conv(x)
    assert y.shape == (2, 3, 3, 3)
    p = np_params(conv)
    ref = np_conv(x.numpy().astype(np.float64), p["weight"], 2) + p["bias"][:, None, None]
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-6)
    small = nn.Conv2d(2, 2, 2, padding_mode="same", key=KEY)
    check_grads(pure(small), (small.params, randn(1, 2, 3, 3)), order=2)
    with pytest.raises(ValueError, match="padding_mode must be 'valid' or 'same'"):
        nn.Conv2d(1, 1, 3, padding_mode="full")


def test_conv2d_layer_against_torch():
    torch = pytest.importorskip("torch")
    conv = nn.Conv2d(4, 6, 3, stride=1, padding_mode="same", groups=2, key=KEY)
    x = RNG.standard_normal((2, 4, 6, 5)).astype(np.float32)
    p = conv.parameters
    ref = torch.nn.functional.conv2d(
        torch.tensor(x),
        torch.tensor(p["weight"].numpy()),
        torch.tensor(p["bias"].numpy()),
        padding="same",
        groups=2,
    )
    np.testing.assert_allclose(conv(T(x)).numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_maxpool2d_layer():
    pool = nn.MaxPool2d(kernel_size=2, stride=2, padding_mode="valid")
    x = randn(1, 3, 32, 32)
    y = pool(x)
    assert y.shape == (1, 3, 16, 16)
    ref = x.numpy().reshape(1, 3, 16, 2, 16, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(y.numpy(), ref)
    assert nn.MaxPool2d(2)(x).shape == (1, 3, 16, 16)
    assert nn.MaxPool2d(3, 2, padding_mode="same")(randn(1, 1, 5, 5)).shape == (1, 1, 3, 3)
    check_grads(lambda a: pool(a), (randn(1, 2, 4, 4),), order=2)


# -- normalization, dropout, embedding -------------------------------------------------------
def test_layernorm_layer():
    ln = nn.LayerNorm(input_size=10)
    x = randn(4, 10)
    y = ln(x)
    assert y.shape == (4, 10)
    xn = x.numpy().astype(np.float64)
    ref = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-5)
    p = {"weight": randn(10), "bias": randn(10)}
    check_grads(pure(ln), (p, randn(3, 10)), order=2)


def test_batchnorm_layer_training_updates_state_eval_uses_it():
    bn = nn.BatchNorm(input_size=10)
    x = randn(4, 10)
    y = bn(x)
    assert y.shape == (4, 10)
    xn = x.numpy().astype(np.float64)
    np.testing.assert_allclose(
        y.numpy(), np_bn_train(xn, np.ones(10), np.zeros(10)), rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * xn.mean(0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * xn.var(0, ddof=1), rtol=1e-5)
    bn.eval()
    before = bn.running_mean.numpy().copy()
    y_eval = bn(x)
    np.testing.assert_array_equal(bn.running_mean.numpy(), before)
    ref = (xn - before) / np.sqrt(bn.running_var.numpy() + 1e-5)
    np.testing.assert_allclose(y_eval.numpy(), ref, rtol=1e-4, atol=1e-5)
    bn.train()
    p = {"weight": randn(10), "bias": randn(10)}
    check_grads(pure(bn), (p, randn(4, 10)), order=2)


def test_batchnorm_against_torch():
    torch = pytest.importorskip("torch")
    bn = nn.BatchNorm(3, momentum=0.3)
    tbn = torch.nn.BatchNorm2d(3, momentum=0.3, dtype=torch.float64)
    x = RNG.standard_normal((4, 3, 2, 2))
    for _ in range(2):
        np.testing.assert_allclose(
            bn(T(x)).numpy(), tbn(torch.tensor(x)).detach().numpy(), rtol=1e-5
        )
    np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-5)


def test_dropout_layer():
    dropout = nn.Dropout(p=0.5)
    x = tg.Tensor(np.ones((40, 40), np.float32))
    dropout.train()
    y = dropout(x)
    frac = (y.numpy() == 0).mean()
    assert 0.4 < frac < 0.6
    np.testing.assert_array_equal(np.unique(y.numpy()), [0.0, 2.0])
    dropout.eval()
    assert dropout(x) is x
    dropout.train()
    f = pure(dropout, key=tg.random.key(3))
    np.testing.assert_array_equal(f({}, x).numpy(), f({}, x).numpy())
    np.testing.assert_array_equal(
        f({}, x).numpy(), F.dropout(x, 0.5, key=tg.random.split(tg.random.key(3))[1]).numpy()
    )
    check_grads(lambda a: f({}, a), (randn(3, 4),), order=2)
    with pytest.raises(ValueError, match="p must lie in"):
        nn.Dropout(2.0)


def test_embedding_layer():
    embed = nn.Embedding(input_size=100, embedding_size=16)
    assert embed(tg.Tensor(np.array([[1, 5, 20], [2, 10, 30]]))).shape == (2, 3, 16)
    embed = nn.Embedding(input_size=50, embedding_size=8, key=KEY)
    idx = np.array([[0, 1, 2], [3, 4, 5]])
    y = embed(tg.Tensor(idx))
    np.testing.assert_array_equal(y.numpy(), embed.weight.numpy()[idx])
    check_grads(lambda params: pure(embed)(params, idx), (embed.params,), order=2)


# -- residual and recurrent blocks -----------------------------------------------------------
def np_residual(x, p, stride, projected):
    y = np_conv(x, p["conv1.weight"], stride, 1)
    y = np.maximum(np_bn_train(y, p["bn1.weight"], p["bn1.bias"]), 0)
    y = np_bn_train(np_conv(y, p["conv2.weight"], 1, 1), p["bn2.weight"], p["bn2.bias"])
    if projected:
        x = np_conv(x, p["shortcut_conv.weight"], stride, 0)
        x = np_bn_train(x, p["shortcut_bn.weight"], p["shortcut_bn.bias"])
    return np.maximum(y + x, 0)


@pytest.mark.parametrize("cin,cout,stride", [(4, 4, 1), (3, 5, 2)])
def test_residual_block(cin, cout, stride):
    block = nn.ResidualBlock(cin, cout, stride=stride, key=KEY)
    x = RNG.standard_normal((2, cin, 6, 6))
    y = block(T(x))
    assert y.shape == (2, cout, 6 // stride, 6 // stride)
    ref = np_residual(x, np_params(block), stride, stride != 1 or cin != cout)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-10)
    small = nn.ResidualBlock(2, 3, stride=2, key=KEY)
    check_grads(pure(small), (small.params, RNG.standard_normal((2, 2, 4, 4))), order=1)


def test_residual_block_seeds_example():
    res_block = nn.ResidualBlock(16, 16, stride=1)
    assert res_block(randn(1, 16, 32, 32)).shape == (1, 16, 32, 32)


def np_rnn(x, p, h=None):
    h = np.zeros((x.shape[0], p["hidden_to_hidden.weight"].shape[0])) if h is None else h
    for t in range(x.shape[1]):
        h = np.tanh(
            x[:, t] @ p["input_to_hidden.weight"]
            + p["input_to_hidden.bias"]
            + h @ p["hidden_to_hidden.weight"]
        )
    return h


def test_recurrent_block():
    rnn = nn.RecurrentBlock(input_size=4, hidden_size=8, output_size=2)
    assert rnn(randn(3, 5, 4)).shape == (3, 2)
    assert nn.RecurrentBlock(input_size=4, hidden_size=8, output_size=3)(randn(3, 5, 4)).shape == (
        3,
        3,
    )
    rnn = nn.RecurrentBlock(4, 6, key=KEY)
    x = RNG.standard_normal((3, 5, 4))
    h0 = RNG.standard_normal((3, 6))
    p = np_params(rnn)
    np.testing.assert_allclose(rnn(T(x)).numpy(), np_rnn(x, p), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(rnn(T(x), T(h0)).numpy(), np_rnn(x, p, h0), rtol=1e-6)
    proj = nn.RecurrentBlock(3, 4, output_size=2, key=KEY)
    pp = np_params(proj)
    xs = RNG.standard_normal((2, 3, 3))
    ref = np_rnn(xs, pp) @ pp["hidden_to_output.weight"] + pp["hidden_to_output.bias"]
    np.testing.assert_allclose(proj(T(xs)).numpy(), ref, rtol=1e-6)
    check_grads(pure(proj), (proj.params, xs), order=2)


def test_recurrent_block_dropout_only_in_training():
    rnn = nn.RecurrentBlock(3, 20, dropout_prob=0.5, key=KEY)
    x = randn(2, 3, 3)
    y = rnn(x)
    assert (y.numpy() == 0).any()
    rnn.eval()
    assert not (rnn(x).numpy() == 0).any()


def np_lstm(x, p, h=None, c=None):
    n = p["hidden_to_gates.weight"].shape[0]
    h = np.zeros((x.shape[0], n)) if h is None else h
    c = np.zeros((x.shape[0], n)) if c is None else c
    for t in range(x.shape[1]):
        z = (
            x[:, t] @ p["input_to_gates.weight"]
            + p["input_to_gates.bias"]
            + h @ p["hidden_to_gates.weight"]
        )
        i, f, g, o = (
            expit(z[:, :n]),
            expit(z[:, n : 2 * n]),
            np.tanh(z[:, 2 * n : 3 * n]),
            expit(z[:, 3 * n :]),
        )
        c = f * c + i * g
        h = o * np.tanh(c)
    return h, c


def test_lstm_block():
    lstm = nn.LongShortTermMemoryBlock(input_size=4, hidden_size=8, output_size=3)
    output, cell_state = lstm(randn(3, 5, 4))
    assert output.shape == (3, 3) and cell_state.shape == (3, 8)
    lstm = nn.LongShortTermMemoryBlock(4, 5, key=KEY)
    x = RNG.standard_normal((2, 3, 4))
    h0, c0 = RNG.standard_normal((2, 5)), RNG.standard_normal((2, 5))
    p = np_params(lstm)
    h, c = lstm(T(x), T(h0), T(c0))
    rh, rc = np_lstm(x, p, h0, c0)
    np.testing.assert_allclose(h.numpy(), rh, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(c.numpy(), rc, rtol=1e-6, atol=1e-7)
    check_grads(pure(lstm), (lstm.params, x[:, :2]), order=1)


def test_lstm_against_torch():
    torch = pytest.importorskip("torch")
    lstm = nn.LongShortTermMemoryBlock(3, 4, key=KEY)
    p = np_params(lstm)
    ref = torch.nn.LSTM(3, 4, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(torch.tensor(p["input_to_gates.weight"].T))
        ref.weight_hh_l0.copy_(torch.tensor(p["hidden_to_gates.weight"].T))
        ref.bias_ih_l0.copy_(torch.tensor(p["input_to_gates.bias"]))
        ref.bias_hh_l0.zero_()
    x = RNG.standard_normal((2, 5, 3))
    _, (th, tc) = ref(torch.tensor(x))
    h, c = lstm(T(x))
    np.testing.assert_allclose(h.numpy(), th[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.numpy(), tc[0].detach().numpy(), rtol=1e-5, atol=1e-6)


# -- attention -------------------------------------------------------------------------------
def test_scaled_dot_product_attention_layer():
    attn = nn.ScaledDotProductAttention(dropout_prob=0.1, key=KEY)
    q, k, v = (RNG.standard_normal((2, 2, 4, 8)) for _ in range(3))
    y = attn(T(q), T(k), T(v))
    assert y.shape == (2, 2, 4, 8)
    attn.eval()
    np.testing.assert_allclose(attn(T(q), T(k), T(v)).numpy(), np_attention(q, k, v), rtol=1e-10)
    assert not np.allclose(y.numpy(), np_attention(q, k, v))  # training applied dropout
    mask = np.triu(np.ones((4, 4)), 1)
    np.testing.assert_allclose(
        attn(T(q), T(k), T(v), mask).numpy(), np_attention(q, k, v, mask * -1e9), rtol=1e-10
    )
    attn.train()
    f = pure(attn, key=tg.random.key(1))
    np.testing.assert_array_equal(f({}, T(q), T(k), T(v)).numpy(), f({}, T(q), T(k), T(v)).numpy())
    check_grads(lambda a, b, c: f({}, a, b, c), (T(q[0]), T(k[0]), T(v[0])), order=2)


def test_multi_head_attention_layer():
    mha = nn.MultiHeadAttention(num_heads=2, hidden_size=16, dropout_prob=0.1)
    x = randn(2, 5, 16)
    assert mha(x, x, x).shape == (2, 5, 16)
    mha = nn.MultiHeadAttention(2, 4, key=KEY).eval()
    xs = RNG.standard_normal((2, 3, 4))
    p = np_params(mha)

    def proj(z, n):
        return (z @ p[f"{n}.weight"] + p[f"{n}.bias"]).reshape(2, 3, 2, 2).transpose(0, 2, 1, 3)

    o = np_attention(proj(xs, "query"), proj(xs, "key"), proj(xs, "value"))
    ref = o.transpose(0, 2, 1, 3).reshape(2, 3, 4) @ p["output.weight"] + p["output.bias"]
    np.testing.assert_allclose(mha(T(xs), T(xs), T(xs)).numpy(), ref, rtol=1e-6, atol=1e-7)
    check_grads(lambda params, z: pure(mha)(params, z, z, z), (mha.params, xs), order=1)
    with pytest.raises(ValueError, match="must divide hidden_size"):
        nn.MultiHeadAttention(3, 16)


def test_multi_head_attention_against_torch():
    torch = pytest.importorskip("torch")
    mha = nn.MultiHeadAttention(2, 6, key=KEY).eval()
    p = np_params(mha)
    ref = torch.nn.MultiheadAttention(6, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.tensor(np.concatenate([p[f"{n}.weight"].T for n in ("query", "key", "value")]))
        )
        ref.in_proj_bias.copy_(
            torch.tensor(np.concatenate([p[f"{n}.bias"] for n in ("query", "key", "value")]))
        )
        ref.out_proj.weight.copy_(torch.tensor(p["output.weight"].T))
        ref.out_proj.bias.copy_(torch.tensor(p["output.bias"]))
    x = RNG.standard_normal((2, 4, 6))
    tx = torch.tensor(x)
    out, _ = ref(tx, tx, tx, need_weights=False)
    np.testing.assert_allclose(
        mha(T(x), T(x), T(x)).numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-6
    )
