"""vmap's batching rules against the per-example loop, on drawn shapes, axes and indices.

Each case is checked with ``tapegrad.testing.check_vmap``: values, shapes and dtypes equal to
``f`` applied to each example and stacked, with no op falling back to the loop. Batches of
size 0 and 1 and size-0/size-1 example axes are drawn too.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_vmap
from tapegrad.testing.strategies import arrays, broadcastable_shapes, shapes

batch = st.integers(0, 3)


def _batched(draw, shape, b, ax=0):
    full = tuple(shape[:ax]) + (b,) + tuple(shape[ax:])
    return tg.Tensor(draw(arrays(full)))


UNARY = {
    "sin": lambda x: tnp.sin(x) * x,
    "sum": lambda x: tnp.sum(x),
    "sum_last": lambda x: tnp.sum(x, axis=-1) if x.ndim else x,
    "mean_keep": lambda x: tnp.mean(x, axis=0, keepdims=True) if x.ndim and len(x) else x,
    "max_all": lambda x: tnp.max(x) if x.size else tnp.sum(x),
    "reshape": lambda x: x.reshape(-1),
    "T": lambda x: x.T,
    "flip": lambda x: tnp.flip(x),
    "cumsum": lambda x: tnp.cumsum(x, axis=-1) if x.ndim else x,
    "roll": lambda x: tnp.roll(x, 1),
    "roll_axis": lambda x: tnp.roll(x, (1, -2), axis=(0, -1)) if x.ndim else x,
    "where": lambda x: tnp.where(x > 0, x, 0.5 * x),
    "maximum": lambda x: tnp.maximum(x, 0.1),
    "pad": lambda x: tnp.pad(x, 1),
    "concat": lambda x: tnp.concatenate([x, 2 * x], axis=-1) if x.ndim else x,
    "stack": lambda x: tnp.stack([x, x * x], axis=-1),
    "expand": lambda x: tnp.expand_dims(x, 0),
    "outer_self": lambda x: x.reshape(-1)[:, None] * x.reshape(-1)[None, :],
    "prod": lambda x: tnp.prod(x, axis=0) if x.ndim else x,
    "var": lambda x: tnp.var(x) if x.size else tnp.sum(x),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data(), shape=shapes(max_dims=3, max_side=3), b=batch)
def test_unary_ops_match_the_loop(name, data, shape, b):
    x = _batched(data.draw, shape, b)
    check_vmap(UNARY[name], (x,))


@given(data=st.data(), shapes2=broadcastable_shapes(2, max_side=3), b=batch,
       axes=st.sampled_from([(0, 0), (0, None), (None, 0)]))
def test_binary_broadcasting_with_batched_and_unbatched_operands(data, shapes2, b, axes):
    args = []
    for shp, ax in zip(shapes2, axes):
        args.append(_batched(data.draw, shp, b) if ax is not None
                    else tg.Tensor(data.draw(arrays(shp))))
    check_vmap(lambda x, y: x * y - x / (1.5 + y * y), tuple(args), in_axes=axes)


@given(data=st.data(), b=batch, n=st.integers(0, 3), m=st.integers(1, 3),
       k=st.integers(0, 3), axes=st.sampled_from([(0, 0), (0, None), (None, 0)]),
       vec=st.sampled_from(["mm", "mv", "vm", "vv"]), stack=st.integers(0, 2))
def test_matmul_all_rank_combinations(data, b, n, m, k, axes, vec, stack):
    lead = (2,) * stack
    sa = {"mm": lead + (n, m), "mv": lead + (n, m), "vm": (m,), "vv": (m,)}[vec]
    sb = {"mm": (m, k), "mv": (m,), "vm": lead + (m, k), "vv": (m,)}[vec]
    args = [_batched(data.draw, s, b) if ax is not None else tg.Tensor(data.draw(arrays(s)))
            for s, ax in zip((sa, sb), axes)]
    check_vmap(lambda x, y: x @ y, tuple(args), in_axes=axes)


@given(data=st.data(), b=batch, ax=st.integers(-3, 2), out_ax=st.integers(-2, 1))
def test_in_axes_and_out_axes_anywhere(data, b, ax, out_ax):
    shape = [2, 3]
    x = _batched(data.draw, shape, b, ax % 3)
    check_vmap(lambda x: tnp.tanh(x) @ tnp.ones((3, 2)), (x,), in_axes=(ax,), out_axes=out_ax)


@st.composite
def index_cases(draw):
    """An example shape, a NumPy index into it, and which index arrays are per example."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    key, arrays_, per_example = [], [], []
    used = 0
    ellipsis = False
    common = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))  # index arrays broadcast
    while used < len(shape) and draw(st.booleans()) or not key:
        kind = draw(st.sampled_from(["slice", "int", "array", "batched_array", "none",
                                     "ellipsis", "mask"]))
        if used >= len(shape) and kind in ("slice", "int", "array", "batched_array", "mask"):
            kind = "none"
        if kind == "ellipsis" and ellipsis:
            kind = "none"
        n = shape[used] if used < len(shape) else 1
        if kind == "slice":
            start = draw(st.integers(-n, n))
            step = draw(st.sampled_from([1, 2, -1]))
            key.append(slice(start, None, step))
            used += 1
        elif kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
            used += 1
        elif kind in ("array", "batched_array"):
            ishape = common[draw(st.integers(0, len(common))):]  # a suffix: broadcasts
            key.append(("array", len(arrays_)))
            arrays_.append((ishape, n))
            per_example.append(kind == "batched_array")
            used += 1
        elif kind == "mask":
            key.append(("mask", len(arrays_)))
            arrays_.append(((n,), None))
            per_example.append(False)
            used += 1
        elif kind == "none":
            key.append(None)
        else:
            key.append(Ellipsis)
            ellipsis = True
            used = len(shape)  # the rest of the axes
    return tuple(shape), key, arrays_, per_example


