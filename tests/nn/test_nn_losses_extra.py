"""PyTorch's other losses: ``ctc_loss`` against ``torch.nn.functional.ctc_loss`` (float64,
values and gradients, every reduction, the edge cases), its gradient convention, its
derivatives of order 2 against an independent sum over every alignment, its vmap, jvp and jit;
the loss Modules against ``torch.nn``; and the errors of every loss (naming the function and
the argument). The elementwise losses are checked on drawn shapes in
property_tests/test_nn_losses_torch.py."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import nn
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads

RNG = np.random.default_rng(0)


def torch_or_skip():
    return pytest.importorskip("torch")


def _log_probs(t, n, c, seed=0):
    z = np.random.default_rng(seed).standard_normal((t, n, c))
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


# A batch with every kind of example: repeated labels that need a blank between them, a target
# of length 0, an impossible alignment (3 equal labels need 5 frames, 2 are given), an input of
# length 0 with an empty target, and an input shorter than T.
T, N, C = 6, 6, 4
TARGETS = np.array([[1, 1, 2], [1, 2, 3], [3, 3, 3], [2, 0, 0], [0, 0, 0], [1, 3, 0]])
INPUT_LENGTHS = np.array([6, 6, 2, 4, 0, 3])
TARGET_LENGTHS = np.array([2, 3, 3, 1, 0, 2])


def _torch_ctc(torch, lp, targets, il, tl, grad_weights=None, **kw):
    x = torch.tensor(lp, requires_grad=True)
    loss = torch.nn.functional.ctc_loss(x, torch.tensor(targets), torch.tensor(il),
                                        torch.tensor(tl), **kw)
    w = torch.ones(()) if grad_weights is None else torch.tensor(grad_weights)
    (g,) = torch.autograd.grad((loss * w).sum(), x)
    return loss.detach().numpy(), g.numpy()


def _concatenated(targets, lengths):
    return np.concatenate([row[:k] for row, k in zip(targets, lengths)]).astype(np.int64)


# -- ctc_loss: values and gradients against PyTorch -------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_loss_matches_torch(reduction, zero_infinity, layout):
    torch = torch_or_skip()
    lp = _log_probs(T, N, C)
    targets = TARGETS if layout == "padded" else _concatenated(TARGETS, TARGET_LENGTHS)
    kw = dict(reduction=reduction, zero_infinity=zero_infinity)
    want, _ = _torch_ctc(torch, lp, targets, INPUT_LENGTHS, TARGET_LENGTHS, **kw)
    got = F.ctc_loss(tg.Tensor(lp), targets, INPUT_LENGTHS, TARGET_LENGTHS, **kw)
    assert got.shape == want.shape and got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    if reduction == "none":  # the impossible example is inf (0 with zero_infinity)
        assert got.numpy()[2] == (0.0 if zero_infinity else math.inf)
        assert got.numpy()[4] == 0.0  # nothing to align with nothing


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_gradient_through_log_softmax_equals_torch(zero_infinity):
    """For anything before a log_softmax (the normal use) the gradients are PyTorch's."""
    torch = torch_or_skip()
    z = RNG.standard_normal((T, N, C))
    w = RNG.standard_normal(N)
    x = torch.tensor(z, requires_grad=True)
    loss = torch.nn.functional.ctc_loss(x.log_softmax(-1), torch.tensor(TARGETS),
                                        torch.tensor(INPUT_LENGTHS), torch.tensor(TARGET_LENGTHS),
                                        reduction="none", zero_infinity=zero_infinity)
    (want,) = torch.autograd.grad((loss * torch.tensor(w)).sum(), x)

    def f(z):
        loss = F.ctc_loss(F.log_softmax(z), TARGETS, INPUT_LENGTHS, TARGET_LENGTHS,
                          reduction="none", zero_infinity=zero_infinity)
        return tnp.sum(loss * w)

    got = tg.grad(f)(tg.Tensor(z)).numpy()
    nan = np.isnan(want.numpy())
    np.testing.assert_array_equal(np.isnan(got), nan)  # the impossible example's frames
    np.testing.assert_allclose(got[~nan], want.numpy()[~nan], rtol=1e-10, atol=1e-12)
    assert zero_infinity or nan[:2, 2].all()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_gradient_convention_against_torch(reduction):
    """With respect to log_probs themselves, PyTorch's rule adds exp(log_probs) on each
    example's frames (it assumes a log_softmax before the loss); the difference is exactly
    that, and NaN/0 patterns agree."""
    torch = torch_or_skip()
    lp = _log_probs(T, N, C, seed=3)
    w = RNG.standard_normal(N) if reduction == "none" else None
    want_loss, want = _torch_ctc(torch, lp, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, w,
                                 reduction=reduction)

    def f(x):
        loss = F.ctc_loss(x, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, reduction=reduction)
        return tnp.sum(loss * w) if w is not None else loss

    got = tg.grad(f)(tg.Tensor(lp)).numpy()
    # the cotangent each example's loss gets: its weight, over its target length ("mean")
    scale = np.ones(N) if w is None else w
    if reduction == "mean":
        scale = scale / np.maximum(TARGET_LENGTHS, 1) / N
    frames = np.arange(T)[:, None] < INPUT_LENGTHS[None, :]
    torch_extra = np.where(frames[..., None], np.exp(lp) * scale[None, :, None], 0.0)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_allclose(got[~nan], (want - torch_extra)[~nan], rtol=1e-10, atol=1e-12)
    if np.isfinite(want_loss).all():
        # and the gradient of the normalized log-probabilities sums to 0 per frame in PyTorch
        np.testing.assert_allclose(want.sum(-1), 0.0, atol=1e-12)


