"""Convolution, pooling, padding and resampling in 1, 2 and 3 spatial dims against PyTorch.

Every function is compared with ``torch.nn.functional`` in float64, value and gradient (input,
weight, bias, grid), on drawn shapes and options (size-1 dims and edge options included); the
layers with ``torch.nn``'s (same parameters, same ``extra_repr``). Bad arguments raise errors
that name the function and the argument. ``vmap`` and ``jit`` run through each family, and
second derivatives are checked against finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads

torch = pytest.importorskip("torch")
TF = torch.nn.functional
# torch's own performance note for its "same" padding with even kernels
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")

RNG = np.random.default_rng(0)
DRAWN = settings(max_examples=12, derandomize=True, deadline=None,
                 phases=(Phase.explicit, Phase.reuse, Phase.generate),  # no slow shrinking
                 suppress_health_check=[HealthCheck.too_slow])
TOL = dict(rtol=1e-10, atol=1e-12)


def T(a):
    return tg.Tensor(np.asarray(a))


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def against_torch(ours, theirs, arrays, diff=(0,), grads=True, tol=TOL, rng=None):
    """``ours(*Tensors)`` equals ``theirs(*torch tensors)``; so do the gradients of
    ``<out, g>`` with respect to the arguments ``diff`` for a random cotangent ``g``."""
    ts = [torch.tensor(a, requires_grad=i in diff) for i, a in enumerate(arrays)]
    ref = _first(theirs(*ts))
    out = _first(ours(*[T(a) for a in arrays]))
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), **tol)
    if not (grads and diff) or out.size == 0:
        return
    g = (RNG if rng is None else rng).standard_normal(out.shape)
    ref.backward(torch.tensor(g))
    got = tg.grad(lambda *xs: (_first(ours(*xs)) * T(g)).sum(), argnums=tuple(diff))(
        *[T(a) for a in arrays])
    for i, gi in zip(diff, got):
        np.testing.assert_allclose(gi.numpy(), ts[i].grad.numpy(), err_msg=f"argument {i}",
                                   **tol)


def spatial(draw, nd, lo=1, hi=6):
    return tuple(draw(st.integers(lo, hi)) for _ in range(nd))


# -- convolutions ----------------------------------------------------------------------------
@DRAWN
@given(data=st.data(), nd=st.sampled_from([1, 3]))
def test_conv_and_conv_transpose_match_torch(data, nd):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    groups = draw(st.sampled_from([1, 2]))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = spatial(draw, nd, 1, 3)
    stride = spatial(draw, nd, 1, 2)
    dilation = spatial(draw, nd, 1, 2)
    n = draw(st.integers(1, 2))
    bias = draw(st.booleans())
    conv, conv_t = (F.conv1d, F.conv_transpose1d) if nd == 1 else (F.conv3d, F.conv_transpose3d)
    tconv, tconv_t = (TF.conv1d, TF.conv_transpose1d) if nd == 1 else (TF.conv3d,
                                                                        TF.conv_transpose3d)
    # a convolution whose output is not empty
    padding = draw(st.sampled_from(["valid", "same", 0, 1])) if nd == 3 else draw(
        st.sampled_from([0, 1]))
    if padding == "same":
        stride = (1,) * nd
    size = tuple(d * (k - 1) + 1 + draw(st.integers(0, 3)) for k, d in zip(kernel, dilation))
    x = rng.standard_normal((n, cin) + size)
    w = rng.standard_normal((cout, cin // groups) + kernel)
    b = rng.standard_normal(cout)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    arrays, diff = ([x, w, b], (0, 1, 2)) if bias else ([x, w], (0, 1))
    against_torch(lambda *a: conv(*a, **kw), lambda *a: tconv(*a, **kw), arrays, diff, rng=rng)
    # its transpose, with an output padding below the stride or the dilation
    pad = tuple(min(p, (k - 1) * d // 2) for p, k, d in zip(
        spatial(draw, nd, 0, 1), kernel, dilation))
    out_pad = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    kw = dict(stride=stride, padding=pad, output_padding=out_pad, groups=groups,
              dilation=dilation)
    xt = rng.standard_normal((n, cin) + spatial(draw, nd, 1, 3))
    wt = rng.standard_normal((cin, cout // groups) + kernel)
    arrays, diff = ([xt, wt, b], (0, 1, 2)) if bias else ([xt, wt], (0, 1))
    against_torch(lambda *a: conv_t(*a, **kw), lambda *a: tconv_t(*a, **kw), arrays, diff, rng=rng)


def test_conv_unbatched_inputs_and_a_size_zero_batch():
    w = RNG.standard_normal((4, 2, 2, 2, 3))
    x = RNG.standard_normal((2, 3, 4, 5))
    against_torch(lambda x, w: F.conv3d(x, w, padding=1), lambda x, w: TF.conv3d(x, w, padding=1),
                  [x, w], (0, 1))
    wt = RNG.standard_normal((2, 3, 2))
    against_torch(lambda x, w: F.conv_transpose1d(x, w, stride=2),
                  lambda x, w: TF.conv_transpose1d(x, w, stride=2),
                  [RNG.standard_normal((2, 5)), wt], (0, 1))
    assert F.conv3d(T(np.zeros((0, 2, 3, 4, 5))), T(w)).shape == (0, 4, 2, 3, 3)
    assert F.conv_transpose3d(T(np.zeros((0, 4, 2, 2, 2))), T(w)).shape == (0, 2, 3, 3, 4)


def test_conv_second_derivatives():
    x, w, b = RNG.standard_normal((2, 2, 3, 4, 3)), RNG.standard_normal((4, 1, 2, 2, 2)), \
        RNG.standard_normal(4)
    check_grads(lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1, groups=2),
                (T(x), T(w), T(b)), order=2)
    check_grads(lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1,
                                                dilation=2),
                (T(RNG.standard_normal((2, 3, 4))), T(RNG.standard_normal((3, 2, 3)))), order=2)


# -- pooling ---------------------------------------------------------------------------------
def _pool_case(draw, nd, dilated=True):
    kernel = spatial(draw, nd, 1, 3)
    stride = spatial(draw, nd, 1, 3)
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    dilation = spatial(draw, nd, 1, 2) if dilated else (1,) * nd
    size = tuple(d * (k - 1) + 1 - 2 * p + draw(st.integers(0, 3))
                 for k, d, p in zip(kernel, dilation, padding))
    size = tuple(max(s, 1) for s in size)
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) + size
    return shape, kernel, stride, padding, dilation, draw(st.booleans())


@DRAWN
@given(data=st.data(), nd=st.sampled_from([1, 2, 3]))
def test_max_pool_matches_torch_values_gradients_and_indices(data, nd):
    shape, kernel, stride, padding, dilation, ceil = _pool_case(data.draw, nd)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ours = getattr(F, f"max_pool{nd}d")
    theirs = getattr(TF, f"max_pool{nd}d")
    kw = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
              ceil_mode=ceil)
    # integer values: many ties, so the routing of the gradient to the first maximum shows
    for x in (rng.standard_normal(shape), rng.integers(0, 3, shape).astype(float)):
        try:
            ref, ref_idx = theirs(torch.tensor(x), return_indices=True, **kw)
        except RuntimeError:  # torch: no window fits; ours says so too
            with pytest.raises(ValueError, match=f"max_pool{nd}d: input of spatial size"):
                ours(T(x), **kw)
            return
        values, idx = ours(T(x), return_indices=True, **kw)
        np.testing.assert_array_equal(values.numpy(), ref.numpy())
        np.testing.assert_array_equal(idx.numpy(), ref_idx.numpy())
        assert idx.dtype == np.int64
        against_torch(lambda a: ours(a, **kw), lambda a: theirs(a, **kw), [x], rng=rng)


@DRAWN
@given(data=st.data(), nd=st.sampled_from([1, 2, 3]),
       count_include_pad=st.booleans(), divisor=st.sampled_from([None, 3, -2]))
def test_avg_pool_matches_torch(data, nd, count_include_pad, divisor):
    shape, kernel, stride, padding, _, ceil = _pool_case(data.draw, nd, dilated=False)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    kw = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil,
              count_include_pad=count_include_pad)
    if nd > 1:
        kw["divisor_override"] = divisor
    x = rng.standard_normal(shape)
    try:
        getattr(TF, f"avg_pool{nd}d")(torch.tensor(x), **kw)
    except RuntimeError as e:
        if "smaller than kernel size" in str(e):  # torch's avg_pool3d alone ignores padding
            assert nd == 3 and any(n < k for n, k in zip(shape[2:], kernel))
            kw.pop("divisor_override")  # ours pools as avg_pool2d does, on each plane
            two = TF.avg_pool2d(torch.tensor(x[:, :, 0]), kernel[1:], stride[1:], padding[1:],
                                **{k: v for k, v in kw.items() if k not in (
                                    "kernel_size", "stride", "padding")})
            if kernel[0] == 1 and padding[0] == 0 and stride[0] == 1:
                np.testing.assert_allclose(F.avg_pool3d(T(x), **kw).numpy()[:, :, 0],
                                           two.numpy(), **TOL)
            return
        with pytest.raises(ValueError, match=f"avg_pool{nd}d: input of spatial size"):
            getattr(F, f"avg_pool{nd}d")(T(x), **kw)
        return
    against_torch(lambda a: getattr(F, f"avg_pool{nd}d")(a, **kw),
                  lambda a: getattr(TF, f"avg_pool{nd}d")(a, **kw), [x], rng=rng)


@DRAWN
@given(data=st.data(), nd=st.sampled_from([1, 2, 3]), kind=st.sampled_from(["avg", "max"]))
def test_adaptive_pools_match_torch(data, nd, kind):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    size = spatial(draw, nd, 1, 7)
    out = tuple(draw(st.integers(1, s + 2)) for s in size)
    shape = (draw(st.integers(1, 2)), 2) + size
    if nd > 1 and draw(st.booleans()):  # None keeps an axis
        out = (None,) + out[1:]
    ours = getattr(F, f"adaptive_{kind}_pool{nd}d")
    theirs = getattr(TF, f"adaptive_{kind}_pool{nd}d")
    for x in (rng.standard_normal(shape), rng.integers(0, 2, shape).astype(float)):
        against_torch(lambda a: ours(a, out), lambda a: theirs(a, out), [x], rng=rng)
        if kind == "max":
            _, idx = ours(T(x), out, return_indices=True)
            np.testing.assert_array_equal(idx.numpy(),
                                          theirs(torch.tensor(x), out, True)[1].numpy())
    against_torch(lambda a: ours(a, out), lambda a: theirs(a, out), [x[0]], rng=rng)  # unbatched


@pytest.mark.parametrize("nd,size,out", [(1, (8,), 4), (2, (4, 6), (2, 3)), (2, (4, 6), (4, 1)),
                                         (3, (4, 2, 6), (2, 2, 3)), (2, (5, 6), (2, 3))])
def test_adaptive_max_pool_equal_and_unequal_bins_route_ties_as_torch(nd, size, out):
    x = RNG.integers(0, 2, (2, 3) + size).astype(float)  # ties everywhere
    ours, theirs = getattr(F, f"adaptive_max_pool{nd}d"), getattr(TF, f"adaptive_max_pool{nd}d")
    against_torch(lambda a: ours(a, out), lambda a: theirs(a, out), [x])
    np.testing.assert_array_equal(ours(T(x), out, True)[1].numpy(),
                                  theirs(torch.tensor(x), out, True)[1].numpy())


def test_pool_second_derivatives_and_float32():
    x = RNG.standard_normal((2, 2, 4, 5, 3))
    check_grads(lambda a: F.max_pool3d(a, 2, 1, 1, (1, 2, 1), ceil_mode=True), (T(x),), order=2)
    check_grads(lambda a: F.avg_pool3d(a, 3, 2, 1, True, False), (T(x),), order=2)
    check_grads(lambda a: F.adaptive_max_pool3d(a, (3, 2, 2)), (T(x),), order=2)
    check_grads(lambda a: F.adaptive_avg_pool1d(a, 3), (T(x[0, 0]),), order=2)
    x32 = x.astype(np.float32)
    ref = TF.max_pool3d(torch.tensor(x32), 2, ceil_mode=True)
    np.testing.assert_array_equal(F.max_pool3d(T(x32), 2, ceil_mode=True).numpy(), ref.numpy())
    assert F.avg_pool1d(T(x32[0, 0]), 2).dtype == np.float32


# -- padding ---------------------------------------------------------------------------------
PADS = [(1, 2), (0, 3), (2, 1, 0, 3), (1, 1, 2, 0, 1, 2), (-1, 2, 3, -2), (3, -2), (-2, 3),
        (2, -4), (-3, -2), (3, -7), (2, 2, -1, -1, 1, -1), (5, 0), (6, 0)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", PADS, ids=str)
def test_pad_matches_torch_or_both_refuse(mode, pad):
    x = RNG.standard_normal((2, 3, 4, 5, 6)[: len(pad) // 2 + 2])
    cropped = [n + min(a, 0) + min(b, 0) for a, b, n in zip(pad[0::2], pad[1::2], x.shape[::-1])]
    if mode == "circular" and any(max(a, b) > n for a, b, n in zip(pad[0::2], pad[1::2],
                                                                     cropped)):
        # a wrap longer than the (cropped) axis: torch reads outside its input or fails
        with pytest.raises(ValueError, match="pad: "):
            F.pad(T(x), pad, mode=mode)
        return
    try:
        ref = TF.pad(torch.tensor(x), pad, mode=mode)
    except RuntimeError:
        with pytest.raises(ValueError, match="pad: "):
            F.pad(T(x), pad, mode=mode)
        return
    assert ref.shape == F.pad(T(x), pad, mode=mode).shape
    against_torch(lambda a: F.pad(a, pad, mode=mode), lambda a: TF.pad(a, pad, mode=mode), [x])
    if mode != "constant" and len(pad) < 6:  # unbatched (C, ...) input too
        against_torch(lambda a: F.pad(a, pad, mode=mode), lambda a: TF.pad(a, pad, mode=mode),
                      [x[0]])


def test_pad_constant_value_any_rank_and_second_derivatives():
    x = RNG.standard_normal((2, 3, 4, 5))
    p = (1, 2, 0, 1, 1, 1, 1, 0)
    against_torch(lambda a: F.pad(a, p, value=2.5), lambda a: TF.pad(a, p, value=2.5), [x])
    np.testing.assert_array_equal(F.pad(T(np.arange(3)), (1, 1), value=7).numpy(),
                                  [7, 0, 1, 2, 7])  # integers, constant mode
    check_grads(lambda a: F.pad(a, (2, 1, 1, 2), mode="reflect") ** 2, (T(x),), order=2)
    check_grads(lambda a: F.pad(a, (2, -1), mode="circular") ** 2, (T(x[0]),), order=2)


# -- interpolate -----------------------------------------------------------------------------
INTERP = [(1, "nearest"), (2, "nearest"), (3, "nearest"), (1, "nearest-exact"),
          (2, "nearest-exact"), (3, "nearest-exact"), (1, "linear"), (2, "bilinear"),
          (3, "trilinear"), (2, "bicubic"), (1, "area"), (2, "area"), (3, "area")]
SIZES = [(5, 7, 3), (4, 1, 6), (1, 3, 2), (10, 2, 9)]
OUTS = [(13, 3, 7), (4, 4, 4), (1, 2, 3), (20, 1, 12)]
FACTORS = [2, 0.7, 1.5, 1.1, 3.3, (0.5, 2.25, 1.7)]


def _pytorch_backward_differs(nd, mode, shape, out, factor):
    """Where PyTorch's backward is not the derivative of its own forward: its backward
    kernels copy an axis whose size does not change (and halve one that doubles, for
    ``"nearest"``), while its 1-D/3-D nearest and its bicubic forward kernels then still
    use ``1 / scale_factor``."""
    if factor is None:
        return False
    f = factor if isinstance(factor, tuple) else (factor,) * nd
    special = [o in (n, 2 * n) if mode == "nearest" else o == n
               for n, o in zip(shape[2:], out)]
    inexact = [o != n * s for n, o, s in zip(shape[2:], out, f)]
    if mode == "nearest" and nd != 2:
        return any(s and i for s, i in zip(special, inexact))
    return mode == "bicubic" and all(special) and any(inexact)


@pytest.mark.parametrize("nd,mode", INTERP, ids=lambda v: str(v))
def test_interpolate_matches_torch(nd, mode):
    corners = [None] if mode.startswith("nearest") or mode == "area" else [False, True]
    for sizes in SIZES:
        shape = (2, 2) + sizes[:nd]
        x = RNG.standard_normal(shape)
        options = [dict(size=o[:nd]) for o in OUTS]
        options += [dict(scale_factor=f[:nd] if isinstance(f, tuple) else f,
                         recompute_scale_factor=r) for f in FACTORS for r in (None, True)]
        for opt in options:
            for ac in corners:
                kw = dict(opt, mode=mode, align_corners=ac)
                try:
                    ref = TF.interpolate(torch.tensor(x), **kw)
                except RuntimeError:  # an empty output: both refuse
                    with pytest.raises(ValueError, match="interpolate: scale_factor"):
                        F.interpolate(T(x), **kw)
                    continue
                if ref.numel() == 0:  # torch's "area" returns it; ours refuses
                    with pytest.raises(ValueError, match="gives the empty output size"):
                        F.interpolate(T(x), **kw)
                    continue
                factor = None if kw.get("recompute_scale_factor") else kw.get("scale_factor")
                exact_grad = not _pytorch_backward_differs(nd, mode, shape, ref.shape[2:],
                                                           factor)
                against_torch(lambda a, kw=kw: F.interpolate(a, **kw),
                              lambda a, kw=kw: TF.interpolate(a, **kw), [x], grads=exact_grad)
                if not exact_grad:  # ours is the derivative of the forward both compute
                    check_grads(lambda a, kw=kw: F.interpolate(a, **kw), (T(x),), order=1)


def test_interpolate_second_derivatives_and_float32():
    x = RNG.standard_normal((1, 2, 4, 3))
    check_grads(lambda a: F.interpolate(a, size=(5, 7), mode="bicubic"), (T(x),), order=2)
    check_grads(lambda a: F.interpolate(a ** 2, scale_factor=1.5, mode="bilinear",
                                        align_corners=True), (T(x),), order=2)
    x32 = RNG.standard_normal((2, 3, 7, 9)).astype(np.float32)
    for kw in (dict(size=(5, 4)), dict(scale_factor=0.7), dict(scale_factor=(1.3, 2.6))):
        for mode in ("nearest", "nearest-exact"):  # PyTorch's float32 index arithmetic
            np.testing.assert_array_equal(
                F.interpolate(T(x32), mode=mode, **kw).numpy(),
                TF.interpolate(torch.tensor(x32), mode=mode, **kw).numpy())
        np.testing.assert_allclose(
            F.interpolate(T(x32), mode="bilinear", **kw).numpy(),
            TF.interpolate(torch.tensor(x32), mode="bilinear", **kw).numpy(), rtol=1e-5,
            atol=1e-6)


# -- grid_sample, affine_grid ----------------------------------------------------------------
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch_in_input_and_grid(nd, mode, padding_mode, align_corners):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    for spatial_in, spatial_out in [((4, 5, 3), (3, 2, 4)), ((1, 3, 1), (2, 1, 3))]:
        x = RNG.standard_normal((2, 3) + spatial_in[:nd])
        grid = RNG.uniform(-1.7, 1.7, (2,) + spatial_out[:nd] + (nd,))
        diff = (0, 1) if mode == "bilinear" else (0,)
        against_torch(lambda a, g: F.grid_sample(a, g, **kw),
                      lambda a, g: TF.grid_sample(a, g, **kw), [x, grid], diff)
    if mode == "nearest":  # no gradient in the grid, as PyTorch
        g = tg.grad(lambda gr: F.grid_sample(T(x), gr, **kw).sum())(T(grid))
        assert not g.numpy().any()


def test_grid_sample_second_derivatives():
    x = RNG.standard_normal((1, 2, 3, 4))
    grid = RNG.uniform(-0.9, 0.9, (1, 2, 3, 2))
    check_grads(lambda a, g: F.grid_sample(a, g, align_corners=True), (T(x), T(grid)), order=2)
    check_grads(lambda a, g: F.grid_sample(a, g, padding_mode="reflection"), (T(x), T(grid)),
                order=1)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (2, 3, 2, 3, 4)])
@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid")  # torch's, on 1-size
def test_affine_grid_matches_torch(size, align_corners):
    nd = len(size) - 2
    theta = RNG.standard_normal((2, nd, nd + 1))
    against_torch(lambda t: F.affine_grid(t, size, align_corners=align_corners),
                  lambda t: TF.affine_grid(t, size, align_corners=align_corners), [theta])


# -- unfold, fold, pixel shuffles ------------------------------------------------------------
@DRAWN
@given(data=st.data())
def test_unfold_and_fold_match_torch(data):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kernel, dilation = spatial(draw, 2, 1, 3), spatial(draw, 2, 1, 2)
    padding, stride = spatial(draw, 2, 0, 1), spatial(draw, 2, 1, 2)
    size = tuple(d * (k - 1) + 1 + draw(st.integers(0, 3)) for k, d in zip(kernel, dilation))
    x = rng.standard_normal((draw(st.integers(1, 2)), draw(st.integers(1, 3))) + size)
    kw = dict(kernel_size=kernel, dilation=dilation, padding=padding, stride=stride)
    against_torch(lambda a: F.unfold(a, **kw), lambda a: TF.unfold(a, **kw), [x], rng=rng)
    against_torch(lambda a: F.unfold(a, **kw), lambda a: TF.unfold(a, **kw), [x[0]], rng=rng)
    cols = rng.standard_normal(tuple(TF.unfold(torch.tensor(x), **kw).shape))
    for c in (cols, cols[0]):  # batched and unbatched
        against_torch(lambda c: F.fold(c, size, **kw), lambda c: TF.fold(c, size, **kw), [c],
                      rng=rng)


@pytest.mark.parametrize("shape,r", [((2, 8, 3, 4), 2), ((3, 9, 2, 2), 3), ((2, 2, 4, 3, 2), 1),
                                     ((4, 3, 3), 1), ((2, 3, 4, 2, 3), 2)])
def test_pixel_shuffle_and_unshuffle_match_torch(shape, r):
    x = RNG.standard_normal(shape)
    if shape[-3] % (r * r) == 0:
        against_torch(lambda a: F.pixel_shuffle(a, r), lambda a: TF.pixel_shuffle(a, r), [x])
    if shape[-2] % r == 0 and shape[-1] % r == 0:
        against_torch(lambda a: F.pixel_unshuffle(a, r), lambda a: TF.pixel_unshuffle(a, r),
                      [x])
        y = F.pixel_unshuffle(T(x), r)
        np.testing.assert_array_equal(F.pixel_shuffle(y, r).numpy(), x)


# -- errors name the function and the argument -----------------------------------------------
X1, X2, X3 = (T(np.zeros(s)) for s in [(2, 3, 8), (2, 3, 8, 8), (2, 3, 6, 6, 6)])
ERRORS = [
    (lambda: F.conv3d(X1, T(np.zeros((2, 3, 2, 2)))), ValueError, "conv3d: input must have"),
    (lambda: F.conv3d(X3, T(np.zeros((2, 3, 2, 2)))), ValueError, "conv3d: weight must have"),
    (lambda: F.conv3d(X3, T(np.zeros((2, 2, 2, 2, 2)))), ValueError, "conv3d: input has 3 "),
    (lambda: F.conv3d(X3, T(np.zeros((2, 3, 2, 2, 2))), stride=0), ValueError,
     "conv3d: stride must be >= 1"),
    (lambda: F.conv3d(X3, T(np.zeros((2, 3, 2, 2, 2))), padding="full"), ValueError,
     "conv3d: padding must be 'valid', 'same'"),
    (lambda: F.conv3d(X3, T(np.zeros((2, 3, 2, 2, 2))), dilation=(1, 2)), TypeError,
     "conv3d: dilation must be an int or a tuple of 3 ints"),
    (lambda: F.conv3d(X3, T(np.zeros((2, 3, 7, 2, 2)))), ValueError,
     "conv3d: input of spatial size"),
    (lambda: F.conv3d(X3, T(np.zeros((2, 3, 2, 2, 2))), T(np.zeros(3))), ValueError,
     r"conv3d: bias must have shape \(2,\)"),
    (lambda: F.conv3d(X3, T(np.zeros((2, 3, 2, 2, 2))), groups=2.0), TypeError,
     "conv3d: groups must be a positive int"),
    (lambda: F.conv3d(T(np.zeros((1, 3, 2, 2, 2), np.int64)), T(np.zeros((2, 3, 1, 1, 1)))),
     TypeError, "conv3d: input must be a floating"),
    (lambda: F.conv_transpose1d(X1, T(np.zeros((3, 2, 2))), stride=2, output_padding=2),
     ValueError, "conv_transpose1d: output_padding"),
    (lambda: F.conv_transpose3d(X3, T(np.zeros((2, 2, 2, 2, 2)))), ValueError,
     "conv_transpose3d: input has 3 channels"),
    (lambda: F.max_pool1d(X1, 4, padding=3), ValueError,
     "max_pool1d: padding .* must be at most half the kernel"),
    (lambda: F.max_pool3d(X3, 7), ValueError, "max_pool3d: input of spatial size"),
    (lambda: F.max_pool1d(X2, 2), ValueError, r"max_pool1d: input must have shape \(N, C, L\)"),
    (lambda: F.max_pool3d(X3, 2, ceil_mode=1), TypeError, "max_pool3d: ceil_mode must be a bool"),
    (lambda: F.max_pool2d(X2, 2, padding="same", ceil_mode=True), ValueError,
     "max_pool2d: padding='same' takes dilation=1 and ceil_mode=False"),
    (lambda: F.avg_pool3d(X3, 2, divisor_override=0), ValueError,
     "avg_pool3d: divisor_override must not be zero"),
    (lambda: F.avg_pool1d(X1, 2.5), TypeError, "avg_pool1d: kernel_size must be an int"),
    (lambda: F.adaptive_max_pool2d(X2, (0, 2)), ValueError,
     "adaptive_max_pool2d: output_size must be >= 1"),
    (lambda: F.adaptive_avg_pool1d(X1, None), TypeError, "adaptive_avg_pool1d: output_size"),
    (lambda: F.adaptive_avg_pool3d(X3, (1, 2)), TypeError, "adaptive_avg_pool3d: output_size"),
    (lambda: F.pad(X1, (1,)), ValueError, "pad: pad must have an even number"),
    (lambda: F.pad(X1, 1), TypeError, "pad: pad must be a tuple of ints"),
    (lambda: F.pad(X1, (1, 1), mode="wrap"), ValueError, "pad: mode must be 'constant'"),
    (lambda: F.pad(X1, (1, 1), mode="reflect", value=2.0), ValueError,
     "pad: mode 'reflect' takes no value"),
    (lambda: F.pad(X1, (8, 1), mode="reflect"), ValueError,
     "pad: mode 'reflect' needs each width smaller"),
    (lambda: F.pad(X1, (9, 1), mode="circular"), ValueError, "pad: mode 'circular' wraps"),
    (lambda: F.pad(X1, (1,) * 8), ValueError, "pad: pad .* pads 4 axes but input has only 3"),
    (lambda: F.pad(X1, (1,) * 6, mode="replicate"), ValueError,
     "pad: mode 'replicate' pads the last 1, 2 or 3 axes"),
    (lambda: F.pad(X1, (1, 1), value="x"), TypeError, "pad: value must be a number"),
    (lambda: F.interpolate(X1, size=4, mode="bilinear"), ValueError,
     "interpolate: mode 'bilinear' needs a 4-D input"),
    (lambda: F.interpolate(X2, size=4, mode="cubic"), ValueError, "interpolate: mode must be"),
    (lambda: F.interpolate(X2, size=4, scale_factor=2), ValueError,
     "interpolate: give exactly one of size and scale_factor"),
    (lambda: F.interpolate(X2), ValueError, "interpolate: give exactly one"),
    (lambda: F.interpolate(X2, size=4, align_corners=True), ValueError,
     "interpolate: align_corners can only be set"),
    (lambda: F.interpolate(X2, size=(4, 4, 4)), TypeError,
     "interpolate: size must be an int or a tuple of 2 ints"),
    (lambda: F.interpolate(X2, scale_factor=-1.0), ValueError,
     "interpolate: scale_factor must be positive"),
    (lambda: F.interpolate(X2, scale_factor="2"), TypeError,
     "interpolate: scale_factor must be a number"),
    (lambda: F.interpolate(X2, size=4, recompute_scale_factor=True), ValueError,
     "interpolate: recompute_scale_factor is not meaningful"),
    (lambda: F.interpolate(X2, size=4, mode="bilinear", antialias=True), NotImplementedError,
     "interpolate: antialias=True"),
    (lambda: F.grid_sample(X2, T(np.zeros((2, 3, 3, 3)))), ValueError,
     "grid_sample: grid must have shape"),
    (lambda: F.grid_sample(X2, T(np.zeros((2, 3, 3, 2))), mode="area"), ValueError,
     "grid_sample: mode must be"),
    (lambda: F.grid_sample(X2, T(np.zeros((2, 3, 3, 2))), padding_mode="wrap"), ValueError,
     "grid_sample: padding_mode must be"),
    (lambda: F.grid_sample(X2, T(np.zeros((2, 3, 3, 2))), mode="bicubic"), NotImplementedError,
     "grid_sample: mode='bicubic'"),
    (lambda: F.affine_grid(T(np.zeros((2, 2, 3))), (2, 3, 4)), TypeError, "affine_grid: size"),
    (lambda: F.affine_grid(T(np.zeros((2, 3, 3))), (2, 3, 4, 4)), ValueError,
     "affine_grid: theta must have shape"),
    (lambda: F.unfold(X2, 9), ValueError, "unfold: no block of kernel_size"),
    (lambda: F.unfold(X3, 2), ValueError, "unfold: input must have shape"),
    (lambda: F.fold(T(np.zeros((2, 7, 9))), 4, 2), ValueError,
     "fold: input's dim 1 .7. must be divisible"),
    (lambda: F.fold(T(np.zeros((2, 8, 8))), 4, 2), ValueError, "fold: input has 8 blocks"),
    (lambda: F.pixel_shuffle(X2, 2), ValueError,
     "pixel_shuffle: input's channels .3. must be divisible"),
    (lambda: F.pixel_shuffle(X2, 0), ValueError, "pixel_shuffle: upscale_factor must be"),
    (lambda: F.pixel_unshuffle(X2, 3), ValueError,
     "pixel_unshuffle: input's spatial size .8, 8. must be divisible"),
    (lambda: F.pixel_unshuffle(X2, 2.0), TypeError, "pixel_unshuffle: downscale_factor"),
]


@pytest.mark.parametrize("make,kind,match", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_bad_arguments_name_the_function_and_argument(make, kind, match):
    with pytest.raises(kind, match=match):
        make()


# -- layers ----------------------------------------------------------------------------------
def _same_params(ours, theirs):
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.copy_(torch.tensor(getattr(ours, name).numpy()))


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (0, 1, 2), "same", "valid"])
def test_conv3d_layer_matches_torch(padding_mode, padding):
    kw = dict(stride=1 if isinstance(padding, str) else (1, 2, 1), padding=padding,
              dilation=(1, 1, 2), groups=2, padding_mode=padding_mode)
    ours = nn.Conv3d(4, 6, (2, 3, 2), key=tg.random.key(0), dtype=np.float64, **kw)
    theirs = torch.nn.Conv3d(4, 6, (2, 3, 2), dtype=torch.float64, **kw)
    _same_params(ours, theirs)
    assert ours.extra_repr() == theirs.extra_repr()
    x = RNG.standard_normal((2, 4, 4, 5, 6))
    against_torch(lambda a: ours(a), lambda a: theirs(a), [x])
    against_torch(lambda a: ours(a), lambda a: theirs(a), [x[0]])


@pytest.mark.parametrize("nd", [1, 3])
def test_conv_transpose_layers_match_torch_with_output_size(nd):
    cls = {1: "ConvTranspose1d", 3: "ConvTranspose3d"}[nd]
    kw = dict(stride=2, padding=1, output_padding=1, groups=2, bias=False, dilation=2)
    ours = getattr(nn, cls)(4, 2, 3, key=tg.random.key(1), dtype=np.float64, **kw)
    theirs = getattr(torch.nn, cls)(4, 2, 3, dtype=torch.float64, **kw)
    _same_params(ours, theirs)
    assert ours.extra_repr() == theirs.extra_repr()
    assert ours.weight.shape == tuple(theirs.weight.shape)
    x = RNG.standard_normal((2, 4) + (3,) * nd)
    against_torch(lambda a: ours(a), lambda a: theirs(a), [x])
    size = (8,) * nd
    against_torch(lambda a: ours(a, output_size=size), lambda a: theirs(a, output_size=size), [x])
    with pytest.raises(ValueError, match=f"{cls}: requested output_size"):
        ours(T(x), output_size=(9,) * nd)
    with pytest.raises(ValueError, match=f"{cls}: only padding_mode='zeros'"):
        getattr(nn, cls)(4, 2, 3, padding_mode="reflect")


def _layer_pairs():
    return [
        ("MaxPool1d", (3,), dict(stride=2, padding=1, dilation=2, ceil_mode=True), (2, 3, 9)),
        ("MaxPool3d", (2, 1, 1, 2, True, True), {}, (2, 2, 5, 4, 5)),
        ("AvgPool1d", (3,), dict(ceil_mode=True, count_include_pad=False), (2, 3, 8)),
        ("AvgPool3d", (2,), dict(divisor_override=3, padding=1), (2, 2, 3, 4, 5)),
        ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 8)),
        ("AdaptiveAvgPool3d", ((2, None, 3),), {}, (2, 3, 5, 4, 7)),
        ("AdaptiveMaxPool1d", (3,), dict(return_indices=True), (2, 3, 8)),
        ("AdaptiveMaxPool2d", ((2, None),), {}, (2, 3, 5, 4)),
        ("AdaptiveMaxPool3d", (2,), {}, (2, 3, 5, 4, 7)),
        ("Upsample", (), dict(scale_factor=2), (2, 3, 4, 5)),
        ("Upsample", (), dict(size=(3, 4), mode="bilinear", align_corners=True), (2, 3, 4, 5)),
        ("Upsample", (), dict(scale_factor=(1.5, 0.5, 2), mode="trilinear"), (1, 2, 3, 4, 5)),
        ("UpsamplingNearest2d", (), dict(scale_factor=2), (2, 3, 4, 5)),
        ("UpsamplingBilinear2d", (3,), {}, (2, 3, 4, 5)),
        ("PixelShuffle", (2,), {}, (2, 8, 3, 4)),
        ("PixelUnshuffle", (2,), {}, (2, 2, 4, 6)),
        ("Unfold", (2,), dict(dilation=(1, 2), padding=1, stride=2), (2, 3, 5, 6)),
        ("Fold", ((4, 5), 2), {}, (2, 12, 12)),
        ("ZeroPad1d", (2,), {}, (2, 3, 4)),
        ("ZeroPad2d", ((1, 2, -1, 3),), {}, (2, 3, 4, 5)),
        ("ZeroPad3d", (1,), {}, (2, 3, 4, 5, 2)),
        ("ConstantPad1d", (2, 3.5), {}, (3, 4)),
        ("ConstantPad2d", (1, 0), {}, (2, 3, 4, 5)),
        ("ConstantPad3d", ((1, 2, 3, 4, 5, 6), 1), {}, (2, 3, 4, 5, 2)),
        ("ReflectionPad1d", (2,), {}, (2, 3, 4)),
        ("ReflectionPad2d", ((1, 2, 0, 3),), {}, (2, 3, 4, 5)),
        ("ReflectionPad3d", (1,), {}, (3, 4, 5, 2)),
        ("ReplicationPad1d", (3,), {}, (2, 3, 4)),
        ("ReplicationPad2d", (1,), {}, (3, 4, 5)),
        ("ReplicationPad3d", ((1, 0, 2, 1, 0, 3),), {}, (2, 3, 4, 5, 2)),
        ("CircularPad1d", (2,), {}, (2, 3, 4)),
        ("CircularPad2d", ((1, 2, 3, 0),), {}, (2, 3, 4, 5)),
        ("CircularPad3d", (1,), {}, (2, 3, 4, 5, 2)),
    ]


@pytest.mark.parametrize("name,args,kw,shape", _layer_pairs(),
                         ids=[f"{p[0]}-{i}" for i, p in enumerate(_layer_pairs())])
def test_stateless_layers_match_torch_and_print_as_torch(name, args, kw, shape):
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert ours.extra_repr() == theirs.extra_repr()
    x = RNG.standard_normal(shape)
    against_torch(lambda a: ours(a), lambda a: theirs(a), [x])
    if kw.get("return_indices") or (name == "MaxPool3d"):
        np.testing.assert_array_equal(ours(T(x))[1].numpy(), theirs(torch.tensor(x))[1].numpy())


def test_layer_errors_name_the_layer():
    with pytest.raises(ValueError, match="Upsample: give exactly one of size and scale_factor"):
        nn.Upsample()(X2)
    with pytest.raises(ValueError, match="Upsample: align_corners can only be set"):
        nn.Upsample(scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="Conv3d: padding_mode must be one of"):
        nn.Conv3d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(TypeError, match=r"ZeroPad2d: padding must be an int or a tuple of 4"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(ValueError, match="MaxPool3d: padding 2 must be at most half"):
        nn.MaxPool3d(3, padding=2)
    with pytest.raises(TypeError, match="did you mean 'padding_mode'"):
        nn.Conv3d(2, 2, 3, paddingmode="zeros")
    with pytest.raises(TypeError, match="AdaptiveMaxPool1d: output_size must be an int"):
        nn.AdaptiveMaxPool1d((2, 3))


def test_layers_take_device_and_dtype_and_differentiate_through_functional_call():
    conv = nn.Conv3d(2, 4, 2, device="cpu", dtype=np.float64, key=tg.random.key(0))
    assert conv.weight.dtype == np.float64 and conv.bias.shape == (4,)
    x = T(RNG.standard_normal((1, 2, 3, 3, 3)))
    grads = tg.grad(lambda p: (nn.functional_call(conv, p, x)[0] ** 2).sum())(conv.params)
    assert grads["weight"].shape == (4, 2, 2, 2, 2) and grads["bias"].shape == (4,)


# -- vmap and jit ----------------------------------------------------------------------------
VMAP_JIT = [
    ("conv3d", lambda x: F.conv3d(x, T(np.linspace(-1, 1, 64).reshape(4, 2, 2, 2, 2)),
                                  padding=1, stride=2), (3, 2, 2, 4, 4, 5)),
    ("conv_transpose1d", lambda x: F.conv_transpose1d(
        x, T(np.linspace(-1, 1, 12).reshape(2, 3, 2)), stride=2, output_padding=1),
     (3, 2, 2, 5)),
    ("max_pool3d", lambda x: F.max_pool3d(x, 2, 1, 1, 2, True), (3, 2, 2, 5, 4, 5)),
    ("max_pool1d indices", lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True)[1],
     (3, 2, 2, 7)),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 3, 2, 1, True, False), (3, 2, 2, 7)),
    ("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 3)), (3, 2, 2, 5, 7)),
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)), (3, 2, 2, 5, 7, 3)),
    ("pad", lambda x: F.pad(x, (1, 2, -1, 1), mode="reflect"), (3, 2, 2, 5, 7)),
    ("interpolate", lambda x: F.interpolate(x, size=(7, 3), mode="bicubic"), (3, 2, 2, 5, 4)),
    ("grid_sample", lambda x: F.grid_sample(
        x, T(np.linspace(-1.2, 1.2, 36).reshape(2, 3, 3, 2)), padding_mode="reflection"),
     (3, 2, 2, 5, 4)),
    ("unfold", lambda x: F.unfold(x, 2, padding=1), (3, 2, 2, 5, 4)),
    ("fold", lambda x: F.fold(x, (4, 5), 2), (3, 2, 8, 12)),
]


@pytest.mark.parametrize("name,fn,shape", VMAP_JIT, ids=[c[0] for c in VMAP_JIT])
def test_vmap_and_jit_match_the_loop(name, fn, shape):
    x = T(RNG.standard_normal(shape))
    loop = np.stack([fn(x[i]).numpy() for i in range(shape[0])])
    np.testing.assert_allclose(tg.vmap(fn)(x).numpy(), loop, rtol=1e-12)
    jitted = tg.jit(fn)
    for i in range(2):  # the second call replays the compiled program on new values
        np.testing.assert_allclose(jitted(x[i]).numpy(), loop[i], rtol=1e-12)
    if np.issubdtype(loop.dtype, np.floating):  # per-example gradients, and under jit
        def loss(a):
            return (fn(a) ** 2).sum()

        per = tg.vmap(tg.grad(loss))(x).numpy()
        ref = np.stack([tg.grad(loss)(x[i]).numpy() for i in range(shape[0])])
        np.testing.assert_allclose(per, ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(tg.jit(tg.grad(loss))(x[1]).numpy(), ref[1], rtol=1e-10,
                                   atol=1e-12)


# -- size-0 dimensions -----------------------------------------------------------------------
EMPTY = [
    ("conv3d", lambda m, x: m.conv3d(x, m_arr(m, (4, 2, 2, 2, 2))), (0, 2, 3, 3, 3)),
    ("conv_transpose1d", lambda m, x: m.conv_transpose1d(x, m_arr(m, (2, 4, 2))), (0, 2, 3)),
    ("max_pool3d", lambda m, x: m.max_pool3d(x, 2), (0, 2, 3, 3, 3)),
    ("max_pool1d", lambda m, x: m.max_pool1d(x, 2), (0, 2, 5)),
    ("avg_pool3d", lambda m, x: m.avg_pool3d(x, 2), (0, 2, 3, 3, 3)),
    ("avg_pool1d", lambda m, x: m.avg_pool1d(x, 2), (0, 2, 5)),
    ("adaptive_max_pool2d", lambda m, x: m.adaptive_max_pool2d(x, 2), (0, 2, 5, 5)),
    ("adaptive_avg_pool3d", lambda m, x: m.adaptive_avg_pool3d(x, 2), (0, 2, 5, 5, 4)),
    ("pad reflect", lambda m, x: m.pad(x, (1, 2), mode="reflect"), (0, 2, 5)),
    ("pad constant", lambda m, x: m.pad(x, (1, 2, 0, 1)), (2, 0, 5)),
    ("interpolate", lambda m, x: m.interpolate(x, scale_factor=2, mode="bicubic"), (0, 2, 5, 4)),
    ("grid_sample", lambda m, x: m.grid_sample(x, m_arr(m, (0, 3, 3, 2)), align_corners=True),
     (0, 2, 5, 4)),
    ("unfold", lambda m, x: m.unfold(x, 2), (0, 2, 5, 4)),
    ("fold", lambda m, x: m.fold(x, (4, 5), 2), (0, 8, 12)),
    ("pixel_shuffle", lambda m, x: m.pixel_shuffle(x, 2), (0, 8, 2, 2)),
]


def m_arr(module, shape):
    """An array of ``shape`` for ``module`` (tapegrad's functional or torch's)."""
    a = np.linspace(-1, 1, int(np.prod(shape))).reshape(shape)
    return T(a) if module is F else torch.tensor(a)


@pytest.mark.parametrize("name,fn,shape", EMPTY, ids=[e[0] for e in EMPTY])
def test_size_zero_batches_and_channels_work_as_in_torch(name, fn, shape):
    x = np.zeros(shape)
    ours = fn(F, T(x))
    assert ours.shape == tuple(fn(TF, torch.tensor(x)).shape)
    g = tg.grad(lambda a: (fn(F, a) ** 2).sum())(T(x))
    assert g.shape == shape
