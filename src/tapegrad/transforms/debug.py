"""``tapegrad.transforms.debug``: see concrete values inside transformed code (JAX's ``jax.debug``).

Inside ``grad``, ``jit`` or ``vmap`` a value is traced, and reading it as a Python number is
refused (it would lose derivatives, or freeze one call's value into a program).
:func:`print` and :func:`callback` instead hand the values to your code while the function
runs, and give nothing back to the computation: results and derivatives are unchanged.

They are one primitive, :class:`DebugCallback`, that is not differentiable and declares an
effect (its ``effect`` trait), so ``jit`` keeps it in the compiled program, in order, and runs
it at every call: never folded into a constant, merged with an identical call or dropped for
having no output.

- under ``grad``, ``vjp``, ``jvp``, ``hessian``, ...: called once with the primal values, in
  the forward pass (never with tangents or cotangents);
- under ``jit``: called at every call of the jitted function (the first call, which records
  the program, runs it once too), also when its arguments are constants;
- under ``vmap``: called once per example, with that example's values, in order (JAX's
  rule); arguments the batch does not touch are passed as they are.

References:
    JAX, ``jax.debug.print`` and ``jax.debug.callback`` (semantics under transforms).
"""

from __future__ import annotations

import builtins

import numpy as np

from tapegrad.core import backend as _backend
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor, const, primal_of
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.core.weak import WeakScalar
from tapegrad.transforms.jit import implicit_state

__all__ = ["print", "callback", "DebugCallback"]


class _Call:
    """The static parameter of one debug call: the function and the arguments' layout."""

    __slots__ = ("fn", "in_tree", "kinds")

    def __init__(self, fn, in_tree, kinds):
        self.fn, self.in_tree, self.kinds = fn, in_tree, kinds

    def __repr__(self) -> str:
        return f"<{getattr(self.fn, '__name__', type(self.fn).__name__)}>"


class DebugCallback(Function):
    """Call a Python function with the values of its inputs; no outputs, no derivative.

    Inputs are the array leaves of the arguments (other leaves live in ``call``). ``forward``
    gives the function fresh constant Tensors (copies: a compiled program may reuse the
    buffers afterwards) and returns nothing. The batching rule calls it per example.
    """

    # the callback sees the values as they are, bfloat16 included
    bfloat16_native = True

    oper = "debug_callback"
    differentiable = False
    traits = Traits(effect=True)

    @staticmethod
    def forward(ctx, *inputs, call):
        leaves = [Tensor(a) if k else a for a, k in zip(inputs, call.kinds)]
        args, kwargs = tree_unflatten(call.in_tree, leaves)  # pyright: ignore[reportGeneralTypeIssues]
        call.fn(*args, **kwargs)  # pyright: ignore[reportCallIssue]
        return ()

    @staticmethod
    def batch(args, batched, size, call):
        for i in range(size):  # JAX's rule: once per example, in order
            DebugCallback.apply(*[a[i] if b else a for a, b in zip(args, batched)], call=call)
        return ()

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("debug_callback runs at once, also in lazy mode")


def _reaches(t, trace) -> bool:
    """Whether traced ``t`` is, or stands on, a value of ``trace``."""
    while isinstance(t, Tensor) and t._level:
        if t._trace is trace:
            return True
        t = primal_of(t)
    return False


def _level0(v):
    """A leaf's value with every transform's tracing taken off (a batch: the whole batch)."""
    while isinstance(v, Tensor) and v._level:
        v = primal_of(v)
    return v


