"""Example tests for ``tapegrad.ravel_pytree`` (also ``tapegrad.flatten``, HIPS autograd's
name): order, structure and dtypes round-trip, both directions differentiate, and errors."""

import collections

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

Pair = collections.namedtuple("Pair", "a b")


def test_round_trip_keeps_order_structure_shapes_and_dtypes():
    tree = {"w": np.arange(6.0).reshape(2, 3), "rest": [Pair(np.float32(2.5), None),
                                                        (np.array([7, 8]),)]}
    flat, unravel = tg.ravel_pytree(tree)
    assert flat.shape == (9,) and flat.dtype == np.float64  # promoted
    np.testing.assert_array_equal(flat.numpy(), [2.5, 7, 8, 0, 1, 2, 3, 4, 5])  # sorted keys
    back = unravel(flat)
    assert isinstance(back["rest"][0], Pair) and back["rest"][0].b is None
    assert back["rest"][1][0].dtype == np.int64 and back["rest"][0].a.dtype == np.float32
    np.testing.assert_array_equal(back["w"].numpy(), tree["w"])
    assert tg.flatten is tg.ravel_pytree
    empty, unravel_empty = tg.ravel_pytree({"a": [], "b": ()})
    assert empty.shape == (0,) and unravel_empty(empty) == {"a": [], "b": ()}


def test_both_directions_are_differentiable():
    a, b = tg.Tensor(np.array([1.0, 2.0])), tg.Tensor(np.array([[3.0]]))
    check_grads(lambda a, b: tg.ravel_pytree([a, {"k": b}])[0] ** 2, (a, b), order=2,
                modes=("rev", "fwd"))
    _, unravel = tg.ravel_pytree([a, {"k": b}])
    check_grads(lambda v: unravel(v)[1]["k"] * unravel(v)[0], (tg.Tensor(np.arange(3.0)),),
                order=2, modes=("rev", "fwd"))
    # flattening traced values inside a transform, as autograd.misc.flatten in its suite
    g = tg.grad(lambda x, y: tnp.sum(tg.flatten([x, y])[0] * tg.Tensor(np.array([2.0, 3.0]))),
                argnums=(0, 1))(np.float64(1.0), np.float64(2.0))
    assert [float(v) for v in g] == [2.0, 3.0]


def test_errors():
    with pytest.raises(TypeError, match=r"ravel_pytree: leaf pytree\['name'\] is a str"):
        tg.ravel_pytree({"name": "x", "w": np.ones(2)})
    _, unravel = tg.ravel_pytree([np.ones(2), np.ones(3)])
    with pytest.raises(ValueError, match=r"unravel: expected a vector of size 5 \(the pytree's "
                                         r"2 leaves\), got size 4"):
        unravel(np.ones(4))
    with pytest.raises(TypeError, match=r"unravel: expected a 1-D vector of size 5, got shape "
                                        r"\(5, 1\)"):
        unravel(np.ones((5, 1)))
