"""Example tests of tapegrad.nn.functional: NumPy reference forwards, PyTorch cross-checks
(skipped without torch), gradient checks in float64 and error paths."""

import math
import warnings

import numpy as np
import pytest
from scipy.special import erf as sp_erf
from scipy.special import expit
from scipy.special import log_softmax as sp_log_softmax

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads

RNG = np.random.default_rng(1234)


def T(a):
    return tg.Tensor(np.asarray(a))


def torch_or_skip():
    return pytest.importorskip("torch")


# -- NumPy references ------------------------------------------------------------------------
def np_conv2d(x, w, stride, pads, dilation, groups):
    """Direct definition: a loop over output pixels (the reference only)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pb, pl, pr = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho = (h + pt + pb - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + pl + pr - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(ho):
            for j in range(wo):
                r0, c0 = i * stride[0], j * stride[1]
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    r0 : r0 + dilation[0] * (kh - 1) + 1 : dilation[0],
                    c0 : c0 + dilation[1] * (kw - 1) + 1 : dilation[1],
                ]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out


def np_max_pool(x, k, s, p):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    ho = (x.shape[2] + 2 * p - k) // s + 1
    wo = (x.shape[3] + 2 * p - k) // s + 1
    out = np.empty(x.shape[:2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            out[:, :, i, j] = xp[:, :, i * s : i * s + k, j * s : j * s + k].max(axis=(2, 3))
    return out


def np_attention(q, k, v, bias=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p @ v


# -- activations -----------------------------------------------------------------------------
ACTIVATIONS = [
    ("relu", F.relu, lambda x: np.maximum(x, 0)),
    ("sigmoid", F.sigmoid, expit),
    ("tanh", F.tanh, np.tanh),
    (
        "gelu_tanh",
        F.gelu,
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    ),
    (
        "gelu_exact",
        lambda x: F.gelu(x, approximate="none"),
        lambda x: 0.5 * x * (1 + sp_erf(x / math.sqrt(2))),
    ),
    ("silu", F.silu, lambda x: x * expit(x)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    ("softplus", F.softplus, lambda x: np.logaddexp(0, x)),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0), lambda x: np.logaddexp(0, 2 * x) / 2),
    ("softmax", lambda x: F.softmax(x, axis=0), lambda x: np.exp(sp_log_softmax(x, axis=0))),
    ("log_softmax", lambda x: F.log_softmax(x, dim=1), lambda x: sp_log_softmax(x, axis=1)),
]


@pytest.mark.parametrize("name,fn,ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_matches_reference_and_grads(name, fn, ref):
    x = RNG.standard_normal((3, 4)) * 2
    x[np.abs(x) < 1e-3] = 0.5  # away from kinks
    y = fn(T(x))
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.numpy(), ref(x), rtol=1e-12, atol=1e-12)
    y32 = fn(T(x.astype(np.float32)))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32.numpy(), ref(x), rtol=2e-5, atol=2e-6)
    check_grads(fn, (T(x),), order=2)


def test_seeds_activation_examples():
    # (Python ints make int64 Tensors, which activations reject: the seeds' data as floats)
    np.testing.assert_allclose(F.relu(tg.Tensor([-1.0, 0, 2])).numpy(), [0, 0, 2])
    np.testing.assert_allclose(F.sigmoid(tg.Tensor([0.0, 2])).numpy(), [0.5, expit(2)], rtol=1e-6)
    np.testing.assert_allclose(F.softmax(tg.Tensor([2.0, 1.0, 0.1])).numpy().sum(), 1, rtol=1e-6)
    y = F.log_softmax(tg.Tensor([2.0, 1.0, 0.1]), dim=-1)
    np.testing.assert_allclose(np.exp(y.numpy()).sum(), 1, rtol=1e-6)
    np.testing.assert_allclose(F.tanh(tg.Tensor([0.0, 1])).numpy(), [0, np.tanh(1)], rtol=1e-6)


def test_activations_are_stable_for_extreme_inputs():
    x = T(np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0]))
    np.testing.assert_allclose(F.sigmoid(x).numpy(), expit(x.numpy()))
    np.testing.assert_allclose(F.softplus(x).numpy(), np.logaddexp(0, x.numpy()))
    ls = F.log_softmax(T(np.array([[1000.0, 0.0, -1000.0]])))
    assert np.all(np.isfinite(ls.numpy()))
    np.testing.assert_allclose(ls.numpy()[0, :2], [0.0, -1000.0])
    g = tg.grad(lambda v: F.sigmoid(v).sum())(x)
    assert np.all(np.isfinite(g.numpy()))


def test_relu_and_hinge_kink_conventions():
    g = tg.grad(lambda v: F.relu(v).sum())(T(np.array([-1.0, 0.0, 1.0])))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 1.0])
    g = tg.grad(lambda v: F.hinge_loss(v, [1.0, 1.0], reduction="sum"))(T(np.array([1.0, 0.5])))
    np.testing.assert_array_equal(g.numpy(), [0.0, -1.0])


def test_activation_errors():
    with pytest.raises(TypeError, match="relu: input must be a floating"):
        F.relu(tg.Tensor(np.array([1, 2])))
    with pytest.raises(ValueError, match="softmax: axis 2 is out of range"):
        F.softmax(T(np.ones((2, 2))), axis=2)
    with pytest.raises(ValueError, match="gelu: approximate"):
        F.gelu(T(np.ones(2)), approximate="fast")
    with pytest.raises(ValueError, match="softplus: beta"):
        F.softplus(T(np.ones(2)), beta=0)


# -- losses ----------------------------------------------------------------------------------
def test_mse_matches_formula_and_seeds_example():
    assert float(F.mean_squared_loss(tg.Tensor([3.0, 5.0]), [2.0, 5.0])) == 0.5
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    np.testing.assert_allclose(float(F.mse_loss(T(a), T(b))), ((a - b) ** 2).mean())
    np.testing.assert_allclose(float(F.mse_loss(T(a), T(b), reduction="sum")), ((a - b) ** 2).sum())
    check_grads(lambda p, t: F.mse_loss(p, t), (T(a), T(b)), order=2)


def test_binary_cross_entropy_formula_clamp_and_grads():
    p = RNG.uniform(0.05, 0.95, (5,))
    y = RNG.integers(0, 2, 5).astype(np.float64)
    ref = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(F.binary_cross_entropy(T(p), T(y), reduction="none").numpy(), ref)
    np.testing.assert_allclose(float(F.binary_cross_entropy(T(p), y)), ref.mean())
    check_grads(lambda a, b: F.binary_cross_entropy(a, b), (T(p), T(y)), order=2)
    edge = F.binary_cross_entropy(T(np.array([0.0, 1.0])), [1.0, 0.0], reduction="none")
    np.testing.assert_allclose(edge.numpy(), [100.0, 100.0])
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\]"):
        F.binary_cross_entropy(T(np.array([1.5])), [1.0])


def test_bce_with_logits_is_stable_and_matches_formula():
    x = RNG.standard_normal(6) * 3
    y = RNG.integers(0, 2, 6).astype(np.float64)
    ref = -(y * np.log(expit(x)) + (1 - y) * np.log(1 - expit(x)))
    out = F.binary_cross_entropy_with_logits(T(x), T(y), reduction="none")
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10)
    big = F.binary_cross_entropy_with_logits(T(np.array([800.0, -800.0])), [0.0, 1.0], "none")
    np.testing.assert_allclose(big.numpy(), [800.0, 800.0])
    g = tg.grad(lambda v: F.binary_cross_entropy_with_logits(v, [1.0, 0.0], "sum"))(
        T(np.array([800.0, -800.0]))
    )
    np.testing.assert_allclose(g.numpy(), [0.0, 0.0])
    check_grads(lambda a: F.binary_cross_entropy_with_logits(a, y), (T(x),), order=2)


def np_cross_entropy(logits, t, ignore, eps, reduction):
    lp = sp_log_softmax(logits, axis=-1)
    c = logits.shape[-1]
    valid = t != ignore
    safe = np.where(valid, t, 0)
    onehot = np.eye(c)[safe]
    target = (1 - eps) * onehot + eps / c
    per = -(target * lp).sum(-1) * valid
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    return per.sum() / max(valid.sum(), 1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4)])
def test_cross_entropy_matches_reference(reduction, shape):
    logits = RNG.standard_normal(shape) * 2
    t = RNG.integers(0, shape[-1], shape[:-1])
    t.reshape(-1)[0] = -100
    out = F.cross_entropy(T(logits), t, label_smoothing=0.1, reduction=reduction)
    np.testing.assert_allclose(out.numpy(), np_cross_entropy(logits, t, -100, 0.1, reduction))
    check_grads(
        lambda z: F.cross_entropy(z, t, label_smoothing=0.1, reduction=reduction), (T(logits),)
    )


def test_cross_entropy_against_torch():
    torch = torch_or_skip()
    logits = RNG.standard_normal((2, 3, 5))
    t = np.array([[0, 4, 7], [1, 7, 2]])
    out = F.cross_entropy(T(logits), t, ignore_index=7, label_smoothing=0.3)
    ref = torch.nn.functional.cross_entropy(
        torch.tensor(logits).permute(0, 2, 1), torch.tensor(t), ignore_index=7, label_smoothing=0.3
    )
    np.testing.assert_allclose(float(out), float(ref), rtol=1e-12)
    y = F.cross_entropy(tg.Tensor(np.array([[2.0, 1.0, 0.1]])), tg.Tensor(np.array([0])))
    np.testing.assert_allclose(float(y), -sp_log_softmax([2.0, 1.0, 0.1])[0], rtol=1e-12)


def test_cross_entropy_stable_all_ignored_and_float_targets():
    big = F.cross_entropy(T(np.array([[1e4, 0.0, -1e4]])), [1])
    np.testing.assert_allclose(float(big), 1e4)
    assert float(F.cross_entropy(T(np.ones((2, 3))), [-100, -100])) == 0.0
    g = tg.grad(lambda z: F.cross_entropy(z, [-100, -100]))(T(np.ones((2, 3))))
    np.testing.assert_array_equal(g.numpy(), np.zeros((2, 3)))
    a = F.cross_entropy(T(np.eye(3)), tg.Tensor([0, 1, 2]))  # float32 integral targets
    b = F.cross_entropy(T(np.eye(3)), np.array([0, 1, 2]))
    assert float(a) == float(b)


def test_cross_entropy_errors():
    z = T(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="target 3 is out of range for 3 classes"):
        F.cross_entropy(z, [0, 3])
    with pytest.raises(ValueError, match=r"y_true of shape \(3,\) fits neither kind of target"):
        F.cross_entropy(z, [0, 1, 2])
    with pytest.raises(TypeError, match="integer class indices"):
        F.cross_entropy(z, tg.Tensor([0.5, 1.0]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.cross_entropy(z, [0, 1], reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(z, [0, 1], label_smoothing=1.5)


def test_hinge_loss_reductions_and_seeds_example():
    pred = tg.Tensor([0.8, -0.5, 0.3])
    ref = np.maximum(0, 1 - np.array([1, -1, 1]) * pred.numpy())
    np.testing.assert_allclose(F.hinge_loss(pred, [1, -1, 1]).numpy(), ref, rtol=1e-6)
    np.testing.assert_allclose(
        float(F.hinge_loss(pred, [1, -1, 1], reduction="mean")), ref.mean(), rtol=1e-6
    )
    x = np.array([0.2, -1.7, 0.4, 3.0])
    check_grads(lambda v: F.hinge_loss(v, [1.0, 1.0, -1.0, 1.0], "sum"), (T(x),), order=2)


# -- linear, conv, pooling -------------------------------------------------------------------
def test_linear_and_mlp():
    x, w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal(2)
    np.testing.assert_allclose(F.linear(T(x), T(w), T(b)).numpy(), x @ w + b)
    check_grads(F.linear, (T(x), T(w), T(b)), order=2)
    params = tg.nn.init.mlp(tg.random.key(0), (4, 8, 2))
    assert [p["weight"].shape for p in params] == [(4, 8), (8, 2)]
    y = F.mlp(params, T(x.astype(np.float32)))
    w0, b0, w1, b1 = (params[i][n].numpy() for i in (0, 1) for n in ("weight", "bias"))
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ w0 + b0, 0) @ w1 + b1, rtol=1e-5)
    with pytest.raises(ValueError, match="linear: input of shape \\(3, 4\\) and weight"):
        F.linear(T(x), T(w.T))


CONV_CASES = [
    dict(stride=1, padding=0, dilation=1, groups=1),
    dict(stride=2, padding=1, dilation=1, groups=2),
    dict(stride=(1, 2), padding=(2, 0), dilation=(2, 1), groups=1),
    dict(stride=1, padding="same", dilation=1, groups=1),
    dict(stride=2, padding="same", dilation=1, groups=4),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_matches_direct_definition_and_grads(case):
    x = RNG.standard_normal((2, 4, 7, 6))
    w = RNG.standard_normal((4, 4 // case["groups"], 3, 2))
    b = RNG.standard_normal(4)
    y = F.conv2d(T(x), T(w), T(b), **case)
    stride = F._pair(case["stride"], "s", "t")
    dil = F._pair(case["dilation"], "d", "t")
    pads = F._resolve_padding(case["padding"], x.shape[2:], w.shape[2:], stride, dil, "t")
    ref = np_conv2d(x, w, stride, pads, dil, case["groups"]) + b[:, None, None]
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10, atol=1e-12)
    if case["padding"] == "same":
        assert y.shape[2:] == tuple(-(-s // st) for s, st in zip(x.shape[2:], stride))
    kw = {k: v for k, v in case.items()}
    check_grads(lambda a, c, d: F.conv2d(a, c, d, **kw), (T(x), T(w), T(b)), order=2)


def test_conv2d_against_torch():
    torch = torch_or_skip()
    x = RNG.standard_normal((2, 6, 9, 8))
    w = RNG.standard_normal((4, 6, 3, 3))
    for kw in (dict(stride=2, padding=1, dilation=2, groups=2), dict(padding="same")):
        y = F.conv2d(T(x), T(w[:, : 6 // kw.get("groups", 1)]), None, **kw)
        ref = torch.nn.functional.conv2d(
            torch.tensor(x), torch.tensor(w[:, : 6 // kw.get("groups", 1)]), **kw
        )
        np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_conv2d_errors():
    x = T(np.ones((1, 3, 5, 5)))
    with pytest.raises(ValueError, match="conv2d: input must have shape \\(N, C, H, W\\)"):
        F.conv2d(T(np.ones((3, 5, 5))), T(np.ones((2, 3, 3, 3))))
    with pytest.raises(ValueError, match="input has 3 channels"):
        F.conv2d(x, T(np.ones((2, 2, 3, 3))))
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        F.conv2d(x, T(np.ones((2, 3, 7, 7))))
    with pytest.raises(ValueError, match="padding must be 'valid', 'same'"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), padding="full")
    with pytest.raises(ValueError, match="stride must be >= 1"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), stride=0)


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool2d_matches_reference_and_grads(k, s, p):
    x = RNG.standard_normal((2, 3, 7, 6))
    y = F.max_pool2d(T(x), k, s, p)
    np.testing.assert_array_equal(y.numpy(), np_max_pool(x, k, s, p))
    check_grads(lambda a: F.max_pool2d(a, k, s, p), (T(x),), order=2)


def test_max_pool2d_routes_gradient_to_argmax():
    x = T(np.array([[[[1.0, 5.0], [3.0, 2.0]]]]))
    g = tg.grad(lambda a: F.max_pool2d(a, 2).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [[[[0.0, 1.0], [0.0, 0.0]]]])
    with pytest.raises(ValueError, match="at most half the kernel"):
        F.max_pool2d(x, 2, padding=2)


def test_avg_pool2d_against_torch_and_grads():
    x = RNG.standard_normal((2, 3, 7, 6))
    for cip in (True, False):
        y = F.avg_pool2d(T(x), 3, 2, 1, count_include_pad=cip)
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        counts = np.pad(np.ones(x.shape[2:]), 1)
        ref = np.empty(y.shape)
        for i in range(y.shape[2]):
            for j in range(y.shape[3]):
                win = padded[:, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3].sum(axis=(2, 3))
                n = 9 if cip else counts[2 * i : 2 * i + 3, 2 * j : 2 * j + 3].sum()
                ref[:, :, i, j] = win / n
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12)
        check_grads(lambda a, c=cip: F.avg_pool2d(a, 3, 2, 1, count_include_pad=c), (T(x),))


# -- dropout, normalization, embedding -------------------------------------------------------
def test_dropout_is_reproducible_scaled_and_identity_in_eval():
    x = T(np.ones((50, 40)))
    k = tg.random.key(3)
    a, b = F.dropout(x, 0.25, key=k), F.dropout(x, 0.25, key=k)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    vals = np.unique(a.numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.75])
    assert 0.2 < (a.numpy() == 0).mean() < 0.3
    assert F.dropout(x, 0.5, training=False) is x
    np.testing.assert_array_equal(F.dropout(x, rate=0.25, key=k).numpy(), a.numpy())
    c = F.dropout(x, 0.25, key=tg.random.split(k)[0])
    assert not np.array_equal(a.numpy(), c.numpy())
    g = tg.grad(lambda v: F.dropout(v, 0.25, key=k).sum())(x)
    np.testing.assert_array_equal(g.numpy(), a.numpy())
    with pytest.raises(ValueError, match="needs a key"):
        F.dropout(x, 0.5)
    with pytest.raises(ValueError, match="p must lie in"):
        F.dropout(x, 1.5, key=k)


def test_layer_norm_reference_torch_and_grads():
    x = RNG.standard_normal((3, 4, 5))
    w, b = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    y = F.layer_norm(T(x), (4, 5), T(w), T(b))
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(y.numpy(), (x - mu) / np.sqrt(var + 1e-5) * w + b, rtol=1e-10)
    check_grads(lambda a, c, d: F.layer_norm(a, (4, 5), c, d), (T(x), T(w), T(b)), order=2)
    with pytest.raises(ValueError, match="does not end with normalized_shape"):
        F.layer_norm(T(x), 4)


def test_batch_norm_training_eval_and_running_stats():
    x = RNG.standard_normal((6, 3, 2, 2)) * 2 + 1
    rm, rv = T(np.zeros(3)), T(np.ones(3))
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    y, m, v = F.batch_norm(T(x), rm, rv, T(w), T(b), training=True, momentum=0.1)
    mu = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    shp = (1, 3, 1, 1)
    ref = (x - mu.reshape(shp)) / np.sqrt(var.reshape(shp) + 1e-5) * w.reshape(shp) + b.reshape(shp)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10)
    np.testing.assert_allclose(m.numpy(), 0.1 * mu)
    np.testing.assert_allclose(v.numpy(), 0.9 + 0.1 * var * 24 / 23)
    np.testing.assert_array_equal(rm.numpy(), np.zeros(3))  # inputs untouched
    ye, m2, v2 = F.batch_norm(T(x), m, v, T(w), T(b), training=False)
    assert m2 is m and v2 is v
    ref_e = (x - m.numpy().reshape(shp)) / np.sqrt(v.numpy().reshape(shp) + 1e-5)
    np.testing.assert_allclose(ye.numpy(), ref_e * w.reshape(shp) + b.reshape(shp), rtol=1e-10)
    check_grads(
        lambda a, c, d: F.batch_norm(a, None, None, c, d, training=True)[0], (T(x), T(w), T(b))
    )
    check_grads(lambda a: F.batch_norm(a, m, v, training=False)[0], (T(x),), order=2)
    with pytest.raises(ValueError, match="needs running_mean and running_var"):
        F.batch_norm(T(x))
    with pytest.raises(ValueError, match="more than one value per channel"):
        F.batch_norm(T(np.ones((1, 3))), training=True)


def test_batch_norm_against_torch():
    torch = torch_or_skip()
    x = RNG.standard_normal((5, 4))
    rm, rv = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    ref = torch.nn.functional.batch_norm(torch.tensor(x), rm, rv, training=True, momentum=0.2)
    y, m, v = F.batch_norm(T(x), T(np.zeros(4)), T(np.ones(4)), training=True, momentum=0.2)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-10)
    np.testing.assert_allclose(m.numpy(), rm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(v.numpy(), rv.numpy(), rtol=1e-12)


def test_embedding_lookup_and_accumulating_gradient():
    w = RNG.standard_normal((5, 3))
    idx = np.array([[0, 2], [2, 4]])
    np.testing.assert_array_equal(F.embedding(idx, T(w)).numpy(), w[idx])
    g = tg.grad(lambda p: F.embedding(idx, p).sum())(T(w))
    np.testing.assert_array_equal(g.numpy()[:, 0], [1, 0, 2, 0, 1])
    check_grads(lambda p: F.embedding(idx, p), (T(w),), order=2)
    with pytest.raises(ValueError, match="indices must lie in \\[0, 5\\)"):
        F.embedding(np.array([5]), T(w))


# -- attention -------------------------------------------------------------------------------
def test_sdpa_masks_follow_the_seeds_contract():
    q, k, v = (RNG.standard_normal((2, 3, 4, 5)) for _ in range(3))
    float_mask = (RNG.random((4, 4)) > 0.6).astype(np.float64)  # 1.0 = forbidden
    y = F.scaled_dot_product_attention(T(q), T(k), T(v), float_mask)
    np.testing.assert_allclose(y.numpy(), np_attention(q, k, v, float_mask * -1e9), rtol=1e-10)
    y_bool = F.scaled_dot_product_attention(T(q), T(k), T(v), float_mask == 0)  # True = allowed
    np.testing.assert_allclose(y_bool.numpy(), y.numpy(), rtol=1e-12)
    causal = np.triu(np.ones((4, 4)), 1)
    y_c = F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True)
    np.testing.assert_allclose(y_c.numpy(), np_attention(q, k, v, causal * -1e9), rtol=1e-10)
    np.testing.assert_allclose(y_c.numpy()[..., 0, :], v[..., 0, :], rtol=1e-10)
    both = F.scaled_dot_product_attention(T(q), T(k), T(v), float_mask, is_causal=True)
    ref = np_attention(q, k, v, np.maximum(float_mask, causal) * -1e9)
    rows_ok = (np.maximum(float_mask, causal) == 0).any(-1)
    np.testing.assert_allclose(both.numpy()[..., rows_ok, :], ref[..., rows_ok, :], rtol=1e-8)


def test_sdpa_against_torch():
    torch = torch_or_skip()
    q, k, v = (
        RNG.standard_normal((2, 4, 3)),
        RNG.standard_normal((2, 6, 3)),
        RNG.standard_normal((2, 6, 2)),
    )
    mask = RNG.random((4, 6)) > 0.3
    mask[:, 0] = True
    y = F.scaled_dot_product_attention(T(q), T(k), T(v), mask, scale=0.7)
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), attn_mask=torch.tensor(mask), scale=0.7
    )
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-10)


def test_sdpa_grads_with_mask_and_dropout():
    q, k, v = (
        RNG.standard_normal((2, 3, 4)),
        RNG.standard_normal((2, 5, 4)),
        RNG.standard_normal((2, 5, 3)),
    )
    mask = RNG.random((3, 5)) > 0.5
    key = tg.random.key(5)

    def f(a, b, c):
        return F.scaled_dot_product_attention(a, b, c, mask, dropout_p=0.3, dropout_key=key)

    check_grads(f, (T(q), T(k), T(v)), order=2)
    # a differentiable additive bias b enters as the float mask -b / 1e9 (the seeds' contract)
    check_grads(
        lambda b: F.scaled_dot_product_attention(T(q), T(k), T(v), b * -1e-9),
        (T(RNG.standard_normal((3, 5))),),
    )
    a = f(T(q), T(k), T(v))
    np.testing.assert_array_equal(a.numpy(), f(T(q), T(k), T(v)).numpy())
    assert not np.allclose(
        a.numpy(), F.scaled_dot_product_attention(T(q), T(k), T(v), mask).numpy()
    )


def test_sdpa_records_one_fused_entry():
    q = T(RNG.standard_normal((3, 4)))
    _, tape = tg.trace(lambda a: F.scaled_dot_product_attention(a, a, a))(q)
    text = str(tape)
    assert text.count("scaled_dot_product_attention") == 1
    assert "softmax" not in text


def test_sdpa_errors():
    q = T(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="do not fit"):
        F.scaled_dot_product_attention(q, T(np.ones((2, 3, 5))), q)
    with pytest.raises(ValueError, match="needs a dropout_key"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="does not broadcast"):
        F.scaled_dot_product_attention(q, q, q, np.ones((2, 2)))


def test_multi_head_attention_matches_numpy():
    d, h = 6, 3
    keys = tg.random.split(tg.random.key(0), 4)
    params = {
        n: {"weight": tg.random.normal(kk, (d, d), np.float64), "bias": T(RNG.standard_normal(d))}
        for n, kk in zip(("query", "key", "value", "output"), keys)
    }
    x = RNG.standard_normal((2, 4, d))
    y = F.multi_head_attention(T(x), T(x), T(x), params, h, is_causal=True)
    p = {n: (v["weight"].numpy(), v["bias"].numpy()) for n, v in params.items()}

    def heads(z):
        return z.reshape(2, 4, h, d // h).transpose(0, 2, 1, 3)

    qh, kh, vh = (heads(x @ p[n][0] + p[n][1]) for n in ("query", "key", "value"))
    o = np_attention(qh, kh, vh, np.triu(np.ones((4, 4)), 1) * -1e9)
    ref = o.transpose(0, 2, 1, 3).reshape(2, 4, d) @ p["output"][0] + p["output"][1]
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10)
    check_grads(lambda a, pp: F.multi_head_attention(a, a, a, pp, h), (T(x), params), order=1)


def test_traced_gradient_replays_on_new_inputs():
    """The tape of grad(loss) (conv, pool, embedding, attention, cross-entropy) is a program:
    replaying it on new parameters, images and labels equals a fresh gradient."""
    keys = tg.random.split(tg.random.key(0), 4)

    def loss(p, x, tokens, labels):
        h = F.relu(F.conv2d(x, p["conv"], padding="same"))
        h = F.max_pool2d(h, 2)  # (N, 2, 2, 2)
        feats = tnp.reshape(h, (h.shape[0], 2, 4))
        e = F.embedding(tokens, p["embed"])  # (N, 2, 4)
        a = F.scaled_dot_product_attention(feats, e, e, is_causal=True)
        logits = F.linear(tnp.reshape(a, (a.shape[0], 8)), p["out"])
        return F.cross_entropy(logits, labels, label_smoothing=0.1)

    def draw(k):
        k1, k2, k3, k4 = tg.random.split(k, 4)
        p = {
            "conv": tg.random.normal(k1, (2, 1, 3, 3), np.float64),
            "embed": tg.random.normal(k2, (5, 4), np.float64),
            "out": tg.random.normal(k3, (8, 3), np.float64),
        }
        x = tg.random.normal(k4, (3, 1, 4, 4), np.float64)
        tokens = tg.random.randint(k4, (3, 2), 0, 5, np.int64)
        labels = tg.random.randint(k1, (3,), 0, 3, np.int64)
        return p, x, tokens, labels

    grad_fn = tg.grad(loss)
    _, tape = tg.trace(grad_fn)(*draw(keys[0]))
    new = draw(keys[1])
    replayed = tape.replay(*new)
    fresh = grad_fn(*new)
    for name in ("conv", "embed", "out"):
        np.testing.assert_allclose(replayed[name].numpy(), fresh[name].numpy(), rtol=1e-12)


def test_seeds_function_class_rows():
    """The seeds document their activations and losses as ``Function.apply`` rows too."""
    np.testing.assert_array_equal(F.Relu.apply(tg.Tensor([-3, 0, 3])).numpy(), [0, 0, 3])
    g = F.Gelu.apply(tg.Tensor([0.5, -0.5])).numpy()
    np.testing.assert_allclose(g, F.gelu(tg.Tensor([0.5, -0.5])).numpy())
    np.testing.assert_allclose(F.Sigmoid.apply(tg.Tensor([0, 2])).numpy(), [0.5, expit(2)])
    assert abs(float(F.Softmax.apply(tg.Tensor([1.0, 2.0, 3.0])).sum()) - 1) < 1e-6
    np.testing.assert_allclose(F.Tanh.apply(tg.Tensor([0, 1])).numpy(), [0, np.tanh(1)])
    p, y = tg.Tensor([0.9, 0.2, 0.1]), tg.Tensor([1, 0, 0])
    bce = F.BinaryCrossEntropy.apply(p, y)
    assert bce.shape == () and 0 < float(bce) < 0.2
    logits = tg.Tensor([2.0, -1.0, -2.0])
    ref = np.mean(np.logaddexp(0, logits.numpy()) - logits.numpy() * y.numpy())
    np.testing.assert_allclose(float(F.BinaryCrossEntropyWithLogits.apply(logits, y)), ref, 1e-6)
    ce = F.CrossEntropy.apply(
        tg.Tensor(np.array([[2.0, 1.0, 0.1]])),
        tg.Tensor(np.array([0])),
        ignore_index=-100,
        label_smoothing=0.1,
    )
    np.testing.assert_allclose(float(ce), 0.5136967, rtol=1e-6)
    hinge = F.HingeLoss.apply(tg.Tensor([0.8, -0.5, 0.3]), tg.Tensor([1, -1, 1]), reduction="mean")
    np.testing.assert_allclose(float(hinge), (0.2 + 0.5 + 0.7) / 3, rtol=1e-6)
    assert float(F.MeanSquaredLoss.apply(tg.Tensor([3.0, 5.0]), tg.Tensor([2.0, 5.0]))) == 0.5


def test_losses_differentiate_in_both_arguments():
    # Its own generator: the values must not depend on which tests ran before (the hinge's
    # kink at y_pred * y_true == 1 is kept out of the finite differences' reach).
    rng = np.random.default_rng(11)
    p = rng.uniform(0.2, 0.8, (3, 2))
    x = rng.standard_normal((3, 2)) * 2
    for y in (rng.uniform(0.1, 0.9, (3, 2)), np.asarray(0.3)):  # same shape, or a scalar
        margin = 1 - x * (y * 3 - 1.2)
        assert np.abs(margin).min() > 0.05
        for fn, a in (
            (F.mse_loss, x),
            (F.binary_cross_entropy, p),
            (F.binary_cross_entropy_with_logits, x),
            (lambda u, v, reduction: F.hinge_loss(u, v * 3 - 1.2, reduction), x),
        ):
            for reduction in ("mean", "sum", "none"):
                check_grads(lambda u, v, f=fn, r=reduction: f(u, v, reduction=r), (T(a), T(y)))
    with pytest.raises(ValueError, match=r"y_pred of shape \(3,\) and y_true of shape \(2,\)"):
        F.mse_loss(T(np.ones(3)), np.ones(2))
    assert np.isnan(float(F.mse_loss(T(np.ones(0)), np.ones(0))))


def test_lazy_mode_defers_and_matches_eager():
    """Every nn primitive infers its output shape and dtype, so lazy mode can defer it."""
    x = tg.Tensor(RNG.standard_normal((2, 3, 6, 5)).astype(np.float32))
    w = tg.Tensor(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))
    table = tg.Tensor(RNG.standard_normal((7, 5)).astype(np.float32))
    idx = tg.Tensor(np.array([[1, 6], [0, 2]]))
    labels = np.array([0, 3])
    proj = tg.Tensor(RNG.standard_normal((24, 4)).astype(np.float32))

    def run():
        h = F.max_pool2d(F.conv2d(x, w, stride=1, padding="same"), 2)  # (2, 4, 3, 2)
        e = F.embedding(idx, table)  # (2, 2, 5)
        a = F.scaled_dot_product_attention(e, e, e, is_causal=True)
        logits = F.linear(tnp.reshape(h, (2, 24)), proj) + tnp.reshape(tnp.sum(a, (1, 2)), (2, 1))
        return (
            F.cross_entropy(logits, labels, reduction="none"),
            F.log_softmax(logits, axis=0),
            F.mse_loss(logits, 1.0),
        )

    eager = run()
    with tg.lazy():
        deferred = run()
    assert not deferred[0].is_realized
    for a, b in zip(eager, deferred):
        np.testing.assert_array_equal(a.numpy(), b.realize().numpy())
        assert a.dtype == b.dtype


# -- loss shape checks -----------------------------------------------------------------------
ELEMENTWISE_LOSSES = [  # (the name in error messages, the function), id: the public name
    pytest.param("mean_squared_loss", F.mean_squared_loss, id="mean_squared_loss"),
    pytest.param("mean_squared_loss", F.mse_loss, id="mse_loss"),
    pytest.param("binary_cross_entropy", F.binary_cross_entropy, id="bce"),
    pytest.param("binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits, id="bcel"),
    pytest.param("hinge_loss", F.hinge_loss, id="hinge_loss"),
    pytest.param("l1_loss", F.l1_loss, id="l1_loss"),
    pytest.param("huber_loss", F.huber_loss, id="huber_loss"),
    pytest.param("smooth_l1_loss", F.smooth_l1_loss, id="smooth_l1_loss"),
    pytest.param("kl_div", F.kl_div, id="kl_div"),
]


@pytest.mark.parametrize("name,fn", ELEMENTWISE_LOSSES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_elementwise_losses_reject_a_target_of_another_shape(name, fn, reduction):
    """A (4, 1) prediction against a (4,) target used to broadcast to a (4, 4) loss: MSE of
    a perfect prediction came out 2.5 instead of 0."""
    pred = T(np.array([[0.1], [0.2], [0.3], [0.4]]))
    with pytest.raises(ValueError, match=rf"{name}: .*\(4, 1\).*\(4,\)"):
        fn(pred, T(np.array([0.1, 0.2, 0.3, 0.4])), reduction=reduction)
    with pytest.raises(ValueError, match=rf"{name}: .*\(2, 3\).*\(3,\)"):
        fn(T(np.full((2, 3), 0.5)), np.full(3, 0.5), reduction=reduction)
    same = fn(pred, T(np.array([[0.1], [0.2], [0.3], [0.4]])), reduction=reduction)
    assert same.shape == ((4, 1) if reduction == "none" else ())
    scalar = fn(pred, 0.5, reduction=reduction)  # a scalar target is unambiguous
    assert scalar.shape == same.shape


def test_mse_of_a_perfect_column_prediction_is_an_error_not_a_wrong_number():
    pred = T(np.arange(4.0).reshape(4, 1))
    with pytest.raises(ValueError, match="y_true.reshape\\(\\(4, 1\\)\\)"):
        F.mse_loss(pred, T(np.arange(4.0)))
    assert float(F.mse_loss(pred, T(np.arange(4.0).reshape(4, 1)))) == 0.0


@pytest.mark.parametrize(
    "cls", [F.MeanSquaredLoss, F.BinaryCrossEntropy, F.BinaryCrossEntropyWithLogits, F.HingeLoss]
)
def test_loss_functions_applied_directly_check_shapes_eagerly_and_lazily(cls):
    pred, target = T(np.full((4, 1), 0.5)), T(np.full(4, 0.5))
    with pytest.raises(ValueError, match=rf"{cls.oper}: y_pred of shape \(4, 1\)"):
        cls.apply(pred, target)
    with pytest.raises(ValueError, match=rf"{cls.oper}: y_pred of shape \(4, 1\)"):
        tg.grad(lambda p: cls.apply(p, target, reduction="sum"))(pred)
    with tg.lazy(), pytest.raises(ValueError, match=rf"{cls.oper}: y_pred of shape \(4, 1\)"):
        cls.apply(pred, target)


def test_class_losses_check_target_shapes():
    logits = T(RNG.standard_normal((4, 3)))
    for bad in (np.zeros((4, 1), np.int64), np.zeros(3, np.int64), np.zeros((4, 4))):
        with pytest.raises(ValueError, match="cross_entropy: y_true of shape"):
            F.cross_entropy(logits, bad)
        with pytest.raises(ValueError, match="nll_loss: target of shape"):
            F.nll_loss(logits, bad)
    with pytest.raises(ValueError, match=r"cross_entropy: y_true of shape \(1,\)"):
        F.CrossEntropy.apply(logits, T(np.zeros(1, np.int64)))  # used to broadcast silently
    with pytest.raises(ValueError, match="nll_loss: target 3 is out of range for 3 classes"):
        F.nll_loss(logits, [0, 1, 2, 3])


# -- new losses ------------------------------------------------------------------------------
def np_reduce(per, reduction):
    return {"none": per, "sum": per.sum(), "mean": per.mean()}[reduction]


def np_huber(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def np_kl(x, t, log_target):
    if log_target:
        return np.exp(t) * (t - x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0) - t * x


def away_from(d, points, margin=1e-2):
    """``d`` with entries near any of ``points`` moved ``2 * margin`` away (kinks)."""
    d = d.copy()
    for p in points:
        near = np.abs(np.abs(d) - p) < margin
        d[near] += 2 * margin * np.sign(d[near] + 1e-300)
    return d


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_match_numpy_and_grads(reduction):
    y = RNG.standard_normal((3, 4))
    x = y + away_from(RNG.standard_normal((3, 4)) * 1.5, (0.0, 0.7, 1.3))
    cases = [
        (lambda a, b: F.l1_loss(a, b, reduction), np.abs(x - y)),
        (lambda a, b: F.huber_loss(a, b, reduction, delta=0.7), np_huber(x - y, 0.7)),
        (lambda a, b: F.huber_loss(a, b, reduction), np_huber(x - y, 1.0)),
        (lambda a, b: F.smooth_l1_loss(a, b, reduction, beta=1.3), np_huber(x - y, 1.3) / 1.3),
        (lambda a, b: F.smooth_l1_loss(a, b, reduction, beta=0.0), np.abs(x - y)),
    ]
    for fn, per in cases:
        out = fn(T(x), T(y))
        assert out.dtype == np.float64
        np.testing.assert_allclose(out.numpy(), np_reduce(per, reduction), rtol=1e-12)
        check_grads(fn, (T(x), T(y)), order=2)
        assert fn(T(x.astype(np.float32)), T(y.astype(np.float32))).dtype == np.float32


def test_regression_losses_against_torch():
    torch = torch_or_skip()
    x, y = RNG.standard_normal((5, 3)) * 2, RNG.standard_normal((5, 3))
    tf = torch.nn.functional
    for reduction in ("mean", "sum", "none"):
        for ours, theirs in (
            (F.l1_loss(T(x), T(y), reduction), tf.l1_loss),
            (
                F.huber_loss(T(x), T(y), reduction, 0.6),
                lambda a, b, reduction: tf.huber_loss(a, b, reduction=reduction, delta=0.6),
            ),
            (
                F.smooth_l1_loss(T(x), T(y), reduction, 0.6),
                lambda a, b, reduction: tf.smooth_l1_loss(a, b, reduction=reduction, beta=0.6),
            ),
        ):
            ref = theirs(torch.tensor(x), torch.tensor(y), reduction=reduction)
            np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)


def test_l1_gradient_at_zero_is_zero_like_torch():
    g = tg.grad(lambda a: F.l1_loss(a, T(np.array([1.0, 2.0])), "sum"))(T(np.array([1.0, 3.0])))
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0])


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
def test_kl_div_matches_numpy_torch_and_grads(log_target, reduction):
    x = sp_log_softmax(RNG.standard_normal((4, 5)), axis=-1)
    p = RNG.dirichlet(np.ones(5), 4)
    p[0, 1] = 0.0  # 0 log 0 = 0
    p[0] /= p[0].sum()
    t = np.log(p + 0.01) if log_target else p
    out = F.kl_div(T(x), T(t), reduction, log_target=log_target)
    per = np_kl(x, t, log_target)
    ref = per.sum() / 4 if reduction == "batchmean" else np_reduce(per, reduction)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    if log_target:
        check_grads(lambda a, b: F.kl_div(a, b, reduction, log_target=True), (T(x), T(t)), order=2)
    else:  # the target's derivative log(t) + 1 - x is unbounded at t = 0: check the input's
        check_grads(lambda a: F.kl_div(a, T(t), reduction), (T(x),), order=2)
        check_grads(lambda b: F.kl_div(T(x), b, reduction), (T(p + 0.05),), order=2)
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():  # torch warns that its "mean" is not the KL divergence
        warnings.simplefilter("ignore", UserWarning)
        ref = torch.nn.functional.kl_div(
            torch.tensor(x), torch.tensor(t), reduction=reduction, log_target=log_target
        )
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12)


def test_kl_div_batchmean_is_the_mean_kl_per_sample():
    p = RNG.dirichlet(np.ones(3), 6)
    q = RNG.dirichlet(np.ones(3), 6)
    kl = (p * np.log(p / q)).sum(-1).mean()
    np.testing.assert_allclose(float(F.kl_div(T(np.log(q)), T(p), "batchmean")), kl, rtol=1e-12)
    assert float(F.kl_div(T(np.log(p)), T(p), "batchmean")) == pytest.approx(0.0, abs=1e-15)
    assert np.isnan(float(F.kl_div(T(np.zeros(2)), T(np.array([-0.5, 1.5])), "sum")))


def np_nll(logp, t, weight, ignore, reduction):
    c = logp.shape[-1]
    w = np.ones(c) if weight is None else weight
    valid = t != ignore
    safe = np.where(valid, t, 0)
    picked = np.take_along_axis(logp, safe[..., None], -1)[..., 0]
    wt = w[safe] * valid
    per = -picked * wt
    if reduction == "mean":
        return per.sum() / wt.sum() if wt.sum() else 0.0
    return np_reduce(per, reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)])
def test_nll_loss_matches_numpy_and_grads(reduction, weighted, shape):
    logp = sp_log_softmax(RNG.standard_normal(shape), axis=-1)
    t = RNG.integers(0, shape[-1], shape[:-1])
    t.reshape(-1)[0] = 1
    t.reshape(-1)[1] = 1  # class 1 is ignored below: twice
    w = RNG.uniform(0.5, 2.0, shape[-1]) if weighted else None
    out = F.nll_loss(T(logp), t, None if w is None else T(w), ignore_index=1, reduction=reduction)
    np.testing.assert_allclose(out.numpy(), np_nll(logp, t, w, 1, reduction), rtol=1e-12)
    wt = None if w is None else T(w)
    check_grads(lambda a: F.nll_loss(a, t, wt, ignore_index=1, reduction=reduction), (T(logp),))


def test_nll_loss_against_torch_and_cross_entropy():
    torch = torch_or_skip()
    logp = sp_log_softmax(RNG.standard_normal((6, 4)), axis=-1)
    t = np.array([0, 3, 2, 2, -100, 1])
    w = RNG.uniform(0.5, 2.0, 4)
    for reduction in ("mean", "sum", "none"):
        ours = F.nll_loss(T(logp), t, T(w), reduction=reduction)
        ref = torch.nn.functional.nll_loss(
            torch.tensor(logp), torch.tensor(t), torch.tensor(w), reduction=reduction
        )
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
    z = T(RNG.standard_normal((6, 4)))
    np.testing.assert_allclose(
        float(F.nll_loss(F.log_softmax(z), t)), float(F.cross_entropy(z, t)), rtol=1e-12
    )
    all_ignored = F.nll_loss(T(logp[:2]), [-100, -100])  # as cross_entropy: 0, not NaN
    assert float(all_ignored) == 0.0


def test_nll_loss_replayed_tape_reads_new_targets():
    """The one-hot selection is recorded from the target Tensor, not baked in as a constant."""

    def f(logp, t):
        return F.nll_loss(logp, t, reduction="sum")

    logp = T(sp_log_softmax(RNG.standard_normal((3, 4)), axis=-1))
    _, tape = tg.trace(f)(logp, T(np.array([0, 1, 2])))
    new_t = T(np.array([3, 3, 0]))
    np.testing.assert_allclose(tape.replay(logp, new_t).numpy(), f(logp, new_t).numpy())


def np_soft_xent(logits, p, eps, weight, reduction):
    c = logits.shape[-1]
    t = (1 - eps) * p + eps / c
    w = np.ones(c) if weight is None else weight
    per = -(t * w * sp_log_softmax(logits, axis=-1)).sum(-1)
    return {"none": per, "sum": per.sum(), "mean": per.sum() / max(per.size, 1)}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_soft_targets(reduction, eps, weighted):
    logits = RNG.standard_normal((2, 3, 4)) * 2
    p = RNG.dirichlet(np.ones(4), (2, 3))
    w = RNG.uniform(0.5, 2.0, 4) if weighted else None
    wt = None if w is None else T(w)
    out = F.cross_entropy(T(logits), T(p), label_smoothing=eps, reduction=reduction, weight=wt)
    np.testing.assert_allclose(out.numpy(), np_soft_xent(logits, p, eps, w, reduction), rtol=1e-12)

    def f(z, q):
        return F.cross_entropy(z, q, label_smoothing=eps, reduction=reduction, weight=wt)

    check_grads(f, (T(logits), T(p)), order=2)
    # one-hot probabilities give the class-index loss
    onehot = np.eye(4)[p.argmax(-1)]
    np.testing.assert_allclose(
        F.cross_entropy(T(logits), T(onehot), label_smoothing=eps, reduction=reduction).numpy(),
        F.cross_entropy(T(logits), p.argmax(-1), label_smoothing=eps, reduction=reduction).numpy(),
        rtol=1e-12,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_cross_entropy_class_weights_match_numpy_and_grads(reduction, eps):
    logits = RNG.standard_normal((5, 4)) * 2
    t = np.array([0, 3, 2, -100, 2])
    w = RNG.uniform(0.5, 2.0, 4)
    out = F.cross_entropy(T(logits), t, label_smoothing=eps, reduction=reduction, weight=T(w))
    lp = sp_log_softmax(logits, axis=-1)
    valid = t != -100
    safe = np.where(valid, t, 0)
    nll = -lp[np.arange(5), safe] * w[safe] * valid
    smooth = -(lp * w).sum(-1) * valid
    per = (1 - eps) * nll + eps / 4 * smooth
    ref = {"none": per, "sum": per.sum(), "mean": per.sum() / (w[safe] * valid).sum()}
    np.testing.assert_allclose(out.numpy(), ref[reduction], rtol=1e-12)
    check_grads(
        lambda z: F.cross_entropy(z, t, label_smoothing=eps, reduction=reduction, weight=T(w)),
        (T(logits),),
        order=2,
    )


def test_cross_entropy_soft_targets_and_weights_against_torch():
    torch = torch_or_skip()
    logits = RNG.standard_normal((6, 5))
    p = RNG.dirichlet(np.ones(5), 6)
    t = np.array([0, 4, 1, 1, -100, 3])
    w = RNG.uniform(0.5, 2.0, 5)
    tf = torch.nn.functional
    for reduction in ("mean", "sum", "none"):
        for eps in (0.0, 0.25):
            for target, tt in ((T(p), torch.tensor(p)), (t, torch.tensor(t))):
                for weight in (None, w):
                    ours = F.cross_entropy(
                        T(logits),
                        target,
                        label_smoothing=eps,
                        reduction=reduction,
                        weight=None if weight is None else T(weight),
                    )
                    ref = tf.cross_entropy(
                        torch.tensor(logits),
                        tt,
                        weight=None if weight is None else torch.tensor(weight),
                        label_smoothing=eps,
                        reduction=reduction,
                    )
                    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)


def test_new_loss_errors():
    x = T(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="ignore_index=0 applies to class-index targets only"):
        F.cross_entropy(x, T(np.full((2, 3), 1 / 3)), ignore_index=0)
    with pytest.raises(ValueError, match=r"cross_entropy: weight must have shape \(3,\)"):
        F.cross_entropy(x, [0, 1], weight=T(np.ones(2)))
    with pytest.raises(TypeError, match="nll_loss: weight must be a floating Tensor"):
        F.nll_loss(x, [0, 1], weight=np.ones(3, np.int64))
    with pytest.raises(TypeError, match="nll_loss: y_true must hold integer class indices"):
        F.nll_loss(x, T(np.array([0.5, 1.0])))
    with pytest.raises(ValueError, match="huber_loss: delta must be positive"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be >= 0"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(ValueError, match="kl_div: reduction must be one of"):
        F.kl_div(x, x, reduction="avg")
    with pytest.raises(ValueError, match="l1_loss: reduction must be one of"):
        F.l1_loss(x, x, reduction="batchmean")
    with pytest.raises(ValueError, match="batchmean' needs an input with a batch axis"):
        F.kl_div(T(np.array(0.0)), 0.5, reduction="batchmean")
    with pytest.raises(TypeError, match="l1_loss: input must be a floating Tensor"):
        F.l1_loss(T(np.array([1, 2])), T(np.array([1, 2])))


# -- conv1d, conv_transpose2d, adaptive pooling ----------------------------------------------
def np_conv1d(x, w, stride, pads, dilation, groups):
    n, c, length = x.shape
    o, cg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pads))
    lo = (length + sum(pads) - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, lo))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(lo):
            seg = xp[
                :,
                g * cg : (g + 1) * cg,
                i * stride : i * stride + dilation * (k - 1) + 1 : dilation,
            ]
            out[:, oc, i] = (seg * w[oc]).sum(axis=(1, 2))
    return out


CONV1D_CASES = [
    dict(stride=1, padding=0, dilation=1, groups=1),
    dict(stride=2, padding=2, dilation=1, groups=2),
    dict(stride=1, padding=1, dilation=2, groups=1),
    dict(stride=1, padding="same", dilation=1, groups=1),
    dict(stride=3, padding="same", dilation=1, groups=4),
    dict(stride=2, padding="valid", dilation=1, groups=1),
]


@pytest.mark.parametrize("case", CONV1D_CASES, ids=str)
def test_conv1d_matches_direct_definition_and_grads(case):
    x = RNG.standard_normal((2, 4, 9))
    w = RNG.standard_normal((4, 4 // case["groups"], 3))
    b = RNG.standard_normal(4)
    y = F.conv1d(T(x), T(w), T(b), **case)
    p = case["padding"]
    if p == "same":
        out = -(-9 // case["stride"])
        total = max((out - 1) * case["stride"] + 3 - 9, 0)
        pads = (total // 2, total - total // 2)
        assert y.shape[-1] == out
    else:
        pads = (0, 0) if p == "valid" else (p, p)
    ref = np_conv1d(x, w, case["stride"], pads, case["dilation"], case["groups"])
    np.testing.assert_allclose(y.numpy(), ref + b[:, None], rtol=1e-10, atol=1e-12)
    check_grads(lambda a, c, d: F.conv1d(a, c, d, **case), (T(x), T(w), T(b)), order=2)


def test_conv1d_against_torch():
    torch = torch_or_skip()
    x, w, b = (
        RNG.standard_normal((2, 6, 11)),
        RNG.standard_normal((4, 3, 3)),
        RNG.standard_normal(4),
    )
    for kw in (dict(stride=2, padding=1, dilation=2, groups=2), dict(padding="same", groups=2)):
        y = F.conv1d(T(x), T(w), T(b), **kw)
        ref = torch.nn.functional.conv1d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kw)
        np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_conv1d_errors():
    x = T(np.ones((1, 3, 5)))
    with pytest.raises(ValueError, match=r"conv1d: input must have shape \(N, C, L\)"):
        F.conv1d(T(np.ones((3, 5))), T(np.ones((2, 3, 3))))
    with pytest.raises(ValueError, match="conv1d: weight must have shape"):
        F.conv1d(x, T(np.ones((2, 3, 3, 3))))
    with pytest.raises(ValueError, match="conv1d: input has 3 channels"):
        F.conv1d(x, T(np.ones((2, 2, 3))))
    with pytest.raises(ValueError, match="conv1d: input of length 5 .* shorter than the dilated"):
        F.conv1d(x, T(np.ones((2, 3, 3))), dilation=3)
    with pytest.raises(ValueError, match="conv1d: padding must be 'valid', 'same' or an int"):
        F.conv1d(x, T(np.ones((2, 3, 3))), padding="full")
    with pytest.raises(TypeError, match="conv1d: stride must be an int"):
        F.conv1d(x, T(np.ones((2, 3, 3))), stride=(1, 2))
    with pytest.raises(ValueError, match=r"conv1d: bias must have shape \(2,\)"):
        F.conv1d(x, T(np.ones((2, 3, 3))), T(np.ones(3)))


def np_conv_transpose2d(x, w, stride, pad, out_pad, groups, dil):
    """Direct definition: every input pixel scatters ``x * w`` into the output."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    full_h = (h - 1) * stride[0] + dil[0] * (kh - 1) + 1 + out_pad[0]
    full_w = (wd - 1) * stride[1] + dil[1] * (kw - 1) + 1 + out_pad[1]
    full = np.zeros((n, cog * groups, full_h, full_w))
    for g in range(groups):
        xs = x[:, g * cig : (g + 1) * cig]
        ws = w[g * cig : (g + 1) * cig]
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for b in range(kw):
                        r, c = i * stride[0] + a * dil[0], j * stride[1] + b * dil[1]
                        full[:, g * cog : (g + 1) * cog, r, c] += xs[:, :, i, j] @ ws[:, :, a, b]
    ho = (h - 1) * stride[0] - 2 * pad[0] + dil[0] * (kh - 1) + out_pad[0] + 1
    wo = (wd - 1) * stride[1] - 2 * pad[1] + dil[1] * (kw - 1) + out_pad[1] + 1
    return full[:, :, pad[0] : pad[0] + ho, pad[1] : pad[1] + wo]