def test_ctc_edge_cases_match_torch():
    torch = torch_or_skip()
    lp = _log_probs(5, 1, 3, seed=5)
    cases = [  # (targets, input length, target length)
        ([1, 1], 3, 2),   # repeated labels: 3 frames is exactly enough (1, blank, 1)
        ([1, 1], 2, 2),   # ... and 2 is not: inf
        ([1, 2], 2, 2),   # different labels need no blank
        ([], 5, 0),       # an empty target: every frame is blank
        ([], 0, 0),       # nothing to align
        ([2], 0, 1),      # no frames for a label: inf
        ([2, 2, 2], 5, 3),
    ]
    for targets, il, tl in cases:
        t = np.array(targets, np.int64).reshape(1, -1) if targets else np.zeros((1, 0), np.int64)
        feasible = np.isfinite(_torch_ctc(torch, lp, t, [il], [tl], reduction="sum")[0])
        for zero_infinity in (False, True):
            want, want_g = _torch_ctc(torch, lp, t, [il], [tl], reduction="sum",
                                      zero_infinity=zero_infinity)
            got = F.ctc_loss(tg.Tensor(lp), t, [il], [tl], reduction="sum",
                             zero_infinity=zero_infinity)
            assert float(got) == pytest.approx(float(want), rel=1e-12, abs=1e-12), (targets, il)
            g = tg.grad(lambda x, t=t, il=il, tl=tl, zi=zero_infinity: F.ctc_loss(
                x, t, [il], [tl], reduction="sum", zero_infinity=zi))(tg.Tensor(lp)).numpy()
            frames = (np.arange(5) < il)[:, None, None]
            extra = np.where(frames & feasible, np.exp(lp), 0.0)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(want_g))
            ok = ~np.isnan(want_g)
            np.testing.assert_allclose(g[ok], (want_g - extra)[ok], atol=1e-12)


def test_ctc_unbatched_size_one_batch_blank_and_float32_match_torch():
    torch = torch_or_skip()
    lp = _log_probs(7, 1, 5, seed=7)
    target = np.array([4, 2, 2, 1])
    for reduction in ("none", "mean", "sum"):
        want, _ = _torch_ctc(torch, lp[:, 0], target, 7, 4, reduction=reduction)
        for il, tl in ((7, 4), ([7], [4]), (np.array(7), np.array([4]))):
            got = F.ctc_loss(tg.Tensor(lp[:, 0]), target, il, tl, reduction=reduction)
            assert got.shape == () and float(got) == pytest.approx(float(want), rel=1e-12)
        batched = F.ctc_loss(tg.Tensor(lp), target[None], [7], [4], reduction=reduction)
        assert batched.shape == ((1,) if reduction == "none" else ())
        np.testing.assert_allclose(np.ravel(batched.numpy()), np.ravel(want), rtol=1e-12)
    # another blank: class 0 becomes a label
    t3 = np.array([[0, 2, 2, 1]])
    want, want_g = _torch_ctc(torch, lp, t3, [7], [4], blank=4, reduction="sum")
    got = F.ctc_loss(tg.Tensor(lp), t3, [7], [4], blank=4, reduction="sum")
    assert float(got) == pytest.approx(float(want), rel=1e-12)
    g = tg.grad(lambda x: F.ctc_loss(F.log_softmax(x), t3, [7], [4], blank=4,
                                     reduction="sum"))(tg.Tensor(lp)).numpy()
    x = torch.tensor(lp, requires_grad=True)
    ref = torch.nn.functional.ctc_loss(x.log_softmax(-1), torch.tensor(t3), [7], [4], blank=4,
                                       reduction="sum")
    np.testing.assert_allclose(g, torch.autograd.grad(ref, x)[0].numpy(), atol=1e-12)
    # float32 keeps its dtype and is close to float64
    got32 = F.ctc_loss(tg.Tensor(lp.astype(np.float32)), t3, [7], [4], blank=4, reduction="sum")
    assert got32.dtype == np.float32 and float(got32) == pytest.approx(float(want), rel=1e-5)
    g32 = tg.grad(lambda x: F.ctc_loss(x, t3, [7], [4], blank=4, reduction="sum"))(
        tg.Tensor(lp.astype(np.float32)))
    assert g32.dtype == np.float32


def test_ctc_empty_targets_in_both_layouts():
    torch = torch_or_skip()
    lp = _log_probs(4, 3, 3, seed=2)
    want, _ = _torch_ctc(torch, lp, np.zeros((3, 0), np.int64), [4, 2, 0], [0, 0, 0],
                         reduction="none")
    np.testing.assert_allclose(want, -np.array([lp[:4, 0, 0].sum(), lp[:2, 1, 0].sum(), 0.0]),
                               atol=1e-12)
    for targets in (np.zeros((3, 0), np.int64), np.zeros(0, np.int64), []):
        got = F.ctc_loss(tg.Tensor(lp), targets, [4, 2, 0], [0, 0, 0], reduction="none")
        np.testing.assert_allclose(got.numpy(), want, atol=1e-12)


def test_ctc_empty_batch_and_no_frames():
    assert F.ctc_loss(tg.Tensor(np.zeros((3, 0, 2))), np.zeros((0, 1), np.int64), [], [],
                      reduction="none").shape == (0,)
    assert float(F.ctc_loss(tg.Tensor(np.zeros((3, 0, 2))), np.zeros((0, 1), np.int64), [], [],
                            reduction="sum")) == 0.0
    assert math.isnan(float(F.ctc_loss(tg.Tensor(np.zeros((3, 0, 2))), np.zeros((0, 1),
                                                                                np.int64), [], [])))
    lp = tg.Tensor(np.zeros((0, 2, 3)))
    out = F.ctc_loss(lp, [[1], [1]], [0, 0], [0, 1], reduction="none")
    np.testing.assert_array_equal(out.numpy(), [0.0, math.inf])
    g = tg.grad(lambda x: F.ctc_loss(x, [[1], [1]], [0, 0], [0, 1], reduction="sum",
                                     zero_infinity=True))(lp)
    assert g.shape == (0, 2, 3)


