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
        return nn.functional_call(model, p, *xs, key=key)[0]

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
    with pytest.raises(ValueError, match="padding_mode must be 'valid', 'same' or 'zeros'"):
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


# -- PyTorch's module names ------------------------------------------------------------------
def test_activation_modules_equal_their_functions():
    x = T(RNG.standard_normal((3, 4)))
    for module, fn in (
        (nn.ReLU(), F.relu),
        (nn.Tanh(), F.tanh),
        (nn.Sigmoid(), F.sigmoid),
        (nn.SiLU(), F.silu),
        (nn.GELU(), lambda v: F.gelu(v, approximate="none")),
        (nn.GELU("tanh"), F.gelu),
        (nn.LeakyReLU(0.2), lambda v: F.leaky_relu(v, 0.2)),
        (nn.Softmax(dim=0), lambda v: F.softmax(v, axis=0)),
        (nn.Softmax(), lambda v: F.softmax(v, axis=-1)),
        (nn.LogSoftmax(dim=1), lambda v: F.log_softmax(v, axis=1)),
    ):
        np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy())
        assert module.params == {} and list(module.parameters()) == []
        out, state = nn.functional_call(module, {}, x)
        assert out.shape == x.shape and state == {}
    with pytest.raises(ValueError, match="GELU: approximate must be"):
        nn.GELU("fast")


def test_activation_modules_against_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((3, 4)) * 3
    for ours, theirs in (
        (nn.GELU(), torch.nn.GELU()),  # exact erf form by default in both
        (nn.GELU("tanh"), torch.nn.GELU("tanh")),
        (nn.SiLU(), torch.nn.SiLU()),
        (nn.Softmax(dim=0), torch.nn.Softmax(dim=0)),
        (nn.LeakyReLU(0.1), torch.nn.LeakyReLU(0.1)),
    ):
        np.testing.assert_allclose(
            ours(T(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-12, atol=1e-14
        )


def test_flatten_and_identity():
    x = T(RNG.standard_normal((2, 3, 4, 5)))
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert nn.Flatten(start_dim=2)(x).shape == (2, 3, 20)
    np.testing.assert_array_equal(nn.Flatten()(x).numpy(), x.numpy().reshape(2, 60))
    g = tg.grad(lambda v: (nn.Flatten()(v) ** 2).sum())(x)
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy())
    ident = nn.Identity(54, unused="argument")
    assert ident(x) is x
    with pytest.raises(ValueError, match="flatten: start_dim 2 comes after end_dim 1"):
        nn.Flatten(2, 1)(x)


def test_conv1d_layer():
    conv = nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2, key=KEY)
    assert conv.weight.shape == (6, 2, 3) and conv.bias.shape == (6,)
    assert sorted(conv.parameters) == ["bias", "weight"]
    x = randn(2, 4, 9)
    y = conv(x)
    ref = F.conv1d(x, conv.weight, conv.bias, stride=2, padding=1, groups=2)
    np.testing.assert_array_equal(y.numpy(), ref.numpy())
    assert y.shape == (2, 6, 5)
    assert nn.Conv1d(4, 6, 3, bias=False).bias is None
    np.testing.assert_array_equal(
        nn.Conv1d(4, 6, 3, key=KEY).weight.numpy(), nn.Conv1d(4, 6, 3, key=KEY).weight.numpy()
    )
    check_grads(pure(conv), (conv.params, x), order=2)
    with pytest.raises(ValueError, match="Conv1d: groups=4 must divide"):
        nn.Conv1d(6, 6, 3, groups=4)


def test_conv_transpose2d_layer_against_torch():
    layer = nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2)
    assert layer.weight.shape == (4, 3, 3, 2)  # (in, out / groups, kH, kW), PyTorch's layout
    x = RNG.standard_normal((2, 4, 5, 5))
    y = layer(T(x.astype(np.float32)))
    assert y.shape == (2, 6, 10, 9)
    check_grads(pure(layer), (layer.params, T(x)), order=1)
    torch = pytest.importorskip("torch")
    ref = torch.nn.ConvTranspose2d(4, 6, (3, 2), 2, 1, 1, groups=2, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(layer.weight.numpy().astype(np.float64)))
        ref.bias.copy_(torch.tensor(RNG.standard_normal(6)))
    params = {"weight": T(ref.weight.detach().numpy()), "bias": T(ref.bias.detach().numpy())}
    ours, _ = nn.functional_call(layer, params, T(x))
    np.testing.assert_allclose(ours.numpy(), ref(torch.tensor(x)).detach().numpy(), rtol=1e-10)


