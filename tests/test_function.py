import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def f64(x):
    return tg.Tensor(np.asarray(x, dtype=np.float64))


class Square(tg.Function):
    oper = "square"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class ScaledCube(tg.Function):
    """A Function with a static positional parameter and free ctx attributes."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return scale * x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * ctx.scale * x * x * g, None


def test_user_function_under_every_transform_and_nested():
    x = f64(1.5)
    assert float(Square.apply(x)) == 2.25
    assert float(tg.grad(lambda x: Square.apply(x))(x)) == 3.0
    assert float(tg.grad(tg.grad(lambda x: Square.apply(x)))(x)) == 2.0
    assert float(tg.grad(tg.grad(tg.grad(lambda x: ScaledCube.apply(x, 2.0))))(x)) == 12.0
    out, vjp_fn = tg.vjp(lambda x: Square.apply(x), f64([1.0, 2.0]))
    np.testing.assert_allclose(vjp_fn(f64([1.0, 1.0]))[0].numpy(), [2.0, 4.0])
    _, tape = tg.trace(lambda x: Square.apply(x))(x)
    assert "square" in str(tape)


def test_context_attributes_are_set():
    seen = {}

    class Probe(tg.Function):
        @staticmethod
        def forward(ctx, x, y):
            seen["fwd"] = (ctx.device, ctx.backend is np, ctx.needs_input_grad)
            return x + y

        @staticmethod
        def backward(ctx, g):
            seen["bwd"] = ctx.needs_input_grad
            return g, g

    tg.grad(lambda x: Probe.apply(x, f64(1.0)))(f64(2.0))
    assert seen["fwd"] == ("cpu", True, (True, False))
    assert seen["bwd"] == (True, False)


def test_broadcast_cotangents_are_summed_by_apply():
    x, b = f64(np.ones((3, 2))), f64([1.0, 2.0])
    gb = tg.grad(lambda b: (x * b).sum())(b)
    np.testing.assert_allclose(gb.numpy(), [3.0, 3.0])
    gs = tg.grad(lambda s: (x + s).sum())(f64(0.0))
    assert gs.shape == () and float(gs) == 6.0


def test_backward_wrong_arity_names_the_function():
    class Bad(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(ValueError, match=r"Bad\.backward returned 2 value\(s\) for 1 input"):
        tg.grad(lambda x: Bad.apply(x).sum())(f64([1.0]))


def test_wrong_rule_arity_is_refused_by_every_transform_that_runs_a_rule():
    """The count check covers each place a rule runs: reverse mode, forward mode's jvp rule,
    forward mode through a transposed backward, and a once-differentiable backward."""

    class Twice(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

        @staticmethod
        def jvp(ctx, t):
            return t * 2, t

    class NoJvp(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    class Once(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @tg.once_differentiable
        def backward(ctx, g):
            return g * 2, g

    x = f64([1.0, 2.0])
    back = r"backward returned 2 value\(s\) for 1 input\(s\); return one cotangent"
    with pytest.raises(ValueError, match=r"Twice\." + back):
        tg.grad(lambda x: Twice.apply(x).sum())(x)
    with pytest.raises(ValueError, match=r"Twice\.jvp returned 2 tangent\(s\) for 1 output"):
        tg.jvp(Twice.apply, (x,), (x,))
    with pytest.raises(ValueError, match=r"NoJvp\." + back):
        tg.jvp(NoJvp.apply, (x,), (x,))
    with pytest.raises(ValueError, match=r"Once\." + back):
        tg.jit(tg.grad(lambda x: Once.apply(x).sum()))(x)


def test_backward_wrong_shape_names_the_function():
    class BadShape(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return tnp.reshape(g, (1, 3))[:, :2]

    with pytest.raises(ValueError, match=r"BadShape\.backward.*shape \(1, 2\).*\(3,\)"):
        tg.grad(lambda x: BadShape.apply(x).sum())(f64([1.0, 2.0, 3.0]))


def test_missing_backward_is_not_implemented():
    class NoBackward(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x

    with pytest.raises(NotImplementedError):
        tg.grad(lambda x: NoBackward.apply(x).sum())(f64([1.0]))


def test_non_differentiable_function_and_marked_outputs():
    class ArgMax(tg.Function):
        differentiable = False

        @staticmethod
        def forward(ctx, x):
            return np.argmax(x)

    class ValueAndIndex(tg.Function):
        @staticmethod
        def forward(ctx, x):
            i = np.argmax(x)
            ctx.i = i
            ctx.n = x.shape[0]
            idx = np.asarray(i)
            ctx.mark_non_differentiable(idx)
            return x[i], idx

        @staticmethod
        def backward(ctx, g, g_idx):
            onehot = np.zeros(ctx.n)
            onehot[ctx.i] = 1.0
            return g * onehot

    x = f64([1.0, 5.0, 2.0])
    assert int(ArgMax.apply(x)) == 1
    g = tg.grad(lambda x: ValueAndIndex.apply(x)[0] * 2.0)(x)
    np.testing.assert_allclose(g.numpy(), [0.0, 2.0, 0.0])


def test_shape_mismatch_in_binary_op_and_matmul_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"add: shapes \(2,\), \(3,\) do not broadcast"):
        tnp.add(f64([1.0, 2.0]), f64([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(2, 3\) are not aligned"):
        f64(np.ones((2, 3))) @ f64(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"matmul.*at least 1-D"):
        tnp.matmul(f64(1.0), f64([1.0]))


class _FakeGpuArray:
    """Stands in for a CuPy array so that the device check can be tested on any machine."""

    __cuda_array_interface__ = {}

    class device:  # noqa: N801
        id = 0

    def __init__(self, shape):
        self.shape = shape
        self.dtype = np.dtype("float32")
        self.ndim = len(shape)


def test_mixed_devices_name_both():
    cpu = tg.Tensor(np.ones(2, np.float32))
    from tapegrad.core.tensor import const

    gpu = const(_FakeGpuArray((2,)))
    with pytest.raises(ValueError, match=r"add: inputs live on different devices \(cpu, cuda:0\)"):
        cpu + gpu


def test_output_shape_default_and_overrides():
    from tapegrad import ops

    assert ops.Add.output_shape((3, 1), (4,)) == (3, 4)
    assert ops.MatMul.output_shape((5, 2, 3), (3,)) == (5, 2)
    assert ops.Sum.output_shape((2, 3, 4), axis=(0, 2), keepdims=True) == (1, 3, 1)
    assert ops.Reshape.output_shape((2, 6), (3, -1)) == (3, 4)
    with pytest.raises(ValueError, match="do not broadcast"):
        ops.Add.output_shape((2,), (3,))


def test_ops_errors_name_op_axis_and_ndim():
    with pytest.raises(ValueError, match="sum: axis 3 is out of range for a Tensor with ndim 2"):
        tnp.sum(f64(np.ones((2, 2))), axis=3)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape 4 elements into shape \(3,\)"):
        tnp.reshape(f64(np.ones(4)), (3,))


def test_multi_output_function_runs_forward_once_per_level():
    calls = []

    class SplitHalves(tg.Function):
        @staticmethod
        def forward(ctx, x):
            calls.append(1)
            n = x.shape[0] // 2
            ctx.n = n
            return x[:n] * 1.0, x[n:] * 2.0

        @staticmethod
        def backward(ctx, ga, gb):
            return tnp.concatenate([ga, gb * 2.0])

    x = f64([1.0, 2.0, 3.0, 4.0])
    g = tg.grad(lambda x: (SplitHalves.apply(x)[0] + SplitHalves.apply(x)[1] ** 2).sum())(x)
    assert len(calls) == 2  # one forward per apply, not two
    np.testing.assert_allclose(g.numpy(), [1.0, 1.0, 24.0, 32.0])  # d(2x)^2/dx = 8x


class _OnDevice(np.ndarray):
    """A NumPy array standing in for another device's array (CI has no GPU)."""


