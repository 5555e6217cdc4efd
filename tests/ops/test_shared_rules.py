"""Errors of the rules several ops share: the functional updates' write (``x.at[idx]``) and
scatter_add, and the matrix-shape check of ``svd`` and ``qr``: each names its op."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.ops.movement import IndexSlot, ScatterAdd

VERBS = {"add": "add", "set": "write", "multiply": "apply", "max": "apply", "min": "apply"}


@pytest.mark.parametrize("name", sorted(VERBS))
@pytest.mark.parametrize("idx", [slice(0, 2), np.array([0, 1])], ids=["basic", "advanced"])
def test_every_update_names_itself_for_values_of_the_wrong_shape(name, idx):
    x = tnp.zeros((4,))
    with pytest.raises(ValueError, match=(
            rf"^at\[\]\.{name}: cannot {VERBS[name]} values of shape \(3,\) at the index of "
            r"a Tensor of shape \(4,\) \(")):
        getattr(x.at[idx], name)(tnp.ones((3,)))


@pytest.mark.parametrize("name", sorted(VERBS))
def test_every_update_names_itself_for_an_index_out_of_range(name):
    x = tnp.zeros((4,))
    with pytest.raises(IndexError, match=rf"^at\[\]\.{name}: .*\(Tensor of shape \(4,\)\)$"):
        getattr(x.at[np.array([7])], name)(1.0)


@pytest.mark.parametrize("name", sorted(VERBS))
def test_every_update_combines_repeated_indices_as_numpy(name):
    """Unbuffered, as NumPy's ``ufunc.at`` (the last write wins for ``set``)."""
    x = tg.Tensor([1.0, 2.0, 4.0])
    out = getattr(x.at[np.array([1, 1])], name)(tg.Tensor([1.0, 3.0]) if name != "add"
                                                else tg.Tensor([-1.0, 1.0]))
    ref = x.numpy().copy()
    ufunc = {"add": np.add, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}
    if name == "set":
        ref[[1, 1]] = [1.0, 3.0]
    else:
        ufunc[name].at(ref, [1, 1], [-1.0, 1.0] if name == "add" else [1.0, 3.0])
    np.testing.assert_array_equal(out.numpy(), ref)


def test_scatter_add_names_itself_and_its_target():
    g = tg.Tensor(np.ones(3))
    with pytest.raises(ValueError, match=(r"^scatter_add: cannot add values of shape \(3,\) "
                                          r"at the index into shape \(4,\) \(")):
        ScatterAdd.apply(g, shape=(4,), key=(slice(0, 2),))
    with pytest.raises(IndexError, match=r"^scatter_add: .*\(target shape \(4,\)\)$"):
        ScatterAdd.apply(tg.Tensor(1.0), tg.Tensor(np.array([9])), shape=(4,),
                         key=(IndexSlot(0, False),))


@pytest.mark.parametrize("op", ["svd", "qr"])
def test_matrix_decompositions_name_themselves_for_a_vector(op):
    with pytest.raises(ValueError, match=rf"^{op}: a must be a \(batch of\) matrices of shape "
                                         r"\(\.\.\., m, n\), got shape \(3,\)$"):
        getattr(tnp.linalg, op)(tnp.ones((3,)))
