"""Filtered transforms (Equinox's): ``grad`` and ``jit`` over pytrees that mix arrays with
other leaves.

``tg.grad`` differentiates every leaf of its arguments and refuses a leaf it cannot
differentiate (an integer array, a string, a function), naming it; ``tg.jit`` traces every
leaf and refuses the ones it cannot trace. A Module is already fine for both (its
configuration is static, and ``grad`` holds its keys and counters constant). For any other
mixed tree, these wrappers split the tree with :func:`tapegrad.core.tree.partition` first:

- :func:`filter_value_and_grad` / :func:`filter_grad` differentiate the floating array leaves
  of the first argument (:func:`tapegrad.core.tree.is_inexact_array`); every other leaf is passed
  through unchanged and its gradient is ``None``;
- :func:`filter_jit` traces the array leaves of every argument (:func:`tapegrad.core.tree.is_array`)
  and treats every other leaf as static: part of the signature, compared by value, so a new
  value compiles again.

References:
    Kidger and Garcia, "Equinox: neural networks in JAX via callable PyTrees and filtered
    transformations", 2021 (``filter_grad``, ``filter_value_and_grad``, ``filter_jit``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tapegrad.core.tree import (
    combine,
    is_array,
    is_inexact_array,
    partition,
    register,
    static_key,
    tree_flatten,
)
from tapegrad.transforms.jit import _check_fuse, jit
from tapegrad.transforms.reverse import check_callable, value_and_grad

__all__ = ["filter_value_and_grad", "filter_grad", "filter_jit"]


def filter_value_and_grad(fun: Callable, *, has_aux: bool = False) -> Callable[..., Any]:
    """:func:`tapegrad.value_and_grad` with respect to the floating array leaves of ``fun``'s
    first argument, which may be any pytree (Equinox's ``filter_value_and_grad``).

    The first argument is split with ``partition(x, is_inexact_array)``: its floating and
    complex arrays (Tensors, NumPy/CuPy arrays) are differentiated; its other leaves (integer
    arrays, Python numbers, strings, functions, keys) reach ``fun`` unchanged and get ``None``
    as their gradient. The other arguments are not differentiated.

    Args:
        fun: Function whose output is a real scalar (``(value, aux)`` with ``has_aux``).
        has_aux: ``fun`` returns ``(value, aux)``.

    Returns:
        A function with ``fun``'s signature returning ``(value, grads)`` (``((value, aux),
        grads)`` with ``has_aux``); ``grads`` has the first argument's structure with ``None``
        at every leaf that was not differentiated.

    Raises:
        TypeError: for a non-callable ``fun``, and as :func:`tapegrad.value_and_grad`.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> params = {"w": np.array([1.0, 2.0]), "steps": np.array(3), "act": np.tanh}
        >>> loss = lambda p: (p["act"](p["w"]) * p["steps"]).sum()
        >>> value, grads = tg.filter_value_and_grad(loss)(params)
        >>> grads["steps"], grads["act"], grads["w"].shape
        (None, None, (2,))
    """
    check_callable(fun, "filter_value_and_grad")

    def filtered(x, *args, **kwargs):
        diff, static = partition(x, is_inexact_array)

        def inner(d, *a, **k):
            return fun(combine(d, static), *a, **k)

        return value_and_grad(inner, has_aux=has_aux)(diff, *args, **kwargs)

    filtered.__name__ = f"filter_value_and_grad_{getattr(fun, '__name__', 'fun')}"
    filtered.__doc__ = fun.__doc__
    filtered.__wrapped__ = fun  # pyright: ignore[reportFunctionMemberAccess]
    return filtered


def filter_grad(fun: Callable, *, has_aux: bool = False) -> Callable[..., Any]:
    """:func:`tapegrad.grad` with respect to the floating array leaves of ``fun``'s first
    argument (Equinox's ``filter_grad``; see :func:`filter_value_and_grad`).

    Returns:
        A function returning ``grads`` (``(grads, aux)`` with ``has_aux``): the first
        argument's structure, ``None`` at every leaf that is not a floating array.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> grads = tg.filter_grad(lambda t: (t[0] ** 2).sum() * t[1])((np.ones(2), 3, "tag"))
        >>> grads
        (Tensor([6., 6.], dtype=float64), None, None)
    """
    check_callable(fun, "filter_grad")
    vg = filter_value_and_grad(fun, has_aux=has_aux)

    def filtered(*args, **kwargs):
        v, g = vg(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    filtered.__name__ = f"filter_grad_{getattr(fun, '__name__', 'fun')}"
    filtered.__doc__ = fun.__doc__
    filtered.__wrapped__ = fun  # pyright: ignore[reportFunctionMemberAccess]
    return filtered


class _Static:
    """A pytree with no leaves carrying ``value`` in its structure: how ``filter_jit`` passes
    the static part of its arguments (and of its results) through ``jit``."""

    __slots__ = ("value", "_key")

    def __init__(self, value):
        self.value = value
        self._key = None

    def key(self):
        if self._key is None:
            leaves, treedef = tree_flatten(self.value)
            self._key = (treedef, tuple(static_key(v) for v in leaves))
        return self._key

    def __eq__(self, other):
        return type(other) is _Static and (self.value is other.value or self.key() == other.key())

    def __hash__(self):
        return hash(self.key())


register(_Static, lambda s: ((), s), lambda aux, children: aux)


def filter_jit(fun: Callable, *, fuse: bool = False) -> Callable[..., Any]:
    """:func:`tapegrad.jit` for arguments that mix arrays with other leaves (Equinox's
    ``filter_jit``).

    Every array leaf of the arguments (:func:`tapegrad.core.tree.is_array`: Tensors, NumPy and CuPy
    arrays) is an input of the compiled program; every other leaf (Python numbers, strings,
    functions, other objects) is static: passed to ``fun`` as it is and part of the
    signature, compared by value, so a new value compiles again. Results may mix the two
    kinds too: their array leaves come from the program, the others are what the recording
    returned. Module arguments need no filtering (``tg.jit`` takes them); this is for other
    mixed trees, such as a dict of arrays and activation functions.

    Args:
        fun: The function.
        fuse: Bool, default False: fuse elementwise regions into native kernels, as
            :func:`tapegrad.jit`'s ``fuse``.

    Returns:
        A function with ``fun``'s signature and results, with ``clear_cache()`` and
        ``cache_size()`` as :func:`tapegrad.jit`'s.

    Raises:
        TypeError: for a non-callable ``fun``; for a ``fuse`` that is not a bool; as
            :func:`tapegrad.jit`.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> layer = {"w": np.ones((2, 2)), "act": np.tanh, "name": "dense"}
        >>> apply = tg.filter_jit(lambda layer, x: (layer["name"], layer["act"](x @ layer["w"])))
        >>> name, y = apply(layer, np.ones((1, 2)))
        >>> name, y.shape
        ('dense', (1, 2))
    """
    check_callable(fun, "filter_jit")
    _check_fuse(fuse, "filter_jit")

    def run(dynamic, static):
        call: Any = combine(dynamic, static.value)
        args, kwargs = call
        out_dynamic, out_static = partition(fun(*args, **kwargs), is_array)
        return out_dynamic, _Static(out_static)

    run.__name__ = getattr(fun, "__name__", "fun")
    compiled = jit(run, fuse=fuse)

    def filtered(*args, **kwargs):
        dynamic, static = partition((args, kwargs), is_array)
        out_dynamic, out_static = compiled(dynamic, _Static(static))
        return combine(out_dynamic, out_static.value)

    filtered.__name__ = f"filter_jit_{getattr(fun, '__name__', 'fun')}"
    filtered.__doc__ = fun.__doc__
    filtered.__wrapped__ = fun  # pyright: ignore[reportFunctionMemberAccess]
    filtered.clear_cache = compiled.clear_cache  # pyright: ignore[reportFunctionMemberAccess]
    filtered.cache_size = compiled.cache_size  # pyright: ignore[reportFunctionMemberAccess]
    return filtered