# -- ctc_loss: derivatives against the sum over every alignment -------------------------------
def _all_alignments_nll(lp: tg.Tensor, target, frames: int, blank: int = 0):
    """``-log sum over the paths that collapse to target of prod_t y_t(path_t)``, by listing
    every path of ``frames`` frames: an independent definition, differentiable by autodiff."""
    c = lp.shape[-1]
    paths = [p for p in itertools.product(range(c), repeat=frames)
             if [k for k, _ in itertools.groupby(p) if k != blank] == list(target)]
    if not paths:
        return None
    idx = np.array(paths)
    scores = tnp.sum(lp[np.arange(frames)[None, :], idx], axis=1)
    return -tnp.log(tnp.sum(tnp.exp(scores)))


@pytest.mark.parametrize("target", [[1, 1], [1, 2], [2], [], [1, 2, 1], [2, 2, 2]])
def test_ctc_value_gradient_and_hessian_equal_the_sum_over_alignments(target):
    z = RNG.standard_normal((5, 3))  # raw scores: the derivative is of the function as given
    frames = 5

    def ours(x):
        return F.ctc_loss(x, target, frames, len(target), reduction="sum")

    def brute(x):
        return _all_alignments_nll(x, target, frames)

    x = tg.Tensor(z)
    assert float(ours(x)) == pytest.approx(float(brute(x)), rel=1e-12)
    np.testing.assert_allclose(tg.grad(ours)(x).numpy(), tg.grad(brute)(x).numpy(), atol=1e-12)
    np.testing.assert_allclose(tg.hessian(ours)(x).numpy(), tg.hessian(brute)(x).numpy(),
                               atol=1e-11)


def test_ctc_derivatives_to_order_2_in_both_modes():
    lp = _log_probs(5, 3, 3, seed=11)
    targets = np.array([[1, 2, 2], [2, 1, 0], [1, 0, 0]])
    for reduction in ("none", "mean"):
        check_grads(lambda x, r=reduction: F.ctc_loss(x, targets, [5, 4, 3], [3, 2, 1],
                                                      reduction=r),
                    (tg.Tensor(lp),), order=2, modes=("rev", "fwd"))
    # through a log_softmax (the normal use) and with an impossible example zeroed
    check_grads(lambda z: F.ctc_loss(F.log_softmax(z), targets, [5, 2, 3], [3, 2, 1],
                                     zero_infinity=True),
                (tg.Tensor(RNG.standard_normal((5, 3, 3))),), order=2, modes=("rev", "fwd"))


def test_ctc_third_order_works():
    x = tg.Tensor(RNG.standard_normal((3, 1, 3)))
    f = lambda x: F.ctc_loss(x, [[1]], [3], [1], reduction="sum")  # noqa: E731
    check_grads(f, (x,), order=3)


# -- ctc_loss: vmap, jvp, jit -------------------------------------------------------------------
def test_ctc_vmap_folds_into_the_batch_and_equals_the_loop():
    b = 3
    lp = tg.Tensor(np.stack([_log_probs(T, N, C, seed=s) for s in range(b)]))
    targets = tg.Tensor(np.stack([np.roll(TARGETS, s, axis=0) for s in range(b)]))
    il = tg.Tensor(np.stack([np.roll(INPUT_LENGTHS, s) for s in range(b)]))
    tl = tg.Tensor(np.stack([np.roll(TARGET_LENGTHS, s) for s in range(b)]))

    def f(lp, t, i, k):
        return F.ctc_loss(lp, t, i, k, reduction="none", zero_infinity=True)

    loop = np.stack([f(lp[k], targets[k], il[k], tl[k]).numpy() for k in range(b)])
    np.testing.assert_allclose(tg.vmap(f)(lp, targets, il, tl).numpy(), loop, rtol=1e-12)
    shared = tg.vmap(f, in_axes=(0, None, None, None))(lp, targets[0], il[0], tl[0])
    np.testing.assert_allclose(shared.numpy()[1], f(lp[1], targets[0], il[0], tl[0]).numpy(),
                               rtol=1e-12)
    grads = tg.vmap(tg.grad(lambda x, t, i, k: tnp.sum(f(x, t, i, k))))(lp, targets, il, tl)
    for k in range(b):
        one = tg.grad(lambda x, k=k: tnp.sum(f(x, targets[k], il[k], tl[k])))(lp[k])
        np.testing.assert_allclose(grads.numpy()[k], one.numpy(), rtol=1e-12, atol=1e-14)


def test_ctc_batching_rule_runs_the_primitive_once():
    calls = []
    forward = F.CTCLoss.forward

    def counting(ctx, *args, **kw):
        calls.append(args[0].shape)
        return forward(ctx, *args, **kw)

    lp = tg.Tensor(np.stack([_log_probs(4, 2, 3, seed=s) for s in range(5)]))
    F.CTCLoss.forward = staticmethod(counting)
    try:
        tg.vmap(lambda x: F.ctc_loss(x, [[1, 2], [2, 0]], [4, 4], [2, 1]))(lp)
    finally:
        F.CTCLoss.forward = staticmethod(forward)
    assert calls == [(4, 10, 3)]


