"""vmap's batching rules of the fused primitives of ``tapegrad.nn.functional`` against the
per-example loop, on drawn shapes, parameters and batched/unbatched operands.

Every case goes through ``tapegrad.testing.check_vmap`` (values, shapes and dtypes equal to the
function applied to each example and stacked, with no op falling back to the loop), for batch
sizes 0, 1 and more, every combination of batched and unbatched operands, and size-0 and size-1
example axes where the op allows them. Besides the forward values, each case checks

- per-example gradients, ``vmap(grad(f))`` (the backward primitives batched: CrossEntropyGrad,
  Conv2dInputGrad/Conv2dWeightGrad, MaxPool2dGrad, the row scatter, ...);
- ``vmap`` of ``vjp`` with any of the primal operands and the cotangent batched, which reaches
  the backward primitives with every mix of batched and unbatched inputs (a shared cotangent
  against per-example images, per-example cotangents against shared weights, ...);
- ``vmap`` of ``jvp`` (forward mode: these ops use the transposed backward);
- second order where the backward has its own backward (cross-entropy, max-pool).

Values come from a drawn seed (NumPy's generator) so that drawn shapes can be large enough to
be interesting and the tests stay fast.
"""

import itertools

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.core.function import Function
from tapegrad.ops import nn as nn_ops
from tapegrad.testing import check_vmap

F = tg.nn.functional

batch_sizes = st.integers(0, 3)
seeds = st.integers(0, 2**32 - 1)


def in_axes(n):
    """Tuples of n entries 0 (batched) or None, at least one batched."""
    return st.tuples(*[st.sampled_from([0, None])] * n).filter(lambda a: 0 in a)


def _value(rng, shape, ax, b, kind="normal", dtype=np.float64):
    """A Tensor of one example's ``shape``, with a leading batch of ``b`` when ``ax == 0``."""
    full = ((b,) if ax == 0 else ()) + tuple(shape)
    if kind == "normal":
        v = rng.standard_normal(full)
    elif kind == "prob":
        v = rng.uniform(0.05, 0.95, full)
    elif kind == "ties":  # few distinct values: ties in max-pooling windows
        v = rng.integers(0, 3, full).astype(float)
    else:
        raise ValueError(kind)
    return tg.Tensor(v.astype(dtype))


def _ints(rng, shape, ax, b, low, high):
    full = ((b,) if ax == 0 else ()) + tuple(shape)
    return tg.Tensor(rng.integers(low, high, full))


def _shape_of(t, ax):
    return t.shape[1:] if ax == 0 else t.shape


def check_transforms(f, floats, axes, rng, ints=(), int_axes=(), jvp=True, **tol):
    """``f(*floats, *ints)`` under vmap: values, per-example gradients of ``sum(sin(f))`` with
    respect to every float operand, and (``jvp``) forward-mode tangents, each against the loop.
    """
    floats, ints = list(floats), list(ints)
    args = tuple(floats + ints)
    all_axes = tuple(axes) + tuple(int_axes)
    nf = len(floats)
    check_vmap(f, args, in_axes=all_axes, **tol)

    def loss(*a):
        return tnp.sum(tnp.sin(f(*a)))

    check_vmap(tg.grad(loss, argnums=tuple(range(nf))), args, in_axes=all_axes, **tol)
    if not jvp:
        return
    tangents = [_value(rng, _shape_of(t, ax), ax, t.shape[0] if ax == 0 else 0, dtype=t.dtype)
                for t, ax in zip(floats, axes)]

    def f_jvp(*a):
        fl, it, ts = a[:nf], a[nf: len(args)], a[len(args):]
        return tg.jvp(lambda *p: f(*p, *it), tuple(fl), tuple(ts))

    check_vmap(f_jvp, args + tuple(tangents), in_axes=all_axes + tuple(axes), **tol)


