"""``dtype=`` is checked by one helper (``tapegrad.ops._registry.dtype_arg``) for every op
that takes NumPy's accumulator/result dtype or casts its inputs."""

import numpy as np
import pytest

import tapegrad.numpy as tnp
from tapegrad.ops._registry import dtype_arg


@pytest.mark.parametrize("given", ["float32", np.float64, np.dtype("int8"), float, "c16"])
def test_dtype_arg_reads_what_numpy_reads(given):
    assert dtype_arg(given, "op") == np.dtype(given)


@pytest.mark.parametrize("bad", ["nope", object(), [1, 2]])
def test_dtype_arg_names_the_op_and_the_value(bad):
    with pytest.raises(TypeError, match=r"^myop: dtype .* is not a dtype$"):
        dtype_arg(bad, "myop")


X = tnp.asarray([[1.0, 2.0], [3.0, 4.0]])

USERS = {
    "sum": lambda dt: tnp.sum(X, dtype=dt),
    "mean": lambda dt: tnp.mean(X, dtype=dt),
    "prod": lambda dt: tnp.prod(X, dtype=dt),
    "var": lambda dt: tnp.var(X, dtype=dt),
    "std": lambda dt: tnp.std(X, dtype=dt),
    "cumsum": lambda dt: tnp.cumsum(X, dtype=dt),
    "cumprod": lambda dt: tnp.cumprod(X, dtype=dt),
    "concatenate": lambda dt: tnp.concatenate([X, X], dtype=dt),
    "stack": lambda dt: tnp.stack([X, X], dtype=dt),
    "einsum": lambda dt: tnp.einsum("ij,jk->ik", X, X, dtype=dt),
}


@pytest.mark.parametrize("op", sorted(USERS))
def test_every_dtype_taking_op_rejects_a_non_dtype_by_name(op):
    with pytest.raises(TypeError, match=rf"^{op}: dtype 'nope' is not a dtype$"):
        USERS[op]("nope")


@pytest.mark.parametrize("op", sorted(USERS))
def test_every_dtype_taking_op_returns_the_dtype_asked_for(op):
    assert USERS[op]("float64").dtype == np.float64
