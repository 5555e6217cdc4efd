"""PyTorch's further layers and functions against torch in float64 (values and gradients):
``InstanceNorm1d/2d`` and ``instance_norm`` (running statistics too), ``Bilinear``,
``Unflatten``, ``EmbeddingBag``/``embedding_bag``, ``CosineSimilarity``, ``PairwiseDistance``,
``one_hot``, ``normalize``; and, where the numbers are random, statistically: channel dropout,
alpha dropout and ``gumbel_softmax`` (with its straight-through gradient)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.nn.functional as F
import tapegrad.numpy as tnp
from tapegrad import nn
from tapegrad.nn.module import _named_leaves

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(0)
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)


def _T(a):
    return tg.Tensor(np.asarray(a))


def _torch_value_and_grads(fn, arrays, cotangent_seed=1):
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*ts)
    w = np.random.default_rng(cotangent_seed).standard_normal(tuple(out.shape))
    if out.numel():
        (out * torch.tensor(w)).sum().backward()
    grads = [np.zeros(t.shape) if t.grad is None else t.grad.numpy() for t in ts]
    return out.detach().numpy(), w, grads


def _assert_matches_torch(ours_fn, torch_fn, arrays, rtol=1e-10, atol=1e-12):
    """``ours_fn`` and ``torch_fn`` agree in value and in the gradient of every floating
    argument (the cotangent a random array)."""
    value, w, tgrads = _torch_value_and_grads(torch_fn, arrays)
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]

    def loss(*fargs):
        args = [_T(a) for a in arrays]
        for i, v in zip(floats, fargs):
            args[i] = v
        return (ours_fn(*args) * _T(w)).sum()

    out = ours_fn(*[_T(a) for a in arrays])
    assert out.shape == value.shape
    np.testing.assert_allclose(out.numpy(), value, rtol=rtol, atol=atol)
    if floats:
        grads = tg.grad(loss, argnums=tuple(range(len(floats))))(*[_T(arrays[i]) for i in floats])
        for i, g in zip(floats, grads):
            np.testing.assert_allclose(g.numpy(), tgrads[i], rtol=rtol, atol=atol)


# -- instance normalization --------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 3), c=st.integers(1, 3), spatial=st.lists(st.integers(2, 4), min_size=1,
                                                                    max_size=2),
       affine=st.booleans())
def test_instance_norm_matches_torch(n, c, spatial, affine):
    x = RNG.standard_normal((n, c, *spatial)) * 3 + 1
    w, b = RNG.standard_normal(c), RNG.standard_normal(c)
    if affine:
        _assert_matches_torch(lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-3),
                              lambda x, w, b: TF.instance_norm(x, weight=w, bias=b, eps=1e-3),
                              [x, w, b])
    else:
        _assert_matches_torch(lambda x: F.instance_norm(x), lambda x: TF.instance_norm(x), [x])


def test_instance_norm_running_statistics_match_torch():
    x = RNG.standard_normal((4, 3, 5)) * 2 + 0.5
    rm, rv = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    want = TF.instance_norm(torch.tensor(x), trm, trv, momentum=0.3)
    y, new_rm, new_rv = F.instance_norm(_T(x), _T(rm), _T(rv), momentum=0.3)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(new_rm.numpy(), trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(new_rv.numpy(), trv.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(rm, _T(rm).numpy())  # nothing updated in place
    eval_y, same_rm, _ = F.instance_norm(_T(x), new_rm, new_rv, use_input_stats=False)
    np.testing.assert_allclose(
        eval_y.numpy(), TF.instance_norm(torch.tensor(x), trm, trv, use_input_stats=False),
        rtol=1e-12)
    assert same_rm is not None and np.array_equal(same_rm.numpy(), new_rm.numpy())


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm1d", (3, 5)),
                                       ("InstanceNorm2d", (2, 3, 4, 4)),
                                       ("InstanceNorm2d", (3, 2, 4))])
@pytest.mark.parametrize("affine,track,momentum", [(False, False, 0.1), (True, True, 0.1),
                                                   (True, True, None), (False, True, 0.5)])
def test_instance_norm_layers_match_torch_in_both_modes(cls, shape, affine, track, momentum):
    ours = getattr(nn, cls)(3, eps=1e-4, momentum=momentum, affine=affine,
                            track_running_stats=track, dtype=np.float64)
    theirs = getattr(torch.nn, cls)(3, eps=1e-4, momentum=momentum, affine=affine,
                                    track_running_stats=track, dtype=torch.float64)
    assert ours.extra_repr() == theirs.extra_repr()
    if affine:
        ours.params = {"weight": _T(RNG.standard_normal(3)), "bias": _T(RNG.standard_normal(3))}
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
            theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    for step in range(3):
        x = RNG.standard_normal(shape) * (step + 1) + step
        np.testing.assert_allclose(ours(_T(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-10, atol=1e-12)
    if track:
        np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(),
                                   rtol=1e-12)
        np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(),
                                   rtol=1e-12)
    ours.eval()
    theirs.eval()
    x = RNG.standard_normal(shape)
    np.testing.assert_allclose(ours(_T(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)


def test_instance_norm_errors():
    with pytest.raises(ValueError, match="instance_norm: expected more than 1 spatial element"):
        F.instance_norm(_T(np.zeros((2, 3, 1))))
    with pytest.raises(ValueError, match="InstanceNorm1d: expected 3 channels"):
        nn.InstanceNorm1d(3)(_T(np.zeros((2, 4, 5))))
    with pytest.raises(ValueError, match="InstanceNorm2d: expected a 3-D \\(unbatched\\) or 4-D"):
        nn.InstanceNorm2d(3)(_T(np.zeros((3, 5))))
    with pytest.raises(ValueError, match="give both running_mean and running_var"):
        F.instance_norm(_T(np.zeros((2, 3, 4))), running_mean=_T(np.zeros(3)))
    with pytest.raises(ValueError, match="use_input_stats=False normalizes with the running"):
        F.instance_norm(_T(np.zeros((2, 3, 4))), use_input_stats=False)


# -- bilinear, unflatten -----------------------------------------------------------------------
@SETTINGS
@given(lead=st.lists(st.integers(0, 3), max_size=2), i1=st.integers(1, 3), i2=st.integers(1, 3),
       out=st.integers(1, 3))
def test_bilinear_matches_torch(lead, i1, i2, out):
    x1, x2 = RNG.standard_normal((*lead, i1)), RNG.standard_normal((*lead, i2))
    w, b = RNG.standard_normal((out, i1, i2)), RNG.standard_normal(out)
    _assert_matches_torch(F.bilinear, TF.bilinear, [x1, x2, w, b])


def test_bilinear_layer_is_torchs():
    ours = nn.Bilinear(3, 4, 2, key=tg.random.key(0), dtype=np.float64)
    theirs = torch.nn.Bilinear(3, 4, 2, dtype=torch.float64)
    assert ours.extra_repr() == theirs.extra_repr()
    assert ours.weight.shape == tuple(theirs.weight.shape)
    assert np.abs(ours.weight.numpy()).max() <= 1 / np.sqrt(3)  # PyTorch's bound
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    x1, x2 = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 4))
    np.testing.assert_allclose(ours(_T(x1), _T(x2)).numpy(),
                               theirs(torch.tensor(x1), torch.tensor(x2)).detach().numpy(),
                               rtol=1e-12)
    assert nn.Bilinear(3, 4, 2, bias=False).bias is None
    with pytest.raises(ValueError, match="bilinear: input1 \\(5, 3\\), input2 \\(4, 4\\)"):
        ours(_T(x1), _T(np.zeros((4, 4))))


@pytest.mark.parametrize("dim,sizes,shape", [(1, (2, 3), (4, 6, 5)), (-1, [5, 1], (2, 5)),
                                             (0, (-1, 2), (6,)), (2, (1,), (2, 3, 1)),
                                             (1, (0, 4), (2, 0))])
def test_unflatten_is_torchs(dim, sizes, shape):
    x = RNG.standard_normal(shape)
    ours, theirs = nn.Unflatten(dim, sizes), torch.nn.Unflatten(dim, sizes)
    assert ours.extra_repr() == theirs.extra_repr()
    np.testing.assert_array_equal(ours(_T(x)).numpy(), theirs(torch.tensor(x)).numpy())
    start = dim % len(shape)
    assert nn.Flatten(start, start + len(sizes) - 1)(ours(_T(x))).shape == shape
    with pytest.raises(ValueError, match="Unflatten: unflattened_size"):
        nn.Unflatten(0, (7, 7))(_T(np.zeros(6)))
    with pytest.raises(TypeError, match="Unflatten: unflattened_size must be a tuple or list"):
        nn.Unflatten(0, 6)


# -- embedding bags ----------------------------------------------------------------------------
BAG_CASES = [
    dict(input=[[1, 2, 4], [4, 3, 2]]),
    dict(input=[[1, 2, 4], [4, 3, 2]], padding_idx=2),
    dict(input=[[1, 2, 4]], padding_idx=-1),
    dict(input=[1, 2, 4, 5, 4, 3, 2, 9], offsets=[0, 4]),
    dict(input=[1, 2, 4, 5, 4, 3, 2, 9], offsets=[0, 0, 3, 8]),
    dict(input=[1, 2, 4, 5, 4, 3, 2, 9], offsets=[0, 3, 3, 8], include_last_offset=True),
    dict(input=[1, 2, 4, 5, 4, 3, 2, 9], offsets=[0, 3, 8], include_last_offset=True),
    dict(input=[2, 2, 1, 7, 2], offsets=[0, 2, 3], padding_idx=2),
    dict(input=[3], offsets=[0]),
    dict(input=np.zeros((0,), np.int64), offsets=[0, 0]),
]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", BAG_CASES, ids=range(len(BAG_CASES)))
def test_embedding_bag_matches_torch(mode, case):
    weight = RNG.standard_normal((10, 3))
    idx = np.asarray(case["input"], np.int64)
    kw = {k: v for k, v in case.items() if k not in ("input", "offsets")}
    arrays = [idx, weight]
    if "offsets" in case:
        arrays.append(np.asarray(case["offsets"], np.int64))
    _assert_matches_torch(lambda i, w, *o: F.embedding_bag(i, w, *o, mode=mode, **kw),
                          lambda i, w, *o: TF.embedding_bag(i, w, *o, mode=mode, **kw), arrays)


@pytest.mark.parametrize("case", [BAG_CASES[0], BAG_CASES[1], BAG_CASES[4], BAG_CASES[5]])
def test_embedding_bag_per_sample_weights_get_torchs_gradient(case):
    weight = RNG.standard_normal((10, 3))
    idx = np.asarray(case["input"], np.int64)
    psw = RNG.standard_normal(idx.shape)
    kw = {k: v for k, v in case.items() if k not in ("input", "offsets")}
    off = [np.asarray(case["offsets"], np.int64)] if "offsets" in case else []
    _assert_matches_torch(
        lambda i, w, p, *o: F.embedding_bag(i, w, *o, mode="sum", per_sample_weights=p, **kw),
        lambda i, w, p, *o: TF.embedding_bag(i, w, *o, mode="sum", per_sample_weights=p, **kw),
        [idx, weight, psw, *off])


def test_embedding_bag_layer_is_torchs():
    ours = nn.EmbeddingBag(10, 3, mode="max", padding_idx=-10, key=tg.random.key(0),
                           dtype=np.float64)
    theirs = torch.nn.EmbeddingBag(10, 3, mode="max", padding_idx=0, dtype=torch.float64)
    assert ours.extra_repr() == theirs.extra_repr() == "10, 3, mode='max', padding_idx=0"
    assert not ours.weight.numpy()[0].any()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
    idx, off = np.array([0, 3, 4, 0, 9]), np.array([0, 1, 3])
    np.testing.assert_allclose(ours(idx, off).numpy(),
                               theirs(torch.tensor(idx), torch.tensor(off)).detach().numpy(),
                               rtol=1e-12)
    fixed = nn.EmbeddingBag(4, 2, _weight=np.arange(8.0).reshape(4, 2), mode="sum")
    np.testing.assert_array_equal(fixed(np.array([[0, 3]])).numpy(), [[6.0, 8.0]])


def test_embedding_bag_errors():
    w = _T(RNG.standard_normal((5, 2)))
    with pytest.raises(ValueError, match="offsets\\[0\\] must be 0"):
        F.embedding_bag(np.array([1, 2]), w, np.array([1]))
    with pytest.raises(ValueError, match="with include_last_offset, the last offset must be "
                       "the input's length 3"):  # PyTorch's result is inconsistent then
        F.embedding_bag(np.array([1, 2, 3]), w, np.array([0, 1, 2]), include_last_offset=True)
    np.testing.assert_array_equal(F.embedding_bag(np.zeros((2, 0), np.int64), w).numpy(),
                                  np.zeros((2, 2)))  # empty bags (PyTorch raises)
    with pytest.raises(ValueError, match="offsets must be non-decreasing"):
        F.embedding_bag(np.array([1, 2, 3]), w, np.array([0, 2, 1]))
    with pytest.raises(ValueError, match="offsets must be None"):
        F.embedding_bag(np.array([[1, 2]]), w, np.array([0]))
    with pytest.raises(ValueError, match="a 1-D input needs offsets"):
        F.embedding_bag(np.array([1, 2]), w)
    with pytest.raises(ValueError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(np.array([[1, 2]]), w, per_sample_weights=np.ones((1, 2)))
    with pytest.raises(ValueError, match="mode must be one of"):
        F.embedding_bag(np.array([[1, 2]]), w, mode="min")
    with pytest.raises(NotImplementedError, match="max_norm"):
        F.embedding_bag(np.array([[1, 2]]), w, max_norm=1.0)
    with pytest.raises(NotImplementedError, match="EmbeddingBag: sparse=True"):
        nn.EmbeddingBag(5, 2, sparse=True)
    with pytest.raises(TypeError, match="embedding_bag: input must hold integers"):
        F.embedding_bag(np.array([[1.0]]), w)


# -- similarities and distances ----------------------------------------------------------------
@SETTINGS
@given(shapes=st.sampled_from([((4, 3), (4, 3)), ((2, 3, 4), (1, 3, 4)), ((3, 1), (3, 5)),
                               ((1, 6), (4, 6)), ((2, 1, 3), (5, 1))]),
       dim=st.integers(-1, 1))
def test_cosine_similarity_matches_torch(shapes, dim):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    _assert_matches_torch(lambda a, b: F.cosine_similarity(a, b, dim),
                          lambda a, b: TF.cosine_similarity(a, b, dim), [a, b])


def test_cosine_similarity_clamps_tiny_norms_as_torch():
    a = np.array([[1e-9, -2e-9, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    b = np.array([[1.0, 1.0, 1.0], [2.0, 0.0, 1.0], [1e-10, 0.0, 0.0]])
    _assert_matches_torch(lambda a, b: F.cosine_similarity(a, b, 1, eps=1e-8),
                          lambda a, b: TF.cosine_similarity(a, b, 1, eps=1e-8), [a, b])
    layer = nn.CosineSimilarity(dim=0)
    np.testing.assert_allclose(layer(_T(a), _T(b)).numpy(),
                               TF.cosine_similarity(torch.tensor(a), torch.tensor(b), 0).numpy(),
                               rtol=1e-12)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf"), 0.5])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shapes", [((4, 3), (4, 3)), ((2, 3, 4), (3, 4)), ((5,), (5,)),
                                    ((1, 3), (4, 3)), ((0, 3), (0, 3))])
def test_pairwise_distance_matches_torch(p, keepdim, shapes):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    _assert_matches_torch(lambda a, b: F.pairwise_distance(a, b, p, 1e-6, keepdim),
                          lambda a, b: TF.pairwise_distance(a, b, p, 1e-6, keepdim), [a, b])
    layer = nn.PairwiseDistance(p, 1e-6, keepdim)
    np.testing.assert_allclose(
        layer(_T(a), _T(b)).numpy(),
        torch.nn.PairwiseDistance(p, 1e-6, keepdim)(torch.tensor(a), torch.tensor(b)).numpy(),
        rtol=1e-12)


@pytest.mark.parametrize("p", [2.0, 1.0, 4.0, float("inf")])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_normalize_matches_torch(p, dim):
    x = RNG.standard_normal((3, 4))
    x[1] = 0.0  # a zero row: the divisor is eps
    _assert_matches_torch(lambda x: F.normalize(x, p, dim), lambda x: TF.normalize(x, p, dim),
                          [x])
    _assert_matches_torch(lambda x: F.normalize(x, p, dim), lambda x: TF.normalize(x, p, dim),
                          [RNG.standard_normal((1, 5))])


def test_one_hot_is_torchs():
    idx = np.array([[0, 3], [2, 2]])
    for n in (-1, 4, 6):
        np.testing.assert_array_equal(F.one_hot(_T(idx), n).numpy(),
                                      TF.one_hot(torch.tensor(idx), n).numpy())
    assert F.one_hot(_T(idx)).dtype == np.int64
    assert F.one_hot(_T(np.zeros((0,), np.int64)), 3).shape == (0, 3)
    assert F.one_hot(_T(np.int64(2)), 3).numpy().tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="one_hot: class value 3 is out of range"):
        F.one_hot(_T(idx), 3)
    with pytest.raises(ValueError, match="one_hot: class values must be non-negative"):
        F.one_hot(_T(np.array([-1, 0])), 3)
    with pytest.raises(ValueError, match="cannot infer the number of classes from an empty"):
        F.one_hot(_T(np.zeros((0,), np.int64)))
    with pytest.raises(TypeError, match="one_hot: tensor must hold integer class indices"):
        F.one_hot(_T([0.0, 1.0]), 2)


# -- randomness: channel dropout, alpha dropout, gumbel-softmax --------------------------------
@pytest.mark.parametrize("fn,shape,lead", [(F.dropout1d, (64, 32, 5), 2), (F.dropout1d, (64, 5), 1),
                                           (F.dropout2d, (32, 32, 3, 3), 2),
                                           (F.dropout2d, (256, 2, 3), 1),
                                           (F.dropout3d, (16, 32, 2, 2, 2), 2),
                                           (F.dropout3d, (128, 2, 2, 2), 1)])
def test_channel_dropout_drops_whole_channels_with_probability_p(fn, shape, lead):
    x = tnp.ones(shape, dtype=np.float64)
    y = fn(x, 0.3, key=tg.random.key(0)).numpy()
    per_channel = y.reshape(shape[:lead] + (-1,))
    assert set(np.unique(y)) <= {0.0, 1 / 0.7}
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # all of a channel, or none
    dropped = (per_channel[..., 0] == 0).mean()
    n = per_channel[..., 0].size
    assert abs(dropped - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)
    np.testing.assert_array_equal(fn(x, 0.3, key=tg.random.key(0)).numpy(), y)  # same key
    assert fn(x, 0.3, training=False) is x
    g = tg.grad(lambda v: (fn(v, 0.3, key=tg.random.key(0)) * 2.0).sum())(x)
    np.testing.assert_allclose(g.numpy(), 2.0 * y)


def test_channel_dropout_checks_its_input():
    with pytest.raises(ValueError, match="dropout2d: expected a 3-D \\(unbatched, channels "
                       "first\\) or 4-D"):
        F.dropout2d(tnp.ones((2, 3)), key=tg.random.key(0))
    with pytest.raises(ValueError, match="dropout1d: training with p > 0 draws random numbers"):
        F.dropout1d(tnp.ones((2, 3)))
    with pytest.raises(ValueError, match="dropout3d: dropout probability p must lie in"):
        F.dropout3d(tnp.ones((2, 3, 2, 2)), 1.5, key=tg.random.key(0))


@pytest.mark.parametrize("cls,shape", [("Dropout1d", (8, 4, 3)), ("Dropout2d", (8, 4, 3, 3)),
                                       ("Dropout3d", (8, 4, 2, 2, 2))])
def test_channel_dropout_layers(cls, shape):
    layer = getattr(nn, cls)(0.25, key=tg.random.key(1))
    assert layer.extra_repr() == getattr(torch.nn, cls)(0.25).extra_repr()
    x = tnp.ones(shape, dtype=np.float64)
    a, b = layer(x).numpy(), layer(x).numpy()
    assert not np.array_equal(a, b)  # a new key each call
    k = tg.random.key(3)
    np.testing.assert_array_equal(nn.functional_call(layer, {}, x, key=k)[0].numpy(),
                                  nn.functional_call(layer, {}, x, key=k)[0].numpy())
    assert layer.eval()(x) is x


def test_alpha_dropout_keeps_zero_mean_and_unit_variance():
    x = tg.random.normal(tg.random.key(0), (400_000,), np.float64)
    y = F.alpha_dropout(x, 0.2, training=True, key=tg.random.key(1)).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.var() - 1.0) < 0.01
    a = 1 / np.sqrt((1.7580993408473766**2 * 0.2 + 1) * 0.8)  # PyTorch's constants
    dropped = y == -1.7580993408473766 * a * 0.8
    assert abs(dropped.mean() - 0.2) < 4 * np.sqrt(0.2 * 0.8 / y.size)
    kept = ~dropped
    np.testing.assert_allclose(y[kept], a * x.numpy()[kept] + 1.7580993408473766 * a * 0.2)
    assert F.alpha_dropout(x, 0.2) is x  # training defaults to False, as PyTorch
    np.testing.assert_array_equal(F.alpha_dropout(x, 1.0, training=True, key=tg.random.key(1))
                                  .numpy(), 0.0)
    layer = nn.AlphaDropout(0.2, key=tg.random.key(2))
    assert layer.extra_repr() == "p=0.2, inplace=False"
    assert layer(x).shape == x.shape and layer.eval()(x) is x


def test_gumbel_softmax_samples_the_categorical_distribution():
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    batch = np.broadcast_to(logits, (20_000, 4))
    y = F.gumbel_softmax(_T(batch), tau=0.5, hard=True, key=tg.random.key(0)).numpy()
    assert set(np.unique(y)) == {0.0, 1.0} and np.all(y.sum(-1) == 1.0)
    freq = y.mean(0)
    se = np.sqrt(np.array([0.1, 0.2, 0.3, 0.4]) * (1 - np.array([0.1, 0.2, 0.3, 0.4])) / 20_000)
    assert np.all(np.abs(freq - [0.1, 0.2, 0.3, 0.4]) < 4 * se), freq
    soft = F.gumbel_softmax(_T(batch), tau=0.5, key=tg.random.key(0)).numpy()
    np.testing.assert_allclose(soft.sum(-1), 1.0)
    np.testing.assert_array_equal(soft.argmax(-1), y.argmax(-1))  # the same noise
    other = F.gumbel_softmax(_T(batch), tau=0.5, hard=True, key=tg.random.key(1)).numpy()
    assert not np.array_equal(other, y)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_gumbel_softmax_straight_through_gradient_is_the_soft_one(dim):
    from tapegrad.nn._extra_functional import _gumbel_noise

    logits = RNG.standard_normal((3, 4, 5))
    key, tau = tg.random.key(7), 0.7
    w = RNG.standard_normal(logits.shape)
    def hard(z):
        return (F.gumbel_softmax(z, tau, hard=True, dim=dim, key=key) * _T(w)).sum()

    y = F.gumbel_softmax(_T(logits), tau, hard=True, dim=dim, key=key).numpy()
    g = _gumbel_noise(key, _T(logits)).numpy()
    t = torch.tensor(logits, requires_grad=True)
    y_soft = TF.softmax((t + torch.tensor(g)) / tau, dim)
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = torch.zeros_like(y_soft).scatter_(dim, index, 1.0)
    (((y_hard - y_soft.detach() + y_soft)) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(y, (y_hard - y_soft.detach() + y_soft).detach().numpy(),
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tg.grad(hard)(_T(logits)).numpy(), t.grad.numpy(), rtol=1e-10,
                               atol=1e-14)


def test_gumbel_softmax_needs_a_key_and_a_positive_tau():
    with pytest.raises(ValueError, match="gumbel_softmax: the Gumbel noise is drawn from an "
                       "explicit key"):
        F.gumbel_softmax(_T([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="gumbel_softmax: tau must be a positive"):
        F.gumbel_softmax(_T([[1.0, 2.0]]), tau=0.0, key=tg.random.key(0))


def test_layers_print_as_torch():
    pairs = [(nn.CosineSimilarity(), torch.nn.CosineSimilarity()),
             (nn.PairwiseDistance(3.0, 1e-3, True), torch.nn.PairwiseDistance(3.0, 1e-3, True)),
             (nn.InstanceNorm1d(3), torch.nn.InstanceNorm1d(3)),
             (nn.InstanceNorm2d(4, affine=True, bias=False),
              torch.nn.InstanceNorm2d(4, affine=True, bias=False)),
             (nn.EmbeddingBag(10, 3, norm_type=3.0), torch.nn.EmbeddingBag(10, 3, norm_type=3.0)),
             (nn.Unflatten(-1, [2, 3]), torch.nn.Unflatten(-1, [2, 3]))]
    for ours, theirs in pairs:
        assert ours.extra_repr() == theirs.extra_repr()


def test_parameter_names_match_torchs():
    for ours, theirs in [(nn.Bilinear(2, 3, 4), torch.nn.Bilinear(2, 3, 4)),
                         (nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
                          torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True)),
                         (nn.EmbeddingBag(5, 2), torch.nn.EmbeddingBag(5, 2)),
                         (nn.PReLU(3), torch.nn.PReLU(3))]:
        want = {k: tuple(v.shape) for k, v in theirs.state_dict().items()
                if k != "num_batches_tracked"}
        got = {k: tuple(v.shape) for k, v in list(_named_leaves(ours.params))
               + list(_named_leaves(ours.state))}
        assert got == want


def test_the_new_functions_run_under_vmap_and_jit():
    k = tg.random.key(0)
    x = tg.random.normal(k, (4, 3, 6), np.float64)
    w = tg.random.normal(k, (10, 6), np.float64)
    idx = _T(np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 1, 2]]))
    layer = nn.TransformerEncoderLayer(6, 2, 8, dropout=0.0, dtype=np.float64, key=k)
    cases = [
        (F.elu, x), (F.hardswish, x), (F.glu, x), (F.mish, x),
        (lambda a: F.normalize(a, dim=1), x),
        (lambda a: F.cosine_similarity(a, a * 2 + 1, dim=1), x),
        (lambda a: F.pairwise_distance(a, a * 2 + 1), x),
        (lambda a: F.instance_norm(a[None])[0], x),
        (lambda a: layer(a, src_key_padding_mask=np.array([False, False, True])), x),
        (lambda i: F.embedding_bag(i[None], w, mode="max"), idx),
        (lambda i: F.embedding_bag(i, w, np.array([0, 1]), mode="mean"), idx),
        (lambda i: F.one_hot(i, 10), idx),
    ]
    for f, batch in cases:
        loop = np.stack([f(batch[i]).numpy() for i in range(batch.shape[0])])
        np.testing.assert_allclose(tg.vmap(f)(batch).numpy(), loop, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(tg.jit(f)(batch[0]).numpy(), loop[0], rtol=1e-12,
                                   atol=1e-14)
