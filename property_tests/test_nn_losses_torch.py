"""PyTorch's other losses against ``torch.nn.functional`` in float64, over drawn shapes (size-0
and size-1 dimensions included), values, reductions and options: values (to 1e-10), and
gradients (to 1e-8) with respect to every argument PyTorch differentiates (arguments PyTorch
does not differentiate are checked against finite differences instead); then derivatives of
order 1 and 2 against finite differences, away from the kinks. Skipped where torch is not
installed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import arrays, floats_in, shapes

torch = pytest.importorskip("torch")
TF = torch.nn.functional

REDUCTIONS = st.sampled_from(["none", "mean", "sum"])


class Spec(NamedTuple):
    """One loss: ``draw(data)`` gives ``(arrays, params)`` (floating arrays become Tensors,
    integer arrays stay NumPy); ``ours``/``theirs`` take them positionally plus the params;
    ``diff`` the positions PyTorch differentiates; ``extra`` positions only tapegrad
    differentiates (checked by finite differences); ``kink(arrays, params)`` the distance to
    the nearest kink (order-2 checks keep away from it); ``float_ok`` whether a float
    argument may be non-finite in PyTorch's gradient (compared where PyTorch is finite)."""

    name: str
    draw: Callable
    ours: Callable
    theirs: Callable
    diff: tuple
    extra: tuple = ()
    kink: Callable | None = None


def _vals(data, shape, lo=-2.0, hi=2.0):
    return data.draw(arrays(shape, elements=floats_in(lo, hi)))


def _signs(data, shape):
    return data.draw(arrays(shape, elements=st.sampled_from([-1.0, 1.0])))


# -- the draws ---------------------------------------------------------------------------------
def _poisson(data):
    shape = data.draw(shapes())
    log_input, full = data.draw(st.booleans()), data.draw(st.booleans())
    x = _vals(data, shape) if log_input else _vals(data, shape, 0.05, 3.0)
    y = _vals(data, shape, 0.0, 4.0)
    return [x, y], dict(log_input=log_input, full=full, reduction=data.draw(REDUCTIONS),
                        eps=data.draw(st.sampled_from([1e-8, 0.5])))


def _gaussian(data):
    shape = data.draw(shapes())
    form = data.draw(st.sampled_from(["same", "per-example", "axis", "number"]))
    if form == "per-example" and shape:
        var = _vals(data, shape[:-1], 0.1, 2.0)
    elif form == "axis" and shape:
        axis = data.draw(st.integers(0, len(shape) - 1))
        var = _vals(data, shape[:axis] + (1,) + shape[axis + 1:], 0.1, 2.0)
    elif form == "number":
        var = data.draw(st.floats(0.1, 2.0))
    else:
        var = _vals(data, shape, 0.1, 2.0)
    if isinstance(var, np.ndarray) and var.size and data.draw(st.booleans()):
        var.flat[0] = 1e-9  # below eps: clamped, gradient unclamped (PyTorch's no_grad clamp)
    return [_vals(data, shape), _vals(data, shape), var], dict(
        full=data.draw(st.booleans()), eps=data.draw(st.sampled_from([1e-6, 0.3])),
        reduction=data.draw(REDUCTIONS))


def _ranking(data):
    shape = data.draw(shapes())
    return [_vals(data, shape), _vals(data, shape), _signs(data, shape)], dict(
        margin=data.draw(st.sampled_from([0.0, 0.5, -0.3])), reduction=data.draw(REDUCTIONS))


def _hinge_embedding(data):
    shape = data.draw(shapes())
    target = data.draw(arrays(shape, elements=st.sampled_from([-1.0, 1.0, 2.0])))
    return [_vals(data, shape), target], dict(
        margin=data.draw(st.sampled_from([1.0, 0.5, -0.2])), reduction=data.draw(REDUCTIONS))


