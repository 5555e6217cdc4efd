"""Typical user code on tapegrad's public API, checked by pyright (basic) in CI: operators and
methods on Tensors, ``tapegrad.numpy`` functions, transforms, nn, optim and io as the docs show
them must type-check without errors. Not collected by pytest (no test_ prefix); it also runs
as a plain script."""

from __future__ import annotations

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import io, nn, optim
from tapegrad import random as tgr
from tapegrad.nn import functional as F


def loss_fn(params, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    h = tnp.tanh(x @ params["w"] + params["b"])
    return tnp.mean((h - y) ** 2) + 1e-3 * tnp.sum(params["w"] ** 2)


def main() -> None:
    key = tgr.key(0)
    k1, k2 = tgr.split(key)
    x = tgr.normal(k1, (8, 3))
    y = tgr.uniform(k2, (8, 2), dtype=np.float64)
    params = {"w": tg.Tensor(np.zeros((3, 2), np.float32)), "b": tnp.zeros(2)}

    # operators, reflected operators, comparisons, methods and properties
    z = 2.0 * x - 1 + x / 3 + abs(-x) + x**2 + (x > 0).astype(np.float32) + x.T.T
    m = z.reshape(4, 6).sum(axis=0).mean() + z.max() + z.std(axis=(0, 1)) + z.mT.sum()
    assert float(m) == float(m.item())
    sel = z[0, 1:] + z.at[0].set(1.0)[0, 1:]
    assert sel.shape == (2,)

    # tapegrad.numpy
    s = tnp.where(x > 0, tnp.exp(x), tnp.log1p(tnp.abs(x))) + tnp.maximum(x, 0.0)
    c = tnp.concatenate([s, x], axis=1) @ tnp.ones((6, 1))
    q, r = tnp.linalg.qr(tnp.eye(3) + 0.1)
    assert c.shape == (8, 1) and q.shape == r.shape

    # transforms
    loss, grads = tg.value_and_grad(loss_fn)(params, x, y)
    g2 = tg.grad(loss_fn, argnums=(1, 2))(params, x, y)
    out, vjp_fn = tg.vjp(tnp.sin, x)
    (ct,) = vjp_fn(tnp.ones_like(out))
    primal_out, tangent_out = tg.jvp(tnp.sin, (x,), (tnp.ones_like(x),))
    batched = tg.vmap(lambda v: v @ v, in_axes=(0,))(x)
    fast = tg.jit(loss_fn)(params, x, y)
    h = tg.hessian(lambda v: tnp.sum(v**3))(x[0])
    assert loss.shape == fast.shape == () and len(g2) == 2 and ct.shape == x.shape
    assert primal_out.shape == tangent_out.shape and batched.shape == (8,) and h.ndim == 2

    # nn, functional, init
    model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2))
    pred = model(x)
    ce = F.cross_entropy(pred, tg.Tensor(np.array([0, 1] * 4)))
    w = nn.init.orthogonal(key, (4, 4)) + nn.init.trunc_normal(key, (4, 4), std=0.02)
    n_params = sum(p.size for p in model.parameters())
    assert pred.shape == (8, 2) and ce.shape == () and w.shape == (4, 4) and n_params > 0

    # optim: pure transforms and the stateful wrapper
    tx = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(optim.linear_schedule(
        1e-2, 0.0, 100)))
    opt_state = tx.init(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optim.apply_updates(params, updates)
    opt = optim.Adam(model.parameters, lr=1e-3)
    opt.step(tg.grad(lambda p: tnp.sum(nn.functional_call(model, p, x)[0] ** 2))(model.params))

    # models are pytrees: model-shaped gradients, jit over a model, Equinox's tree tools
    model_grads = tg.grad(lambda m, v: tnp.sum(m(v) ** 2))(model, x)
    opt.step(model_grads)
    out = tg.jit(lambda m, v: m(v))(model, x)
    arrays, rest = tg.tree.partition(model, tg.tree.is_inexact_array)
    rebuilt = tg.tree.combine(arrays, rest)
    edited = tg.tree.tree_at(lambda m: m[0].bias, model, replace_fn=lambda b: b * 0.0)
    filtered = tg.filter_grad(lambda t: tnp.sum(t["w"] ** 2))({"w": params["w"], "tag": "a"})
    with nn.key_stream(key):
        drop = nn.Dropout(0.5)(x)
    assert out.shape == (8, 2) and rebuilt is not model and edited is not model
    assert filtered["tag"] is None and drop.shape == x.shape

    # io
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        io.save(f"{d}/params.safetensors", params)
        back = io.load(f"{d}/params.safetensors")
        assert set(back) == {"w", "b"}


if __name__ == "__main__":
    main()
