"""NumPy's functions that return indices, flags, types or strings, and NumPy's own classes and
settings, as ``tapegrad.numpy`` names (HIPS autograd passes these through too).

- *On the values*: the functions here take Tensors (traced ones too: inside ``grad`` or
  ``jvp`` they read the current values, since their results carry no derivative; under
  ``vmap`` and ``jit``, where one value cannot stand for the call, they refuse with a
  TypeError), run NumPy's function, and
  return its result with numeric arrays as Tensors (integer indices, boolean flags) and other
  values (strings, dtypes, Python numbers) as they are. A NumPy error is re-raised with the
  function's name.
- *NumPy's own*: classes, context managers and settings (``matrix``, ``nditer``,
  ``errstate``, ``printoptions``, ...) are NumPy's objects themselves. They read a Tensor as
  its NumPy value (outside transforms; inside one they refuse a traced Tensor, whose gradient
  would be lost). The print options apply to Tensors' reprs; ``seterr``/``errstate`` govern
  NumPy's own warnings (tapegrad's operations return NaN or infinity without one: see
  :func:`tapegrad.debug_nans`).
"""

from __future__ import annotations

import functools

import numpy as _np

from tapegrad.core.tensor import Tensor, host_value

__all__ = [
    # on the values: indices, flags, types, strings, dates
    "unravel_index", "ravel_multi_index", "may_share_memory", "shares_memory", "iterable",
    "isfortran", "min_scalar_type", "common_type", "mintypecode", "typename", "isnat",
    "packbits", "unpackbits", "array2string", "array_repr", "array_str",
    "format_float_positional", "format_float_scientific", "base_repr", "binary_repr",
    "busday_count", "busday_offset", "is_busday", "datetime_as_string", "datetime_data",
    # NumPy's own classes, settings and information
    "broadcast", "busdaycalendar", "flatiter", "nditer", "nested_iters", "ndenumerate",
    "ndindex", "poly1d", "ufunc", "frompyfunc", "matrix", "asmatrix", "bmat", "recarray",
    "errstate", "seterr", "geterr", "seterrcall", "geterrcall", "getbufsize", "setbufsize",
    "printoptions", "set_printoptions", "get_printoptions", "get_include", "info",
    "show_config", "show_runtime", "test",
]


def _refusing_trace(t: Tensor | None):
    """``"vmap"`` or ``"jit"`` when a running transform holding ``t`` cannot take a value read
    from it or computed outside tapegrad (a batched value stands for many examples; a replayed
    tape would keep the result of the first call), else None."""
    while t is not None and t._level:
        trace = t._trace
        if not trace.done:
            if trace.batched:
                return "vmap"
            if trace.replays:
                return "jit"
        t = t._primal
    return None


def host(v, name: str = "tapegrad.numpy"):
    """A Tensor argument as its NumPy value (the current value inside ``grad``/``jvp``), lists
    and tuples holding Tensors converted inside; any other value as it is.

    Raises:
        TypeError: naming ``name``, for a value traced by ``vmap`` (it stands for a batch) or
            by ``jit``/``trace`` (the result would be replayed unchanged for new inputs).
    """
    if isinstance(v, Tensor):
        kind = _refusing_trace(v) if v._level else None
        if kind is not None:
            why = ("under vmap the value stands for a whole batch" if kind == "vmap" else
                   "under jit/trace it would run once, when traced, and its result be replayed "
                   "unchanged for new inputs")
            raise TypeError(f"{name}: NumPy's {name} runs on a Tensor's value, but {why}. Call "
                            f"it outside the {kind}-transformed function.")
        return host_value(v)
    if isinstance(v, (list, tuple)) and any(isinstance(e, (Tensor, list, tuple)) for e in v):
        return type(v)(host(e, name) for e in v)
    return v


def wrap(out):
    """NumPy's result with plain numeric arrays as Tensors (tuples of them too)."""
    if type(out) is _np.ndarray and out.dtype.kind in "biufc":
        return Tensor(out)
    if isinstance(out, tuple) and not hasattr(out, "_fields"):
        return tuple(wrap(o) for o in out)
    return out