def test_ctc_jvp_is_the_gradient_contracted_with_the_tangent():
    lp, t = tg.Tensor(_log_probs(T, N, C)), tg.Tensor(RNG.standard_normal((T, N, C)))

    def f(x):
        return F.ctc_loss(x, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none",
                          zero_infinity=True)

    value, tangent = tg.jvp(f, (lp,), (t,))
    jac = tg.jacrev(f)(lp).numpy()
    np.testing.assert_allclose(value.numpy(), f(lp).numpy())
    np.testing.assert_allclose(tangent.numpy(), np.einsum("ntmc,tmc->n", jac, t.numpy()),
                               atol=1e-12)


def test_ctc_under_jit_replays_with_new_lengths_in_both_layouts():
    lp = [tg.Tensor(_log_probs(5, 2, 4, seed=s)) for s in range(3)]
    cat_lengths = [[2, 1], [1, 2], [3, 0]]
    cat_targets = [[1, 2, 3], [3, 1, 1], [2, 2, 3]]
    jf = tg.jit(lambda x, t, i, k: F.ctc_loss(x, t, i, k, reduction="none"))
    jg = tg.jit(tg.grad(lambda x, t, i, k: F.ctc_loss(x, t, i, k)))
    for x, t, k in zip(lp, cat_targets, cat_lengths):
        t, k, i = tg.Tensor(np.array(t)), tg.Tensor(np.array(k)), tg.Tensor(np.array([5, 4]))
        np.testing.assert_allclose(jf(x, t, i, k).numpy(), F.ctc_loss(x, t, i, k,
                                                                      reduction="none").numpy())
        np.testing.assert_allclose(jg(x, t, i, k).numpy(),
                                   tg.grad(lambda y, t=t, i=i, k=k: F.ctc_loss(y, t, i, k))(
                                       x).numpy(),
                                   atol=1e-14)
    padded = [np.array([[1, 2, 0], [3, 3, 1]]), np.array([[2, 2, 2], [1, 3, 3]])]
    for x, t in zip(lp, padded):
        args = (x, tg.Tensor(t), tg.Tensor(np.array([5, 5])), tg.Tensor(np.array([2, 3])))
        np.testing.assert_allclose(jf(*args).numpy(), F.ctc_loss(*args,
                                                                 reduction="none").numpy())


# -- ctc_loss: errors ---------------------------------------------------------------------------
def test_ctc_errors_name_the_argument():
    lp = tg.Tensor(_log_probs(4, 2, 3))
    t, il, tl = [[1, 2], [2, 1]], [4, 4], [2, 2]
    cases = [
        (TypeError, "ctc_loss: log_probs must be a floating Tensor",
         lambda: F.ctc_loss(tg.Tensor(np.zeros((4, 2, 3), np.int64)), t, il, tl)),
        (ValueError, r"ctc_loss: log_probs must have shape \(T, N, C\) or \(T, C\)",
         lambda: F.ctc_loss(tg.Tensor(np.zeros(4)), t, il, tl)),
        (ValueError, "ctc_loss: blank=3 is out of range for C=3",
         lambda: F.ctc_loss(lp, t, il, tl, blank=3)),
        (TypeError, "ctc_loss: blank must be an int", lambda: F.ctc_loss(lp, t, il, tl, blank=0.0)),
        (TypeError, "ctc_loss: targets must have an integer dtype",
         lambda: F.ctc_loss(lp, np.array(t, float), il, tl)),
        (TypeError, "ctc_loss: input_lengths must have an integer dtype",
         lambda: F.ctc_loss(lp, t, [4.0, 4.0], tl)),
        (ValueError, r"ctc_loss: input_lengths must have shape \(2,\)",
         lambda: F.ctc_loss(lp, t, [4, 4, 4], tl)),
        (ValueError, r"ctc_loss: target_lengths must have shape \(2,\)",
         lambda: F.ctc_loss(lp, t, il, 2)),
        (ValueError, r"ctc_loss: input_lengths must lie in \[0, T=4\], got 5",
         lambda: F.ctc_loss(lp, t, [5, 4], tl)),
        (ValueError, r"ctc_loss: input_lengths must lie in \[0, T=4\], got -1",
         lambda: F.ctc_loss(lp, t, [-1, 4], tl)),
        (ValueError, "ctc_loss: target_lengths must be >= 0, got -1",
         lambda: F.ctc_loss(lp, t, il, [-1, 2])),
        (ValueError, "ctc_loss: target_lengths reach 3 but the padded targets hold 2",
         lambda: F.ctc_loss(lp, t, il, [3, 2])),
        (ValueError, r"ctc_loss: padded targets must have shape \(N=2, S\)",
         lambda: F.ctc_loss(lp, [[1, 2]], il, tl)),
        (ValueError, "ctc_loss: concatenated targets hold 3 labels but target_lengths sum to 4",
         lambda: F.ctc_loss(lp, [1, 2, 1], il, tl)),
        (ValueError, r"ctc_loss: targets value 3 is out of range; expected values in \[0, 2\]",
         lambda: F.ctc_loss(lp, [[1, 3], [2, 1]], il, tl)),
        (ValueError, "ctc_loss: targets contain the blank label 0",
         lambda: F.ctc_loss(lp, [[1, 0], [2, 1]], il, tl)),
        (ValueError, "ctc_loss: targets of an unbatched",
         lambda: F.ctc_loss(lp[:, 0], [[1, 2]], 4, 2)),
        (ValueError, "ctc_loss: reduction must be one of",
         lambda: F.ctc_loss(lp, t, il, tl, reduction="batchmean")),
        (TypeError, "ctc_loss: zero_infinity must be",
         lambda: F.ctc_loss(lp, t, il, tl, zero_infinity="yes")),
        (TypeError, r"ctc_loss: unexpected keyword argument 'size_average' \(PyTorch's "
         "deprecated switch; use reduction=\\)",
         lambda: F.ctc_loss(lp, t, il, tl, size_average=True)),
    ]
    for kind, match, call in cases:
        with pytest.raises(kind, match=match):
            call()
    # labels past target_lengths are padding: never read, never checked
    padded = F.ctc_loss(lp, [[1, 0], [2, 7]], il, [1, 1], reduction="none")
    np.testing.assert_array_equal(padded.numpy(), F.ctc_loss(lp, [[1, 1], [2, 2]], il, [1, 1],
                                                             reduction="none").numpy())
    np.testing.assert_array_equal(
        tg.grad(lambda x: F.ctc_loss(x, [[1, -1], [2, 7]], il, [1, 1]))(lp).numpy(),
        tg.grad(lambda x: F.ctc_loss(x, [[1, 1], [2, 2]], il, [1, 1]))(lp).numpy())
    # the primitive itself refuses mismatched arrays, naming the loss
    with pytest.raises(ValueError, match="ctc_loss: targets"):
        F.CTCLoss.apply(lp, tg.Tensor(np.ones((3, 2), np.int64)), tg.Tensor(np.array([4, 4])),
                        tg.Tensor(np.array([1, 1])))
    with pytest.raises(ValueError, match="ctc_loss: a target label is out of range for 3"):
        F.CTCLoss.apply(lp, tg.Tensor(np.array([[1, 5], [1, 1]])), tg.Tensor(np.array([4, 4])),
                        tg.Tensor(np.array([2, 1])))
    padding = F.CTCLoss.apply(lp, tg.Tensor(np.array([[1, -1], [1, 9]])),
                              tg.Tensor(np.array([4, 4])), tg.Tensor(np.array([1, 1])))
    np.testing.assert_array_equal(padding.numpy(), F.CTCLoss.apply(
        lp, tg.Tensor(np.array([[1, 0], [1, 0]])), tg.Tensor(np.array([4, 4])),
        tg.Tensor(np.array([1, 1]))).numpy())