def test_pooling_layers():
    x = randn(2, 3, 7, 6)
    np.testing.assert_array_equal(
        nn.AvgPool2d(3, 2, 1)(x).numpy(), F.avg_pool2d(x, 3, 2, 1).numpy()
    )
    np.testing.assert_array_equal(
        nn.AvgPool2d(3, 2, 1, count_include_pad=False)(x).numpy(),
        F.avg_pool2d(x, 3, 2, 1, count_include_pad=False).numpy(),
    )
    assert nn.AvgPool2d(2)(x).shape == (2, 3, 3, 3)
    assert nn.AdaptiveAvgPool2d((2, 3))(x).shape == (2, 3, 2, 3)
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 3, 1, 1)
    np.testing.assert_allclose(
        nn.AdaptiveAvgPool2d(1)(x).numpy()[..., 0, 0], x.numpy().mean(axis=(2, 3)), rtol=1e-6
    )
    torch = pytest.importorskip("torch")
    xd = RNG.standard_normal((2, 3, 7, 6))
    for ours, theirs in (
        (nn.AvgPool2d(3, 2, 1), torch.nn.AvgPool2d(3, 2, 1)),
        (nn.AvgPool2d(3, 2, 1, count_include_pad=False),
         torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False)),
        (nn.AdaptiveAvgPool2d((4, 5)), torch.nn.AdaptiveAvgPool2d((4, 5))),
    ):
        np.testing.assert_allclose(
            ours(T(xd)).numpy(), theirs(torch.tensor(xd)).numpy(), rtol=1e-12
        )


def test_rms_norm_and_group_norm_layers():
    rms = nn.RMSNorm((3, 4))
    assert rms.weight.shape == (3, 4) and np.all(rms.weight.numpy() == 1)
    x = RNG.standard_normal((2, 3, 4))
    y = rms(T(x))
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(y.numpy(), x / np.sqrt((x**2).mean((1, 2), keepdims=True) + eps))
    assert nn.RMSNorm(4, elementwise_affine=False).params == {"weight": None}
    check_grads(pure(nn.RMSNorm(4, eps=1e-5)), (nn.RMSNorm(4).params, T(x)), order=2)
    gn = nn.GroupNorm(2, 4)
    assert sorted(gn.parameters) == ["bias", "weight"]
    x4 = RNG.standard_normal((2, 4, 3, 3))
    np.testing.assert_allclose(
        gn(T(x4)).numpy(), F.group_norm(T(x4), 2, gn.weight, gn.bias).numpy(), rtol=1e-12
    )
    assert list(nn.GroupNorm(2, 4, affine=False).parameters()) == []
    check_grads(pure(gn), (gn.params, T(x4)), order=2)
    with pytest.raises(ValueError, match="GroupNorm: num_groups=3 must divide num_channels=4"):
        nn.GroupNorm(3, 4)
    torch = pytest.importorskip("torch")
    tg_ref = torch.nn.GroupNorm(2, 4, dtype=torch.float64)
    np.testing.assert_allclose(
        nn.GroupNorm(2, 4, dtype=np.float64)(T(x4)).numpy(),
        tg_ref(torch.tensor(x4)).detach().numpy(),
        rtol=1e-10,
    )
    rms_ref = torch.nn.RMSNorm((3, 4), dtype=torch.float64)
    np.testing.assert_allclose(
        nn.RMSNorm((3, 4), dtype=np.float64)(T(x)).numpy(),
        rms_ref(torch.tensor(x)).detach().numpy(),
        rtol=1e-12,
    )


# -- recurrent layers ------------------------------------------------------------------------
def np_step(mode, gi, h, c, whh, bhh):
    gh = h @ whh + bhh
    n = h.shape[-1]
    if mode == "rnn_tanh":
        return np.tanh(gi + gh), None
    if mode == "rnn_relu":
        return np.maximum(gi + gh, 0), None
    if mode == "gru":
        r, z = expit(gi[..., :n] + gh[..., :n]), expit(gi[..., n : 2 * n] + gh[..., n : 2 * n])
        cand = np.tanh(gi[..., 2 * n :] + r * gh[..., 2 * n :])
        return (1 - z) * cand + z * h, None
    a = gi + gh
    c = expit(a[..., n : 2 * n]) * c + expit(a[..., :n]) * np.tanh(a[..., 2 * n : 3 * n])
    return expit(a[..., 3 * n :]) * np.tanh(c), c