CONVT_CASES = [
    dict(stride=(1, 1), padding=(0, 0), output_padding=(0, 0), groups=1, dilation=(1, 1)),
    dict(stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2, dilation=(1, 1)),
    dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2), groups=1, dilation=(2, 1)),
    dict(stride=(3, 1), padding=(2, 0), output_padding=(0, 0), groups=4, dilation=(1, 2)),
]


@pytest.mark.parametrize("case", CONVT_CASES, ids=str)
def test_conv_transpose2d_matches_direct_definition_and_grads(case):
    x = RNG.standard_normal((2, 4, 3, 4))
    w = RNG.standard_normal((4, 8 // case["groups"], 3, 2))
    b = RNG.standard_normal(8)
    y = F.conv_transpose2d(T(x), T(w), T(b), **case)
    ref = np_conv_transpose2d(
        x,
        w,
        case["stride"],
        case["padding"],
        case["output_padding"],
        case["groups"],
        case["dilation"],
    )
    np.testing.assert_allclose(y.numpy(), ref + b[:, None, None], rtol=1e-10, atol=1e-12)
    check_grads(lambda a, c, d: F.conv_transpose2d(a, c, d, **case), (T(x), T(w), T(b)), order=2)


def test_conv_transpose2d_is_the_transpose_of_conv2d():
    """<conv2d(x, w), y> == <x, conv_transpose2d(y, w)>: the defining adjoint identity."""
    x, w = RNG.standard_normal((2, 3, 7, 6)), RNG.standard_normal((4, 3, 3, 3))
    kw = dict(stride=2, padding=1)
    cx = F.conv2d(T(x), T(w), **kw)
    y = RNG.standard_normal(cx.shape)
    op = (x.shape[2] + 2 - 3) % 2, (x.shape[3] + 2 - 3) % 2  # sizes lost to the stride
    ty = F.conv_transpose2d(T(y), T(w), output_padding=op, **kw)
    assert ty.shape == x.shape
    np.testing.assert_allclose((cx.numpy() * y).sum(), (x * ty.numpy()).sum(), rtol=1e-10)


def test_conv_transpose2d_against_torch():
    torch = torch_or_skip()
    x, w, b = RNG.standard_normal((2, 4, 5, 6)), RNG.standard_normal((4, 3, 3, 2)), None
    for kw in (
        dict(stride=2, padding=1, output_padding=1, groups=2),
        dict(stride=(2, 3), padding=(0, 1), dilation=(2, 1), output_padding=(1, 2)),
    ):
        g = kw.get("groups", 1)
        b = RNG.standard_normal(3 * g)
        y = F.conv_transpose2d(T(x), T(w), T(b), **kw)
        ref = torch.nn.functional.conv_transpose2d(
            torch.tensor(x), torch.tensor(w), torch.tensor(b), **kw
        )
        np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_conv_transpose2d_errors():
    x = T(np.ones((1, 4, 3, 3)))
    with pytest.raises(ValueError, match="conv_transpose2d: input must have shape"):
        F.conv_transpose2d(T(np.ones((3, 3))), T(np.ones((4, 2, 3, 3))))
    assert F.conv_transpose2d(T(np.ones((4, 3, 3))), T(np.ones((4, 2, 3, 3)))).shape == (
        2, 5, 5)  # an unbatched (C, H, W) input, as PyTorch
    with pytest.raises(ValueError, match="conv_transpose2d: input has 4 channels"):
        F.conv_transpose2d(x, T(np.ones((3, 2, 3, 3))))
    with pytest.raises(ValueError, match="output_padding \\(2, 2\\) must be smaller than stride"):
        F.conv_transpose2d(x, T(np.ones((4, 2, 3, 3))), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="gives an empty output"):
        F.conv_transpose2d(x, T(np.ones((4, 2, 1, 1))), padding=2)
    with pytest.raises(ValueError, match=r"conv_transpose2d: bias must have shape \(4,\)"):
        F.conv_transpose2d(x, T(np.ones((4, 2, 3, 3))), T(np.ones(2)), groups=2)


def np_adaptive_avg_pool(x, out_hw):
    h, w = x.shape[-2:]
    ho, wo = out_hw
    out = np.empty(x.shape[:-2] + (ho, wo))
    for i in range(ho):
        r0, r1 = (i * h) // ho, -(-((i + 1) * h) // ho)
        for j in range(wo):
            c0, c1 = (j * w) // wo, -(-((j + 1) * w) // wo)
            out[..., i, j] = x[..., r0:r1, c0:c1].mean(axis=(-1, -2))
    return out


@pytest.mark.parametrize("out", [(1, 1), (3, 2), (7, 5), (4, 3), (10, 8)])
def test_adaptive_avg_pool2d_matches_numpy_and_grads(out):
    x = RNG.standard_normal((2, 3, 7, 5))
    y = F.adaptive_avg_pool2d(T(x), out)
    np.testing.assert_allclose(y.numpy(), np_adaptive_avg_pool(x, out), rtol=1e-12)
    check_grads(lambda a: F.adaptive_avg_pool2d(a, out), (T(x),), order=2)
    assert F.adaptive_avg_pool2d(T(x[0]), out).shape == (3,) + out  # unbatched (C, H, W)


def test_adaptive_avg_pool2d_against_torch_and_errors():
    x = RNG.standard_normal((2, 3, 9, 6))
    assert F.adaptive_avg_pool2d(T(x), (None, 2)).shape == (2, 3, 9, 2)
    assert F.adaptive_avg_pool2d(T(x), 4).shape == (2, 3, 4, 4)
    with pytest.raises(ValueError, match="adaptive_avg_pool2d: input must have shape"):
        F.adaptive_avg_pool2d(T(np.ones((3, 3))), 2)
    with pytest.raises(ValueError, match="output_size must be >= 1"):
        F.adaptive_avg_pool2d(T(x), (0, 2))
    with pytest.raises(TypeError, match="output_size must be an int or a pair"):
        F.adaptive_avg_pool2d(T(x), (1, 2, 3))
    torch = torch_or_skip()
    for out in ((4, 5), (1, 1), (None, 2), 3):
        ref = torch.nn.functional.adaptive_avg_pool2d(torch.tensor(x), out)
        np.testing.assert_allclose(F.adaptive_avg_pool2d(T(x), out).numpy(), ref.numpy())


# -- rms_norm, group_norm --------------------------------------------------------------------
def test_rms_norm_matches_numpy_torch_and_grads():
    x = RNG.standard_normal((3, 4, 5))
    w = RNG.standard_normal((4, 5))
    y = F.rms_norm(T(x), (4, 5), T(w), eps=1e-6)
    ref = x / np.sqrt((x**2).mean(axis=(1, 2), keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12)
    check_grads(lambda a, c: F.rms_norm(a, (4, 5), c, eps=1e-6), (T(x), T(w)), order=2)
    y0 = F.rms_norm(T(x), 5)  # eps defaults to the dtype's machine epsilon
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(y0.numpy(), x / np.sqrt((x**2).mean(-1, keepdims=True) + eps))
    with pytest.raises(ValueError, match="rms_norm: input of shape .* does not end with"):
        F.rms_norm(T(x), 4)
    with pytest.raises(ValueError, match=r"rms_norm: weight must have shape \(5,\)"):
        F.rms_norm(T(x), 5, T(np.ones(4)))
    torch = torch_or_skip()
    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-6)):
        xs = x.astype(dtype)
        ref = torch.nn.functional.rms_norm(torch.tensor(xs), (5,), torch.tensor(w[0].astype(dtype)))
        np.testing.assert_allclose(
            F.rms_norm(T(xs), 5, T(w[0].astype(dtype))).numpy(), ref.numpy(), rtol=rtol
        )


def np_group_norm(x, g, w, b, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1)
    y = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)
    shp = (1, c) + (1,) * (x.ndim - 2)
    return y.reshape(x.shape) * w.reshape(shp) + b.reshape(shp)