def _stand_in_device(monkeypatch):
    from tapegrad.core import backend
    from tapegrad.ops import movement

    real_device_of, real_to_device = backend.device_of, backend.to_device

    def device_of(a):
        return "cuda:0" if isinstance(a, _OnDevice) else real_device_of(a)

    def to_device(a, device):
        if device == "cuda:0":
            return np.asarray(a).view(_OnDevice)
        return real_to_device(a, device)

    monkeypatch.setattr(backend, "device_of", device_of)
    monkeypatch.setattr(backend, "to_device", to_device)
    monkeypatch.setattr(backend, "get_backend", lambda device: np)
    monkeypatch.setattr(movement, "_get_backend", lambda device: np)
    real_parse = backend.parse_device
    monkeypatch.setattr(backend, "parse_device",
                        lambda device: device if device == "cuda:0" else real_parse(device))


def test_numpy_constants_join_the_device_of_the_tensor_inputs(monkeypatch):
    """Eagerly, under a transform and on the recorded tape: a NumPy array given beside a
    Tensor on another device is a constant of that device, like a Python number; Tensors of
    two devices still do not mix."""
    _stand_in_device(monkeypatch)
    from tapegrad.core.tensor import const
    from tapegrad.ops import Add

    x = const(np.arange(3.0).view(_OnDevice))  # Tensor() would copy it into a plain array
    seen = []
    real_forward = Add.forward

    def forward(ctx, a, b):
        seen.append((type(a), type(b)))
        return real_forward(ctx, a, b)

    monkeypatch.setattr(Add, "forward", staticmethod(forward))
    Add.apply(x, np.ones(3))  # eager
    _, tape = tg.trace(lambda v: Add.apply(v, np.ones(3)))(x)  # recorded
    assert seen == [(_OnDevice, _OnDevice)] * 2
    (entry,) = [e for e in tape.entries if e.fn is Add]
    assert isinstance(entry.consts[1], _OnDevice)
    with pytest.raises(ValueError, match="add: inputs live on different devices"):
        Add.apply(x, tg.Tensor(np.ones(3)))