# -- the other losses: errors -------------------------------------------------------------------
X, Y = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal((3, 4)))
LABELS = np.array([0, 3, 1])


@pytest.mark.parametrize("kind,match,call", [
    (ValueError, r"poisson_nll_loss: input of shape \(3, 4\) and target of shape \(4,\) differ",
     lambda: F.poisson_nll_loss(X, Y[0])),
    (ValueError, "poisson_nll_loss: eps must be a finite number and >= 0",
     lambda: F.poisson_nll_loss(X, Y, eps=-1.0)),
    (TypeError, "poisson_nll_loss: log_input must be", lambda: F.poisson_nll_loss(X, Y,
                                                                                 log_input="no")),
    (ValueError, "poisson_nll_loss: reduction must be one of",
     lambda: F.poisson_nll_loss(X, Y, reduction="avg")),
    (TypeError, "poisson_nll_loss: input must be a floating Tensor",
     lambda: F.poisson_nll_loss(tg.Tensor(np.ones(3, np.int64)), np.ones(3))),
    (ValueError, "gaussian_nll_loss: var has negative entries",
     lambda: F.gaussian_nll_loss(X, Y, -tnp.abs(Y))),
    (ValueError, "gaussian_nll_loss: var must be non-negative",
     lambda: F.gaussian_nll_loss(X, Y, -1.0)),
    (ValueError, r"gaussian_nll_loss: var of shape \(4,\) does not fit input of shape \(3, 4\)",
     lambda: F.gaussian_nll_loss(X, Y, np.ones(4))),
    (ValueError, r"gaussian_nll_loss: target of shape \(3, 2\) does not broadcast",
     lambda: F.gaussian_nll_loss(X, np.ones((3, 2)), 1.0)),
    (TypeError, "gaussian_nll_loss: var must be a real number",
     lambda: F.gaussian_nll_loss(X, Y, "one")),
    (ValueError, r"margin_ranking_loss: input1, input2 must have one shape, got input1 \(3, 4\), "
                 r"input2 \(4,\)", lambda: F.margin_ranking_loss(X, Y[0], 1.0)),
    (ValueError, r"margin_ranking_loss: input1 of shape \(3, 4\) and target of shape \(3,\)",
     lambda: F.margin_ranking_loss(X, Y, np.ones(3))),
    (TypeError, "margin_ranking_loss: margin must be a real number",
     lambda: F.margin_ranking_loss(X, Y, 1.0, margin="1")),
    (ValueError, r"hinge_embedding_loss: input of shape \(3, 4\) and target of shape \(2,\)",
     lambda: F.hinge_embedding_loss(X, [1, -1])),
    (ValueError, r"soft_margin_loss: input of shape \(3, 4\) and target of shape \(12,\) "
                 r"differ.*Reshape", lambda: F.soft_margin_loss(X, np.ones(12))),
    (ValueError, "multilabel_soft_margin_loss: input must have a class axis",
     lambda: F.multilabel_soft_margin_loss(X[0, 0], 1.0)),
    (ValueError, r"multilabel_soft_margin_loss: weight of shape \(3,\) does not broadcast",
     lambda: F.multilabel_soft_margin_loss(X, Y, weight=np.ones(3))),
    (ValueError, r"cosine_embedding_loss: input1 and input2 must have shape \(N, D\) or \(D,\)",
     lambda: F.cosine_embedding_loss(tnp.reshape(X, (3, 2, 2)), tnp.reshape(Y, (3, 2, 2)),
                                     np.ones(3))),
    (ValueError, r"cosine_embedding_loss: target of shape \(4,\) does not fit inputs of shape "
                 r"\(3, 4\); expected \(3,\)", lambda: F.cosine_embedding_loss(X, Y, np.ones(4))),
    (ValueError, "triplet_margin_loss: margin must be a finite number and > 0",
     lambda: F.triplet_margin_loss(X, Y, X, margin=0.0)),
    (ValueError, "triplet_margin_loss: p must be > 0", lambda: F.triplet_margin_loss(X, Y, X,
                                                                                    p=0.0)),
    (ValueError, "triplet_margin_loss: anchor, positive, negative must have one shape",
     lambda: F.triplet_margin_loss(X, Y, X[0])),
    (ValueError, "triplet_margin_loss: anchor, positive and negative must have an embedding",
     lambda: F.triplet_margin_loss(X[0, 0], Y[0, 0], X[0, 1])),
    (TypeError, "triplet_margin_loss: swap must be", lambda: F.triplet_margin_loss(X, Y, X,
                                                                                  swap="no")),
    (ValueError, "multi_margin_loss: p must be 1 or 2", lambda: F.multi_margin_loss(X, LABELS,
                                                                                   p=3)),
    (TypeError, "multi_margin_loss: p must be 1 or 2", lambda: F.multi_margin_loss(X, LABELS,
                                                                                  p="1")),
    (ValueError, r"multi_margin_loss: target value 4 is out of range; expected values in "
                 r"\[0, 3\]", lambda: F.multi_margin_loss(X, [0, 4, 1])),
    (ValueError, r"multi_margin_loss: target of shape \(2,\) does not fit input of shape "
                 r"\(3, 4\); expected \(3,\)", lambda: F.multi_margin_loss(X, [0, 1])),
    (TypeError, "multi_margin_loss: target must have an integer dtype",
     lambda: F.multi_margin_loss(X, np.array([0.0, 1.0, 2.0]))),
    (ValueError, r"multi_margin_loss: weight must have shape \(4,\)",
     lambda: F.multi_margin_loss(X, LABELS, weight=np.ones(3))),
    (ValueError, r"multi_margin_loss: input must have shape \(N, C\) or \(C,\) with C > 0",
     lambda: F.multi_margin_loss(tg.Tensor(np.zeros((2, 0))), [0, 0])),
    (ValueError, r"multilabel_margin_loss: target value -2 is out of range; expected values in "
                 r"\[-1, 3\]", lambda: F.multilabel_margin_loss(X, -2 * np.ones((3, 4), int))),
    (ValueError, r"multilabel_margin_loss: target of shape \(3,\) does not fit input",
     lambda: F.multilabel_margin_loss(X, LABELS)),
])
def test_loss_errors_name_the_function_and_argument(kind, match, call):
    with pytest.raises(kind, match=match):
        call()


