"""No silent wrong answers: each case here returned a wrong value without a word before.

Every test pins one corner a new user hits: a gradient that silently lost a path, a transform
that silently ignored its function, a replay that silently froze a random draw, a convention
mixed between ops. Each must now give the right answer or a clear error.
"""

import gc
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import optim


# -- a Python number taken from a differentiated value ------------------------------------------
def test_float_of_a_differentiated_value_is_an_error_not_a_lost_gradient():
    # x * float(x) has derivative 2x; the float would silently drop one path (3.0 at x = 3)
    for conv in (float, lambda t: t.item(), complex):
        with pytest.raises(TypeError, match=r"stop_gradient"):
            tg.grad(lambda x, conv=conv: x * conv(x))(tg.Tensor(3.0))
    with pytest.raises(TypeError, match=r"tg.stop_gradient\(x\).item\(\)"):
        tg.grad(lambda x: x * x.item())(tg.Tensor(3.0))
    with pytest.raises(TypeError, match="stop_gradient"):
        tg.jvp(lambda x: x * float(x), (tg.Tensor(3.0),), (tg.Tensor(1.0),))
    # the fix the message names: a constant on purpose
    g = tg.grad(lambda x: x * tg.stop_gradient(x).item())(tg.Tensor(3.0))
    assert float(g) == 3.0
    assert float(tg.grad(lambda x: x * float(tg.stop_gradient(x)))(tg.Tensor(3.0))) == 3.0


def test_python_decisions_still_work_as_guards():
    def f(x, n):
        total = x * 0.0
        for _ in range(int(n)):  # an integer: no derivative to lose
            total = total + x
        if x > 0:  # a comparison: a boolean
            return total
        return -total

    assert float(tg.grad(f)(tg.Tensor(2.0), tg.Tensor(np.array(3)))) == 3.0
    assert float(tg.grad(f)(tg.Tensor(-2.0), tg.Tensor(np.array(3)))) == -3.0
    with tg.no_grad():  # nothing is differentiated inside no_grad: a number is fine there
        assert float(tg.grad(lambda x: tg.stop_gradient(x) * 2.0 + x)(tg.Tensor(1.0))) == 1.0
    # under jit (a replaying trace), float() is a guard: a new value re-traces
    fj = tg.jit(lambda x: x * float(x))
    assert float(fj(tg.Tensor(3.0))) == 9.0
    assert float(fj(tg.Tensor(4.0))) == 16.0


# -- repeated argnums -------------------------------------------------------------------------
def test_repeated_argnums_give_each_copy_the_full_gradient():
    def f(a, b):
        return tnp.sum(a * a * b)

    a, b = tg.Tensor(np.array([1.0, 2.0])), tg.Tensor(np.array([3.0, 4.0]))
    g0, g1 = tg.grad(f, argnums=(0, 0))(a, b)
    np.testing.assert_allclose(g0.numpy(), [6.0, 16.0])
    np.testing.assert_allclose(g1.numpy(), [6.0, 16.0])
    ga, gb = tg.grad(f, argnums=(0, -2))(a, b)  # -2 names argument 0 as well
    np.testing.assert_allclose(ga.numpy(), g0.numpy())
    np.testing.assert_allclose(gb.numpy(), g0.numpy())
    (v, (h0, h1, h2)) = tg.value_and_grad(f, argnums=(1, 0, 1))(a, b)
    np.testing.assert_allclose(h0.numpy(), [1.0, 4.0])
    np.testing.assert_allclose(h2.numpy(), h0.numpy())
    np.testing.assert_allclose(h1.numpy(), g0.numpy())