def test_cpu_index_tensors_join_the_device_of_the_indexed_tensor(monkeypatch):
    """PyTorch's rule: x[tnp.arange(n), y], take and take_along_axis on another device's
    Tensor read CPU index Tensors there."""
    _stand_in_device(monkeypatch)
    from tapegrad.core.tensor import const
    from tapegrad.ops import GetItem

    x = const(np.arange(6.0).reshape(2, 3).view(_OnDevice))
    seen = []
    real_forward = GetItem.forward

    def forward(ctx, a, *index_arrays, key):
        seen.append({type(i) for i in index_arrays})
        return real_forward(ctx, a, *index_arrays, key=key)

    monkeypatch.setattr(GetItem, "forward", staticmethod(forward))
    picked = x[tnp.arange(2), tg.Tensor(np.array([2, 0]))]
    np.testing.assert_array_equal(np.asarray(picked._array), [2.0, 3.0])
    tnp.take_along_axis(x, tg.Tensor(np.array([[1], [0]])), axis=1)
    assert seen and all(kinds == {_OnDevice} for kinds in seen)


# -- once_differentiable ----------------------------------------------------------------------
class OnceSin(tg.Function):
    """sin with a NumPy backward, marked first-order only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.sin(x)

    @staticmethod
    @tg.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.numpy() * np.cos(x.numpy())


class OnceScaledSin(tg.Function):
    """sin(x) * k with cos(x) kept on ctx and a static keyword; backward on Tensors."""

    @tg.once_differentiable  # above @staticmethod works too
    @staticmethod
    def backward(ctx, g):
        return g * ctx.cos * ctx.k, None

    @staticmethod
    def forward(ctx, x, shift, k=1.0):
        ctx.cos, ctx.k = np.cos(x + shift), k
        return np.sin(x + shift) * k


def test_once_differentiable_first_order_everywhere():
    xs = [np.array([0.3, -1.2]), np.array([1.0, 2.0])]

    def f(v):
        return tnp.sum(OnceSin.apply(v))

    def h(v):
        return tnp.sum(OnceScaledSin.apply(v, 0.5, k=2.0))

    jf, jh = tg.jit(tg.grad(f)), tg.jit(tg.grad(h))
    for a in xs:
        x = f64(a)
        for grad_f in (tg.grad(f), jf):  # jit replays the rule on new inputs: no stale value
            np.testing.assert_allclose(grad_f(x).numpy(), np.cos(a))
        np.testing.assert_allclose(jh(x).numpy(), 2 * np.cos(a + 0.5))
        _, tape = tg.trace(tg.grad(f))(f64(xs[0]))
        np.testing.assert_allclose(tape.replay(x).numpy(), np.cos(a))
    assert jf.cache_size() == 1  # no guard: the rule is one primitive of the program
    # vmap(grad): the rule runs per example (the op itself has no batching rule)
    with pytest.warns(UserWarning, match="OnceScaledSin .* has no batching rule") as w:
        per = tg.vmap(tg.grad(lambda v: OnceScaledSin.apply(v, 0.5, k=2.0)))(f64(xs[1]))
    assert {r.filename for r in w} == {__file__}  # the warning points at the user's line
    np.testing.assert_allclose(per.numpy(), 2 * np.cos(xs[1] + 0.5))
    # forward mode transposes a backward written with tapegrad ops on the cotangent
    _, t = tg.jvp(h, (f64(xs[0]),), (f64([1.0, 1.0]),))
    np.testing.assert_allclose(float(t), np.sum(2 * np.cos(xs[0] + 0.5)))


def test_once_differentiable_raises_when_differentiated_again():
    x = f64([0.3, -1.2])

    def f(v):
        return tnp.sum(OnceSin.apply(v))

    def h(v):
        return tnp.sum(OnceScaledSin.apply(v, 0.5))

    for fn, name in ((f, "OnceSin"), (h, "OnceScaledSin")):
        with pytest.raises(TypeError, match=rf"{name}\.backward is decorated with "
                                            r"@tg.once_differentiable.*differentiates it again"):
            tg.grad(lambda v, fn=fn: tnp.sum(tg.grad(fn)(v)))(x)
        with pytest.raises(TypeError, match=rf"{name}"):
            tg.hessian(fn)(x)
    # a NumPy backward cannot be transposed for forward mode: say so
    with pytest.raises(TypeError, match=r"OnceSin has no jvp rule.*once_differentiable"):
        tg.jvp(f, (x,), (x,))
    with pytest.raises(TypeError, match="once_differentiable: expected a backward rule"):
        tg.once_differentiable(3)


def _all_functions():
    import tapegrad.nn.functional  # noqa: F401  (defines its primitives)
    import tapegrad.scipy.linalg  # noqa: F401
    import tapegrad.scipy.special  # noqa: F401

    seen, todo = [], [tg.Function]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


def test_every_primitive_declares_what_jit_and_memory_assume_in_one_traits_record():
    """No Function carries jit's or the memory model's knowledge as loose class attributes:
    each declares one :class:`~tapegrad.core.function.Traits` record (or inherits the default)."""
    from tapegrad.core.function import Traits

    loose = ("ufunc", "into", "fresh", "view", "permutation", "transposed", "effect")
    bad = [f"{c.__module__}.{c.__qualname__}.{a}" for c in _all_functions() for a in loose
           if any(a in k.__dict__ for k in c.__mro__ if k is not object)]
    assert not bad, bad
    assert all(isinstance(c.traits, Traits) for c in _all_functions())
    assert not hasattr(tg.Function, "ufunc")