def np_rnn_layers(mode, p, x, h0, c0, layers, dirs):
    """Sequence-first NumPy reference: x (L, N, in), h0/c0 (layers * dirs, N, H)."""
    hn, cn = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            h, c = h0[layer * dirs + d], c0[layer * dirs + d]
            gi = x @ p["weight_ih" + sfx] + p["bias_ih" + sfx]
            hs = [None] * len(x)
            for t in reversed(range(len(x))) if d else range(len(x)):
                h, c = np_step(mode, gi[t], h, c, p["weight_hh" + sfx], p["bias_hh" + sfx])
                hs[t] = h
            outs.append(np.stack(hs))
            hn.append(h)
            cn.append(c)
        x = np.concatenate(outs, -1)
    return x, np.stack(hn), (np.stack(cn) if mode == "lstm" else None)


RNN_CASES = [
    (nn.RNN, "rnn_tanh", {}),
    (nn.RNN, "rnn_relu", {"nonlinearity": "relu"}),
    (nn.LSTM, "lstm", {}),
    (nn.GRU, "gru", {}),
]


@pytest.mark.parametrize("cls,mode,extra", RNN_CASES, ids=[c[1] for c in RNN_CASES])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_recurrent_layers_match_numpy(cls, mode, extra, bidirectional, batch_first):
    dirs = 2 if bidirectional else 1
    layer = cls(
        3,
        4,
        num_layers=2,
        batch_first=batch_first,
        bidirectional=bidirectional,
        key=KEY,
        dtype=np.float64,
        **extra,
    )
    g = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}[mode]
    assert layer.weight_ih_l0.shape == (3, g * 4)
    assert layer.weight_ih_l1.shape == (dirs * 4, g * 4)
    assert layer.weight_hh_l1.shape == (4, g * 4) and layer.bias_hh_l1.shape == (g * 4,)
    assert ("weight_ih_l1_reverse" in layer.parameters) == bidirectional
    x = RNG.standard_normal((5, 2, 3))  # (L, N, in)
    h0, c0 = RNG.standard_normal((2 * dirs, 2, 4)), RNG.standard_normal((2 * dirs, 2, 4))
    hx = (T(h0), T(c0)) if mode == "lstm" else T(h0)
    xin = x.swapaxes(0, 1) if batch_first else x
    out, hn = layer(T(xin), hx)
    ref_out, ref_h, ref_c = np_rnn_layers(mode, np_params(layer), x, h0, c0, 2, dirs)
    if batch_first:
        ref_out = ref_out.swapaxes(0, 1)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-12, atol=1e-14)
    if mode == "lstm":
        hn, cn = hn
        np.testing.assert_allclose(cn.numpy(), ref_c, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hn.numpy(), ref_h, rtol=1e-12, atol=1e-14)
    # unbatched input: (L, in), states (layers * dirs, H)
    hx1 = (T(h0[:, 0]), T(c0[:, 0])) if mode == "lstm" else T(h0[:, 0])
    out1, hn1 = layer(T(x[:, 0]), hx1)
    np.testing.assert_allclose(
        out1.numpy(),
        np_rnn_layers(mode, np_params(layer), x[:, :1], h0[:, :1], c0[:, :1], 2, dirs)[0][:, 0],
        rtol=1e-12,
        atol=1e-14,
    )
    assert (hn1[0] if mode == "lstm" else hn1).shape == (2 * dirs, 4)


