"""The fused training-step primitives of tapegrad.nn.functional (Linear, CrossEntropyGrad):
forward against NumPy, gradients at orders 1 and 2, inputs never mutated, fallbacks."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads

RNG = np.random.default_rng(7)


def T(a):
    return tg.Tensor(np.asarray(a))


# -- Linear ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (1, 3)])
def test_linear_matches_numpy_and_is_fused(shape):
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    copies = [a.copy() for a in (x, w, b)]
    out = F.linear(T(x), T(w), T(b))
    np.testing.assert_allclose(out.numpy(), x @ w + b, rtol=1e-13)
    for a, c in zip((x, w, b), copies):
        np.testing.assert_array_equal(a, c)  # inputs untouched
    y = F.Linear.apply(T(x), T(w), T(b))
    np.testing.assert_array_equal(y.numpy(), out.numpy())


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3)])
def test_linear_grads_orders_1_and_2(shape):
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    check_grads(F.Linear.apply, (T(x), T(w), T(b)), order=2)
    check_grads(lambda x, w, b: tnp.tanh(F.linear(x, w, b)), (T(x), T(w), T(b)), order=2)


def test_linear_gradients_match_numpy_and_skip_unneeded():
    x, w, b = RNG.standard_normal((6, 3)), RNG.standard_normal((3, 2)), RNG.standard_normal(2)
    g = RNG.standard_normal((6, 2))
    _, vjp = tg.vjp(F.linear, T(x), T(w), T(b))
    gx, gw, gb = vjp(T(g))
    np.testing.assert_allclose(gx.numpy(), g @ w.T, rtol=1e-13)
    np.testing.assert_allclose(gw.numpy(), x.T @ g, rtol=1e-13)
    np.testing.assert_allclose(gb.numpy(), g.sum(0), rtol=1e-13)
    gw_only = tg.grad(lambda w: F.linear(T(x), w, T(b)).sum())(T(w))
    np.testing.assert_allclose(gw_only.numpy(), x.T @ np.ones((6, 2)), rtol=1e-13)


def test_linear_fallbacks_keep_the_old_semantics():
    w, b = RNG.standard_normal((3, 2)), RNG.standard_normal(2)
    v = RNG.standard_normal(3)
    np.testing.assert_allclose(F.linear(T(v), T(w), T(b)).numpy(), v @ w + b)  # 1-D input
    x32 = RNG.standard_normal((4, 3)).astype(np.float32)
    mixed = F.linear(T(x32), T(w), T(b))  # float32 input, float64 weight: promotes
    assert mixed.dtype == np.float64
    np.testing.assert_allclose(mixed.numpy(), x32 @ w + b, rtol=1e-6)
    no_bias = F.linear(T(x32), T(w.astype(np.float32)))
    np.testing.assert_allclose(no_bias.numpy(), x32 @ w, rtol=1e-5, atol=1e-6)
    check_grads(lambda v, w, b: F.linear(v, w, b), (T(v), T(w), T(b)), order=2)


def test_linear_errors():
    with pytest.raises(ValueError, match="linear"):
        F.Linear.apply(T(np.ones((2, 3))), T(np.ones((4, 2))), T(np.ones(2)))
    with pytest.raises(ValueError, match="bias must have shape"):
        F.linear(T(np.ones((2, 3))), T(np.ones((3, 2))), T(np.ones(3)))
    with pytest.raises(TypeError, match="floating"):
        F.linear(T(np.ones((2, 3), int)), T(np.ones((3, 2))), T(np.ones(2)))


def test_linear_under_jit_and_nested_grad():
    x, w, b = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2)), RNG.standard_normal(2)

    def loss(w, b):
        return tnp.sum(F.relu(F.linear(T(x), w, b)) ** 2)

    g = tg.grad(loss, argnums=(0, 1))
    gj = tg.jit(g)
    for a, c in zip(g(T(w), T(b)), gj(T(w), T(b))):
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-12)
    hess = tg.hessian(lambda b: loss(T(w), b))(T(b))
    assert hess.shape == (2, 2)


def test_linear_derivatives_record_no_transpose():
    """Linear's rules multiply by transposed operands through matmul's flags: no transpose
    entry at first or second order, so no strided transposed cotangent reaches an elementwise
    op of a second derivative."""
    x, w, b = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2)), RNG.standard_normal(2)

    def loss(x, w, b):
        return tnp.sum(tnp.tanh(F.linear(x, w, b)))

    args = (T(x), T(w), T(b))
    for fun in (tg.grad(loss, argnums=(0, 1, 2)),
                tg.grad(lambda *a: sum(tnp.sum(g * g) for g in tg.grad(loss, (0, 1, 2))(*a)),
                        argnums=(0, 1, 2))):
        listing = str(tg.jit(fun).lower(*args))
        assert " = transpose" not in listing, listing
    check_grads(loss, args, order=2, modes=("rev", "fwd"))


# -- CrossEntropyGrad --------------------------------------------------------------------------
def _ce_reference(logits, t, g, eps, reduction):
    """d loss / d logits of the composite cross-entropy, via tapegrad ops on the log-softmax."""
    n_cls = logits.shape[-1]
    valid = t != -100
    target = np.eye(n_cls)[np.where(valid, t, 0)] * (1 - eps) + eps / n_cls

    def loss(z):
        per = -tnp.sum(F.log_softmax(z) * target, axis=-1) * valid
        if reduction == "none":
            return tnp.sum(per * g)
        total = tnp.sum(per) * g
        return total / max(int(valid.sum()), 1) if reduction == "mean" else total

    return tg.grad(loss)(T(logits)).numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
def test_cross_entropy_grad(reduction, eps, shape):
    logits = RNG.standard_normal(shape)
    t = RNG.integers(0, shape[-1], shape[:-1])
    if t.ndim:
        t.reshape(-1)[0] = -100  # one ignored target
    g = RNG.standard_normal(t.shape) if reduction == "none" else np.array(1.7)
    copies = [a.copy() for a in (logits, t, g)]
    params = dict(label_smoothing=eps, reduction=reduction)
    out = F.CrossEntropyGrad.apply(T(logits), T(t), T(g), **params)
    np.testing.assert_allclose(out.numpy(), _ce_reference(logits, t, g, eps, reduction), 1e-10)
    for a, c in zip((logits, t, g), copies):
        np.testing.assert_array_equal(a, c)

    def f(z, gt):
        return F.CrossEntropyGrad.apply(z, T(t), gt, **params)

    check_grads(f, (T(logits), T(g)), order=2)
    check_grads(lambda z: F.cross_entropy(z, T(t), **params), (T(logits),), order=3)


def test_cross_entropy_grad_all_ignored_and_float32():
    z = RNG.standard_normal((3, 4)).astype(np.float32)
    t = np.full(3, -100)
    d = F.CrossEntropyGrad.apply(T(z), T(t), T(np.float32(1.0)))
    assert d.dtype == np.float32 and np.all(d.numpy() == 0)
    gz = tg.grad(lambda z: F.cross_entropy(z, T(np.array([0, 1, 3]))))(T(z))
    assert gz.dtype == np.float32
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(3), [0, 1, 3]] -= 1
    np.testing.assert_allclose(gz.numpy(), p / 3, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("ignore", [None, "first", "all"])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (0, 4)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cross_entropy_first_order_backward_equals_the_fused_grad(
    reduction, eps, ignore, shape, dtype
):
    """The first-order backward reuses the forward's row maxima and sums: bitwise the values
    CrossEntropyGrad computes from the logits alone (which the traced path and jit use)."""
    logits = (RNG.standard_normal(shape) * 3).astype(dtype)
    t = RNG.integers(0, shape[-1], shape[:-1])
    if ignore == "first" and t.size:
        t.reshape(-1)[0] = -100
    if ignore == "all":
        t[...] = -100
    g = RNG.standard_normal(t.shape).astype(dtype) if reduction == "none" else dtype(0.7)
    params = dict(label_smoothing=eps, reduction=reduction)
    _, f_vjp = tg.vjp(lambda z: F.cross_entropy(z, T(t), **params), T(logits))
    (gz,) = f_vjp(T(g))
    ref = F.CrossEntropyGrad.apply(T(logits), T(t), T(g), **params)
    assert gz.dtype == dtype and gz.shape == shape
    np.testing.assert_array_equal(gz.numpy(), ref.numpy())
    (again,) = f_vjp(T(g))  # the pullback may be called again: the stats are not consumed
    np.testing.assert_array_equal(again.numpy(), ref.numpy())
    jitted = tg.jit(tg.grad(lambda z: tnp.sum(F.cross_entropy(z, T(t), **params) * T(g))))
    np.testing.assert_array_equal(jitted(T(logits)).numpy(), ref.numpy())


def test_cross_entropy_ignore_index_inside_the_classes():
    """An ignore_index that is also a class index: those targets are ignored, the rest count."""
    z = RNG.standard_normal((4, 3))
    t = np.array([0, 1, 2, 0])
    out = F.cross_entropy(T(z), T(t), ignore_index=0)
    lp = z - np.log(np.exp(z).sum(1, keepdims=True))
    np.testing.assert_allclose(float(out), -(lp[1, 1] + lp[2, 2]) / 2, rtol=1e-12)
    gz = tg.grad(lambda v: F.cross_entropy(v, T(t), ignore_index=0))(T(z))
    np.testing.assert_array_equal(gz.numpy()[[0, 3]], 0.0)
    check_grads(lambda v: F.cross_entropy(v, T(t), ignore_index=0), (T(z),), order=2)


def test_cross_entropy_primitive_checks_its_targets():
    """CrossEntropy.apply itself (not only the cross_entropy wrapper) rejects targets that are
    neither a class index nor ignore_index, with or without a trace."""
    z = T(np.zeros((3, 4)))
    for bad in ([0, 4, 1], [0, -1, 1], [0, -100, 9]):
        with pytest.raises(ValueError, match=f"target {bad[1] if bad[1] != -100 else 9} is out"):
            F.CrossEntropy.apply(z, T(np.array(bad)))
        with pytest.raises(ValueError, match="cross_entropy: target .* out of range for 4"):
            tg.grad(lambda v, b=bad: F.CrossEntropy.apply(v, T(np.array(b))))(z)
    t_u8 = np.array([3, 0, 2], np.uint8)  # unsigned targets need no ignore_index
    np.testing.assert_allclose(float(F.cross_entropy(z, T(t_u8))), np.log(4.0), rtol=1e-12)
    with pytest.raises(ValueError, match="target 200 is out of range"):
        F.cross_entropy(z, T(np.array([200, 0, 1], np.uint8)))


def test_cross_entropy_common_case_equals_the_general_path():
    """The wrapper's fast path (Tensors, defaults) gives what the general path gives."""
    z = RNG.standard_normal((6, 5)).astype(np.float32)
    t = RNG.integers(0, 5, 6)
    fast = F.cross_entropy(T(z), T(t))
    general = F.cross_entropy(z, list(t), ignore_index=-100.0)  # not the fast path's types
    np.testing.assert_array_equal(fast.numpy(), general.numpy())
    assert fast.dtype == np.float32 and fast.shape == ()
    with pytest.raises(ValueError, match=r"y_true of shape \(5,\) fits neither kind of target"):
        F.cross_entropy(T(z), T(t[:5]))
    with pytest.raises(TypeError, match="integer class indices"):
        F.cross_entropy(T(z), T(t.astype(np.float32) + 0.5))