def check_vjp(f, primals, p_axes, cotangent_shape, g_axis, size, rng, extra=(), extra_axes=(),
              **tol):
    """``vjp(f, *primals)[1](g)`` under vmap with any of the primals and the cotangent ``g``
    batched (the backward primitives with every mix of batched and unbatched inputs)."""
    g = _value(rng, cotangent_shape, g_axis, size, dtype=primals[0].dtype)
    n = len(primals)

    def pull(*a):
        ps, g, ex = a[:n], a[n], a[n + 1:]
        return tg.vjp(lambda *p: f(*p, *ex), *ps)[1](g)

    check_vmap(pull, tuple(primals) + (g,) + tuple(extra),
               in_axes=tuple(p_axes) + (g_axis,) + tuple(extra_axes), **tol)


# -- coverage --------------------------------------------------------------------------------
def test_every_primitive_has_a_batching_rule():
    prims = [v for v in vars(nn_ops).values()
             if isinstance(v, type) and issubclass(v, Function) and v is not Function]
    names = {p.__name__ for p in prims}
    for expected in ("Softmax", "LogSoftmax", "_Loss", "MeanSquaredLoss", "BinaryCrossEntropy",
                     "BinaryCrossEntropyWithLogits", "HingeLoss", "CrossEntropy",
                     "CrossEntropyGrad", "Linear", "Conv2d", "Conv2dInputGrad",
                     "Conv2dWeightGrad", "MaxPool2d", "MaxPool2dGrad", "MaxPool2dGather",
                     "_TakeRows", "_ScatterRows", "ScaledDotProductAttention", "Gelu"):
        assert expected in names
    missing = sorted(p.__name__ for p in prims if p.batch is None)
    assert not missing, f"no batching rule: {missing}"


# -- softmax, log_softmax, gelu --------------------------------------------------------------
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
@given(data=st.data(), b=batch_sizes, seed=seeds)
def test_softmax_and_log_softmax(fn, data, b, seed):
    rng = np.random.default_rng(seed)
    shape = data.draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
    nd = len(shape)
    axis = data.draw(st.integers(-nd, max(nd, 1) - 1))
    x = _value(rng, shape, 0, b)
    check_transforms(lambda x: fn(x, axis=axis), [x], (0,), rng)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_gradient_of_a_0d_input(fn):
    """Regression: the backward summed a 0-d cotangent over axis 0 (out of range)."""
    x = tg.Tensor(np.array(0.3))
    np.testing.assert_allclose(tg.grad(lambda x: tnp.sum(tnp.sin(fn(x, axis=0))))(x).numpy(), 0.0)


@given(b=batch_sizes, seed=seeds, shape=st.lists(st.integers(0, 3), max_size=2).map(tuple),
       approximate=st.sampled_from(["tanh", "none", None]))
def test_gelu(b, seed, shape, approximate):
    rng = np.random.default_rng(seed)
    x = _value(rng, shape, 0, b)
    fn = F.Gelu.apply if approximate is None else (lambda x: F.gelu(x, approximate))
    check_transforms(fn, [x], (0,), rng)


