"""tg.debug.print and tg.debug.callback: concrete values under grad, jit and vmap; the
computation and its derivatives unchanged."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def f(x):
    tg.debug.print("x = {}", x)
    return tnp.sum(tnp.sin(x) * x)


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_eager_and_under_differentiating_transforms_the_primal_is_printed_once(capsys):
    x = tg.Tensor(np.array([1.0, 2.0]))
    f(x)
    assert _lines(capsys) == ["x = [1. 2.]"]
    g = tg.grad(f)(x)
    assert _lines(capsys) == ["x = [1. 2.]"]  # the forward pass, with the primal
    quiet = tg.grad(lambda v: tnp.sum(tnp.sin(v) * v))(x)
    np.testing.assert_array_equal(g.numpy(), quiet.numpy())
    tg.jvp(f, (x,), (tg.Tensor(np.array([5.0, 6.0])),))
    assert _lines(capsys) == ["x = [1. 2.]"]  # never the tangent
    h = tg.hessian(f)(x)
    assert _lines(capsys) == ["x = [1. 2.]"]
    np.testing.assert_array_equal(h.numpy(), tg.hessian(
        lambda v: tnp.sum(tnp.sin(v) * v))(x).numpy())
    tg.grad(tg.grad(lambda v: f(v * v)))(tg.Tensor(3.0))
    assert _lines(capsys) == ["x = 9.0"]


def test_jit_prints_at_every_call_not_only_when_recording(capsys):
    jf = tg.jit(f)
    for v in (1.0, 2.0, 3.0):
        out = jf(tg.Tensor(np.array([v, -v])))
        np.testing.assert_allclose(out.numpy(), 2 * v * np.sin(v))
    assert _lines(capsys) == ["x = [ 1. -1.]", "x = [ 2. -2.]", "x = [ 3. -3.]"]
    assert "debug_callback" in str(jf.lower(tg.Tensor(np.array([1.0, 2.0]))))
    jg = tg.jit(tg.grad(f))
    for v in (1.0, 2.0):
        jg(tg.Tensor(np.array([v, v])))
    assert _lines(capsys) == ["x = [1. 1.]", "x = [2. 2.]"]


def test_jit_keeps_calls_on_constants_and_runs_them_in_order(capsys):
    table = tg.Tensor(np.array([7.0, 8.0]))

    @tg.jit
    def step(x):
        tg.debug.print("start")
        tg.debug.print("table {}", table)  # a constant of the recording
        y = x * 2.0
        tg.debug.print("y {}", y)
        tg.debug.print("y {}", y)  # an identical call: not merged
        return y

    for v in (1.0, 2.0):
        step(tg.Tensor(v))
    assert _lines(capsys) == ["start", "table [7. 8.]", "y 2.0", "y 2.0"] + [
        "start", "table [7. 8.]", "y 4.0", "y 4.0"]


def test_vmap_calls_once_per_example_in_order(capsys):
    xs = tg.Tensor(np.arange(6.0).reshape(3, 2))
    out = tg.vmap(f)(xs)
    assert _lines(capsys) == ["x = [0. 1.]", "x = [2. 3.]", "x = [4. 5.]"]
    np.testing.assert_allclose(out.numpy(), np.sum(np.sin(xs.numpy()) * xs.numpy(), axis=1))
    tg.vmap(tg.grad(f))(xs)  # vmap below a differentiating transform: no extra call
    assert _lines(capsys) == ["x = [0. 1.]", "x = [2. 3.]", "x = [4. 5.]"]
    jv = tg.jit(tg.vmap(f))
    jv(xs)
    jv(xs + 10.0)
    assert _lines(capsys) == ["x = [0. 1.]", "x = [2. 3.]", "x = [4. 5.]",
                              "x = [10. 11.]", "x = [12. 13.]", "x = [14. 15.]"]
    # an argument the batch does not touch is passed as it is, with each example
    tg.vmap(lambda x, s: tg.debug.print("{} {}", x, s), in_axes=(0, None))(
        tg.Tensor(np.array([1.0, 2.0])), tg.Tensor(np.array([5.0, 6.0])))
    assert _lines(capsys) == ["1.0 [5. 6.]", "2.0 [5. 6.]"]


def test_callback_gets_constant_tensors_it_may_keep():
    seen = []

    def keep(x, extra, *, tag):
        assert isinstance(x, tg.Tensor) and not x.is_traced
        seen.append((x, extra, tag))

    @tg.jit
    def g(x):
        y = tnp.exp(x)
        tg.debug.callback(keep, y, {"n": 3}, tag="t")
        return tnp.sum(y * 2.0) + tnp.sum(y + 1.0)  # buffers the program may reuse

    for v in (0.0, 1.0, 2.0):
        g(tg.Tensor(np.array([v, v])))
    assert [s[1:] for s in seen] == [({"n": 3}, "t")] * 3
    for (x, _, _), v in zip(seen, (0.0, 1.0, 2.0)):  # each kept value is still its own
        np.testing.assert_allclose(x.numpy(), np.exp([v, v]))


def test_lazy_mode_and_format_specs(capsys):
    with tg.lazy():
        y = tnp.exp(tg.Tensor(1.0))
        tg.debug.print("{v:.3f} and {0}", tg.Tensor(2.5), v=y)
    assert _lines(capsys) == ["2.718 and 2.5"]


def test_errors_are_clear():
    x = tg.Tensor(1.0)
    with pytest.raises(TypeError, match="debug.callback: fn must be callable"):
        tg.debug.callback(3, x)
    with pytest.raises(TypeError, match="debug.print: fmt must be a format string"):
        tg.debug.print(x)
    with pytest.raises(ValueError, match="debug.print: the format string .* field"):
        tg.debug.print("{} {}", x)
    with pytest.raises(ValueError, match="field 'y'"):
        tg.jit(lambda v: tg.debug.print("{y}", x=v))(x)
    with pytest.raises(ValueError, match="bad format string"):
        tg.debug.print("{", x)


def test_jit_keeps_every_call_of_any_op_that_declares_an_effect():
    log = []

    class Note(tg.Function):  # a user op with a side effect, declared as a trait
        traits = tg.Traits(effect=True)
        differentiable = False

        @staticmethod
        def forward(ctx, x):
            log.append(float(np.sum(x)))
            return x * 0.0  # an output nothing reads

    @tg.jit
    def g(x):
        Note.apply(x)
        Note.apply(x)  # the same call again: not merged
        return x * 2.0

    for v in (1.0, 2.0, 3.0):
        g(tg.Tensor(v))
    assert log == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert str(g.lower(tg.Tensor(1.0))).count("note") == 2
