"""``Function`` and ``Context``: the contract every differentiable primitive follows.

A primitive is a :class:`Function` subclass with static ``forward`` (backend arrays in, backend
array(s) out) and ``backward`` (Tensor cotangents in, one Tensor or ``None`` per positional
input out, written with tapegrad ops so that outer transforms record it). ``apply`` finds the
highest trace level among the inputs: at level 0 it runs ``forward`` on the arrays; otherwise
it hands the application to that level's trace (:meth:`tapegrad.tape.Trace.record`), which
records it and computes the value one level down. This is how nested transforms keep their
perturbations apart (Siskind and Pearlmutter, 2005).

Every ``forward`` runs through :func:`run_forward`: floating-point warnings are off (results
are NumPy's, NaN or inf, without a warning), and inside :func:`debug_nans` each result is
checked for a NaN or infinity made from finite inputs.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from tapegrad import backend as _backend
from tapegrad import dtypes as _dtypes
from tapegrad import profiler as _profiler
from tapegrad.lazy import _GLOBAL as _LAZY_GLOBAL
from tapegrad.lazy import LazyArray, defer, realize_array
from tapegrad.lazy import _state as _lazy_state
from tapegrad.tensor import Tensor, _s_array, _s_box, caller_line, const

__all__ = [
    "Function",
    "Context",
    "no_grad",
    "is_grad_enabled",
    "unbroadcast",
    "debug_nans",
    "new_level",
]

_ndarray = np.ndarray
_new = object.__new__
_PROFILING = _profiler.PROFILING  # nonzero while a tg.profile block is open (in any thread)
_levels = itertools.count(1)
_last_level = [0]
_level_lock = threading.Lock()


def new_level() -> int:
    """A fresh trace level, newer (larger) than every level handed out before."""
    with _level_lock:
        level = _last_level[0] = next(_levels)
    return level


class _State(threading.local):
    """Per-thread engine state."""

    limit = 0  # levels <= limit carry no gradient (no_grad)
    quiet = 0  # depth of transform scopes (floating-point warnings already off)
    debug = os.environ.get("TAPEGRAD_DEBUG_NANS", "") not in ("", "0")
    fast = False  # quiet and not debug: forward runs with no extra work
    backward_of = None  # (op name, call site) of the backward rule now running (debug_nans)


_state = _State()


@contextmanager
def no_grad():
    """Context manager: operations inside carry no gradient to the transforms already running.

    Values computed inside are still recorded on an active tape that replays (``trace``,
    ``jit``), but no cotangent flows through them, as if each were wrapped in
    ``stop_gradient``. A transform called inside ``no_grad`` still differentiates its own
    function (as ``torch.func.grad`` does): ``no_grad`` stops only the levels that were active
    when it was entered. The flag is per thread and nests.

    Example:
        >>> import tapegrad as tg
        >>> def f(x):
        ...     with tg.no_grad():
        ...         scale = x * 2.0
        ...     return (scale * x).sum()
        >>> float(tg.grad(f)(tg.Tensor(3.0)))
        6.0
    """
    st = _state
    previous = st.limit
    st.limit = max(previous, _last_level[0])
    try:
        yield
    finally:
        st.limit = previous


def is_grad_enabled() -> bool:
    """False inside :func:`no_grad` (in this thread)."""
    return _state.limit == 0


@contextmanager
def debug_nans(enabled: bool = True):
    """Context manager: find the first op that makes a NaN or infinity out of finite inputs.

    Inside, every op's result is checked, forward rules and the ops inside backward rules
    alike. The first op whose output holds a NaN or infinity although all its floating inputs
    are finite raises :class:`FloatingPointError` naming the op, whether it ran as a forward
    rule or inside the backward rule of another op ("in the backward of sqrt"), its input
    shapes and dtypes, and the file and line of your code that called the op. That is the
    origin, not where a NaN later spreads. Off by default, with no cost when off; the
    environment variable ``TAPEGRAD_DEBUG_NANS=1`` switches it on for the whole run. Per
    thread; nests.

    Args:
        enabled: False switches the checks off inside (for a section you know makes infinities).

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> with tg.debug_nans():
        ...     try:
        ...         tg.grad(lambda x: tnp.sum(tnp.sqrt(x * x)))(tg.Tensor([0.0, 1.0]))
        ...     except FloatingPointError as e:
        ...         print(str(e).split(" made")[0])
        the backward of sqrt (its op unary_grad)
    """
    st = _state
    previous = st.debug
    st.debug = bool(enabled)
    st.fast = st.quiet > 0 and not st.debug
    try:
        yield
    finally:
        st.debug = previous
        st.fast = st.quiet > 0 and not st.debug


try:  # NumPy 2: the floating-point error state is a context variable; setting it is cheap
    from numpy._core._ufunc_config import _extobj_contextvar as _fp_state  # pyright: ignore[reportArgumentType, reportAttributeAccessIssue]

    with np.errstate(all="ignore"):
        _QUIET = _fp_state.get()
except ImportError:  # pragma: no cover - NumPy 1.x
    _fp_state = None


class _Quiet:
    """``with _Quiet():`` runs NumPy with floating-point warnings off (``np.errstate``, set
    directly on NumPy's context variable where NumPy 2 has one: a tenth of the cost)."""

    __slots__ = ("token", "cm")

    def __enter__(self):
        if _fp_state is not None:
            self.token = _fp_state.set(_QUIET)
        else:  # pragma: no cover - NumPy 1.x
            self.cm = np.errstate(all="ignore")
            self.cm.__enter__()
        return self

    def __exit__(self, *exc):
        if _fp_state is not None:
            _fp_state.reset(self.token)
        else:  # pragma: no cover - NumPy 1.x
            self.cm.__exit__(*exc)
        return False


@contextmanager
def transform_scope():
    """The scope of a transform: floating-point warnings off once for everything inside."""
    st = _state
    if st.quiet:
        st.quiet += 1
        try:
            yield
        finally:
            st.quiet -= 1
        return
    with _Quiet():
        st.quiet = 1
        st.fast = not st.debug
        try:
            yield
        finally:
            st.quiet = 0
            st.fast = False


class _SavedTensors:
    """``Context.saved_tensors`` before ``apply`` has set it: a clear error."""

    def __get__(self, ctx, owner=None):
        if ctx is None:
            return self
        raise RuntimeError(
            "Context.saved_tensors is only available in backward, after forward called "
            "ctx.save_for_backward(...)"
        )


class Context:
    """Per-application namespace shared by a Function's ``forward`` and ``backward``.

    Set automatically before ``forward``:
        device: ``"cpu"`` or ``"cuda:N"``.
        backend: :mod:`numpy` or :mod:`cupy`; write ``xp = ctx.backend`` in rules.
        needs_input_grad: Tuple of bools, one per positional input: whether some active
            transform wants that input's cotangent (skip work in ``backward`` when False).

    Set before ``backward`` and ``jvp``:
        saved_tensors: The values given to :meth:`save_for_backward`, as Tensors (reading it
            when ``forward`` saved nothing raises ``RuntimeError``).

    Free attributes carry static values (axes, shapes, flags) from ``forward`` to ``backward``.
    Arrays computed in ``forward`` other than inputs and outputs are constants to ``backward``:
    recompute them with tapegrad ops there, or higher derivatives come out wrong.

    Raises:
        RuntimeError: reading ``saved_tensors`` before ``backward``.
    """

    device: str = "cpu"
    backend: Any = np
    saved_tensors: Any = _SavedTensors()
    needs_input_grad: tuple[bool, ...]
    _watch: Any = None  # set when an enclosing transform records the rules (tapegrad.tape)

    if TYPE_CHECKING:  # free attributes: static values from forward to backward

        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def save_for_backward(self, *arrays) -> None:
        """Save input or output arrays of ``forward`` (or other values); ``backward`` reads them
        back as Tensors (traced by any outer transform) from :attr:`saved_tensors`. Each call
        replaces the last."""
        self._to_save = arrays

    def mark_non_differentiable(self, *arrays) -> None:
        """Declare outputs (returned arrays) that carry no gradient, such as indices or masks."""
        self._non_diff = arrays


def unbroadcast(g: Tensor, shape: tuple, fn=None, index: int = 0) -> Tensor:
    """Sum cotangent ``g`` down to ``shape``, undoing NumPy broadcasting.

    Args:
        g: Cotangent of a broadcast result, of a shape that ``shape`` broadcasts to.
        shape: The input's shape.
        fn, index: The Function and input position, for the error message.

    Returns:
        A Tensor of ``shape`` and ``g``'s dtype.

    Raises:
        ValueError: if ``g``'s shape does not reduce to ``shape`` (a wrong backward rule); the
            message names the Function.
    """
    gshape = g.shape
    lead = len(gshape) - len(shape)
    if lead < 0 or any(s != 1 and s != gs for s, gs in zip(shape, gshape[lead:])):
        who = f"{fn.__name__}.backward" if fn is not None else "unbroadcast"
        raise ValueError(
            f"{who}: cotangent for input {index} has shape {tuple(gshape)}, which does not "
            f"reduce to the input's shape {tuple(shape)}; backward must return a cotangent of "
            "the input's shape (or one that broadcasts from it)."
        )
    ones = tuple(
        lead + i for i, (s, gs) in enumerate(zip(shape, gshape[lead:])) if s == 1 and gs != 1
    )
    if not ones:  # only leading axes to sum away: one reduction gives the shape
        return g.sum(axis=tuple(range(lead))) if lead else g
    g = g.sum(axis=tuple(range(lead)) + ones, keepdims=True)
    return g.reshape(shape) if g.shape != tuple(shape) else g


def as_array(out, xp=np):
    """A forward result as a backend array (NumPy scalars become 0-d arrays)."""
    if type(out) is _ndarray:
        return out
    if isinstance(out, np.generic) or not hasattr(out, "shape"):
        return np.asarray(out) if xp is np else xp.asarray(out)
    return out


def run_forward(cls, ctx, arrays, params, _timed=False):
    """``cls.forward(ctx, *arrays, **params)``: floating-point warnings off, bad input
    explained (naming the op and the shapes), results checked inside :func:`debug_nans`,
    timed inside :func:`tapegrad.profile`."""
    if _PROFILING[0] and not _timed:
        return _profiler.forward_call(cls, run_forward, cls, ctx, arrays, params, True)
    st = _state
    try:
        if st.fast:
            return cls.forward(ctx, *arrays, **params)
        if st.quiet:
            out = cls.forward(ctx, *arrays, **params)
        else:
            with _Quiet():
                out = cls.forward(ctx, *arrays, **params)
    except (ValueError, TypeError, IndexError) as e:
        raise cls._explain(e, arrays, params) from e
    if st.debug:
        _check_finite(cls, arrays, out)
    return out


def _nonfinite(a) -> bool:
    return hasattr(a, "dtype") and a.dtype.kind in "fcV" and not bool(
        _backend.backend_of(a).isfinite(a).all()
    )


def _check_finite(cls, arrays, out) -> None:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not any(_nonfinite(o) for o in outs) or any(_nonfinite(a) for a in arrays):
        return
    where = _state.backward_of
    desc = ", ".join(
        f"{tuple(a.shape)} {a.dtype}" if hasattr(a, "shape") else repr(a) for a in arrays
    )
    bad = next(o for o in outs if _nonfinite(o))
    kind = "a NaN" if bool(_backend.backend_of(bad).isnan(bad).any()) else "an infinity"
    if where is None:
        what, site = f"{cls._name()} (forward rule)", caller_line()
    else:
        what, site = f"the backward of {where[0]} (its op {cls._name()})", where[1]
    raise FloatingPointError(
        f"{what} made {kind} from finite inputs ({desc}); the op was called at {site}. "
        "(tg.debug_nans is on: this is the first op that produced one.)"
    )


def _check_devices(cls, values, arrays: list) -> str:
    """Device of an op: that of its Tensor inputs' ``arrays`` (deferred arrays are computed in
    place first). NumPy arrays given as plain values, not Tensors, are constants: like Python
    numbers they join that device (moved in ``arrays``).

    Raises:
        ValueError: if the Tensor inputs live on different devices, naming the op and both.
    """
    devs = set()
    for i, a in enumerate(arrays):
        if type(a) is LazyArray:
            arrays[i] = a = realize_array(a)
        if type(values[i]) is Tensor:
            devs.add(_backend.device_of(a))
    if len(devs) > 1:
        raise ValueError(
            f"{cls._name()}: inputs live on different devices ({', '.join(sorted(devs))}); "
            "move them to one device first with x.to_device(...)"
        )
    dev = devs.pop() if devs else "cpu"
    if dev != "cpu":
        for i, a in enumerate(arrays):
            if type(a) is _ndarray:  # a NumPy constant (a Tensor's would be on the CPU above)
                arrays[i] = _backend.to_device(a, dev)
    return dev


_FALSES = [(False,) * i for i in range(9)]


_BF16 = _dtypes.bfloat16
_F32 = np.dtype(np.float32)


def _round_back(out, ints):
    """A float32 result of a widened bfloat16 op, rounded back to bfloat16; a float64 one too
    where an integer operand (``ints``) met the widened float32 (bfloat16 there, JAX's rule),
    while an op that gives float64 for float32 input (``float_power``) keeps it; anything else
    (integers, booleans, complex numbers) as it is."""
    d = getattr(out, "dtype", None)
    if d is _F32 or d == _F32 or (ints and d is not None and d.kind == "f"):
        return out.astype(_BF16)
    return out


def _widened_forward(fn, ctx, arrays, params):
    """Run ``fn`` (a ``forward`` rule) on ``arrays`` with every bfloat16 array widened to
    float32, as XLA computes bfloat16 on a CPU: a float32 result is rounded back to bfloat16
    when bfloat16 is the only floating input dtype and no ``dtype`` parameter asks otherwise
    (bfloat16 beside float16 or a wider float promotes to float32 or wider, JAX's rule). What
    ``forward`` saved or marked non-differentiable is mapped back to the arrays the engine
    knows (the bfloat16 inputs and outputs), so backward rules see them."""
    up = [a.astype(_F32) if getattr(a, "dtype", None) is _BF16 else a for a in arrays]
    out = fn(ctx, *up, **params)
    back = params.get("dtype") is None and not any(
        getattr(a, "dtype", _BF16) is not _BF16 and a.dtype.kind in "fc" for a in arrays)
    if not back:
        outs = out
    else:
        ints = any(getattr(a, "dtype", _BF16).kind in "biu" for a in arrays)
        if isinstance(out, (tuple, list)):
            outs = type(out)(_round_back(o, ints) for o in out)
        else:
            outs = _round_back(out, ints)
    d = ctx.__dict__
    if "_to_save" in d or "_non_diff" in d:
        swap = {id(u): a for u, a in zip(up, arrays) if u is not a}
        if back:
            pairs = zip(out, outs) if isinstance(out, (tuple, list)) else ((out, outs),)
            swap.update((id(o), b) for o, b in pairs if o is not b)
        for key in ("_to_save", "_non_diff"):
            if key in d:
                d[key] = type(d[key])(swap.get(id(v), v) for v in d[key])
    return outs


def _bfloat16_forward(fn):
    """``fn`` (a ``forward`` rule) made to accept bfloat16 arrays (see
    :func:`_widened_forward`); other inputs go straight to ``fn``."""

    @functools.wraps(fn)
    def forward(ctx, *arrays, **params):
        for a in arrays:
            if getattr(a, "dtype", None) is _BF16:
                return _widened_forward(fn, ctx, arrays, params)
        return fn(ctx, *arrays, **params)

    return forward


def _bfloat16_classmethod_forward(fn):
    """:func:`_bfloat16_forward` for a ``forward`` written as a classmethod."""

    @functools.wraps(fn)
    def forward(klass, ctx, *arrays, **params):
        for a in arrays:
            if getattr(a, "dtype", None) is _BF16:
                return _widened_forward(functools.partial(fn, klass), ctx, arrays, params)
        return fn(klass, ctx, *arrays, **params)

    return forward


def _falses(n):
    return _FALSES[n] if n < 9 else (False,) * n


class _NoWeak:
    """Placeholder until :mod:`tapegrad.weak` registers its WeakScalar type."""


#: The type of a Python number ``jit`` traces (set by :mod:`tapegrad.weak`) and the function
#: that makes ``apply``'s arguments of that type what the eager call would have computed with.
_WeakType: type = _NoWeak
_resolve_weak: Any = None


class Function:
    """Base class of differentiable primitives.

    Subclass with static ``forward(ctx, *inputs, **params)`` returning a backend array (or a
    tuple of them) and static ``backward(ctx, *cotangents)`` returning one Tensor or ``None``
    per positional input. Call ``MyFn.apply(*inputs, **params)``; never call ``forward``
    directly. Positional Tensor inputs are differentiable; any other positional value (a Python
    number, a tuple of axes) is passed to ``forward`` as is and gets ``None`` from ``backward``.
    Keyword ``params`` are static and are shown on tape listings.

    Class attributes:
        oper: Label on tape listings and graph drawings (default: lowercase class name).
        differentiable: Set False for ops with no gradient (argmax, comparisons).
        nondiff_argnums: Positions of inputs the output is piecewise constant in (derivative
            zero almost everywhere), such as the mask operand ``y`` of ``ReluGrad(g, y)``;
            ``backward`` returns ``None`` for them and ``needs_input_grad`` is False for them.
        jvp: Optional forward-mode rule ``jvp(ctx, *tangents) -> tangent(s)`` (static method),
            written with tapegrad ops, reading the same ``ctx`` as ``backward`` plus
            ``ctx.out_avals`` (``(shape, dtype)`` per output); ``None`` tangents are zero.
            Without one, forward mode transposes ``backward`` (it is linear in the cotangent).
        batch: Optional batching rule for ``vmap``.
        ufunc, into, fresh, view: What ``jit``'s buffer planning may assume about ``forward``:
            ``ufunc`` names the NumPy/CuPy ufunc that ``forward`` is, on its inputs as given
            (the compiled program may call it with ``out=`` a dying buffer); ``into`` that
            ``forward`` takes a keyword ``into=``, an array of its (first) output's shape and
            dtype, possibly one of its inputs, and writes the output there; ``fresh`` says
            the outputs are new arrays; ``view`` that an output may be a view of the first
            input (``"readonly"``: a view that must not be written, such as a broadcast). An
            op that declares none is never written into (always safe).
        permutation, transposed: What ``jit``'s layout pass may assume: ``permutation(ndim,
            **params)`` (static method) of an op that only permutes its input's axes returns
            the permutation (two that cancel are dropped); ``transposed(ins, params)``
            (static method) returns the inputs and parameters with which this same op
            computes its output with the last two axes swapped, as a C-contiguous array
            (``transpose(a @ b)`` becomes one product ``b^T @ a^T``, so no strided transposed
            result reaches an elementwise op).
        effect: ``forward`` has an effect beyond its outputs (a debug callback): ``jit``
            keeps every such call in its program, in order, never folding, merging or
            dropping it.

    Example:
        >>> import tapegrad as tg
        >>> class Square(tg.Function):
        ...     oper = "square"
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> tg.grad(lambda x: Square.apply(x).sum())(tg.Tensor([2.0, 3.0]))
        Tensor([4., 6.], dtype=float32)
    """

    oper: str | None = None
    differentiable: bool = True
    nondiff_argnums: tuple = ()
    jvp = None
    batch = None
    ufunc: str | None = None
    into: bool = False
    fresh: bool = False
    view: bool = False
    permutation: Any = None
    transposed: Any = None
    effect: bool = False

    @staticmethod
    def forward(ctx, *args, **params):  # pragma: no cover - abstract
        raise NotImplementedError("Function subclasses must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *cotangents):
        raise NotImplementedError("this Function defines no backward rule")

    unbroadcast = staticmethod(unbroadcast)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("forward")
        if own is not None and not cls.__dict__.get("bfloat16_native", False):
            # bfloat16 inputs: computed in float32, rounded back (see _widened_forward)
            if isinstance(own, classmethod):
                cls.forward = classmethod(  # pyright: ignore[reportAttributeAccessIssue]
                    _bfloat16_classmethod_forward(own.__func__))
            elif isinstance(own, staticmethod) or callable(own):
                fn = own.__func__ if isinstance(own, staticmethod) else own
                cls.forward = staticmethod(  # pyright: ignore[reportAttributeAccessIssue]
                    _bfloat16_forward(fn))
        if getattr(cls.backward, "once_differentiable", False):
            # the rule reruns forward on the values it is given (tapegrad.once_differentiable),
            # so arrays forward leaves on ctx are never one example's under vmap
            cls._ctx_arrays_recomputed = True

    @classmethod
    def output_shape(cls, *shapes, **params) -> tuple:
        """Output shape from the inputs' shapes, without running the op.

        Each positional argument is the input's shape (a tuple) if it is a Tensor, else the
        value itself; ``params`` are the keyword parameters. Multi-output ops return a list of
        shapes. The default is NumPy broadcasting of the Tensor shapes (right for elementwise
        ops). Used for clear errors before any work and by lazy mode.

        Raises:
            ValueError: if the shapes are incompatible, naming the op and the shapes.
        """
        tensor_shapes = [s for s in shapes if isinstance(s, tuple)]
        try:
            return tuple(np.broadcast_shapes(*tensor_shapes))
        except ValueError:
            raise ValueError(
                f"{cls._name()}: shapes {', '.join(str(s) for s in tensor_shapes)} do not "
                "broadcast together (NumPy broadcasting: trailing dimensions must be equal or 1)"
            ) from None

    @classmethod
    def output_dtype(cls, *dtypes, **params):
        """Output dtype from the inputs' dtypes (Tensor inputs) and values (other positional
        arguments), without running the op; a list for multi-output ops. The default is NumPy's
        type promotion with Python numbers weak (``float32 * 2.0`` stays float32)."""
        args = [d for d in dtypes if isinstance(d, (np.dtype, int, float, complex))]
        return _dtypes.result_type(*args) if args else np.dtype(np.float32)

    @classmethod
    def _name(cls) -> str:
        return cls.oper or cls.__name__.lower()

    @classmethod
    def apply(cls, *args, **params) -> Any:
        """Apply the op: returns a Tensor (or a tuple of Tensors for several outputs)."""
        top = 0
        arrays = []
        cpu = True
        for a in args:
            if type(a) is Tensor:
                b = a._box
                if b is not None and b[0] > top:
                    top = b[0]
                    trace = b[1]
                a = a._array
                if type(a) is not _ndarray:
                    cpu = False
            elif type(a) is _WeakType:  # a Python number jit traces: as the eager call would
                return cls.apply(*_resolve_weak(cls, args), **params)
            arrays.append(a)
        if top:
            res = trace.record(cls, args, params, None)
            return res[0] if res[3] else res[0][0]
        if _lazy_state.depth or _LAZY_GLOBAL["lazy"]:
            deferred = _defer(cls, args, params)
            if deferred is not None:
                return deferred
        ctx = _new(Context)
        n = len(arrays)
        ctx.needs_input_grad = _FALSES[n] if n < 9 else (False,) * n
        if not cpu:
            ctx.device = _check_devices(cls, args, arrays)
            ctx.backend = _backend.get_backend(ctx.device)
        if _state.fast and not _PROFILING[0]:
            try:
                out = cls.forward(ctx, *arrays, **params)
            except (ValueError, TypeError, IndexError) as e:
                raise cls._explain(e, arrays, params) from e
        else:
            out = run_forward(cls, ctx, arrays, params)
        if type(out) is _ndarray:
            t = _new(Tensor)
            _s_array(t, out)
            _s_box(t, None)
            return t
        if type(out) is tuple or type(out) is list:
            return tuple([const(as_array(o, ctx.backend)) for o in out])
        return const(as_array(out, ctx.backend))

    @classmethod
    def _explain(cls, e, arrays, params=None):
        shapes = [tuple(a.shape) if hasattr(a, "shape") else a for a in arrays]
        try:
            cls.output_shape(*shapes, **(params or {}))
        except ValueError as clear:  # its own type kept: numpy's AxisError is an IndexError too
            return clear.with_traceback(None)
        except Exception:
            pass
        desc = ", ".join(
            f"{tuple(a.shape)} {a.dtype}" if hasattr(a, "shape") else repr(a) for a in arrays
        )
        msg = str(e)
        prefix = "" if msg.startswith(f"{cls._name()}:") else f"{cls._name()}: "
        text = f"{prefix}{msg} (inputs: {desc})"
        try:
            return type(e)(text)
        except Exception:  # an exception type with another constructor (NumPy's casting error)
            base = next(b for b in (TypeError, IndexError, ValueError) if isinstance(e, b))
            return base(text)


def base_apply(cls, values, arrays, cpu, params, needs):
    """Run ``forward`` on the level-0 ``values`` (Tensors or Python values) for a recording.

    Returns ``(output arrays, ctx, saved spec, multi, non-differentiable outputs, prims)``.
    ``ctx.saved_tensors`` is set for the lowest recording level (the values it saved, as the
    level-0 Tensors in ``values`` or new constants, ``prims`` holding those made for outputs).
    The saved spec lists what ``forward`` saved, ``(0, k)`` input ``k``, ``(1, k)`` output
    ``k``, ``(2, value)`` another value, so that each higher recording level can give its
    ``backward`` the matching Tensors of its own level. ``arrays`` are the values' arrays (the
    values themselves where they are not Tensors), ``cpu`` whether all of them are NumPy's.
    """
    ctx = _new(Context)
    ctx.needs_input_grad = needs
    if not cpu:
        ctx.device = _check_devices(cls, values, arrays)
        ctx.backend = _backend.get_backend(ctx.device)
    if _state.fast and not _PROFILING[0]:
        try:
            raw = cls.forward(ctx, *arrays, **params)
        except (ValueError, TypeError, IndexError) as e:
            raise cls._explain(e, arrays, params) from e
    else:
        raw = run_forward(cls, ctx, arrays, params)
    if type(raw) is _ndarray:
        multi = False
        raws = given = (raw,)
    elif type(raw) is tuple or type(raw) is list:
        multi = True
        given = tuple(raw)
        raws = tuple([as_array(r, ctx.backend) for r in given])
    else:  # NumPy scalars (ufuncs on 0-d arrays give them) become 0-d arrays
        multi = False
        given = (raw,)
        raws = (as_array(raw, ctx.backend),)
    d = ctx.__dict__
    spec = ()
    prims = None
    if "_to_save" in d:
        sp = []
        saved = []
        for s in d.pop("_to_save"):
            k = 0
            for a in arrays:
                if a is s:
                    sp.append((0, k))
                    saved.append(values[k])
                    break
                k += 1
            else:
                k = 0
                for o in given:
                    if o is s:
                        sp.append((1, k))
                        if prims is None:
                            prims = [None] * len(raws)
                        p = prims[k]
                        if p is None:
                            p = prims[k] = const(raws[k])  # pyright: ignore[reportArgumentType, reportCallIssue]
                        saved.append(p)
                        break
                    k += 1
                else:
                    v = s if isinstance(s, Tensor) or not hasattr(s, "shape") else const(s)
                    sp.append((2, v))
                    saved.append(v)
        spec = ctx._spec = tuple(sp)  # (kept on ctx for tapegrad.memory)
        ctx.saved_tensors = tuple(saved)
    nondiff = ()
    if "_non_diff" in d:
        nd = d.pop("_non_diff")
        nondiff = tuple([j for j, o in enumerate(given) if any(o is s for s in nd)])
    return raws, ctx, spec, multi, nondiff, prims


def _defer(cls, args, params):
    """Lazy mode: Tensor(s) holding LazyArrays for ``cls.apply(*args, **params)``, or None when
    the op cannot infer its output (it then runs at once)."""
    if _lazy_state.realizing:
        return None
    shapes = [a._array.shape if type(a) is Tensor else a for a in args]
    dtypes = [a._array.dtype if type(a) is Tensor else a for a in args]
    try:
        shape = cls.output_shape(*shapes, **params)
        dtype = cls.output_dtype(*dtypes, **params)
    except NotImplementedError:
        return None
    multi = isinstance(shape, list)
    shapes_out = shape if multi else [shape]
    dtypes_out = dtype if isinstance(dtype, list) else [dtype] * len(shapes_out)
    avals = [(tuple(s), np.dtype(d)) for s, d in zip(shapes_out, dtypes_out)]

    def run(*arrays):
        ctx = _new(Context)
        ctx.needs_input_grad = _falses(len(arrays))
        xp = np
        arrays = list(arrays)
        if any(type(a) is not _ndarray and hasattr(a, "shape") for a in arrays):
            ctx.device = _check_devices(cls, args, arrays)
            xp = ctx.backend = _backend.get_backend(ctx.device)
        out = run_forward(cls, ctx, arrays, params)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(as_array(o, xp) for o in outs)

    raw = [a._array if type(a) is Tensor else a for a in args]
    outs = tuple(const(a) for a in defer(run, raw, avals, cls._name()))
    return outs if multi else outs[0]