def test_the_new_losses_refuse_unknown_keywords_and_point_from_pytorchs_switches():
    calls = {
        F.poisson_nll_loss: (X, Y), F.gaussian_nll_loss: (X, Y, 1.0),
        F.margin_ranking_loss: (X, Y, 1.0), F.hinge_embedding_loss: (X, 1.0),
        F.soft_margin_loss: (X, 1.0), F.multilabel_soft_margin_loss: (X, Y),
        F.cosine_embedding_loss: (X, Y, np.ones(3)), F.triplet_margin_loss: (X, Y, X),
        F.multi_margin_loss: (X, LABELS), F.multilabel_margin_loss: (X, -np.ones((3, 4), int)),
    }
    for fn, args in calls.items():
        assert tnp.ndim(fn(*args)) == 0
        with pytest.raises(TypeError, match="'reductoin'; did you mean 'reduction'"):
            fn(*args, reductoin="sum")
        with pytest.raises(TypeError, match="'reduce' \\(PyTorch's deprecated switch; use "
                           "reduction=\\)"):
            fn(*args, reduce=False)


def test_poisson_full_target_gradient_is_finite_at_zero_counts():
    """PyTorch's Stirling term gives a NaN target gradient at target 0 (0 * log 0 in its
    masked branch); here the masked branch has no derivative: the term's is 0 for target <= 1."""
    g = tg.grad(lambda y: F.poisson_nll_loss(X, y, full=True, reduction="sum"))(
        tg.Tensor(np.array([[0.0, 0.5, 1.0, 3.0]] * 3)))
    want = -X.numpy() + np.where([[0, 0, 0, 1]] * 3, np.log(3.0) + 0.5 / 3.0, 0.0)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)


def test_soft_margin_loss_does_not_overflow():
    """PyTorch computes log(1 + exp(-y x)), inf once exp overflows; here it stays exact."""
    x = tg.Tensor(np.array([-800.0, 800.0]))
    np.testing.assert_allclose(F.soft_margin_loss(x, [1.0, 1.0], reduction="none").numpy(),
                               [800.0, 0.0])
    np.testing.assert_allclose(tg.grad(lambda v: F.soft_margin_loss(v, [1.0, 1.0],
                                                                    reduction="sum"))(x).numpy(),
                               [-1.0, 0.0])


def test_gaussian_nll_clamps_var_without_differentiating_the_clamp():
    var = tg.Tensor(np.array([1e-9, 0.5]))
    x, y = tg.Tensor(np.array([1.0, 1.0])), tg.Tensor(np.array([0.0, 0.0]))
    v = np.array([1e-6, 0.5])
    loss = F.gaussian_nll_loss(x, y, var, reduction="none")
    np.testing.assert_allclose(loss.numpy(), 0.5 * (np.log(v) + 1.0 / v), rtol=1e-15)
    g = tg.grad(lambda s: F.gaussian_nll_loss(x, y, s, reduction="sum"))(var)
    np.testing.assert_allclose(g.numpy(), 0.5 * (1 / v - 1 / v**2), rtol=1e-12)  # not 0