# -- no_grad only stops the transforms that were running --------------------------------------
def test_a_transform_inside_no_grad_differentiates_its_function():
    x = tg.Tensor(np.array([1.0, 2.0]))
    with tg.no_grad():
        g = tg.grad(lambda v: tnp.sum(v * v))(x)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])  # was [0, 0]

    def outer(v):
        with tg.no_grad():  # stops outer's level, not the inner transform's own
            inner = tg.grad(lambda w: tnp.sum(w * w * v))(v)
        return tnp.sum(inner * v)

    # inner = 2 v * v (v constant inside no_grad for the outer level); outer = sum(2 v^3)
    # with inner's dependence on v cut: d/dv sum(inner * v) = inner
    np.testing.assert_allclose(tg.grad(outer)(x).numpy(), 2 * x.numpy() ** 2)
    assert tg.is_grad_enabled()


# -- one complex convention: JAX's and HIPS autograd's ----------------------------------------
def test_complex_gradient_follows_jax_everywhere():
    z = tg.Tensor(np.array([0.3 + 0.7j]))
    # |z (1 - 2j)|^2 = 5 |z|^2: d/dx = 10 x = 3, d/dy = 10 y = 7; JAX's grad is 3 - 7j
    g = tg.grad(lambda z: tnp.sum(tnp.abs(z * (1 - 2j)) ** 2))(z)
    np.testing.assert_allclose(g.numpy(), [3 - 7j])
    g2 = tg.grad(lambda z: tnp.sum(tnp.real(z * tnp.conj(z)) * 5.0))(z)
    np.testing.assert_allclose(g2.numpy(), [3 - 7j])


# -- random draws under jit and replay --------------------------------------------------------
def test_jit_and_replay_draw_from_the_key_they_are_given():
    k1, k2 = tg.random.split(tg.random.key(0))
    draw = tg.jit(lambda k: tg.random.normal(k, (3,)))
    np.testing.assert_array_equal(draw(k1).numpy(), tg.random.normal(k1, (3,)).numpy())
    np.testing.assert_array_equal(draw(k2).numpy(), tg.random.normal(k2, (3,)).numpy())
    assert not np.array_equal(draw(k1).numpy(), draw(k2).numpy())
    x = tg.Tensor(np.ones(1000))
    drop = tg.jit(lambda x, k: tg.nn.functional.dropout(x, 0.5, key=k, training=True))
    for k in (k1, k2):
        want = tg.nn.functional.dropout(x, 0.5, key=k, training=True).numpy()
        np.testing.assert_array_equal(drop(x, k).numpy(), want)
    _, tape = tg.trace(lambda k: tg.random.uniform(tg.random.fold_in(k, 3), (2,)))(k1)
    want = tg.random.uniform(tg.random.fold_in(k2, 3), (2,)).numpy()
    np.testing.assert_array_equal(tape.replay(k2).numpy(), want)


# -- Python integers stay integers under jit --------------------------------------------------
def test_jitted_adam_step_equals_the_eager_step_in_float64():
    rng = np.random.default_rng(0)
    params = {"w": tg.Tensor(rng.standard_normal(5)), "b": tg.Tensor(rng.standard_normal(2))}
    tx = optim.adam(1e-2)

    def step(params, opt_state, g):
        updates, opt_state = tx.update(g, opt_state, params)
        return optim.apply_updates(params, updates), opt_state

    jstep = tg.jit(step)
    pe, se = params, tx.init(params)
    pj, sj = params, tx.init(params)
    for _ in range(5):
        g = {"w": tg.Tensor(rng.standard_normal(5)), "b": tg.Tensor(rng.standard_normal(2))}
        pe, se = step(pe, se, g)
        pj, sj = jstep(pj, sj, g)
    for k in params:
        np.testing.assert_allclose(pj[k].numpy(), pe[k].numpy(), rtol=1e-15, atol=1e-15)
    assert tg.Tensor(5).dtype == np.int64  # a Python int is an integer Tensor


# -- the collector and threads -----------------------------------------------------------------
def test_transforms_never_switch_the_collector_off():
    seen = []
    stop = threading.Event()

    def worker():
        x = tg.Tensor(np.ones(8))
        while not stop.is_set():
            tg.grad(lambda v: tnp.sum(tnp.tanh(v) * v))(x)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(200):
            seen.append(gc.isenabled())
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert all(seen)
    inside = []
    tg.grad(lambda v: (inside.append(gc.isenabled()), tnp.sum(v * v))[1])(tg.Tensor([1.0]))
    assert inside == [True]


