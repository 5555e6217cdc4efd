import collections
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def f64(x):
    return tg.Tensor(np.asarray(x, dtype=np.float64))


# -- the everyday calls -------------------------------------------------------------------
def test_grad_over_a_params_pytree_keeps_structure():
    rng = np.random.default_rng(0)
    params = {"w": f64(rng.standard_normal((3, 2))), "b": f64(np.zeros(2))}
    x, y = f64(rng.standard_normal((4, 3))), f64(rng.standard_normal((4, 2)))

    def loss_fn(params, x, y):
        pred = tnp.tanh(x @ params["w"] + params["b"])
        return ((pred - y) ** 2).mean()

    grads = tg.grad(loss_fn)(params, x, y)
    assert set(grads) == {"w", "b"}
    assert grads["w"].shape == (3, 2) and grads["w"].dtype == np.float64
    # hand-written reverse mode
    z = x.numpy() @ params["w"].numpy()
    p = np.tanh(z)
    gp = 2 * (p - y.numpy()) / p.size
    gz = gp * (1 - p**2)
    np.testing.assert_allclose(grads["w"].numpy(), x.numpy().T @ gz, rtol=1e-12)
    np.testing.assert_allclose(grads["b"].numpy(), gz.sum(0), rtol=1e-12)
    loss, grads2 = tg.value_and_grad(loss_fn)(params, x, y)
    np.testing.assert_allclose(loss.numpy(), ((p - y.numpy()) ** 2).mean())
    np.testing.assert_allclose(grads2["w"].numpy(), grads["w"].numpy())


def test_pytree_kinds_namedtuple_none_list_tuple():
    P = collections.namedtuple("P", "a b")
    tree = {"nt": P(f64(1.0), None), "l": [f64(2.0), (f64(3.0),)]}

    def f(t):
        return t["nt"].a * t["l"][0] * t["l"][1][0]

    g = tg.grad(f)(tree)
    assert isinstance(g["nt"], P) and g["nt"].b is None
    assert float(g["nt"].a) == 6.0 and float(g["l"][0]) == 3.0 and float(g["l"][1][0]) == 2.0


def test_argnums_tuple_and_has_aux():
    f = lambda a, b, c: (a * b * c, {"ab": a * b})  # noqa: E731
    (ga, gc), aux = tg.grad(f, argnums=(0, 2), has_aux=True)(f64(2.0), f64(3.0), f64(5.0))
    assert float(ga) == 15.0 and float(gc) == 6.0 and float(aux["ab"]) == 6.0
    (v, aux2), g = tg.value_and_grad(f, argnums=1, has_aux=True)(f64(2.0), f64(3.0), f64(5.0))
    assert float(v) == 30.0 and float(g) == 10.0 and not aux2["ab"].is_traced


def test_negative_argnums():
    assert float(tg.grad(lambda a, b: a * b, argnums=-1)(f64(2.0), f64(3.0))) == 2.0


def test_output_not_depending_on_input_gives_zeros():
    g = tg.grad(lambda x: tg.Tensor(np.float64(3.0)))(f64([1.0, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])


def test_vjp_callable_many_times_and_linear():
    a, b = f64([1.0, 2.0]), f64([3.0, 4.0])
    out, vjp_fn = tg.vjp(lambda a, b: a * b + tnp.sin(a), a, b)
    u1, u2 = f64([1.0, 0.0]), f64([0.5, 2.0])
    c1, c2, c12 = vjp_fn(u1), vjp_fn(u2), vjp_fn(u1 + u2)
    for k in range(2):
        np.testing.assert_allclose(c12[k].numpy(), c1[k].numpy() + c2[k].numpy())
    np.testing.assert_allclose(vjp_fn(u1)[0].numpy(), c1[0].numpy())  # no "second backward" error
    np.testing.assert_allclose(c1[1].numpy(), [1.0, 0.0])


def test_vjp_pytree_outputs_and_has_aux():
    out, vjp_fn, aux = tg.vjp(
        lambda x: ({"s": x.sum(), "d": x * 2}, "note"), f64([1.0, 2.0]), has_aux=True
    )
    assert aux == "note"
    (g,) = vjp_fn({"s": f64(1.0), "d": f64([1.0, 1.0])})
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])


# -- levels: no perturbation confusion ------------------------------------------------------
def test_siskind_pearlmutter_example():
    inner = lambda x: tg.grad(lambda y: x + y)(1.0)  # noqa: E731
    assert tg.grad(lambda x: x * inner(x))(1.0) == 1.0


def test_siskind_pearlmutter_second_example():
    # d/dx [ x * d/dy (x * y) |_{y=2} ] = d/dx x^2 = 2x
    def f(x):
        return x * tg.grad(lambda y: x * y)(f64(2.0))

    assert float(tg.grad(f)(f64(3.0))) == 6.0


