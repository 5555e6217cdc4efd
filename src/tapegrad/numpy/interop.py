"""Interoperability: NumPy dispatch (NEP 13 and NEP 18), DLPack and the array API hook.

Importing this module (``tapegrad.numpy`` does) installs on :class:`~tapegrad.Tensor`:

- ``__array_ufunc__`` and ``__array_function__``: NumPy's own functions called with Tensors
  (``np.sin(t)``, ``np.sum(t, axis=0)``, ``np.concatenate([t, u])``, ``np.linalg.solve(a, b)``)
  run the :mod:`tapegrad.numpy` function of the same name, so they are recorded and
  differentiable under every transform (``grad``, ``jvp``, ``vmap``, ``jit``...). The lookup is
  by name at call time (``np.X`` -> ``tnp.X``, ``np.linalg.X`` -> ``tnp.linalg.X``,
  ``np.fft.X`` -> ``tnp.fft.X``), so every function ``tapegrad.numpy`` gains dispatches with no
  table to update. NumPy arrays and scalars mixed with Tensors become constants. Binary
  operators between NumPy arrays and Tensors (``a + t``, ``a @ t``, ``a < t``) return Tensors.
- ``__dlpack__`` and ``__dlpack_device__``: zero-copy exchange with NumPy, PyTorch, JAX, CuPy
  and any library speaking DLPack (see :func:`from_dlpack` for the other direction).
- ``__array_namespace__`` (the Python array API standard's entry point, returning
  :mod:`tapegrad.numpy.array_api`), the ``mT`` property (matrix transpose of the last two axes) and
  the unary ``+`` operator.

A NumPy function with no ``tapegrad.numpy`` version is a passthrough (HIPS autograd's): NumPy's
own function runs on the Tensors' values and returns its plain result; inside ``grad``/``jvp``
only when that result holds no floating values (it has no derivative to lose).

What NumPy cannot dispatch raises a clear ``TypeError`` naming the function: a passthrough that
would lose a gradient (a floating result of a traced Tensor) or could not be right (inside
``vmap`` or ``jit``; functions that write into their argument), ``out=`` arguments and in-place
updates of NumPy arrays by Tensors (Tensors are immutable: assign the result instead), and the
ufunc methods with no tapegrad equivalent. ``np.asarray(t)`` of a traced Tensor stays an error
(it would silently lose the gradient).

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> x = tg.Tensor([0.5, 1.0, 2.0], dtype="float64")
    >>> g = tg.grad(lambda x: np.sum(np.sin(x) * x))(x)
    >>> bool(np.allclose(g.numpy(), np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy())))
    True
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import numpy as np

from tapegrad import numpy as _tnp_module
from tapegrad.core.tensor import Tensor, host_value
from tapegrad.core.tree import tree_leaves, tree_map
from tapegrad.numpy._dlpack import _dlpack, _dlpack_device, from_dlpack  # noqa: F401  (re-exported)
from tapegrad.numpy._passthrough import _refusing_trace

__all__ = ["from_dlpack", "numpy_dispatch_target"]

# tapegrad.numpy assembles its namespace at import time (from the ops' declarations), so a type
# checker cannot list its functions: it is typed as Any here.
tnp: Any = _tnp_module

_ND_UFUNC = np.ndarray.__array_ufunc__
_ND_FUNCTION = np.ndarray.__array_function__
#: Array API versions :meth:`Tensor.__array_namespace__` accepts (the namespace is 2024.12).
API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

# ufunc methods other than __call__: NumPy ufunc name -> tapegrad.numpy function name.
_REDUCE = {
    "add": "sum",
    "multiply": "prod",
    "maximum": "max",
    "minimum": "min",
    "fmax": "nanmax",
    "fmin": "nanmin",
    "logical_and": "all",
    "logical_or": "any",
    "logaddexp": "logsumexp",
}
_ACCUMULATE = {"add": "cumsum", "multiply": "cumprod"}

# Suggestions for NumPy functions tapegrad.numpy does not have.
_HINTS = {
    "copyto": "Tensors are immutable: build the result instead (tnp.where(mask, src, dst))",
    "put": "Tensors are immutable: use x.at[indices].set(values)",
    "put_along_axis": "Tensors are immutable: use x.at[...].set(values)",
    "place": "Tensors are immutable: use tnp.where(mask, values, x)",
    "putmask": "Tensors are immutable: use tnp.where(mask, values, x)",
    "fill_diagonal": "Tensors are immutable: use x.at[idx, idx].set(value)",
    "asanyarray": "use tnp.asarray",
    "ascontiguousarray": "use tnp.asarray (Tensors are always contiguous to tapegrad)",
}
#: NumPy functions that write into their array argument: never a passthrough on a Tensor.
_IN_PLACE = {"copyto", "put", "put_along_axis", "place", "putmask", "fill_diagonal"}


def _metadata(name):
    """NumPy functions that only read a Tensor's shape or dtype: NumPy's own code serves."""

    def dtype_of(v):
        return v.dtype if isinstance(v, Tensor) else v

    if name in ("shape", "ndim", "size", "iscomplexobj", "isrealobj"):
        return lambda func, *args, **kwargs: func._implementation(*args, **kwargs)
    if name in ("result_type", "can_cast", "min_scalar_type"):
        return lambda func, *args, **kwargs: func(*[dtype_of(a) for a in args], **kwargs)
    if name == "copy":  # a Tensor is immutable: the copy is the Tensor itself
        return lambda func, a, *args, **kwargs: tnp.asarray(a)
    return None


def _namespace_for(module: str):
    """The tapegrad namespace standing for the NumPy module ``module`` (None if absent)."""
    if module.startswith("numpy.linalg"):
        return getattr(tnp, "linalg", None), "tapegrad.numpy.linalg"
    if module.startswith("numpy.fft"):
        return getattr(tnp, "fft", None), "tapegrad.numpy.fft"
    return tnp, "tapegrad.numpy"


def _qualname(func) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    if isinstance(func, np.ufunc) or not module.startswith(("numpy.linalg", "numpy.fft")):
        module = "numpy"
    return f"{module}.{func.__name__}"


def numpy_dispatch_target(func):
    """The :mod:`tapegrad.numpy` function a NumPy function or ufunc dispatches to.

    ``np.X`` maps to ``tnp.X``, ``np.linalg.X`` to ``tnp.linalg.X`` and ``np.fft.X`` to
    ``tnp.fft.X``, looked up by name when called, so functions added to ``tapegrad.numpy``
    dispatch without any registration.

    Args:
        func: A NumPy function (``np.sum``, ``np.linalg.solve``) or ufunc (``np.sin``).

    Returns:
        The ``tapegrad.numpy`` function, or ``None`` when there is none.

    Example:
        >>> import numpy as np
        >>> from tapegrad.numpy.interop import numpy_dispatch_target
        >>> numpy_dispatch_target(np.sin).__name__
        'sin'
    """
    name = getattr(func, "__name__", None)
    if name is None:
        return None
    module = getattr(func, "__module__", None) or "numpy"
    if isinstance(func, np.ufunc):
        module = "numpy"
    space, _ = _namespace_for(module)
    fn = getattr(space, name, None) if space is not None else None
    if fn is None or fn is func or not callable(fn) or isinstance(fn, type):
        return None
    return fn


def _missing(func, extra: str = "") -> TypeError:
    name = getattr(func, "__name__", repr(func))
    qual = _qualname(func)
    _, where = _namespace_for(getattr(func, "__module__", None) or "numpy")
    hint = _HINTS.get(name)
    msg = (
        f"{qual} was called with a tapegrad Tensor, but {where} has no {name!r}, so only "
        f"NumPy's own function could run, on the value alone, and here it cannot.{extra} "
        + (f"Suggestion: {hint}. " if hint else "")
        + "Write it with tapegrad.numpy functions, or pass tg.stop_gradient(x).numpy() if a "
        "constant result is really meant."
    )
    return TypeError(msg)


def _passthrough(func, qual: str, args, kwargs):
    """NumPy's own ``func`` on the Tensors' values, for a function ``tapegrad.numpy`` lacks
    (HIPS autograd's passthrough): its plain result outside transforms; inside ``grad``/``jvp``
    only when the result holds no floating value (an integer or boolean result has no
    derivative to lose).

    Raises:
        TypeError: naming the function, for a floating result of a traced Tensor (its gradient
            would be lost) and for any call on a value traced by ``vmap`` or ``jit``/``trace``.
    """
    if getattr(func, "__name__", None) in _IN_PLACE:
        raise _missing(func, " It writes into its argument, and a Tensor is immutable.")
    leaves = tree_leaves((args, kwargs))
    traced = [v for v in leaves if isinstance(v, Tensor) and v._level]
    for t in traced:
        kind = _refusing_trace(t)
        if kind == "vmap":
            raise _missing(func, " Under vmap the value stands for a whole batch, so NumPy's "
                                 "own function cannot run on it.")
        if kind == "jit":
            raise _missing(func, " Under jit/trace the result would be recorded as a constant "
                                 "and replayed unchanged for new inputs.")
    # the values alone (no derivative): a floating result of a traced value is refused below
    a_args, a_kwargs = tree_map(lambda v: host_value(v) if isinstance(v, Tensor) else v,
                                (args, kwargs))
    out = func(*a_args, **a_kwargs)
    if traced:
        for v in tree_leaves(out):
            if isinstance(v, (np.ndarray, np.generic, float, complex)) and \
                    np.asarray(v).dtype.kind in "fc":
                raise _missing(func, f" Its result is floating ({np.asarray(v).dtype}): "
                                     "computed outside tapegrad, it would carry no gradient.")
    return out


def _out_error(qual: str) -> TypeError:
    return TypeError(
        f"{qual}: out= is not supported with tapegrad Tensors: Tensors are immutable, so no "
        "function writes into an existing array. Assign the result instead (y = f(x)); this "
        "includes in-place operators on a NumPy array with a Tensor operand (write a = a + t "
        "rather than a += t)."
    )


@functools.lru_cache(maxsize=1024)
def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _call(fn, qual: str, args, kwargs):
    """``fn(*args, **kwargs)``; NumPy's ``None`` defaults tapegrad does not take are dropped and
    arguments tapegrad does not accept give an error naming both functions."""
    if kwargs:
        sig = _signature(fn)
        if sig is not None:
            params = sig.parameters
            takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
            if not takes_kwargs and any(k not in params for k in kwargs):
                kwargs = {k: v for k, v in kwargs.items() if v is not None or k in params}
            try:
                sig.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(
                    f"{qual} dispatches to tapegrad.numpy.{fn.__name__}{sig}, which does not "
                    f"accept these arguments ({e}). Call tapegrad.numpy.{fn.__name__} with "
                    "the arguments it takes."
                ) from None
    return fn(*args, **kwargs)


def _foreign(values) -> bool:
    """Whether an operand type overrides NumPy in a way tapegrad does not know."""
    for v in values:
        if isinstance(v, Tensor):
            continue
        au = getattr(type(v), "__array_ufunc__", _ND_UFUNC)
        if au is not _ND_UFUNC:
            return True
    return False


def _ufunc_kwargs(ufunc, method: str, kwargs: dict) -> dict:
    """Check the ufunc keywords; return those the tapegrad function receives."""
    qual = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    out = kwargs.pop("out", None)
    if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
        raise _out_error(qual)
    defaults = {"casting": "same_kind", "order": "K", "subok": True, "signature": None,
                "dtype": None, "where": True, "keepdims": False, "axis": None, "axes": None,
                "initial": np._NoValue}  # fmt: skip
    passed = {}
    for key, value in kwargs.items():
        if method in ("reduce", "accumulate") and key in ("axis", "keepdims"):
            passed[key] = value
            continue
        if key not in defaults:
            raise TypeError(f"{qual}: unexpected keyword argument {key!r}")
        default = defaults[key]
        if value is default or (type(value) in (str, bool, type(None)) and value == default):
            continue
        if key == "where":
            hint = "select with tnp.where(mask, result, other) instead"
        elif key == "dtype":
            hint = "cast the operands with tnp.astype(x, dtype) instead"
        else:
            hint = "leave it at its default"
        raise TypeError(
            f"{qual}: the keyword {key}={value!r} is not supported with tapegrad Tensors; "
            f"{hint}."
        )
    return passed


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """NEP 13: a NumPy ufunc with a Tensor operand runs the ``tapegrad.numpy`` function.

    ``__call__`` maps ``np.<name>`` to ``tnp.<name>``; ``reduce`` and ``accumulate`` map the
    ufuncs with a tapegrad reduction (``np.add.reduce`` -> ``tnp.sum``, ``np.multiply.
    accumulate`` -> ``tnp.cumprod``...); ``outer`` works for every binary ufunc tapegrad has;
    ``at`` and ``reduceat`` raise ``TypeError`` (Tensors are immutable: use ``x.at[idx]``).

    Raises:
        TypeError: for ``out=``, ``where=``, ``dtype=`` or other non-default keywords, for a ufunc
            with no ``tapegrad.numpy`` version, and for ``at``/``reduceat``.
    """
    if _foreign(inputs):
        return NotImplemented
    name = ufunc.__name__
    kwargs = _ufunc_kwargs(ufunc, method, kwargs)
    if method == "__call__":
        fn = numpy_dispatch_target(ufunc)
        if fn is None:
            return _passthrough(ufunc, f"numpy.{name}", inputs, kwargs)
        return fn(*inputs, **kwargs)
    if method in ("reduce", "accumulate"):
        table = _REDUCE if method == "reduce" else _ACCUMULATE
        target = table.get(name)
        fn = getattr(tnp, target, None) if target else None
        if fn is None:
            raise TypeError(
                f"numpy.{name}.{method} is not supported with tapegrad Tensors: tapegrad.numpy "
                f"has no equivalent. Supported: "
                + ", ".join(f"np.{k}.{method} (tnp.{v})" for k, v in table.items()
                            if hasattr(tnp, v))
                + "."
            )
        array, *rest = inputs
        if len(rest) > 1:
            raise TypeError(
                f"numpy.{name}.{method}: only the array and axis may be passed positionally "
                f"with tapegrad Tensors, got {len(inputs)} positional arguments"
            )
        axis = rest[0] if rest else kwargs.pop("axis", 0)
        if method == "accumulate":
            if kwargs.pop("keepdims", False):
                raise TypeError(f"numpy.{name}.accumulate: unexpected keyword 'keepdims'")
            if axis is None:
                raise TypeError(f"numpy.{name}.accumulate: axis must be an int, got None")
        return fn(array, axis=axis, **kwargs)
    if method == "outer":
        if len(inputs) != 2 or ufunc.nin != 2:
            raise TypeError(f"numpy.{name}.outer needs a binary ufunc and two operands")
        fn = numpy_dispatch_target(ufunc)
        if fn is None:
            raise _missing(ufunc)
        a, b = inputs
        a_shape, b_ndim = np.shape(a), np.ndim(b)
        return fn(tnp.reshape(a, tuple(a_shape) + (1,) * b_ndim), b)
    if method == "at":
        raise TypeError(
            f"numpy.{name}.at updates an array in place, and tapegrad Tensors are immutable: "
            "use the functional update x = x.at[indices].add(values) (also .set, .multiply, "
            ".min, .max)."
        )
    raise TypeError(f"numpy.{name}.{method} is not supported with tapegrad Tensors.")


def _array_function(self, func, types, args, kwargs):
    """NEP 18: a NumPy function with a Tensor argument runs the ``tapegrad.numpy`` function of
    the same name (``np.linalg.X`` -> ``tnp.linalg.X``, ``np.fft.X`` -> ``tnp.fft.X``).

    Raises:
        TypeError: when ``tapegrad.numpy`` has no such function, for ``out=``, and when the
            tapegrad function does not accept the arguments given (naming both functions).
    """
    for t in types:
        if not (issubclass(t, Tensor) or issubclass(t, np.ndarray)):
            return NotImplemented
    qual = _qualname(func)
    if "out" in kwargs:
        out = kwargs["out"]
        if out is not None:
            raise _out_error(qual)
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    fn = numpy_dispatch_target(func)
    if fn is None:
        meta = _metadata(func.__name__)
        if meta is not None:
            return meta(func, *args, **kwargs)
        return _passthrough(func, qual, args, kwargs)
    return _call(fn, qual, args, kwargs)


# -- the array API hook ---------------------------------------------------------------------
def _array_namespace(self, /, *, api_version=None):
    """The array API standard's namespace for Tensors: :mod:`tapegrad.numpy.array_api`.

    Args:
        api_version: ``None`` or one of ``"2021.12"``, ``"2022.12"``, ``"2023.12"``,
            ``"2024.12"`` (the namespace implements 2024.12, which keeps the earlier versions'
            functions).

    Raises:
        ValueError: for another version string.
    """
    if api_version is not None and api_version not in API_VERSIONS:
        raise ValueError(
            f"Tensor.__array_namespace__: api_version {api_version!r} is not supported; "
            f"tapegrad implements {', '.join(API_VERSIONS)} (the latest)"
        )
    from tapegrad.numpy import array_api

    return array_api


def _mT(self):
    """The matrix transpose: the last two axes swapped (``(..., m, n)`` -> ``(..., n, m)``).

    Raises:
        ValueError: if the Tensor has fewer than two dimensions.
    """
    if self.ndim < 2:
        raise ValueError(f"Tensor.mT needs at least 2 dimensions, got shape {self.shape}")
    return tnp.swapaxes(self, -1, -2)


def _pos(self):
    return tnp.positive(self)


_pos.__doc__ = "``+x``: the same values (``tnp.positive``)."
#: The Tensor methods of NumPy's protocols, DLPack and the array API (attached by
#: :mod:`tapegrad.numpy.methods`; ``__pos__`` only where the ops layer has none).
METHODS = {
    "__array_ufunc__": _array_ufunc,
    "__array_function__": _array_function,
    "__dlpack__": _dlpack,
    "__dlpack_device__": _dlpack_device,
    "__array_namespace__": _array_namespace,
    "mT": property(_mT),
    "__pos__": _pos,
}
for _name, _fn in METHODS.items():
    if callable(_fn):
        _fn.__name__ = _name