def _soft_margin(data):
    shape = data.draw(shapes())
    return [_vals(data, shape, -5, 5), _signs(data, shape)], dict(reduction=data.draw(REDUCTIONS))


def _multilabel_soft(data):
    shape = data.draw(shapes(min_dims=1))
    weighted = data.draw(st.booleans())
    args = [_vals(data, shape), _vals(data, shape, 0.0, 1.0)]
    args.append(_vals(data, shape[-1:], 0.1, 2.0) if weighted else None)
    return args, dict(reduction=data.draw(REDUCTIONS))


def _cosine(data):
    shape = data.draw(st.sampled_from([1, 2]).flatmap(lambda k: shapes(k, k, 0, 4)))
    target = data.draw(arrays(shape[:-1], elements=st.sampled_from([-1.0, 1.0])))
    return [_vals(data, shape), _vals(data, shape), target], dict(
        margin=data.draw(st.sampled_from([0.0, 0.5, -0.5])), reduction=data.draw(REDUCTIONS))


def _triplet(data):
    shape = data.draw(st.sampled_from([1, 2, 3]).flatmap(lambda k: shapes(k, k, 0, 4)))
    return [_vals(data, shape) for _ in range(3)], dict(
        margin=data.draw(st.sampled_from([1.0, 0.3])),
        p=data.draw(st.sampled_from([1.0, 2.0, 3.0, math.inf])),
        eps=data.draw(st.sampled_from([1e-6, 0.0, 0.1])), swap=data.draw(st.booleans()),
        reduction=data.draw(REDUCTIONS))


def _class_shape(data):
    c = data.draw(st.integers(1, 5))
    return data.draw(st.sampled_from([(c,), (data.draw(st.integers(0, 4)), c)]))


def _multi_margin(data):
    shape = _class_shape(data)
    n, c = (shape[0] if len(shape) == 2 else 1), shape[-1]
    target = data.draw(arrays((n,) if len(shape) == 2 else data.draw(st.sampled_from([(), (1,)])),
                              dtype=np.int64, elements=st.integers(0, c - 1)))
    weight = _vals(data, (c,), 0.1, 2.0) if data.draw(st.booleans()) else None
    return [_vals(data, shape), target, weight], dict(
        p=data.draw(st.sampled_from([1, 2])), margin=data.draw(st.sampled_from([1.0, 0.3])),
        reduction=data.draw(REDUCTIONS))


def _multilabel_margin(data):
    shape = _class_shape(data)
    c = shape[-1]
    target = data.draw(arrays(shape, dtype=np.int64, elements=st.integers(-1, c - 1)))
    return [_vals(data, shape), target], dict(reduction=data.draw(REDUCTIONS))


# -- the kinks (order-2 checks keep at least 0.05 away) ----------------------------------------
def _ranking_kink(a, p):
    return np.abs(p["margin"] - a[2] * (a[0] - a[1])).min(initial=1.0)


def _hinge_kink(a, p):
    return np.abs(p["margin"] - a[0]).min(initial=1.0)


def _poisson_kink(a, p):
    return np.abs(a[1] - 1.0).min(initial=1.0) if p["full"] else 1.0


def _gaussian_kink(a, p):
    # below eps the value is constant in var but the gradient is the formula's at eps
    # (PyTorch's clamp is not differentiated): not a derivative, so keep above eps
    return (np.asarray(a[2]) - p["eps"]).min(initial=1.0)


def _cos(a):
    x1, x2 = a[0], a[1]
    return (x1 * x2).sum(-1) / np.sqrt(((x1 * x1).sum(-1) + 1e-12) * ((x2 * x2).sum(-1) + 1e-12))


def _cosine_kink(a, p):
    d = np.abs(_cos(a) - p["margin"])[a[2] == -1]
    norms = np.minimum(np.linalg.norm(a[0], axis=-1), np.linalg.norm(a[1], axis=-1))
    return min(d.min(initial=1.0), norms.min(initial=1.0))