@pytest.mark.parametrize(
    "shape,groups", [((2, 6, 3, 4), 3), ((3, 4), 2), ((2, 4, 5), 4), ((1, 6, 2, 2), 1)]
)
def test_group_norm_matches_numpy_and_grads(shape, groups):
    x = RNG.standard_normal(shape) * 2 + 1
    c = shape[1]
    w, b = RNG.standard_normal(c), RNG.standard_normal(c)
    y = F.group_norm(T(x), groups, T(w), T(b))
    np.testing.assert_allclose(y.numpy(), np_group_norm(x, groups, w, b), rtol=1e-10, atol=1e-12)
    check_grads(lambda a, p, q: F.group_norm(a, groups, p, q), (T(x), T(w), T(b)), order=2)


def test_group_norm_against_torch_and_errors():
    x = RNG.standard_normal((2, 6, 3, 4))
    with pytest.raises(ValueError, match="group_norm: num_groups must be a positive int dividing"):
        F.group_norm(T(x), 4)
    with pytest.raises(ValueError, match=r"group_norm: input must have shape \(N, C, ...\)"):
        F.group_norm(T(np.ones(3)), 1)
    with pytest.raises(ValueError, match=r"group_norm: weight must have shape \(6,\)"):
        F.group_norm(T(x), 3, T(np.ones(3)))
    with pytest.raises(ValueError, match="group_norm: input .* has an empty spatial axis"):
        F.group_norm(T(np.ones((2, 6, 0))), 3)
    with pytest.raises(ValueError, match=r"rms_norm: normalized_shape \(0,\) is empty"):
        F.rms_norm(T(np.ones((2, 0))), 0)
    torch = torch_or_skip()
    w, b = RNG.standard_normal(6), RNG.standard_normal(6)
    ref = torch.nn.functional.group_norm(torch.tensor(x), 2, torch.tensor(w), torch.tensor(b))
    np.testing.assert_allclose(F.group_norm(T(x), 2, T(w), T(b)).numpy(), ref.numpy(), rtol=1e-10)