# -- NaN provenance --------------------------------------------------------------------------
def test_debug_nans_names_the_origin_forward_and_backward():
    with tg.debug_nans():
        with pytest.raises(FloatingPointError, match=r"^log \(forward rule\) made a NaN") as e:
            tnp.log(tg.Tensor(1.0) - 2.0)
        assert "test_trust.py" in str(e.value)  # the user's file and line
        with pytest.raises(FloatingPointError, match=r"the backward of sqrt") as e:
            tg.grad(lambda x: tnp.sum(tnp.sqrt(x * x)))(tg.Tensor([0.0, 1.0]))
        assert "test_trust.py" in str(e.value) and "(2,) float32" in str(e.value)
        # inputs already NaN or infinite: not an origin, no error
        tnp.log(tg.Tensor(np.nan))
        tnp.exp(tg.Tensor(np.inf))
        with tg.debug_nans(False):
            tnp.log(tg.Tensor(-1.0))
    # off by default: the same calls are silent (NaN is the answer)
    assert np.isnan(tnp.log(tg.Tensor(-1.0)).numpy())
    g = tg.grad(lambda x: tnp.sum(tnp.sqrt(x * x)))(tg.Tensor([0.0, 1.0])).numpy()
    assert np.isnan(g[0])


def test_no_forward_rule_warns():
    # (pytest turns warnings into errors) 0 * inf, log(-1), 1 / 0 and overflow are all silent
    inf = tg.Tensor(np.inf)
    for value in (tg.Tensor(0.0) * inf, tnp.log(tg.Tensor(-1.0)), tg.Tensor(1.0) / 0.0,
                  tnp.exp(tg.Tensor(np.float32(100.0))), tnp.sqrt(tg.Tensor(-1.0))):
        assert not np.isfinite(value.numpy())


# -- clearer errors ----------------------------------------------------------------------------
def test_wrong_calls_give_errors_that_name_the_fix():
    x = tg.Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"operand is None.*x is None"):
        _ = x == None  # noqa: E711
    with pytest.raises(TypeError, match=r"astype: 'foo' is not a dtype"):
        x.astype("foo")
    with pytest.raises(TypeError, match=r"checkpoint: argument leaf 0 .* is a str"):
        tg.checkpoint(lambda v: v * 2.0)("a")


# -- a NumPy array read out of a traced value -----------------------------------------------------
_READS = {
    "numpy()": lambda t: t.numpy(),
    "np.asarray": np.asarray,
    "np.array": np.array,
    "__array__": lambda t: t.__array__(),
}


@pytest.mark.parametrize("read", list(_READS), ids=list(_READS))
def test_numpy_of_a_differentiated_value_is_an_error_not_a_lost_gradient(read):
    # v * v.numpy() has derivative 2v: reading the value as an array would drop one path
    # (2.0 at v = 2, where the answer is 4.0); every differentiating transform refuses it
    r = _READS[read]

    def f(v):
        return tnp.sum(v * tg.Tensor(r(v)))

    x = tg.Tensor([2.0])
    calls = {
        "grad": lambda: tg.grad(f)(x),
        "value_and_grad": lambda: tg.value_and_grad(f)(x),
        "vjp": lambda: tg.vjp(f, x),
        "jvp": lambda: tg.jvp(f, (x,), (x,)),
        "linearize": lambda: tg.linearize(f, x),
        "jacfwd": lambda: tg.jacfwd(f)(x),
        "jacrev": lambda: tg.jacrev(f)(x),
        "hessian": lambda: tg.hessian(f)(x),
        "elementwise_grad": lambda: tg.elementwise_grad(f)(x),
        "checkpoint": lambda: tg.grad(tg.checkpoint(f))(x),
        "jit(grad)": lambda: tg.jit(tg.grad(f))(x),
        "grad(jit)": lambda: tg.grad(tg.jit(f))(x),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=r"stop_gradient\(x\)\.numpy\(\)"):
            call()
            pytest.fail(name)
    # inside vmap the value stands for a whole batch
    with pytest.raises(TypeError, match="batched value inside vmap"):
        tg.vmap(f)(tg.Tensor([[2.0], [3.0]]))
    # the fix the message names: a constant on purpose (derivative 2.0, as it says)
    g = tg.grad(lambda v: tnp.sum(v * tg.Tensor(tg.stop_gradient(v).numpy())))(x)
    assert float(g[0]) == 2.0