# -- elementwise losses ----------------------------------------------------------------------
LOSSES = {
    "mse": (F.mean_squared_loss, F.MeanSquaredLoss, "normal"),
    "bce": (F.binary_cross_entropy, F.BinaryCrossEntropy, "prob"),
    "bce_logits": (F.binary_cross_entropy_with_logits, F.BinaryCrossEntropyWithLogits, "normal"),
    "hinge": (F.hinge_loss, F.HingeLoss, "normal"),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
@given(b=batch_sizes, seed=seeds, shape=st.lists(st.integers(0, 3), max_size=3).map(tuple),
       axes=in_axes(2), scalar_target=st.booleans(),
       reduction=st.sampled_from(["none", "mean", "sum", None]))
def test_elementwise_losses_reduce_each_example(name, b, seed, shape, axes, scalar_target,
                                                reduction):
    """``"mean"``/``"sum"`` reduce each example's own elements (``None``: the primitive's own
    default reduction, through the seeds' ``Function.apply`` row)."""
    fn, cls, kind = LOSSES[name]
    rng = np.random.default_rng(seed)
    p = _value(rng, shape, axes[0], b, kind)
    y = _value(rng, () if scalar_target else shape, axes[1], b, "prob")
    f = cls.apply if reduction is None else (lambda p, y: fn(p, y, reduction=reduction))
    check_transforms(f, [p, y], axes, rng)


# -- cross-entropy ---------------------------------------------------------------------------
@given(data=st.data(), b=batch_sizes, seed=seeds, axes=in_axes(2),
       lead=st.lists(st.integers(0, 2), max_size=2).map(tuple), classes=st.integers(1, 4),
       reduction=st.sampled_from(["none", "mean", "sum"]), smoothing=st.sampled_from([0.0, 0.1]),
       ignore=st.booleans())
def test_cross_entropy_with_integer_targets(data, b, seed, axes, lead, classes, reduction,
                                            smoothing, ignore):
    """Class-index targets, batched or shared, some ignored: the mean of each example divides
    by that example's count of valid targets."""
    rng = np.random.default_rng(seed)
    logits = _value(rng, lead + (classes,), axes[0], b)
    target = _ints(rng, lead, axes[1], b, -1 if ignore else 0, classes)
    kw = dict(reduction=reduction, label_smoothing=smoothing, ignore_index=-1)

    def f(logits, target):
        return F.cross_entropy(logits, target, **kw)

    check_transforms(f, [logits], axes[:1], rng, ints=[target], int_axes=axes[1:])
    # the backward primitive with a per-example or shared logits/cotangent mix
    g_axis = data.draw(st.sampled_from([0, None]))
    out_shape = lead if reduction == "none" else ()
    check_vjp(f, [logits], axes[:1], out_shape, g_axis, b, rng, extra=[target],
              extra_axes=axes[1:])

    # second order: per-example Hessian-vector products (CrossEntropyGrad's own backward)
    def hvp(logits, target, v):
        return tg.grad(lambda z: tnp.sum(tg.grad(lambda z: tnp.sum(f(z, target)))(z) * v))(logits)

    v = _value(rng, lead + (classes,), 0, b)
    check_vmap(hvp, (logits, target, v), in_axes=axes + (0,))


# -- linear ----------------------------------------------------------------------------------
@given(data=st.data(), b=batch_sizes, seed=seeds, axes=in_axes(3),
       lead=st.lists(st.integers(0, 2), max_size=2).map(tuple), n_in=st.integers(0, 3),
       n_out=st.integers(0, 3))
def test_linear_with_shared_or_per_example_weights(data, b, seed, axes, lead, n_in, n_out):
    """``x`` (1-D examples too: F.linear runs them as one row), ``w`` and ``b`` each batched or
    not: per-example weights are an ensemble."""
    rng = np.random.default_rng(seed)
    x = _value(rng, lead + (n_in,), axes[0], b)
    w = _value(rng, (n_in, n_out), axes[1], b)
    bias = _value(rng, (n_out,), axes[2], b)
    check_transforms(F.linear, [x, w, bias], axes, rng)
    if len(lead) >= 1:  # the primitive itself (2-D examples or more)
        g_axis = data.draw(st.sampled_from([0, None]))
        check_vjp(F.Linear.apply, [x, w, bias], axes, lead + (n_out,), g_axis, b, rng)


def test_linear_gradient_with_zero_input_features():
    """Regression: Linear's backward reshaped with -1, ambiguous for zero features."""
    x = tg.Tensor(np.zeros((2, 3, 0)))
    w, bias = tg.Tensor(np.zeros((0, 4))), tg.Tensor(np.ones(4))
    gx, gw, gb = tg.grad(lambda x, w, b: tnp.sum(F.Linear.apply(x, w, b)), argnums=(0, 1, 2))(
        x, w, bias)
    assert gx.shape == (2, 3, 0) and gw.shape == (0, 4)
    np.testing.assert_array_equal(gb.numpy(), np.full(4, 6.0))


# -- convolutions ----------------------------------------------------------------------------
@st.composite
def conv_cases(draw):
    """``(x shape, w shape, conv2d keyword params)`` with a non-empty output."""
    groups = draw(st.integers(1, 2))
    c_in, c_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), 1)
    padding = draw(st.sampled_from([0, 1, "same", "valid", (1, 0)]))
    h = draw(st.integers(dilation[0] * (kh - 1) + 1, dilation[0] * (kh - 1) + 3))
    w = draw(st.integers(kw, kw + 2))
    n = draw(st.integers(0, 2))
    params = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return (n, c_in, h, w), (c_out, c_in // groups, kh, kw), params


@given(data=st.data(), b=batch_sizes, seed=seeds, case=conv_cases(), axes=in_axes(3),
       bias=st.booleans())
def test_conv2d_with_shared_or_per_example_weights(data, b, seed, case, axes, bias):
    """Images, weights and bias each batched or not: shared weights merge the batch into N,
    per-example weights use grouped convolution."""
    xs, ws, params = case
    # without a bias only x and w are mapped, and in_axes(3) may have batched the bias alone:
    # vmap then has nothing to map (check_vmap rejects it: no batch size)
    assume(bias or 0 in axes[:2])
    rng = np.random.default_rng(seed)
    x, w = _value(rng, xs, axes[0], b), _value(rng, ws, axes[1], b)
    if bias:
        bb = _value(rng, ws[:1], axes[2], b)
        check_transforms(lambda x, w, bb: F.conv2d(x, w, bb, **params), [x, w, bb], axes, rng)
    else:
        check_transforms(lambda x, w: F.conv2d(x, w, **params), [x, w], axes[:2], rng)
    # both transposes with every mix: vjp in x and w with the cotangent batched or not
    g_axis = data.draw(st.sampled_from([0, None]))
    p_axes = data.draw(st.sampled_from([(0, 0), (0, None), (None, 0), (None, None)]))
    if g_axis is None and p_axes == (None, None):
        g_axis = 0
    x, w = _value(rng, xs, p_axes[0], b), _value(rng, ws, p_axes[1], b)
    out_shape = F.conv2d(tg.Tensor(np.zeros(xs)), tg.Tensor(np.zeros(ws)), **params).shape
    check_vjp(lambda x, w: F.conv2d(x, w, **params), [x, w], p_axes, out_shape, g_axis, b, rng)


@given(b=batch_sizes, seed=seeds, axes=in_axes(2), groups=st.integers(1, 2),
       stride=st.integers(1, 2), padding=st.integers(0, 1), n=st.integers(0, 2))
def test_conv_transpose2d(b, seed, axes, groups, stride, padding, n):
    """The input-gradient primitive run forward (transposed convolution)."""
    rng = np.random.default_rng(seed)
    x = _value(rng, (n, 2 * groups, 3, 2), axes[0], b)
    w = _value(rng, (2 * groups, 2, 3, 2), axes[1], b)
    check_transforms(
        lambda x, w: F.conv_transpose2d(x, w, stride=stride, padding=padding, groups=groups),
        [x, w], axes, rng)


# -- max pooling -----------------------------------------------------------------------------
@given(data=st.data(), b=batch_sizes, seed=seeds, kernel=st.integers(1, 3),
       stride=st.sampled_from([None, 1, 2]), n=st.integers(0, 2), c=st.integers(1, 2),
       ties=st.booleans())
def test_max_pool2d(data, b, seed, kernel, stride, n, c, ties):
    """Values, per-example gradients (MaxPool2dGrad, first maximum on ties), vjp with a shared
    or per-example cotangent, and second order (MaxPool2dGather)."""
    rng = np.random.default_rng(seed)
    padding = data.draw(st.integers(0, kernel // 2))
    h, w = data.draw(st.integers(kernel, kernel + 3)), data.draw(st.integers(kernel, kernel + 2))
    kind = "ties" if ties else "normal"
    x = _value(rng, (n, c, h, w), 0, b, kind)

    def pool(x):
        return F.max_pool2d(x, kernel, stride, padding)

    check_transforms(pool, [x], (0,), rng)
    x_axis, g_axis = data.draw(st.sampled_from([(0, 0), (0, None), (None, 0)]))
    x = _value(rng, (n, c, h, w), x_axis, b, kind)
    out_shape = pool(tg.Tensor(np.zeros((n, c, h, w)))).shape
    check_vjp(pool, [x], (x_axis,), out_shape, g_axis, b, rng)

    # the gather: the vjp of the vjp, in the cotangent of the inner one
    def gather(x, g, h):
        inner = lambda g: tg.vjp(pool, x)[1](g)[0]  # noqa: E731
        return tg.vjp(inner, g)[1](h)[0]

    g = _value(rng, out_shape, g_axis, b)
    hh = _value(rng, (n, c, h, w), 0, b)
    check_vmap(gather, (x, g, hh), in_axes=(x_axis, g_axis, 0))


# -- embedding rows --------------------------------------------------------------------------
@given(data=st.data(), b=batch_sizes, seed=seeds, axes=in_axes(2), rows=st.integers(1, 4),
       dim=st.integers(0, 2), ishape=st.lists(st.integers(0, 2), max_size=2).map(tuple))
def test_embedding_with_shared_or_per_example_tables(data, b, seed, axes, rows, dim, ishape):
    rng = np.random.default_rng(seed)
    weight = _value(rng, (rows, dim), axes[0], b)
    idx = _ints(rng, ishape, axes[1], b, 0, rows)
    check_transforms(lambda w, i: F.embedding(i, w), [weight], axes[:1], rng, ints=[idx],
                     int_axes=axes[1:])
    # the primitives directly, negative indices counted from each example's own end
    neg = _ints(rng, ishape, axes[1], b, -rows, rows)
    check_vmap(nn_ops._TakeRows.apply, (weight, neg), in_axes=axes)
    g_axis = data.draw(st.sampled_from([0, None]))
    if g_axis is None and axes[1] is None:
        g_axis = 0
    g = _value(rng, ishape + (dim,), g_axis, b)
    check_vmap(lambda g, i: nn_ops._ScatterRows.apply(g, i, rows=rows), (g, neg),
               in_axes=(g_axis, axes[1]))


def test_row_lookup_out_of_range_raises_under_vmap():
    """An index outside one example's table raises, never reads another example's rows."""
    w = tg.Tensor(np.zeros((2, 3, 4)))
    idx = tg.Tensor(np.array([[0, 1], [2, 3]]))
    with pytest.raises(IndexError):
        tg.vmap(nn_ops._TakeRows.apply)(w, idx)
    with pytest.raises(IndexError):
        tg.vmap(lambda g, i: nn_ops._ScatterRows.apply(g, i, rows=3))(
            tg.Tensor(np.zeros((2, 2, 4))), idx)


# -- attention -------------------------------------------------------------------------------
@given(b=batch_sizes, seed=seeds, axes=in_axes(4), lq=st.integers(0, 3), lk=st.integers(1, 3),
       e=st.integers(1, 3), ev=st.integers(0, 2),
       heads=st.lists(st.integers(1, 2), max_size=2).map(tuple),
       mask=st.sampled_from(["none", "bool", "float"]), causal=st.booleans())
def test_scaled_dot_product_attention(b, seed, axes, lq, lk, e, ev, heads, mask, causal):
    """q, k, v and the mask each batched or not, with leading (head) dimensions."""
    rng = np.random.default_rng(seed)
    if mask == "none" and 0 not in axes[:3]:
        axes = (0,) + axes[1:]
    q = _value(rng, heads + (lq, e), axes[0], b)
    k = _value(rng, heads + (lk, e), axes[1], b)
    v = _value(rng, heads + (lk, ev), axes[2], b)
    full = ((b,) if axes[3] == 0 else ()) + (lq, lk)
    if mask == "bool":
        m = tg.Tensor(rng.random(full) > 0.3)
    elif mask == "float":
        m = tg.Tensor((rng.random(full) > 0.7).astype(np.float64))
    else:
        m = None
    if m is None:
        def f(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        check_transforms(f, [q, k, v], axes[:3], rng)
    else:
        def f(q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, m, is_causal=causal)

        check_transforms(f, [q, k, v], axes[:3], rng, ints=[m], int_axes=axes[3:])


# -- whole models: per-example gradients and ensembles ----------------------------------------
def _conv_net(params, x, y):
    """One example: x (C, H, W) -> conv, relu, max-pool, conv, flatten, linear, cross-entropy."""
    h = F.relu(F.conv2d(x[None], params["c1"]["w"], params["c1"]["b"], padding=1))
    h = F.max_pool2d(h, 2)
    h = F.conv2d(h, params["c2"]["w"], params["c2"]["b"], stride=2, groups=2)
    logits = F.linear(tnp.reshape(h, (-1,)), params["fc"]["w"], params["fc"]["b"])
    return F.cross_entropy(F.log_softmax(logits), y)


def _conv_params(rng, dtype=np.float64):
    def t(*s):
        return tg.Tensor((0.5 * rng.standard_normal(s)).astype(dtype))

    return {"c1": {"w": t(4, 1, 3, 3), "b": t(4)}, "c2": {"w": t(4, 2, 2, 2), "b": t(4)},
            "fc": {"w": t(16, 3), "b": t(3)}}


@given(b=batch_sizes, seed=seeds)
def test_per_example_gradients_of_a_conv_net(b, seed):
    rng = np.random.default_rng(seed)
    params = _conv_params(rng)
    x = tg.Tensor(rng.standard_normal((b, 1, 8, 8)))
    y = tg.Tensor(rng.integers(0, 3, b))
    check_vmap(tg.grad(_conv_net), (params, x, y), in_axes=(None, 0, 0))


def test_per_example_gradients_in_float32_keep_the_dtype():
    rng = np.random.default_rng(0)
    params = _conv_params(rng, np.float32)
    x = tg.Tensor(rng.standard_normal((3, 1, 8, 8)).astype(np.float32))
    y = tg.Tensor(rng.integers(0, 3, 3))
    check_vmap(tg.grad(_conv_net), (params, x, y), in_axes=(None, 0, 0), atol=1e-5, rtol=1e-4)


@given(b=st.integers(0, 3), seed=seeds, shared_data=st.booleans())
def test_ensemble_of_conv_nets(b, seed, shared_data):
    """Per-example (per-member) weights, the data shared or per member: values and gradients."""
    rng = np.random.default_rng(seed)
    members = [_conv_params(rng) for _ in range(b)] or [_conv_params(rng)]
    leaves = [[m[layer][p] for m in members] for layer in ("c1", "c2", "fc") for p in "wb"]
    stacked = [tg.Tensor(np.stack([t.numpy() for t in ts])[:b]) for ts in leaves]
    x = tg.Tensor(rng.standard_normal(((b,) if not shared_data else ()) + (1, 8, 8)))
    y = tg.Tensor(np.asarray(1))

    def loss(w1, b1, w2, b2, w3, b3, x):
        p = {"c1": {"w": w1, "b": b1}, "c2": {"w": w2, "b": b2}, "fc": {"w": w3, "b": b3}}
        return _conv_net(p, x, y)

    axes = (0,) * 6 + (None if shared_data else 0,)
    check_vmap(loss, (*stacked, x), in_axes=axes)
    check_vmap(tg.grad(loss, argnums=tuple(range(6))), (*stacked, x), in_axes=axes)


@pytest.mark.parametrize("combo", list(itertools.product([0, None], repeat=3))[:-1])
def test_per_example_gradients_of_an_mlp_with_integer_labels(combo):
    """The benchmark's model (smaller): every mix of batched params, inputs and labels."""
    rng = np.random.default_rng(1)
    b = 3
    p_ax, x_ax, y_ax = combo
    sizes = (5, 4, 3)

    def t(shape):
        return tg.Tensor(rng.standard_normal(((b,) if p_ax == 0 else ()) + shape))

    ws = [t((i, o)) for i, o in zip(sizes[:-1], sizes[1:])]
    bs = [t((o,)) for o in sizes[1:]]
    x = tg.Tensor(rng.standard_normal(((b,) if x_ax == 0 else ()) + (5,)))
    y = tg.Tensor(rng.integers(0, 3, (b,) if y_ax == 0 else ()))

    def loss(w1, b1, w2, b2, x, y):
        h = tnp.tanh(F.linear(x, w1, b1))
        return F.cross_entropy(F.linear(h, w2, b2), y)

    axes = (p_ax,) * 4 + (x_ax, y_ax)
    check_vmap(tg.grad(loss, argnums=(0, 1, 2, 3)), (ws[0], bs[0], ws[1], bs[1], x, y),
               in_axes=axes)