def _dist(x, y, p, eps):
    d = np.abs(x - y + eps)
    return d.max(-1, initial=0.0) if math.isinf(p) else (d**p).sum(-1) ** (1 / p)


def _triplet_kink(a, p):
    dp, dn = _dist(a[0], a[1], p["p"], p["eps"]), _dist(a[0], a[2], p["p"], p["eps"])
    gaps = [np.abs(np.abs(np.stack([a[0] - a[1], a[0] - a[2], a[1] - a[2]]) + p["eps"]))]
    if p["swap"]:
        ds = _dist(a[1], a[2], p["p"], p["eps"])
        gaps.append(np.abs(dn - ds))
        dn = np.minimum(dn, ds)
    gaps.append(np.abs(p["margin"] + dp - dn))
    if math.isinf(p["p"]):  # the maximum switches where two differences tie
        d = np.sort(np.abs(np.stack([a[0] - a[1], a[0] - a[2], a[1] - a[2]]) + p["eps"]), -1)
        gaps.append(d[..., -1] - d[..., -2] if d.shape[-1] > 1 else np.ones(1))
    return min(g.min(initial=1.0) for g in gaps)


def _multi_margin_kink(a, p):
    x, t = np.atleast_2d(a[0]), np.asarray(a[1]).reshape(-1)
    if not x.size:
        return 1.0
    z = p["margin"] - np.take_along_axis(x, t[:, None], -1) + x
    return np.abs(z).min()


def _multilabel_margin_kink(a, p):
    x = np.atleast_2d(a[0])
    z = 1 - x[:, :, None] + x[:, None, :]
    return np.abs(z).min(initial=1.0)


def _torch_args(vals):
    return [v if isinstance(v, float) or v is None else torch.tensor(v) for v in vals]


SPECS = [
    Spec("poisson_nll_loss", _poisson, lambda x, y, **k: F.poisson_nll_loss(x, y, **k),
         lambda x, y, **k: TF.poisson_nll_loss(x, y, **k), (0, 1), kink=_poisson_kink),
    Spec("gaussian_nll_loss", _gaussian, lambda x, y, v, **k: F.gaussian_nll_loss(x, y, v, **k),
         lambda x, y, v, **k: TF.gaussian_nll_loss(x, y, v, **k), (0, 1, 2),
         kink=_gaussian_kink),
    Spec("margin_ranking_loss", _ranking, F.margin_ranking_loss, TF.margin_ranking_loss,
         (0, 1, 2), kink=_ranking_kink),
    Spec("hinge_embedding_loss", _hinge_embedding, F.hinge_embedding_loss,
         TF.hinge_embedding_loss, (0,), kink=_hinge_kink),
    Spec("soft_margin_loss", _soft_margin, F.soft_margin_loss, TF.soft_margin_loss, (0,),
         extra=(1,)),
    Spec("multilabel_soft_margin_loss", _multilabel_soft, F.multilabel_soft_margin_loss,
         TF.multilabel_soft_margin_loss, (0, 1, 2)),
    Spec("cosine_embedding_loss", _cosine, F.cosine_embedding_loss, TF.cosine_embedding_loss,
         (0, 1), kink=_cosine_kink),
    Spec("triplet_margin_loss", _triplet, F.triplet_margin_loss, TF.triplet_margin_loss,
         (0, 1, 2), kink=_triplet_kink),
    Spec("multi_margin_loss", _multi_margin,
         lambda x, t, w, **k: F.multi_margin_loss(x, t, weight=w, **k),
         lambda x, t, w, **k: TF.multi_margin_loss(x, t, weight=w, **k), (0,), extra=(2,),
         kink=_multi_margin_kink),
    Spec("multilabel_margin_loss", _multilabel_margin, F.multilabel_margin_loss,
         TF.multilabel_margin_loss, (0,), kink=_multilabel_margin_kink),
]


