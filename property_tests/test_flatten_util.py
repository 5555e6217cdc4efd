"""Property tests for ``tapegrad.ravel_pytree``: drawn pytrees of arrays (size-0 and size-1
dims included) round-trip, the vector is NumPy's concatenation of the raveled leaves, and both
directions have correct derivatives at orders 1 and 2 in both modes."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import floats_in, shapes


@given(data=st.data())
def test_ravel_pytree_round_trips_and_differentiates(data):
    leaf_shapes = data.draw(st.lists(shapes(max_dims=3, max_side=3), min_size=1, max_size=4))
    leaves = [data.draw(hnp.arrays(np.float64, s, elements=floats_in(-2.0, 2.0)))
              for s in leaf_shapes]
    tree = {"first": leaves[0], "more": tuple(leaves[1:])}
    flat, unravel = tg.ravel_pytree(tree)
    want = np.concatenate([leaves[0].ravel()] + [v.ravel() for v in leaves[1:]])
    np.testing.assert_array_equal(flat.numpy(), want)
    back = unravel(flat)
    for got, leaf in zip([back["first"], *back["more"]], leaves, strict=True):
        assert got.shape == leaf.shape and got.dtype == leaf.dtype
        np.testing.assert_array_equal(got.numpy(), leaf)
    t = tuple(tg.Tensor(v) for v in leaves)
    check_grads(lambda *xs: tg.ravel_pytree({"first": xs[0], "more": xs[1:]})[0] ** 2, t,
                order=2, modes=("rev", "fwd"))
    check_grads(lambda v: [x * x for x in tg.tree.tree_leaves(unravel(v))],
                (tg.Tensor(want),), order=2, modes=("rev", "fwd"))