# -- recurrent cells -------------------------------------------------------------------------
def np_cells(kind, x, h, c, wih, whh, bih, bhh):
    gi, gh = x @ wih + bih, h @ whh + bhh
    n = h.shape[-1]
    if kind == "rnn_tanh":
        return np.tanh(gi + gh)
    if kind == "rnn_relu":
        return np.maximum(gi + gh, 0)
    if kind == "gru":
        r = expit(gi[..., :n] + gh[..., :n])
        z = expit(gi[..., n : 2 * n] + gh[..., n : 2 * n])
        cand = np.tanh(gi[..., 2 * n :] + r * gh[..., 2 * n :])
        return (1 - z) * cand + z * h
    zz = gi + gh
    i, f = expit(zz[..., :n]), expit(zz[..., n : 2 * n])
    g, o = np.tanh(zz[..., 2 * n : 3 * n]), expit(zz[..., 3 * n :])
    c2 = f * c + i * g
    return o * np.tanh(c2), c2


def call_cell(kind, x, h, c, *params):
    if kind.startswith("rnn"):
        return F.rnn_cell(x, h, *params, nonlinearity=kind[4:])
    if kind == "gru":
        return F.gru_cell(x, h, *params)
    return F.lstm_cell(x, (h, c), *params)


@pytest.mark.parametrize("kind", ["rnn_tanh", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("batch", [(3,), ()])
def test_recurrent_cells_match_numpy_and_grads(kind, batch):
    gates = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}[kind]
    n_in, n_h = 4, 5
    x, h, c = (
        RNG.standard_normal(batch + (n_in,)),
        RNG.standard_normal(batch + (n_h,)),
        RNG.standard_normal(batch + (n_h,)),
    )
    params = (
        RNG.standard_normal((n_in, gates * n_h)) * 0.5,
        RNG.standard_normal((n_h, gates * n_h)) * 0.5,
        RNG.standard_normal(gates * n_h),
        RNG.standard_normal(gates * n_h),
    )
    out = call_cell(kind, T(x), T(h), T(c), *map(T, params))
    ref = np_cells(kind, x, h, c, *params)
    for a, r in zip(out if kind == "lstm" else (out,), ref if kind == "lstm" else (ref,)):
        assert a.shape == batch + (n_h,)
        np.testing.assert_allclose(a.numpy(), r, rtol=1e-12, atol=1e-14)
    order = 1 if kind == "rnn_relu" else 2
    check_grads(lambda *a: call_cell(kind, *a), (T(x), T(h), T(c), *map(T, params)), order=order)
    # None hidden states mean zeros; None biases mean no bias
    z = np.zeros(batch + (n_h,))
    no_bias = call_cell(kind, T(x), None, None, T(params[0]), T(params[1]))
    ref = np_cells(kind, x, z, z, params[0], params[1], 0.0, 0.0)
    for a, r in zip(no_bias if kind == "lstm" else (no_bias,), ref if kind == "lstm" else (ref,)):
        np.testing.assert_allclose(a.numpy(), r, rtol=1e-12, atol=1e-14)


def test_recurrent_cells_against_torch():
    torch = torch_or_skip()
    x, h, c = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 5)), RNG.standard_normal((3, 5))
    for cls, fn in (
        (torch.nn.RNNCell, lambda *a: F.rnn_cell(T(x), T(h), *a)),
        (torch.nn.GRUCell, lambda *a: F.gru_cell(T(x), T(h), *a)),
        (torch.nn.LSTMCell, lambda *a: F.lstm_cell(T(x), (T(h), T(c)), *a)),
    ):
        cell = cls(4, 5).double()
        w = [T(p.detach().numpy().T.copy()) for p in (cell.weight_ih, cell.weight_hh)]
        b = [T(p.detach().numpy()) for p in (cell.bias_ih, cell.bias_hh)]
        ours = fn(*w, *b)
        if cls is torch.nn.LSTMCell:
            ref = cell(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
            for a, r in zip(ours, ref):
                np.testing.assert_allclose(a.numpy(), r.detach().numpy(), rtol=1e-12)
        else:
            ref = cell(torch.tensor(x), torch.tensor(h))
            np.testing.assert_allclose(ours.numpy(), ref.detach().numpy(), rtol=1e-12)


def test_recurrent_cell_errors():
    x, h = T(np.ones((2, 3))), T(np.ones((2, 4)))
    w_ih, w_hh = T(np.ones((3, 12))), T(np.ones((4, 12)))
    with pytest.raises(ValueError, match=r"gru_cell: weight_hh must have shape \(hidden_size, 3"):
        F.gru_cell(x, h, w_ih, T(np.ones((4, 8))))
    with pytest.raises(ValueError, match=r"gru_cell: weight_ih must have shape .* \(3, 12\)"):
        F.gru_cell(x, h, T(np.ones((2, 12))), w_hh)
    with pytest.raises(ValueError, match=r"gru_cell: hidden state must have shape \(2, 4\)"):
        F.gru_cell(x, T(np.ones((3, 4))), w_ih, w_hh)
    with pytest.raises(ValueError, match=r"gru_cell: bias_hh must have shape \(12,\)"):
        F.gru_cell(x, h, w_ih, w_hh, None, T(np.ones(4)))
    with pytest.raises(ValueError, match="gru_cell: input must have shape"):
        F.gru_cell(T(np.ones((1, 2, 3))), h, w_ih, w_hh)
    with pytest.raises(TypeError, match="lstm_cell: hx must be a pair"):
        F.lstm_cell(x, h, T(np.ones((3, 16))), T(np.ones((4, 16))))
    with pytest.raises(ValueError, match="rnn_cell: nonlinearity must be 'tanh' or 'relu'"):
        F.rnn_cell(x, h, T(np.ones((3, 4))), T(np.ones((4, 4))), nonlinearity="gelu")


# -- extract_windows -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "k,s,mode", [(3, 1, "valid"), (3, 1, "same"), (2, 2, "valid"), (3, 2, "same"), (4, 3, "same")]
)
def test_extract_windows_matches_slicing_and_grads(k, s, mode):
    x = RNG.standard_normal((2, 3, 7, 6))
    windows, (ho, wo) = F.extract_windows(T(x), k, s, padding_mode=mode)
    if mode == "same":
        assert (ho, wo) == (-(-7 // s), -(-6 // s))
        th, tw = max((ho - 1) * s + k - 7, 0), max((wo - 1) * s + k - 6, 0)
        xp = np.pad(x, ((0, 0), (0, 0), (th // 2, th - th // 2), (tw // 2, tw - tw // 2)))
    else:
        assert (ho, wo) == ((7 - k) // s + 1, (6 - k) // s + 1)
        xp = x
    assert windows.shape == (ho, wo, 2, 3, k, k)
    for i in range(ho):
        for j in range(wo):
            np.testing.assert_array_equal(
                windows.numpy()[i, j], xp[:, :, i * s : i * s + k, j * s : j * s + k]
            )
    check_grads(lambda a: F.extract_windows(a, k, s, mode)[0], (T(x),), order=2)
    assert tg.nn.extract_windows is F.extract_windows


def test_extract_windows_seeds_example_and_errors():
    x = tg.random.normal(tg.random.key(0), (2, 3, 32, 32))
    windows, size = tg.nn.extract_windows(x, kernel_size=3, stride=1, padding_mode="same")
    assert windows.shape == (32, 32, 2, 3, 3, 3) and size == (32, 32)
    with pytest.raises(ValueError, match="extract_windows: padding_mode must be"):
        F.extract_windows(x, 3, 1, "full")
    with pytest.raises(ValueError, match=r"extract_windows: x must have shape \(N, C, H, W\)"):
        F.extract_windows(x[0], 3, 1)
    with pytest.raises(ValueError, match="kernel_size 40 is larger than the"):
        F.extract_windows(x, 40, 1)
    with pytest.raises(ValueError, match="extract_windows: stride must be >= 1"):
        F.extract_windows(x, 3, 0)


def test_recurrent_cell_hidden_state_must_be_one_tensor():
    x, h = T(np.ones((2, 3))), T(np.ones((2, 4)))
    with pytest.raises(ValueError, match="gru_cell: hidden state must have shape"):
        F.gru_cell(x, (h, h), T(np.ones((3, 12))), T(np.ones((4, 12))))


def test_extract_windows_against_torch_unfold():
    torch = torch_or_skip()
    x = RNG.standard_normal((2, 3, 7, 6))
    for k, s, pad in ((3, 1, 1), (2, 2, 0), (3, 2, 1)):
        mode = "valid" if pad == 0 else "same"
        windows, (ho, wo) = F.extract_windows(T(x), k, s, mode)
        if mode == "same":  # torch pads symmetrically: compare where the paddings agree
            th, tw = max((ho - 1) * s + k - 7, 0), max((wo - 1) * s + k - 6, 0)
            if (th % 2, tw % 2) != (0, 0):
                continue
        cols = torch.nn.functional.unfold(torch.tensor(x), k, padding=pad, stride=s).numpy()
        ours = windows.numpy().transpose(2, 3, 4, 5, 0, 1).reshape(2, 3 * k * k, ho * wo)
        np.testing.assert_array_equal(ours, cols)


# -- targets and parameters the losses check ------------------------------------------------------
def test_cross_entropy_names_the_target_shapes():
    logits = T(RNG.standard_normal((4, 3)))
    # float (soft) targets of the wrong shape said "non-integer floats", not the shape
    for y in (T(RNG.random((4, 2))), RNG.random((4, 2)).tolist(), T(np.zeros((4, 2), np.int64)),
              T(np.zeros((5,), np.int64))):
        with pytest.raises(ValueError, match=r"cross_entropy: y_true of shape \((4, 2|5,)\) fits "
                                             r"neither kind of target for y_pred of shape "
                                             r"\(4, 3\): class indices have shape \(4,\) "
                                             r"\(integers\), class probabilities have y_pred's "
                                             r"shape \(4, 3\) \(floating\)"):
            F.cross_entropy(logits, y)
    with pytest.raises(ValueError, match=r"y_true has y_pred's shape \(4, 3\) but dtype kind "
                                         r"'i'; class probabilities must be floating"):
        F.cross_entropy(logits, T(np.zeros((4, 3), np.int64)))
    with pytest.raises(TypeError, match="cross_entropy: y_true must hold integer class indices"):
        F.cross_entropy(logits, "abc")
    with pytest.raises(ValueError, match=r"nll_loss: target of shape \(4, 2\) does not match "
                                         r"input of shape \(4, 3\); expected \(4,\)"):
        F.nll_loss(logits, T(RNG.random((4, 2))))
    # the right shapes still work, both kinds
    assert F.cross_entropy(logits, T(np.full((4, 3), 1 / 3))).shape == ()
    assert F.cross_entropy(logits, [0, 1, 2, 0], ignore_index=-100.0).shape == ()


def test_elementwise_losses_name_the_function_for_bad_targets_and_parameters():
    x = T(RNG.standard_normal((4, 3)))
    p = T(RNG.uniform(0.2, 0.8, (4, 3)))
    pairs = {"mean_squared_loss": (F.mse_loss, x, "y_true"),
             "binary_cross_entropy": (F.binary_cross_entropy, p, "y_true"),
             "binary_cross_entropy_with_logits": (F.binary_cross_entropy_with_logits, x,
                                                  "y_true"),
             "hinge_loss": (F.hinge_loss, x, "y_true"), "l1_loss": (F.l1_loss, x, "target"),
             "huber_loss": (F.huber_loss, x, "target"),
             "smooth_l1_loss": (F.smooth_l1_loss, x, "target"), "kl_div": (F.kl_div, x, "target")}
    for name, (fn, a, tname) in pairs.items():
        with pytest.raises(TypeError, match=rf"{name}: {tname} must be numeric"):
            fn(a, "x")  # was NumPy's bare "could not convert string to float"
        with pytest.raises(ValueError, match=rf"{name}: .* of shape \(4, 3\) and {tname} of "
                                             r"shape \(4, 2\) differ"):
            fn(a, T(np.ones((4, 2))))
    bad_params = [
        (lambda: F.cross_entropy(x, [0, 1, 2, 0], label_smoothing="0.1"),
         r"cross_entropy: label_smoothing must be a real number, got '0.1'"),
        (lambda: F.cross_entropy(x, [0, 1, 2, 0], ignore_index=1.5),
         r"cross_entropy: ignore_index must be an int, got 1.5"),
        (lambda: F.nll_loss(x, [0, 1, 2, 0], ignore_index="-100"),
         r"nll_loss: ignore_index must be an int"),
        (lambda: F.kl_div(x, p, log_target="yes"), r"kl_div: log_target must be a bool"),
        (lambda: F.huber_loss(x, x, delta="1"), r"huber_loss: delta must be a real number"),
        (lambda: F.smooth_l1_loss(x, x, beta=None), r"smooth_l1_loss: beta must be a real"),
    ]
    for call, msg in bad_params:
        with pytest.raises(TypeError, match=msg):
            call()