def _ours_args(vals):
    return [tg.Tensor(v) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
            for v in vals]


def _floating(vals, positions):
    return [i for i in positions if isinstance(vals[i], np.ndarray) and vals[i].dtype.kind == "f"]


def _empty_batch_reduced(spec, vals, params) -> bool:
    """PyTorch's multi-class margin kernels leave the reduced loss of an empty batch
    uninitialized; tapegrad gives the mean of nothing (NaN) and the sum of nothing (0)."""
    return (spec.name in ("multi_margin_loss", "multilabel_margin_loss") and vals[0].ndim == 2
            and vals[0].shape[0] == 0 and params["reduction"] != "none")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@given(data=st.data())
def test_values_and_gradients_match_torch(spec, data):
    vals, params = spec.draw(data)
    out = spec.ours(*_ours_args(vals), **params)
    if _empty_batch_reduced(spec, vals, params):
        want = math.nan if params["reduction"] == "mean" else 0.0
        np.testing.assert_array_equal(out.numpy(), want)
        return
    diff = _floating(vals, spec.diff)
    t_args = _torch_args(vals)
    for i in diff:
        t_args[i] = t_args[i].requires_grad_()
    if spec.name == "triplet_margin_loss" and math.isinf(params["p"]) and not vals[0].shape[-1]:
        # PyTorch refuses the maximum norm of an empty vector; here it is 0, as every norm's
        same = spec.ours(*_ours_args(vals), **{**params, "p": 2.0, "eps": 0.0})
        np.testing.assert_array_equal(out.numpy(), same.numpy())
        return
    ref = spec.theirs(*t_args, **params)
    assert out.shape == tuple(ref.shape) and out.dtype == np.float64
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    if not diff or not ref.requires_grad:
        return
    w = np.random.default_rng(out.size).standard_normal(out.shape)
    want = torch.autograd.grad((ref * torch.tensor(w)).sum(), [t_args[i] for i in diff],
                               allow_unused=True)

    def weighted(*xs):
        a = list(_ours_args(vals))
        for i, x in zip(diff, xs):
            a[i] = x
        return tnp.sum(spec.ours(*a, **params) * w)

    got = tg.grad(weighted, argnums=tuple(range(len(diff))))(*[tg.Tensor(vals[i]) for i in diff])
    for i, g, r in zip(diff, got, want):
        r = np.zeros_like(vals[i]) if r is None else r.numpy()
        finite = np.isfinite(r)  # PyTorch's Stirling term: NaN at target 0 (tapegrad: 0)
        assert g.shape == np.shape(vals[i]), (i, g.shape)
        # 1e-8: near a zero vector (cosine) or a clamped variance the gradient is ~1e6 and
        # the two orders of operations differ in the ninth digit
        np.testing.assert_allclose(g.numpy()[finite], r[finite], rtol=1e-8, atol=1e-11,
                                   err_msg=f"gradient of argument {i}")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@given(data=st.data())
def test_derivatives_to_order_2_match_finite_differences(spec, data):
    vals, params = spec.draw(data)
    positions = _floating(vals, spec.diff + spec.extra)
    assume(positions and all(vals[i].size for i in positions) and vals[0].size)
    assume(spec.kink is None or spec.kink(vals, params) > 0.05)

    def f(*xs):
        a = list(_ours_args(vals))
        for i, x in zip(positions, xs):
            a[i] = x
        return spec.ours(*a, **params)

    check_grads(f, tuple(tg.Tensor(vals[i]) for i in positions), order=2, modes=("rev", "fwd"),
                atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@given(data=st.data())
def test_float32_keeps_its_dtype(spec, data):
    vals, params = spec.draw(data)
    vals32 = [v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
              for v in vals]
    out = spec.ours(*_ours_args(vals32), **params)
    assert out.dtype == np.float32
    ref = spec.ours(*_ours_args(vals), **params).numpy()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