def test_numpy_of_a_traced_value_is_a_guard_under_jit_and_trace(tmp_path):
    # the first call's array was baked into every later call (f(3) gave 6, not 9)
    for read in _READS.values():
        f = tg.jit(lambda v, r=read: tnp.sum(v * tg.Tensor(r(v))))
        assert float(f(tg.Tensor([2.0]))) == 4.0
        assert float(f(tg.Tensor([3.0]))) == 9.0
        assert float(f(tg.Tensor([2.0]))) == 4.0  # the first program, still right
    # a constant read through stop_gradient is a guard too: nothing is baked silently
    f = tg.jit(lambda v: tnp.sum(v * tg.Tensor(tg.stop_gradient(v).numpy())))
    assert float(f(tg.Tensor([2.0]))) == 4.0 and float(f(tg.Tensor([3.0]))) == 9.0
    # an integer value has no derivative to lose: allowed under grad, guarded under jit
    h = tg.jit(lambda x, n: x * float(np.asarray(n).sum()))
    assert float(h(tg.Tensor(1.0), tg.Tensor(np.array([1, 2])))) == 3.0
    assert float(h(tg.Tensor(1.0), tg.Tensor(np.array([3, 4])))) == 7.0
    assert float(tg.grad(lambda x, n: x * float(n.numpy().sum()))(
        tg.Tensor(1.0), tg.Tensor(np.array([3, 4])))) == 7.0
    # trace: the tape holds the guard; a replay on another value refuses
    out, tape = tg.trace(lambda v: tnp.sum(v * tg.Tensor(v.numpy())))(tg.Tensor([2.0, 1.0]))
    assert float(out) == 5.0 and "guard numpy(a) == [2., 1.]" in str(tape)
    assert float(tape.replay(tg.Tensor([2.0, 1.0]))) == 5.0
    with pytest.raises(tg.GuardError, match=r"numpy\(\.\.\.\) gave \[2\., 1\.\]"):
        tape.replay(tg.Tensor([3.0, 1.0]))
    path = tmp_path / "consts.safetensors"  # the guard's array travels with the tape
    again = tg.Tape.from_json(tape.to_json(arrays=path), arrays=path)
    assert float(again.replay(tg.Tensor([2.0, 1.0]))) == 5.0
    with pytest.raises(tg.GuardError):
        again.replay(tg.Tensor([3.0, 1.0]))
    # NaN meets NaN, and a value of another dtype or shape never passes
    _, tape = tg.trace(lambda v: v + tg.Tensor(v.numpy()))(tg.Tensor([np.nan]))
    assert np.isnan(float(tape.replay(tg.Tensor([np.nan]))[0]))