def test_function_closing_over_an_outer_traced_value():
    def outer(x):
        g = lambda y: tnp.sin(x * y)  # noqa: E731  (closes over the outer traced x)
        return tg.grad(g)(f64(0.5)) * x  # x cos(0.5 x) * x

    x0 = 1.3
    expected = 2 * x0 * np.cos(0.5 * x0) - 0.5 * x0**2 * np.sin(0.5 * x0)
    np.testing.assert_allclose(tg.grad(outer)(f64(x0)).numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "fn, d3",
    [
        (tnp.tanh, lambda x: -2 * (1 - np.tanh(x) ** 2) * (1 - 3 * np.tanh(x) ** 2)),
        (tnp.exp, np.exp),
        (tnp.sin, lambda x: -np.cos(x)),
        (lambda x: 3 * x**4 - x**3 + 2 * x, lambda x: 72 * x - 6),
    ],
    ids=["tanh", "exp", "sin", "poly"],
)
def test_third_derivatives_match_analytic(fn, d3):
    for x0 in (-0.7, 0.2, 1.1):
        got = tg.grad(tg.grad(tg.grad(fn)))(f64(x0))
        np.testing.assert_allclose(got.numpy(), d3(x0), rtol=1e-10, atol=1e-12)


def test_vjp_of_vjp():
    # f(x) = x^3: vjp_fn(u) = 3x^2 u; its vjp w.r.t. x with cotangent w: 6 x u w
    x, u, w = f64(1.5), f64(2.0), f64(0.5)

    def pulled(x):
        return tg.vjp(lambda x: x**3, x)[1](u)[0]

    _, vjp2 = tg.vjp(pulled, x)
    np.testing.assert_allclose(vjp2(w)[0].numpy(), 6 * 1.5 * 2.0 * 0.5)


def test_stop_gradient_and_detach():
    x = f64(2.0)
    assert float(tg.grad(lambda x: x * tg.stop_gradient(x))(x)) == 2.0
    assert float(tg.grad(lambda x: x * x.detach())(x)) == 2.0
    tree = tg.stop_gradient({"a": x, "b": 1})
    assert tree["b"] == 1


def test_no_grad_nests_and_is_thread_local():
    x = f64(3.0)

    def f(x):
        with tg.no_grad():
            with tg.no_grad():
                c = x * 2.0
            d = x * 5.0
        return c * x + d * x

    assert float(tg.grad(f)(x)) == 6.0 + 15.0
    assert tg.is_grad_enabled()
    seen = {}
    barrier = threading.Barrier(2)

    def worker(name, disable):
        if disable:
            with tg.no_grad():
                barrier.wait()
                seen[name] = tg.is_grad_enabled()
                barrier.wait()
        else:
            barrier.wait()
            seen[name] = tg.is_grad_enabled()
            barrier.wait()

    ts = [threading.Thread(target=worker, args=(n, d)) for n, d in (("a", True), ("b", False))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == {"a": False, "b": True}


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1)])
def test_grad_takes_a_one_element_output_as_its_scalar(shape):
    # HIPS autograd's rule: np.sum(x, keepdims=True) is a scalar for grad
    x = f64([[0.3, -1.2], [0.7, 2.0]])
    keep = len(shape) == 2

    def f(x):
        out = tnp.sum(tnp.sin(x) * x, keepdims=keep)
        return out if keep else tnp.reshape(out, shape)

    want = np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy())
    np.testing.assert_allclose(tg.grad(f)(x).numpy(), want, rtol=1e-12)
    value, g = tg.value_and_grad(f)(x)
    assert value.shape == shape  # the value as fun returned it
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
    # nested, argnums, has_aux, holomorphic: every way grad is called
    gg = tg.grad(lambda x: tnp.sum(tg.grad(f)(x), keepdims=True))(x)
    np.testing.assert_allclose(gg.numpy(), 2 * np.cos(x.numpy()) - x.numpy() * np.sin(x.numpy()),
                               rtol=1e-12)
    g2 = tg.grad(lambda a, b: tnp.reshape(tnp.sum(a * b), shape), argnums=(0, 1))(x, x)
    np.testing.assert_allclose(g2[1].numpy(), x.numpy())
    g3, aux = tg.grad(lambda x: (f(x), 5), has_aux=True)(x)
    assert aux == 5 and g3.shape == x.shape
    z = tg.Tensor(np.array(1.0 + 2.0j))
    gz = tg.grad(lambda z: tnp.reshape(z * z, shape), holomorphic=True)(z)
    assert complex(gz) == 2.0 + 4.0j


