"""linear_transpose: the transpose of a linear function, against JAX and the adjoint identity;
functions that are not linear are refused."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

RNG = np.random.default_rng(11)
M = RNG.normal(size=(2, 3))


def _dot(a, b):
    return sum(float(np.vdot(np.asarray(x.numpy()).conj(), np.asarray(y.numpy())).real)
               for x, y in zip(tg.tree.tree_leaves(a), tg.tree.tree_leaves(b)))


def test_transpose_satisfies_the_adjoint_identity_on_pytrees():
    def f(p):
        return {"y": tg.Tensor(M) @ p["a"] + 2.0 * p["b"][:2], "z": tnp.sum(p["b"]) * 3.0}

    p = {"a": tg.Tensor(RNG.normal(size=3)), "b": tg.Tensor(RNG.normal(size=3))}
    ft = tg.linear_transpose(f, p)
    ct = {"y": tg.Tensor(RNG.normal(size=2)), "z": tg.Tensor(np.float64(0.7))}
    (back,) = ft(ct)
    assert tg.tree.tree_structure(back) == tg.tree.tree_structure(p)
    np.testing.assert_allclose(_dot(back, p), _dot(ct, f(p)), rtol=1e-13)
    np.testing.assert_allclose(back["a"].numpy(), M.T @ ct["y"].numpy(), rtol=1e-14)


def test_matches_jax_real_and_complex():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    with jax.enable_x64(True):
        got = tg.linear_transpose(lambda x, y: tg.Tensor(M) @ x - y, tg.Tensor(np.zeros(3)),
                                  tg.Tensor(np.zeros(2)))(tg.Tensor(np.array([1.0, -2.0])))
        want = jax.linear_transpose(lambda x, y: M @ x - y, np.zeros(3), np.zeros(2))(
            np.array([1.0, -2.0]))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-14)
        # complex: the transpose, not the conjugate transpose; conj is real-linear
        for fn_t, fn_j in ((lambda z: tnp.conj(z) * (2 + 1j), lambda z: jnp.conj(z) * (2 + 1j)),
                           (lambda z: z * (1 - 3j), lambda z: z * (1 - 3j))):
            z0 = np.array([1j, 2.0 + 0j])
            ct = np.array([1.0 + 2j, -0.5j])
            (g,) = tg.linear_transpose(fn_t, tg.Tensor(z0))(tg.Tensor(ct))
            (w,) = jax.linear_transpose(fn_j, z0)(ct)
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-14)


def test_composes_with_jit_vmap_and_grad():
    a = tg.Tensor(M)
    ft = tg.linear_transpose(lambda x: a @ x, tg.Tensor(np.zeros(3)))
    cts = RNG.normal(size=(4, 2))
    want = cts @ M
    np.testing.assert_allclose(tg.vmap(lambda c: ft(c)[0])(tg.Tensor(cts)).numpy(), want,
                               rtol=1e-14)
    jt = tg.jit(lambda c: ft(c)[0])
    for c, w in zip(cts, want):
        np.testing.assert_allclose(jt(tg.Tensor(c)).numpy(), w, rtol=1e-14)

    # the transpose of x -> A x, differentiated with respect to the A it closes over:
    # d/dA <A^T c, v> = c v^T
    c, v = tg.Tensor(cts[0]), tg.Tensor(RNG.normal(size=3))

    def pairing(a):
        (back,) = tg.linear_transpose(lambda x: a @ x, tg.Tensor(np.zeros(3)))(c)
        return tnp.sum(back * v)

    np.testing.assert_allclose(tg.grad(pairing)(a).numpy(), np.outer(cts[0], v.numpy()),
                               rtol=1e-14)


@pytest.mark.parametrize("name, fn", [
    ("offset", lambda x: x + 1.0),
    ("square", lambda x: x * x),
    ("sin", tnp.sin),
    ("relu", lambda x: tnp.maximum(x, 0.0)),
    ("abs", tnp.abs),
    ("exp minus one", lambda x: tnp.exp(x) - 1.0),
    ("product of inputs", lambda x: x * x[::-1]),
])
def test_functions_that_are_not_linear_are_refused(name, fn):
    with pytest.raises(ValueError, match="linear_transpose: fun is not linear"):
        tg.linear_transpose(fn, tg.Tensor(np.zeros(3)))


def test_linear_functions_of_every_kind_pass_the_check():
    x = tg.Tensor(np.zeros((2, 3)))
    for fn in (lambda v: v.T, lambda v: tnp.cumsum(v, axis=1), lambda v: v[:, ::-1] * 2.0,
               lambda v: tnp.fft.fft(v).real, lambda v: tnp.pad(v, 1), lambda v: -v,
               lambda v: tnp.where(tg.Tensor(np.eye(2, 3) > 0), v, 0.0)):
        ft = tg.linear_transpose(fn, x)
        u = tg.Tensor(RNG.normal(size=(2, 3)))
        out = fn(u)
        c = tg.Tensor(RNG.normal(size=out.shape))
        np.testing.assert_allclose(_dot(ft(c)[0], u), _dot(c, out), rtol=1e-12)


def test_float32_and_shape_dtype_structs():
    class Spec:  # like jax.ShapeDtypeStruct: only shape and dtype
        shape, dtype = (3,), np.dtype("float32")

    ft = tg.linear_transpose(lambda x: x * 2.0, Spec())
    (g,) = ft(tg.Tensor(np.ones(3, np.float32)))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g.numpy(), 2.0)


def test_errors_are_clear():
    with pytest.raises(TypeError, match="linear_transpose: fun must be callable"):
        tg.linear_transpose(3, tg.Tensor(0.0))
    with pytest.raises(TypeError, match="primal leaf 0 has dtype int64"):
        tg.linear_transpose(lambda x: x, tg.Tensor([1, 2]))
    with pytest.raises(TypeError, match="primal leaf 0 is a str"):
        tg.linear_transpose(lambda x: x, "x")
    with pytest.raises(TypeError, match="output leaf 0 has dtype bool"):
        tg.linear_transpose(lambda x: x > 0, tg.Tensor([1.0, 2.0]))
    ft = tg.linear_transpose(lambda x: x * 2.0, tg.Tensor(np.zeros(2)))
    with pytest.raises(TypeError, match="cotangent has structure"):
        ft((tg.Tensor(np.zeros(2)),))
    with pytest.raises(ValueError, match="cotangent leaf 0 has shape"):
        ft(tg.Tensor(np.zeros(3)))
    with pytest.raises(TypeError, match="cotangent leaf 0 has dtype float32"):
        ft(tg.Tensor(np.zeros(2, np.float32)))