def test_a_tensor_made_from_a_traced_value_is_a_read_like_numpy():
    # tg.Tensor(v) silently made a constant: 2.0 instead of 4.0 under grad, f(3) = 6 under
    # jit, and inside vmap every example became example 0
    x = tg.Tensor([2.0])
    for make in (tg.Tensor, tg.tensor, lambda t: tg.Tensor(t, dtype="float64")):
        def f(v, make=make):
            return tnp.sum(v * make(v))

        for call in (lambda: tg.grad(f)(x), lambda: tg.jvp(f, (x,), (x,)),
                     lambda: tg.hessian(f)(x)):
            with pytest.raises(TypeError, match=r"Tensor\(x\) of a Tensor that a transform is "
                                                r"differentiating.*tg.stop_gradient\(x\)"):
                call()
        jf = tg.jit(f)
        assert float(jf(x)) == 4.0 and float(jf(tg.Tensor([3.0]))) == 9.0
        with pytest.raises(TypeError, match=r"Tensor\(x\) of a batched value inside vmap"):
            tg.vmap(make)(tg.Tensor([[1.0], [2.0]]))
    # the fixes: the value itself stays traced; a constant on purpose through stop_gradient
    assert float(tg.grad(lambda v: tnp.sum(v * tnp.asarray(v)))(x)[0]) == 4.0
    assert float(tg.grad(lambda v: tnp.sum(v * tg.Tensor(tg.stop_gradient(v))))(x)[0]) == 2.0


def test_a_guard_that_flips_on_every_call_keeps_few_programs():
    f = tg.jit(lambda v: v * tg.Tensor(v.numpy()))
    for i in range(20):
        assert float(f(tg.Tensor(float(i)))) == float(i * i)
    assert f.cache_size() <= 8


def test_reading_a_value_outside_a_derivative_is_still_allowed():
    # no_grad, stop_gradient, and a value no transform traces all read freely
    x = tg.Tensor([2.0, 3.0])
    with tg.no_grad():
        assert tg.grad(lambda v: tnp.sum(v))(x).numpy().tolist() == [1.0, 1.0]
    assert tg.grad(lambda v: tnp.sum(v * tg.Tensor(np.asarray(tg.stop_gradient(v)))))(
        x).numpy().tolist() == [2.0, 3.0]
    seen = []
    tg.grad(lambda v: (seen.append(repr(v)), tnp.sum(v))[1])(x)  # printing is not computing
    assert "traced=level" in seen[0]


# -- a backward rule computed off the tape, at second order ----------------------------------------
class _NumpySin(tg.Function):
    """sin whose backward reads its saved input as a NumPy array."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * np.cos(x.numpy())


class _CtxSin(tg.Function):
    """sin whose backward reads cos(x) computed in forward and kept on ctx."""

    @staticmethod
    def forward(ctx, x):
        ctx.cos = np.cos(x)
        return np.sin(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.cos


class _SavedSin(tg.Function):
    """sin whose backward reads cos(x) saved with save_for_backward (neither input nor output)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(np.cos(x))
        return np.sin(x)

    @staticmethod
    def backward(ctx, g):
        (c,) = ctx.saved_tensors
        return g * c


@pytest.mark.parametrize("fn", [_NumpySin, _CtxSin, _SavedSin], ids=lambda c: c.__name__)
def test_a_backward_off_the_tape_raises_at_second_order(fn):
    # d2/dx2 sin at 0.3 is -0.2955; these rules gave 0 without a word
    x = tg.Tensor(np.float64(0.3))

    def f(v):
        return fn.apply(v)

    np.testing.assert_allclose(float(tg.grad(f)(x)), np.cos(0.3))  # first order is right
    for second in (tg.grad(tg.grad(f)), tg.hessian(f),
                   lambda v: tg.jvp(tg.grad(f), (v,), (v,)),
                   tg.grad(lambda v: tg.jvp(f, (v,), (v,))[1])):
        with pytest.raises(TypeError, match=rf"{fn.__name__}\.backward.*"
                                            r"once_differentiable"):
            second(x)
    if fn is _NumpySin:  # under jit the read is a guard: right for every input
        jg = tg.jit(tg.grad(f))
        for v in (0.3, 1.0):
            np.testing.assert_allclose(float(jg(tg.Tensor(np.float64(v)))), np.cos(v))
    else:  # under jit the array would keep the first call's value: refused
        with pytest.raises(TypeError, match=rf"{fn.__name__}\.backward.*jit"):
            tg.jit(tg.grad(f))(x)
