"""Shared fixtures of the optimizer tests."""

import types

import numpy as np
import pytest

import tapegrad as tg


@pytest.fixture
def optax_x64():
    """Optax (skipped where not installed) with JAX's float64 enabled for the test, restored
    afterwards, and ``run(tx, params, grads_seq, values=None)``: the parameters (NumPy leaves,
    in tapegrad's flatten order) after each Optax step from tapegrad pytrees."""
    optax = pytest.importorskip("optax")
    import jax
    import jax.numpy as jnp

    def to_jax(tree):
        return tg.tree.tree_map(
            lambda x: jnp.asarray(np.asarray(x.numpy() if isinstance(x, tg.Tensor) else x)), tree
        )

    def run(tx, params, grads_seq, values=None):
        p = to_jax(params)
        state = tx.init(p)
        out = []
        for i, g in enumerate(grads_seq):
            kw = {} if values is None else {"value": values[i]}
            u, state = tx.update(to_jax(g), state, p, **kw)
            p = optax.apply_updates(p, u)
            out.append([np.asarray(x) for x in jax.tree_util.tree_leaves(p)])
        return out

    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield types.SimpleNamespace(optax=optax, run=run)
    finally:
        jax.config.update("jax_enable_x64", old)