def test_multilabel_margin_loss_reads_each_row_up_to_the_first_minus_one():
    x = tg.Tensor(np.array([[0.1, 0.2, 0.4, 0.8]]))
    # classes 3 and 0; the 1 after the -1 is not a target
    got = float(F.multilabel_margin_loss(x, [[3, 0, -1, 1]]))
    ref = sum(max(0.0, 1 - (x.numpy()[0, j] - x.numpy()[0, i])) for j in (3, 0) for i in (1, 2))
    assert got == pytest.approx(ref / 4)


# -- the Modules --------------------------------------------------------------------------------
LOSS_MODULES = [
    ("PoissonNLLLoss", dict(log_input=False, full=True, eps=0.1), 2),
    ("GaussianNLLLoss", dict(full=True, eps=0.01), 3),
    ("MarginRankingLoss", dict(margin=0.2), 3),
    ("HingeEmbeddingLoss", dict(margin=0.5), 2),
    ("SoftMarginLoss", dict(), 2),
    ("MultiLabelSoftMarginLoss", dict(weight=np.array([1.0, 2.0, 0.5, 1.0])), 2),
    ("CosineEmbeddingLoss", dict(margin=0.1), 3),
    ("TripletMarginLoss", dict(margin=0.5, p=1.0, swap=True), 3),
    ("MultiMarginLoss", dict(p=2, margin=0.5, weight=np.array([1.0, 2.0, 0.5, 1.0])), 2),
    ("MultiLabelMarginLoss", dict(), 2),
    ("MSELoss", dict(), 2),
    ("L1Loss", dict(), 2),
    ("HuberLoss", dict(delta=0.7), 2),
    ("SmoothL1Loss", dict(beta=0.7), 2),
    ("KLDivLoss", dict(log_target=True), 2),
    ("BCELoss", dict(weight=np.array([1.0, 2.0, 0.5, 1.0])), 2),
    ("BCEWithLogitsLoss", dict(weight=np.array([[1.0], [2.0], [0.5]]),
                               pos_weight=np.array([1.0, 3.0, 0.5, 2.0])), 2),
    ("NLLLoss", dict(weight=np.array([1.0, 2.0, 0.5, 1.0]), ignore_index=1), 2),
    ("CrossEntropyLoss", dict(weight=np.array([1.0, 2.0, 0.5, 1.0]), ignore_index=3,
                              label_smoothing=0.2), 2),
]


def _module_inputs(name):
    rng = np.random.default_rng(len(name))
    x, y = np.abs(rng.standard_normal((3, 4))) + 0.1, rng.standard_normal((3, 4))
    signs = np.sign(rng.standard_normal((3, 4)))
    return {
        "PoissonNLLLoss": [x, np.abs(y) * 2], "GaussianNLLLoss": [y, x, x],
        "MarginRankingLoss": [x, y, signs], "HingeEmbeddingLoss": [y, signs],
        "SoftMarginLoss": [y, signs], "MultiLabelSoftMarginLoss": [y, (signs > 0) * 1.0],
        "CosineEmbeddingLoss": [x, y, signs[:, 0]], "TripletMarginLoss": [x, y, x + y],
        "MultiMarginLoss": [y, LABELS], "MultiLabelMarginLoss": [y, np.array(
            [[3, 0, -1, 1], [1, -1, 2, 2], [0, 1, 2, 3]])],
        "MSELoss": [x, y], "L1Loss": [x, y], "HuberLoss": [x, y], "SmoothL1Loss": [x, y],
        "KLDivLoss": [-x, -np.abs(y)], "BCELoss": [1 / (1 + np.exp(-y)), (signs > 0) * 1.0],
        "BCEWithLogitsLoss": [y * 3, (signs > 0) * 1.0], "NLLLoss": [-x, LABELS],
        "CrossEntropyLoss": [y, LABELS],
    }[name]


@pytest.mark.parametrize("name,config,arity", LOSS_MODULES, ids=[m[0] for m in LOSS_MODULES])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
def test_loss_modules_match_torch_modules(name, config, arity, reduction):
    torch = torch_or_skip()
    inputs = _module_inputs(name)
    assert len(inputs) == arity
    if reduction == "batchmean" and name != "KLDivLoss":
        with pytest.raises(ValueError, match=f"{name}: reduction must be one of"):
            getattr(nn, name)(reduction=reduction)
        return
    ours = getattr(nn, name)(**config, reduction=reduction)
    tconfig = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in config.items()}
    theirs = getattr(torch.nn, name)(**tconfig, reduction=reduction)
    got = ours(*[tg.Tensor(v) if v.dtype.kind == "f" else v for v in inputs])
    with warnings.catch_warnings():  # PyTorch's notice on KLDivLoss's "mean"
        warnings.simplefilter("ignore", UserWarning)
        want = theirs(*[torch.tensor(v) for v in inputs])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert repr(ours) == repr(theirs) == f"{name}()" and ours.extra_repr() == ""
    assert not ours.parameters  # a loss has no trainable parameters
    if "weight" in config:
        np.testing.assert_array_equal(ours.states["weight"].numpy(), config["weight"])