# -- Conv2d with fused bias ----------------------------------------------------------------------
def _np_conv(x, w, b, stride, pad, dilation, groups):
    """Direct definition (a loop over output pixels; the reference only)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - dilation * (kh - 1) - 1) // stride + 1
    wo = (wd + 2 * pad - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for oc in range(o):
        cs = slice(oc // og * cg, oc // og * cg + cg)
        for i in range(ho):
            for j in range(wo):
                r = slice(i * stride, i * stride + dilation * (kh - 1) + 1, dilation)
                q = slice(j * stride, j * stride + dilation * (kw - 1) + 1, dilation)
                patch = xp[:, cs, r, q]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3)) + b[oc]
    return out


@pytest.mark.parametrize(
    "stride,pad,dilation,groups", [(1, 1, 1, 1), (2, 0, 1, 2), (1, 2, 2, 1), (2, 1, 1, 1)]
)
def test_conv2d_fused_bias(stride, pad, dilation, groups):
    x = RNG.standard_normal((2, 4, 7, 6))
    w = RNG.standard_normal((6, 4 // groups, 3, 3))
    b = RNG.standard_normal(6)
    copies = [a.copy() for a in (x, w, b)]
    kw = dict(stride=stride, padding=pad, dilation=dilation, groups=groups)
    out = F.conv2d(T(x), T(w), T(b), **kw)
    np.testing.assert_allclose(out.numpy(), _np_conv(x, w, b, stride, pad, dilation, groups), 1e-12)
    for a, c in zip((x, w, b), copies):
        np.testing.assert_array_equal(a, c)
    check_grads(lambda x, w, b: F.conv2d(x, w, b, **kw), (T(x), T(w), T(b)), order=2)
    conv = dict(stride=(stride,) * 2, padding=(pad,) * 4, dilation=(dilation,) * 2, groups=groups)
    y = F.Conv2d.apply(T(x), T(w), T(b), **conv)
    np.testing.assert_array_equal(y.numpy(), out.numpy())


def test_conv2d_bias_of_another_dtype_promotes():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(3)
    out = F.conv2d(T(x), T(w), T(b), padding=1)
    assert out.dtype == np.float64
    ref = _np_conv(x.astype(np.float64), w.astype(np.float64), b, 1, 1, 1, 1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


# -- MaxPool2d, MaxPool2dGrad, MaxPool2dGather ---------------------------------------------------
def _np_pool(x, k, s, p):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.empty((n, c, ho, wo))
    dx = np.zeros_like(xp)
    g = np.arange(out.size, dtype=float).reshape(out.shape) + 1.0
    for i in range(ho):
        for j in range(wo):
            win = xp[:, :, i * s : i * s + k, j * s : j * s + k].reshape(n, c, -1)
            out[:, :, i, j] = win.max(-1)
            a = win.argmax(-1)
            for nn in range(n):
                for cc in range(c):
                    di, dj = divmod(a[nn, cc], k)
                    dx[nn, cc, i * s + di, j * s + dj] += g[nn, cc, i, j]
    return out, g, dx[:, :, p : p + h, p : p + w]


@pytest.mark.parametrize("k,s,p,hw", [(2, 2, 0, (6, 4)), (3, 2, 1, (7, 5)), (2, 1, 0, (5, 5)),
                                      (2, 2, 0, (5, 7)), (3, 3, 1, (6, 6))])  # fmt: skip
def test_max_pool2d_forward_and_routing(k, s, p, hw):
    x = RNG.standard_normal((2, 3) + hw)
    x[0, 0, :2, :2] = 1.5  # ties: the first maximum in the window wins
    x0 = x.copy()
    out = F.max_pool2d(T(x), k, s, p)
    ref, g, dx = _np_pool(x, k, s, p)
    np.testing.assert_array_equal(out.numpy(), ref)
    _, vjp = tg.vjp(lambda x: F.max_pool2d(x, k, s, p), T(x))
    np.testing.assert_array_equal(vjp(T(g))[0].numpy(), dx)
    np.testing.assert_array_equal(x, x0)
    pool = dict(kernel=(k, k), stride=(s, s), padding=(p,) * 4)
    gathered = F.MaxPool2dGather.apply(T(dx), T(x), out, **pool)
    # the gather reads each window's routed position: <gather(h), g> == <h, route(g)>
    h = RNG.standard_normal(x.shape)
    routed = F.MaxPool2dGrad.apply(T(g), T(x), out, **pool).numpy()
    lhs = (F.MaxPool2dGather.apply(T(h), T(x), out, **pool).numpy() * g).sum()
    np.testing.assert_allclose(lhs, (h * routed).sum(), rtol=1e-12)
    assert gathered.shape == out.shape


def test_max_pool2d_grads_orders_1_and_2():
    x = RNG.permutation(2 * 3 * 6 * 6).reshape(2, 3, 6, 6) / 10.0  # distinct: no kinks
    check_grads(lambda x: F.max_pool2d(x, 2), (T(x),), order=2)
    check_grads(lambda x: F.max_pool2d(x, 3, 2, 1), (T(x),), order=2)
    pool = dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0))
    out = F.max_pool2d(T(x), 2)
    g = RNG.standard_normal(out.shape)
    check_grads(lambda g: F.MaxPool2dGrad.apply(g, T(x), out, **pool), (T(g),), order=2)
    check_grads(lambda h: F.MaxPool2dGather.apply(h, T(x), out, **pool), (T(x),), order=2)


def test_max_pool2d_nan_and_non_finite_cotangents():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    x[0, 0, 1, 0] = np.nan
    out = F.max_pool2d(T(x), 2)
    assert np.isnan(out.numpy()[0, 0, 0, 0]) and out.numpy()[0, 0, 1, 1] == 15
    _, vjp = tg.vjp(lambda x: F.max_pool2d(x, 2), T(x))
    dx = vjp(T(np.ones((1, 1, 2, 2))))[0].numpy()
    assert dx[0, 0, 0, 1] == 1 and dx[0, 0, 1, 0] == 0 and dx.sum() == 4  # first NaN wins
    g = np.array([[[[np.inf, 1.0], [2.0, 3.0]]]])
    dx = vjp(T(g))[0].numpy()
    assert dx[0, 0, 0, 1] == np.inf and not np.isnan(dx).any()