def callback(fn, *args, ordered: bool = False, **kwargs) -> None:
    """Call ``fn(*args, **kwargs)`` with concrete values, also inside ``grad``, ``jit`` and
    ``vmap``; nothing flows back into the computation.

    ``fn`` receives the arguments' pytrees with each Tensor or array leaf as a constant Tensor
    (a fresh copy, which ``fn`` may keep) and other leaves (numbers, strings) as given. When it
    runs (see the module docstring): with the primal values under differentiating transforms,
    at every call of a jitted function, once per example under ``vmap``. Calls run in program
    order, so ``ordered=True`` (JAX's option) always holds and ``ordered=False`` changes
    nothing.

    Args:
        fn: The callback; its return value is ignored.
        *args: Pytrees of Tensors, arrays and Python values.
        ordered: Accepted for JAX compatibility; calls always run in program order.
        **kwargs: Keyword pytrees, passed to ``fn`` as keywords.

    Returns:
        None.

    Raises:
        TypeError: if ``fn`` is not callable. Errors ``fn`` raises propagate.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> seen = []
        >>> def f(x):
        ...     tg.debug.callback(lambda v: seen.append(float(v)), x)
        ...     return tnp.sin(x)
        >>> g = tg.grad(f)(tg.Tensor(0.5))
        >>> seen
        [0.5]

    References:
        JAX, ``jax.debug.callback``.
    """
    if not callable(fn):
        raise TypeError(f"debug.callback: fn must be callable, got {type(fn).__name__}; "
                        "write tg.debug.callback(fn, *args).")
    del ordered  # calls always run in program order
    leaves, in_tree = tree_flatten((args, kwargs))
    kinds, inputs = [], []
    for v in leaves:
        if type(v) is WeakScalar:  # a Python number jit traces: its exact value
            v = v.tensor
        if isinstance(v, (np.ndarray, np.generic)) or hasattr(v, "__cuda_array_interface__"):
            v = const(np.asarray(v) if isinstance(v, np.generic) else v)
        kinds.append(isinstance(v, Tensor))
        inputs.append(v)
    call = _Call(fn, in_tree, tuple(kinds))
    cap = implicit_state.capture
    if cap is not None and not cap.trace.done and not any(
            _reaches(v, cap.trace) for v in inputs):
        # inside a jit recording, on values that do not come from the jitted function's
        # inputs: record the call on that program anyway, so that every call runs it
        cap.trace.record(DebugCallback, [_level0(v) for v in inputs], {"call": call}, None)
        return
    DebugCallback.apply(*inputs, call=call)


def _host(v):
    if isinstance(v, Tensor):
        return _backend.to_device(v._concrete(), "cpu")
    return v


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001  (JAX's name)
    """Print ``fmt.format(*args, **kwargs)`` with concrete values, also inside ``grad``,
    ``jit`` and ``vmap`` (see :func:`callback` for when it runs).

    Tensor leaves are formatted as NumPy arrays (``{}`` of a 0-d value prints the number,
    ``{:.3f}`` formats it); the line goes to standard output with Python's ``print``.

    Args:
        fmt: A ``str.format`` format string.
        *args: Values for the positional fields (pytrees of Tensors, arrays, Python values).
        ordered: Accepted for JAX compatibility; calls always run in program order.
        **kwargs: Values for the named fields.

    Returns:
        None.

    Raises:
        TypeError: if ``fmt`` is not a string.
        ValueError: if ``fmt`` names a field that no argument fills (checked at the call).

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> f = tg.jit(lambda x: (tg.debug.print("x = {}", x), x * 2.0)[1])
        >>> y = f(tg.Tensor(1.5))
        x = 1.5
        >>> y = f(tg.Tensor(2.5))
        x = 2.5

    References:
        JAX, ``jax.debug.print``.
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: fmt must be a format string, got {type(fmt).__name__}; "
                        "write tg.debug.print('x = {}', x).")
    try:  # the fields against the arguments, now rather than inside a compiled program
        fmt.format(*[_ANY] * len(args), **dict.fromkeys(kwargs, _ANY))
    except (IndexError, KeyError) as e:
        raise ValueError(
            f"debug.print: the format string {fmt!r} has a field {e} that no argument fills "
            f"({len(args)} positional, keywords {sorted(kwargs)})."
        ) from None
    except ValueError as e:
        raise ValueError(f"debug.print: bad format string {fmt!r}: {e}") from None

    def show(*a, **k):
        a, k = [_map_host(v) for v in a], {n: _map_host(v) for n, v in k.items()}
        builtins.print(fmt.format(*a, **k))

    callback(show, *args, **kwargs)


def _map_host(tree):
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [_host(v) for v in leaves])


class _Anything:
    """Fills any format field (any spec, attribute or index): checks a format string's
    fields against the arguments without their values."""

    def __format__(self, spec: str) -> str:
        return ""

    def __getattr__(self, name: str):
        return self

    def __getitem__(self, key):
        return self


_ANY = _Anything()