def test_cross_entropy_modules_take_classes_last():
    """PyTorch's (N, C, d) is (N, d, C) here; (N, C) is the same in both."""
    torch = torch_or_skip()
    logits, target = RNG.standard_normal((2, 4, 3)), np.array([[0, 1, 2, 0], [2, 2, 1, 0]])
    want = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(torch.tensor(logits).transpose(1, 2),
                                                          torch.tensor(target))
    got = nn.CrossEntropyLoss(label_smoothing=0.1)(tg.Tensor(logits), target)
    assert float(got) == pytest.approx(float(want), rel=1e-12)
    want = torch.nn.NLLLoss(ignore_index=2)(torch.tensor(logits).transpose(1, 2),
                                            torch.tensor(target))
    assert float(nn.NLLLoss(ignore_index=2)(tg.Tensor(logits), target)) == pytest.approx(
        float(want), rel=1e-12)


def test_bce_with_logits_pos_weight_gradient_matches_torch():
    torch = torch_or_skip()
    x, y = RNG.standard_normal((3, 4)) * 4, (RNG.random((3, 4)) > 0.5) * 1.0
    pw, w = np.array([1.0, 3.0, 0.5, 2.0]), np.array([[1.0], [2.0], [0.5]])
    xt = torch.tensor(x, requires_grad=True)
    ref = torch.nn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(pw))(
        xt, torch.tensor(y))
    (want,) = torch.autograd.grad(ref, xt)
    ours = nn.BCEWithLogitsLoss(weight=w, pos_weight=pw)
    got = tg.grad(lambda v: ours(v, y))(tg.Tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-15)
    big = ours(tg.Tensor(np.full((3, 4), 800.0)), np.zeros((3, 4)))  # no overflow
    assert np.isfinite(float(big))
    with pytest.raises(ValueError, match=r"BCEWithLogitsLoss: pos_weight of shape \(3,\) does "
                       "not broadcast"):
        nn.BCEWithLogitsLoss(pos_weight=np.ones(3))(tg.Tensor(x), y)


def test_ctc_module_matches_torch_module():
    torch = torch_or_skip()
    lp = _log_probs(T, N, C)
    for reduction in ("none", "mean", "sum"):
        ours = nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=True)
        theirs = torch.nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=True)
        got = ours(tg.Tensor(lp), TARGETS, INPUT_LENGTHS, TARGET_LENGTHS)
        want = theirs(torch.tensor(lp), torch.tensor(TARGETS), torch.tensor(INPUT_LENGTHS),
                      torch.tensor(TARGET_LENGTHS))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    assert repr(nn.CTCLoss()) == "CTCLoss()"


def test_loss_modules_check_their_configuration():
    cases = [
        (ValueError, "TripletMarginLoss: margin must be a finite number > 0",
         lambda: nn.TripletMarginLoss(margin=0.0)),
        (ValueError, "TripletMarginLoss: p must be a number > 0",
         lambda: nn.TripletMarginLoss(p=-1.0)),
        (ValueError, "MultiMarginLoss: p must be 1 or 2", lambda: nn.MultiMarginLoss(p=3)),
        (TypeError, "MultiMarginLoss: p must be the int 1 or 2", lambda: nn.MultiMarginLoss(p=1.0)),
        (ValueError, "MultiMarginLoss: weight must be 1-D",
         lambda: nn.MultiMarginLoss(weight=np.ones((2, 2)))),
        (TypeError, "MultiLabelSoftMarginLoss: weight must be a floating Tensor",
         lambda: nn.MultiLabelSoftMarginLoss(weight="x")),
        (ValueError, "CTCLoss: blank must be >= 0", lambda: nn.CTCLoss(blank=-1)),
        (TypeError, "CTCLoss: zero_infinity must be a bool",
         lambda: nn.CTCLoss(zero_infinity=1)),
        (ValueError, "PoissonNLLLoss: eps must be a finite number >= 0",
         lambda: nn.PoissonNLLLoss(eps=-1e-8)),
        (ValueError, "GaussianNLLLoss: reduction must be one of",
         lambda: nn.GaussianNLLLoss(reduction="batchmean")),
        (ValueError, "HuberLoss: delta must be a finite number > 0",
         lambda: nn.HuberLoss(delta=0.0)),
        (ValueError, "CrossEntropyLoss: label_smoothing must lie in",
         lambda: nn.CrossEntropyLoss(label_smoothing=1.5)),
        (TypeError, "NLLLoss: ignore_index must be an int", lambda: nn.NLLLoss(ignore_index=1.5)),
        (TypeError, "BCELoss: weight must be a floating Tensor", lambda: nn.BCELoss(weight="w")),
        (TypeError, r"SoftMarginLoss: unexpected keyword argument 'size_average' \(PyTorch's "
         r"deprecated switch; use reduction=\)", lambda: nn.SoftMarginLoss(size_average=False)),
    ]
    for kind, match, make in cases:
        with pytest.raises(kind, match=match):
            make()
    assert nn.TripletMarginLoss(p=math.inf).p == math.inf
    with pytest.raises(TypeError):  # keyword-only, as PyTorch's
        nn.GaussianNLLLoss(True)  # pyright: ignore[reportCallIssue]


def test_loss_modules_train_a_model():
    """A loss Module in a training step: its value and gradient are the functional's."""
    model = nn.Linear(4, 3, key=tg.random.key(0), dtype=np.float64)
    loss_fn = nn.MultiMarginLoss(margin=0.5)
    x = tg.Tensor(RNG.standard_normal((5, 4)))
    y = np.array([0, 2, 1, 1, 0])

    def loss(params):
        return loss_fn(nn.functional_call(model, params, x)[0], y)

    params = model.params
    value, grads = tg.value_and_grad(loss)(params)
    want = F.multi_margin_loss(model(x), y, margin=0.5)
    assert float(value) == float(want)
    assert grads["weight"].shape == (4, 3)