def _index_args(draw, case, b):
    shape, key, arrs, per = case
    vals = []
    for (ishape, n), pe in zip(arrs, per):
        if n is None:  # a mask
            vals.append(np.asarray(draw(st.lists(st.booleans(), min_size=ishape[0],
                                                 max_size=ishape[0]))))
        else:
            full = ((b,) if pe else ()) + ishape
            vals.append(np.asarray(draw(st.lists(st.integers(-n, n - 1),
                                                 min_size=int(np.prod(full)),
                                                 max_size=int(np.prod(full))))).reshape(full)
                        .astype(np.int64))
    return vals


def _valid(shape, key, vals, per):
    """Whether NumPy accepts the index on an example (masks must broadcast with the arrays)."""
    try:
        return np.zeros(shape)[_apply_key(key, [v[0] if p else v for v, p in zip(vals, per)])]
    except IndexError:
        assume(False)


def _apply_key(key, arrays_):
    return tuple(arrays_[e[1]] if isinstance(e, tuple) else e for e in key)


@given(data=st.data(), case=index_cases(), b=st.integers(1, 3))
def test_getitem_with_any_index(data, case, b):
    shape, key, _, per = case
    x = _batched(data.draw, shape, b)
    vals = _index_args(data.draw, case, b)
    _valid(shape, key, vals, per)
    ts = [tg.Tensor(v) for v in vals]
    axes = (0,) + tuple(0 if p else None for p in per)
    check_vmap(lambda x, *idx: x[_apply_key(key, idx)], (x, *ts), in_axes=axes)


@given(data=st.data(), case=index_cases(), b=st.integers(1, 3),
       op=st.sampled_from(["set", "add", "multiply", "max", "min"]),
       x_batched=st.booleans(), v_batched=st.booleans())
def test_scatter_updates_with_any_index(data, case, b, op, x_batched, v_batched):
    shape, key, _, per = case
    vals = _index_args(data.draw, case, b)
    sub = _valid(shape, key, vals, per).shape
    x = _batched(data.draw, shape, b) if x_batched else tg.Tensor(data.draw(arrays(shape)))
    v = _batched(data.draw, sub, b) if v_batched else tg.Tensor(data.draw(arrays(sub)))
    if not (x_batched or v_batched or any(per)):
        x = _batched(data.draw, shape, b)
        x_batched = True
    ts = [tg.Tensor(a) for a in vals]
    axes = (0 if x_batched else None, 0 if v_batched else None) + tuple(
        0 if p else None for p in per)

    def f(x, v, *idx):
        return getattr(x.at[_apply_key(key, idx)], op)(v)

    check_vmap(f, (x, v, *ts), in_axes=axes)


@given(data=st.data(), case=index_cases(), b=st.integers(1, 3))
def test_gradient_of_indexing_under_vmap(data, case, b):
    """vmap(grad(f)) with f indexing: the backward's scatter is batched as well."""
    shape, key, _, per = case
    x = _batched(data.draw, shape, b)
    vals = _index_args(data.draw, case, b)
    _valid(shape, key, vals, per)
    ts = [tg.Tensor(v) for v in vals]
    axes = (0,) + tuple(0 if p else None for p in per)
    check_vmap(tg.grad(lambda x, *idx: tnp.sum(tnp.sin(x[_apply_key(key, idx)]))),
               (x, *ts), in_axes=axes)