@pytest.mark.parametrize("cls,mode,extra", RNN_CASES, ids=[c[1] for c in RNN_CASES])
def test_recurrent_layers_against_torch(cls, mode, extra):
    torch = pytest.importorskip("torch")
    tcls = {nn.RNN: torch.nn.RNN, nn.LSTM: torch.nn.LSTM, nn.GRU: torch.nn.GRU}[cls]
    ref = tcls(3, 4, num_layers=2, bidirectional=True, batch_first=True, **extra).double()
    layer = cls(3, 4, num_layers=2, bidirectional=True, batch_first=True, **extra)
    theirs = dict(ref.named_parameters())
    assert set(theirs) == set(layer.parameters)  # PyTorch's names
    params = {
        k: T(v.detach().numpy().T.copy() if k.startswith("weight") else v.detach().numpy())
        for k, v in theirs.items()
    }
    x = RNG.standard_normal((2, 5, 3))
    (out, hn), _ = nn.functional_call(layer, params, T(x))
    tout, thn = ref(torch.tensor(x))
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12, atol=1e-14)
    for a, b in zip(hn if mode == "lstm" else (hn,), thn if mode == "lstm" else (thn,)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_recurrent_cell_modules_and_init():
    for cls, g in ((nn.RNNCell, 1), (nn.LSTMCell, 4), (nn.GRUCell, 3)):
        cell = cls(3, 5, key=KEY)
        assert sorted(cell.parameters) == ["bias_hh", "bias_ih", "weight_hh", "weight_ih"]
        assert cell.weight_ih.shape == (3, g * 5) and cell.weight_hh.shape == (5, g * 5)
        bound = 1 / math.sqrt(5)  # PyTorch's U(-1/sqrt(hidden), 1/sqrt(hidden))
        for p in cell.parameters():
            assert np.abs(p.numpy()).max() <= bound
        assert cls(3, 5, bias=False).params["bias_ih"] is None
        x = randn(2, 3)
        out = cell(x)
        h = out[0] if cls is nn.LSTMCell else out
        assert h.shape == (2, 5)
        check_grads(pure(cell), (cell.params, x), order=2)
    with pytest.raises(ValueError, match="RNNCell: nonlinearity must be"):
        nn.RNNCell(3, 5, nonlinearity="gelu")


def test_recurrent_cell_modules_against_torch():
    torch = pytest.importorskip("torch")
    x, h = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 5))
    for cls, tcls in (
        (nn.RNNCell, torch.nn.RNNCell),
        (nn.GRUCell, torch.nn.GRUCell),
        (nn.LSTMCell, torch.nn.LSTMCell),
    ):
        ref = tcls(3, 5).double()
        theirs = dict(ref.named_parameters())
        assert set(theirs) == set(cls(3, 5).parameters)
        params = {
            k: T(v.detach().numpy().T.copy() if k.startswith("weight") else v.detach().numpy())
            for k, v in theirs.items()
        }
        ours, _ = nn.functional_call(
            cls(3, 5), params, T(x), (T(h), T(h)) if cls is nn.LSTMCell else T(h)
        )
        ref_out = ref(
            torch.tensor(x),
            (torch.tensor(h), torch.tensor(h)) if cls is nn.LSTMCell else torch.tensor(h),
        )
        for a, b in zip(
            ours if cls is nn.LSTMCell else (ours,), ref_out if cls is nn.LSTMCell else (ref_out,)
        ):
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12)


def test_gru_grads_dropout_between_layers_and_errors():
    gru = nn.GRU(2, 3, num_layers=2, dropout=0.5, key=KEY, dtype=np.float64)
    x = T(RNG.standard_normal((4, 2, 2)))
    check_grads(lambda p, a: nn.functional_call(gru.eval(), p, a)[0][0], (gru.params, x),
                order=2)
    gru.train()
    k = tg.random.key(3)
    a = nn.functional_call(gru, gru.params, x, key=k)[0][0]
    b = nn.functional_call(gru, gru.params, x, key=k)[0][0]
    np.testing.assert_array_equal(a.numpy(), b.numpy())  # keyed dropout is reproducible
    e = nn.functional_call(gru.eval(), gru.params, x)[0][0]
    assert not np.allclose(a.numpy(), e.numpy())  # training drops between the layers
    single = nn.GRU(2, 3, num_layers=1, dropout=0.5, key=KEY)
    np.testing.assert_array_equal(  # no layer after the last: no dropout at all
        single(x)[0].numpy(), single.eval()(x)[0].numpy()
    )
    with pytest.raises(ValueError, match="GRU: the sequence is empty"):
        gru(T(np.zeros((0, 2, 2))))
    with pytest.raises(ValueError, match="GRU: expected input_size 2"):
        gru(T(np.zeros((4, 2, 3))))
    with pytest.raises(ValueError, match=r"GRU: hidden state must have shape .* \(2, 2, 3\)"):
        gru(x, T(np.zeros((1, 2, 3))))
    with pytest.raises(ValueError, match="GRU: input must have shape"):
        gru(T(np.zeros(3)))
    with pytest.raises(TypeError, match="LSTM: hx must be a pair"):
        nn.LSTM(2, 3)(x, T(np.zeros((1, 2, 3))))
    with pytest.raises(ValueError, match=r"GRU: dropout must lie in \[0, 1\)"):
        nn.GRU(2, 3, dropout=1.0)
    with pytest.raises(ValueError, match="RNN: nonlinearity must be"):
        nn.RNN(2, 3, nonlinearity="sigmoid")