# -- bad input ------------------------------------------------------------------------------
def test_grad_of_non_scalar_names_shape_and_dtype_and_points_to_vjp():
    with pytest.raises(TypeError, match=r"shape \(2,\) dtype float64.*vjp"):
        tg.grad(lambda x: x * 2)(f64([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"shape \(0,\) dtype float64.*vjp"):
        tg.grad(lambda x: x[:0])(f64([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"complex.*holomorphic=True"):
        tg.grad(lambda x: tnp.reshape(x * 1j, (1,)))(f64(1.0))
    with pytest.raises(TypeError, match="real scalar"):
        tg.grad(lambda x: (x > 0).sum())(f64([1.0]))


def test_integer_input_names_the_leaf_path():
    params = {"w": f64([1.0]), "bn": {"count": np.array(3)}}
    with pytest.raises(TypeError, match=r"params\['bn'\]\['count'\].*int64"):
        tg.grad(lambda params: params["w"].sum())(params)
    with pytest.raises(TypeError, match="bool"):
        tg.grad(lambda x: x)(np.array(True))


def test_non_numeric_leaf_names_path_and_type():
    with pytest.raises(TypeError, match=r"params\['name'\] is a str"):
        tg.grad(lambda params: params["w"].sum())({"w": f64(1.0), "name": "x"})


def test_argnums_errors():
    with pytest.raises(TypeError, match="argnums"):
        tg.grad(lambda x: x, argnums="0")
    with pytest.raises(TypeError, match="argnums"):
        tg.grad(lambda x: x, argnums=(0, 1.0))
    with pytest.raises(ValueError, match="out of range"):
        tg.grad(lambda x: x.sum(), argnums=2)(f64(1.0))


def test_has_aux_without_a_pair():
    with pytest.raises(TypeError, match="has_aux=True"):
        tg.grad(lambda x: x.sum(), has_aux=True)(f64([1.0]))
    with pytest.raises(TypeError, match="pair"):
        tg.vjp(lambda x: (x, x, x), f64(1.0), has_aux=True)


def test_vjp_cotangent_mismatch_names_both():
    _, vjp_fn = tg.vjp(lambda x: {"a": x * 2}, f64([1.0, 2.0]))
    with pytest.raises(TypeError, match="structure"):
        vjp_fn(f64([1.0, 1.0]))
    with pytest.raises(ValueError, match=r"shape \(3,\).*shape \(2,\)"):
        vjp_fn({"a": f64([1.0, 1.0, 1.0])})
    with pytest.raises(ValueError, match="float32.*float64"):
        vjp_fn({"a": tg.Tensor([1.0, 1.0])})


def test_leaked_tracer_is_an_error():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0

    tg.grad(f)(f64(1.0))
    with pytest.raises(RuntimeError, match="leaked"):
        tg.grad(lambda y: leaked[0] * y)(f64(1.0))


def test_grad_numbers_mixed_leaf_kinds_in_order():
    """Concrete float Tensors take an inlined path to their traced inputs and every other leaf
    (numbers, arrays, labelled Tensors) the general one; the node ids must still follow the
    leaves, so each gradient lands on its own leaf."""
    params = {
        "a": tg.Tensor(np.float32(2.0)),
        "b": 3.0,
        "c": np.array([1.0, 2.0]),
        "d": tg.Tensor(np.array([5.0, 7.0]), label="d"),
        "e": tg.Tensor(np.float64(0.5)),
    }

    def f(p):
        return (p["a"] * p["b"] * p["c"] * p["d"]).sum() + p["e"] ** 2

    g = tg.grad(f)(params)
    c, d = np.array([1.0, 2.0]), np.array([5.0, 7.0])
    np.testing.assert_allclose(g["a"].numpy(), 3.0 * (c * d).sum())
    np.testing.assert_allclose(g["b"].numpy(), 2.0 * (c * d).sum())
    np.testing.assert_allclose(g["c"].numpy(), 6.0 * d)
    np.testing.assert_allclose(g["d"].numpy(), 6.0 * c)
    np.testing.assert_allclose(g["e"].numpy(), 1.0)


# -- a transform of something that is not a function ---------------------------------------------
_X = tg.Tensor(1.0)
_MAKE = {  # each transform given 3 where a function belongs, as made (or called) by a user
    "grad": lambda f: tg.grad(f),
    "value_and_grad": lambda f: tg.value_and_grad(f),
    "vjp": lambda f: tg.vjp(f, _X),
    "jvp": lambda f: tg.jvp(f, (_X,), (_X,)),
    "linearize": lambda f: tg.linearize(f, _X),
    "jacfwd": lambda f: tg.jacfwd(f),
    "jacrev": lambda f: tg.jacrev(f),
    "hessian": lambda f: tg.hessian(f),
    "hvp": lambda f: tg.hvp(f, (_X,), (_X,)),
    "elementwise_grad": lambda f: tg.elementwise_grad(f),
    "trace": lambda f: tg.trace(f),
    "vmap": lambda f: tg.vmap(f),
    "jit": lambda f: tg.jit(f),
    "checkpoint": lambda f: tg.checkpoint(f),
}


@pytest.mark.parametrize("name", list(_MAKE))
def test_a_transform_of_a_non_callable_fails_when_made(name):
    # tg.grad(3) returned a function that failed later, far from the mistake
    for bad in (3, _X, "f"):
        with pytest.raises(TypeError, match=rf"{name}: fun must be callable.*got "
                                            rf"{type(bad).__name__}"):
            _MAKE[name](bad)
