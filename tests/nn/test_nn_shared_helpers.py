"""The private helpers several nn layers and losses share: each keeps the behaviour of the
copies it replaced, for every caller."""

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn._activation_layers import _Pointwise, _PointwiseInplace
from tapegrad.nn._functional import _broadcasts_to


@pytest.mark.parametrize(
    "shape, target, fits",
    [
        ((), (2, 3), True),
        ((3,), (2, 3), True),
        ((1, 3), (2, 3), True),
        ((2, 1), (2, 3), True),
        ((2, 3), (2, 3), True),
        ((0,), (4, 0), True),
        ((4,), (2, 3), False),  # does not broadcast at all
        ((2, 3), (3,), False),  # broadcasts, but grows the target
        ((5, 2, 3), (2, 3), False),
        ((2, 3), (), False),
    ],
)
def test_broadcasts_to_matches_numpy_without_growing(shape, target, fits):
    assert _broadcasts_to(shape, target) is fits
    if fits:  # the same verdict as broadcasting an array
        assert np.broadcast_to(np.zeros(shape), target).shape == target


@pytest.mark.parametrize("name", ["params", "state"])
def test_params_and_state_stay_properties_that_replace_the_tree(name):
    prop = getattr(nn.Module, name)
    assert isinstance(prop, property) and prop.__doc__
    bn = nn.BatchNorm(2)
    tree = getattr(bn, name)
    new = {k: tg.Tensor(np.full(v.shape, 3.0, v.dtype)) for k, v in tree.items()}
    setattr(bn, name, new)
    assert all(float(getattr(bn, name)[k].numpy()[0]) == 3.0 for k in new)
    with pytest.raises((TypeError, ValueError)):
        setattr(bn, name, {"no_such_entry": tg.Tensor([1.0])})


@pytest.mark.parametrize("cls", [c for c in vars(nn).values()
                                 if isinstance(c, type) and issubclass(c, _Pointwise)])
def test_pointwise_layers_document_their_function_and_inplace(cls):
    doc = cls.__doc__
    assert doc.startswith(f"Module form of :func:`{cls._fn.__name__}` (PyTorch's ``nn.")
    assert ("inplace: PyTorch's option; only False." in doc) == issubclass(cls, _PointwiseInplace)


def test_a_subclass_of_a_pointwise_layer_keeps_its_own_docstring():
    class Quiet(nn.ReLU6):
        pass

    class Documented(nn.Mish):
        """My Mish."""

    assert Quiet.__doc__ is None
    assert Documented.__doc__ == "My Mish."
    x = tg.Tensor([-4.0, 0.5, 7.0])
    np.testing.assert_allclose(Quiet()(x).numpy(), nn.ReLU6()(x).numpy())