def on_values(name: str, summary: str, returns: str, example: str = ""):
    """A ``tapegrad.numpy`` function running NumPy's ``name`` on the values of its Tensor
    arguments (see the module docstring), with a docstring of ``summary`` and ``returns``."""
    np_fn = getattr(_np, name)

    @functools.wraps(np_fn)
    def fn(*args, **kwargs):
        args = [host(a, name) for a in args]
        kwargs = {k: host(v, name) for k, v in kwargs.items()}
        try:
            out = np_fn(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{name}: {e}") from None
        return wrap(out)

    fn.__module__ = "tapegrad.numpy"
    fn.__qualname__ = name
    fn.__doc__ = (
        f"{summary} (NumPy ``{name}``).\n\n"
        f"    Runs NumPy's ``{name}`` on the values of Tensor arguments (inside ``grad`` or "
        "``jvp``, their current values): the result carries no derivative.\n\n"
        f"    Returns:\n        {returns}\n\n"
        f"    Raises:\n        TypeError, ValueError: as NumPy's ``{name}``, naming "
        f"``{name}``; TypeError for a Tensor traced by ``vmap`` or ``jit``.\n"
        + (f"\n    Example:\n{example}" if example else "")
    )
    return fn


_TENSORS = "Integer or boolean results as Tensors (no derivative), other values as NumPy's."
_STR = "A string, as NumPy's."

unravel_index = on_values(
    "unravel_index", "The coordinates of flat indices in an array of ``shape``",
    "A tuple of int64 Tensors, one per axis of ``shape``.",
    "        >>> import tapegrad.numpy as tnp\n"
    "        >>> tnp.unravel_index(tnp.asarray([5, 1]), (2, 3))\n"
    "        (Tensor([1, 0], dtype=int64), Tensor([2, 1], dtype=int64))\n")
ravel_multi_index = on_values(
    "ravel_multi_index", "The flat indices of coordinate tuples in an array of ``dims``",
    "An int64 Tensor of the coordinates' broadcast shape (a Python int for scalars).")
may_share_memory = on_values(
    "may_share_memory", "Whether two arrays might share memory (a bounds check)",
    "A Python bool; Tensors are read through their buffers.")
shares_memory = on_values(
    "shares_memory", "Whether two arrays share memory (an exact check)",
    "A Python bool; Tensors are read through their buffers.")
iterable = on_values("iterable", "Whether ``y`` can be iterated over",
                     "A Python bool (False for a 0-d Tensor, as for a 0-d array).")
isfortran = on_values("isfortran", "Whether ``a`` is Fortran-ordered and not C-ordered",
                      "A Python bool (of a Tensor's buffer).")
min_scalar_type = on_values("min_scalar_type",
                            "The smallest dtype that holds ``a``'s values (or its dtype)",
                            "A NumPy dtype.")
common_type = on_values("common_type", "The inexact scalar type common to the arrays",
                        "A NumPy scalar type (float64 for integer arrays, as NumPy).")
mintypecode = on_values("mintypecode",
                        "The smallest type code in ``typeset`` that the type codes cast to",
                        "A one-character type-code string.")
typename = on_values("typename", "A description of the type code ``char``", _STR)
isnat = on_values("isnat", "Whether each datetime or timedelta is NaT (not a time)",
                  "A boolean Tensor (a Python bool for a scalar).")
packbits = on_values("packbits", "Pack the elements of a boolean or integer array into bits",
                     "A uint8 Tensor.")
unpackbits = on_values("unpackbits", "Unpack the bits of a uint8 array",
                       "A uint8 Tensor of 0s and 1s.")
array2string = on_values(
    "array2string", "The array's values as a string (NumPy's formatting and print options)",
    _STR,
    "        >>> import tapegrad.numpy as tnp\n"
    "        >>> tnp.array2string(tnp.asarray([1.0, 2.5]))\n"
    "        '[1.  2.5]'\n")
array_repr = on_values("array_repr", "NumPy's repr of the array's values", _STR)
array_str = on_values("array_str", "NumPy's str of the array's values", _STR)
format_float_positional = on_values(
    "format_float_positional", "A floating-point scalar in positional notation", _STR)
format_float_scientific = on_values(
    "format_float_scientific", "A floating-point scalar in scientific notation", _STR)
base_repr = on_values("base_repr", "An integer written in base ``base``", _STR)
binary_repr = on_values("binary_repr", "An integer written in binary (two's complement with "
                        "``width``)", _STR)
busday_count = on_values("busday_count", "The number of valid days between two dates",
                         _TENSORS)
busday_offset = on_values("busday_offset", "Dates moved by a number of valid days",
                          "datetime64 values, as NumPy's (dates are not Tensors).")
is_busday = on_values("is_busday", "Whether each date is a valid day", _TENSORS)
datetime_as_string = on_values("datetime_as_string", "Datetimes as strings",
                               "A NumPy array of strings.")
datetime_data = on_values("datetime_data", "The unit and count of a datetime or timedelta "
                          "dtype", "A ``(unit, count)`` tuple.")



def _as_numpy(v):
    """A Tensor operand as a NumPy array (refused for a traced Tensor: its gradient would be
    lost), lists and tuples of operands converted inside."""
    if isinstance(v, Tensor):
        return _np.asarray(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_as_numpy(e) for e in v)
    return v


def nditer(op, *args, **kwargs):
    """NumPy's ``nditer`` over the values of Tensor operands (outside transforms: a traced
    Tensor is refused, since iterating its values would lose its gradient).

    Returns:
        NumPy's ``nditer`` object.

    Raises:
        TypeError: for a traced Tensor operand; otherwise as NumPy's ``nditer``.
    """
    return _np.nditer(_as_numpy(op), *args, **kwargs)


def nested_iters(op, axes, *args, **kwargs):
    """NumPy's ``nested_iters`` over the values of Tensor operands (refused for a traced
    Tensor, as :func:`nditer`).

    Returns:
        NumPy's tuple of ``nditer`` objects.

    Raises:
        TypeError: for a traced Tensor operand; otherwise as NumPy's ``nested_iters``.
    """
    return _np.nested_iters(_as_numpy(op), axes, *args, **kwargs)


#: NumPy's own classes, functions on NumPy arrays, settings and information (module doc).
broadcast, busdaycalendar, flatiter = _np.broadcast, _np.busdaycalendar, _np.flatiter
ndenumerate, ndindex, poly1d = _np.ndenumerate, _np.ndindex, _np.poly1d
ufunc, frompyfunc, matrix, asmatrix, bmat = (_np.ufunc, _np.frompyfunc, _np.matrix,
                                             _np.asmatrix, _np.bmat)
recarray = _np.recarray
errstate, seterr, geterr, seterrcall, geterrcall = (_np.errstate, _np.seterr, _np.geterr,
                                                    _np.seterrcall, _np.geterrcall)
getbufsize, setbufsize = _np.getbufsize, _np.setbufsize
printoptions, set_printoptions, get_printoptions = (_np.printoptions, _np.set_printoptions,
                                                    _np.get_printoptions)
get_include, info, show_config, show_runtime, test = (_np.get_include, _np.info,
                                                      _np.show_config, _np.show_runtime,
                                                      _np.test)
