"""``Function`` and ``Context``: the contract every differentiable primitive follows.

A primitive is a :class:`Function` subclass with static ``forward`` (backend arrays in, backend
array(s) out) and ``backward`` (Tensor cotangents in, one Tensor or ``None`` per positional
input out, written with tapegrad ops so that outer transforms record it). ``apply`` does the
bookkeeping: levels, recording on the tape, broadcasting, arity and shape checks.

Levels: each active transform owns a trace level. ``apply`` records at the highest level among
its Tensor inputs, treating lower-level inputs as constants there, and computes the value by
applying itself again one level down; at level 0 the ``forward`` rule runs on arrays. This is how
nested transforms keep their perturbations apart (Siskind and Pearlmutter, 2005).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

from tapegrad import backend as _backend
from tapegrad.lazy import _GLOBAL as _LAZY_GLOBAL
from tapegrad.lazy import LazyArray as _LazyArray
from tapegrad.lazy import _state as _lazy_state
from tapegrad.lazy import realize_array as _realize_array
from tapegrad.lazy import record as _lazy_record
from tapegrad.tensor import Tensor, _make, _primal_of, _speedups

__all__ = ["Function", "Context", "no_grad", "is_grad_enabled", "unbroadcast"]

_ndarray = np.ndarray
_new = object.__new__
_set = object.__setattr__


class _GradState(threading.local):
    disabled = 0


_grad_state = _GradState()


@contextmanager
def no_grad():
    """Context manager: operations inside carry no gradient to any transform.

    Values computed inside are still recorded on an active tape (so a replay recomputes them),
    but no cotangent flows through them, as if each were wrapped in ``stop_gradient``. The flag
    is per thread and nests.

    Example:
        >>> import tapegrad as tg
        >>> def f(x):
        ...     with tg.no_grad():
        ...         scale = x * 2.0
        ...     return (scale * x).sum()
        >>> float(tg.grad(f)(tg.Tensor(3.0)))
        6.0
    """
    _grad_state.disabled += 1
    try:
        yield
    finally:
        _grad_state.disabled -= 1


def is_grad_enabled() -> bool:
    """False inside :func:`no_grad` (in this thread)."""
    return not _grad_state.disabled


class _SavedTensors:
    """``Context.saved_tensors``: the saved values, in ``save_for_backward`` order, as Tensors.

    A non-data descriptor: once ``apply`` has stored the tuple on the instance, reading it is
    one dict lookup in every backward rule; before that, reading it raises a clear error.
    """

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

    Set before ``backward``:
        saved_tensors: The values given to :meth:`save_for_backward`, as Tensors.

    Free attributes carry static values (axes, shapes, flags) from ``forward`` to ``backward``.
    Arrays computed in ``forward`` other than inputs and outputs are constants to ``backward``:
    recompute them with tapegrad ops there, or higher derivatives come out wrong.

    Raises:
        RuntimeError: reading ``saved_tensors`` before ``backward`` (in ``forward``, or on a
            Context that no transform recorded).
    """

    # CPU defaults live on the class, so the hot path sets them only for other devices.
    device = "cpu"
    backend = np
    saved_tensors = _SavedTensors()

    def save_for_backward(self, *arrays) -> None:
        """Save input or output arrays of ``forward``; ``backward`` reads them back as Tensors
        (traced by any outer transform) from :attr:`saved_tensors`. Each call replaces the last.
        """
        self._to_save = arrays

    def mark_non_differentiable(self, *arrays) -> None:
        """Declare outputs (returned arrays) that carry no gradient, such as indices or masks."""
        self._non_diff = arrays


_tnp = None  # tapegrad.numpy, bound on first use (it sits above this module)


def _load_tnp():
    global _tnp
    from tapegrad import numpy as tnp

    _tnp = tnp
    return tnp


def unbroadcast(g: Tensor, shape: tuple, fn=None, index: int = 0) -> Tensor:
    """Sum cotangent ``g`` down to ``shape``, undoing NumPy broadcasting.

    Raises:
        ValueError: if ``g``'s shape does not broadcast from ``shape`` (a wrong backward rule);
            the message names the Function.
    """
    tnp = _tnp or _load_tnp()
    gshape = g.shape
    lead = len(gshape) - len(shape)
    ok = lead >= 0 and all(s == 1 or s == gs for s, gs in zip(shape, gshape[lead:]))
    if not ok:
        who = f"{fn.__name__}.backward" if fn is not None else "unbroadcast"
        raise ValueError(
            f"{who}: cotangent for input {index} has shape {tuple(gshape)}, which does not "
            f"reduce to the input's shape {tuple(shape)}; backward must return a cotangent of "
            "the input's shape (or one that broadcasts from it)."
        )
    axes = tuple(range(lead)) + tuple(
        lead + i for i, (s, gs) in enumerate(zip(shape, gshape[lead:])) if s == 1 and gs != 1
    )
    if axes:
        g = tnp.sum(g, axis=axes, keepdims=True)
    if g.shape != tuple(shape):
        g = tnp.reshape(g, shape)
    return g


def _as_array(out, xp):
    """Forward results as backend arrays (NumPy scalars become 0-d arrays)."""
    if type(out) is _ndarray:
        return out
    if isinstance(out, np.generic) or not hasattr(out, "shape"):
        out = np.asarray(out) if xp is np else xp.asarray(out)
    return out


def _float(dtype) -> bool:
    return dtype.kind in "fc"


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
            Differentiating transforms (``grad``, ``vjp``, ``jvp``, ...) then skip an
            application whose only traced inputs are these, as they skip non-differentiable
            ops and ops under :func:`no_grad`: it runs one level down and its output is a
            constant at their level, so no cotangent is computed for it or upstream of it.
            Recording transforms (``trace``, ``jit``, ``linearize``) still record it.

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
    #: Optional forward-mode rule ``jvp(ctx, *tangents) -> tangent(s)`` (static method), written
    #: with tapegrad ops; ``None`` tangents are zero. Without one, forward mode transposes
    #: ``backward``.
    jvp = None

    @staticmethod
    def forward(ctx, *args, **params):  # pragma: no cover - abstract
        raise NotImplementedError("Function subclasses must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *cotangents):
        raise NotImplementedError("this Function defines no backward rule")

    @classmethod
    def output_shape(cls, *shapes, **params) -> tuple:
        """Output shape from the inputs' shapes, without running the op.

        Each positional argument is the input's shape (a tuple) if it is a Tensor, else the
        value itself; ``params`` are the keyword parameters. Multi-output ops return a list of
        shapes. The default is NumPy broadcasting of the Tensor shapes (right for elementwise
        ops); other ops override it. Used for clear errors before any work and by lazy mode.

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
        args = [d for d in dtypes if isinstance(d, np.dtype) or isinstance(d, (int, float))]
        if not args:
            return np.dtype(np.float32)
        return np.result_type(*args)

    @classmethod
    def _name(cls) -> str:
        return cls.oper or cls.__name__.lower()

    # -- the hot path ------------------------------------------------------------------------
    @classmethod
    def _apply_py(cls, *args, **params):
        """Run the op on ``args``; returns a Tensor (or a tuple of Tensors).

        This is :meth:`apply` in Python. When ``tapegrad._speedups`` is built, ``apply`` is its
        compiled translation of the eager branch and of :meth:`_record_small` (for any number
        of inputs), which hands every other case to this method before doing any work.
        """
        n = len(args)
        # One and two inputs are unrolled: this is the hot path of every program.
        if n == 1:
            a = args[0]
            top = a._level if type(a) is Tensor else 0
        elif n == 2:
            a, b = args
            top = a._level if type(a) is Tensor else 0
            if type(b) is Tensor and b._level > top:
                top = b._level
        else:
            top = 0
            for x in args:
                if type(x) is Tensor and x._level > top:
                    top = x._level
        if top:
            if cls.differentiable and not cls.nondiff_argnums and not _grad_state.disabled:
                if n < 3:
                    out = cls._record_small(top, args, params, a, b if n == 2 else None, n == 2)
                    if out is not None:
                        return out
                outs, _, multi, _, _ = cls._record(top, args, params, True, None)
                return outs if multi else outs[0]
            return cls._apply_inactive(top, args, params)
        if _lazy_state.depth or _LAZY_GLOBAL["lazy"]:
            out = _lazy_record(cls, args, params)
            if out is not None:
                return out
        # Eager: no transform holds any input; run the forward rule and wrap the result.
        if n == 1:
            xa = a._array if type(a) is Tensor else a
            if type(xa) is _ndarray or type(a) is not Tensor:
                ctx = _new(Context)
                ctx.needs_input_grad = _F1
                try:
                    out = cls.forward(ctx, xa, **params) if params else cls.forward(ctx, xa)
                except (ValueError, TypeError, IndexError) as e:
                    raise cls._explain(e, [xa], params) from e
                if type(out) is _ndarray:
                    return _const(out)
                return _wrap_eager(out, np)
        elif n == 2:
            ta = type(a) is Tensor
            tb = type(b) is Tensor
            xa = a._array if ta else a
            xb = b._array if tb else b
            if (type(xa) is _ndarray or not ta) and (type(xb) is _ndarray or not tb):
                ctx = _new(Context)
                ctx.needs_input_grad = _F2
                try:
                    if params:
                        out = cls.forward(ctx, xa, xb, **params)
                    else:
                        out = cls.forward(ctx, xa, xb)
                except (ValueError, TypeError, IndexError) as e:
                    raise cls._explain(e, [xa, xb], params) from e
                if type(out) is _ndarray:
                    return _const(out)
                return _wrap_eager(out, np)
        return cls._eager(args, params)

    apply = _apply_py

    @classmethod
    def _apply_inactive(cls, top, args, params):
        """Apply at level ``top`` an op that may carry no derivative there: a
        non-differentiable op, any op under :func:`no_grad`, or one whose only inputs traced at
        ``top`` are its ``nondiff_argnums``.

        A trace that only differentiates (``Trace.replays`` False: grad, vjp, jvp) skips such
        an application: the op runs one level down and its output is a constant at ``top``, so
        the transform neither records it nor computes cotangents for it or upstream of it.
        A recording trace (trace, jit, linearize) records it with no gradient, since its tape
        must replay it.
        """
        diff = cls.differentiable and not _grad_state.disabled
        nd = cls.nondiff_argnums
        trace = None
        active = False
        for i, x in enumerate(args):
            if type(x) is Tensor and x._level == top:
                trace = x._trace
                if diff and i not in nd:
                    active = True
        if not active and not trace.replays and not trace.done:
            lowered = [_primal_of(x) if type(x) is Tensor and x._level == top else x for x in args]
            return cls.apply(*lowered, **params)
        outs, _, multi, _, _ = cls._record(top, args, params, active, None)
        return outs if multi else outs[0]

    @classmethod
    def _eager(cls, args, params):
        """Eager application, any arity and device (the general form of :meth:`apply`'s
        eager branch)."""
        arrays = []
        cpu = True
        for a in args:
            if type(a) is Tensor:
                a = a._array
                if type(a) is not _ndarray:
                    cpu = False
            arrays.append(a)
        ctx = _new(Context)
        if not cpu:
            ctx.device = dev = _check_devices(cls, arrays)
            ctx.backend = _backend.get_backend(dev)
        n = len(arrays)
        ctx.needs_input_grad = _FALSES[n] if n < 8 else (False,) * n
        try:
            out = cls.forward(ctx, *arrays, **params)
        except (ValueError, TypeError, IndexError) as e:
            raise cls._explain(e, arrays, params) from e
        if type(out) is _ndarray:
            return _const(out)
        return _wrap_eager(out, ctx.backend)

    @classmethod
    def _explain(cls, e, arrays, params=None):
        shapes = [tuple(a.shape) if hasattr(a, "shape") else a for a in arrays]
        try:
            cls.output_shape(*shapes, **(params or {}))
        except ValueError as clear:
            return ValueError(str(clear))
        except Exception:
            pass
        desc = ", ".join(
            f"{tuple(a.shape)} {a.dtype}" if hasattr(a, "shape") else repr(a) for a in arrays
        )
        return type(e)(f"{cls._name()}: {e} (inputs: {desc})")

    @classmethod
    def _base(cls, arrays, cpu, params, needs):
        """Run forward at level 0 for a recording; returns
        ``(outputs as constants, ctx, multi, saved spec, non-diff output indices)``."""
        ctx = _new(Context)
        if cpu:
            xp = np
        else:
            ctx.device = dev = _check_devices(cls, arrays)
            xp = ctx.backend = _backend.get_backend(dev)
        ctx.needs_input_grad = needs
        try:
            raw = cls.forward(ctx, *arrays, **params)
        except (ValueError, TypeError, IndexError) as e:
            raise cls._explain(e, arrays, params) from e
        return cls._wrap_base(ctx, raw, arrays, xp)

    @staticmethod
    def _wrap_base(ctx, raw, arrays, xp):
        """Wrap forward's result as constants and resolve what it saved (see :meth:`_base`)."""
        if type(raw) is tuple or type(raw) is list:
            multi = True
            raws = tuple(raw)
            outs = tuple([_const(_as_array(o, xp)) for o in raws])
        else:
            multi = False
            raws = (raw,)
            outs = (_const(raw if type(raw) is _ndarray else _as_array(raw, xp)),)
        d = ctx.__dict__
        saved = d.pop("_to_save", None)
        spec = ()
        if saved:
            sp = []
            for s in saved:
                k = 0
                for a in arrays:
                    if a is s:
                        sp.append((0, k))
                        break
                    k += 1
                else:
                    for k, o in enumerate(raws):
                        if o is s or outs[k]._array is s:
                            sp.append((1, k))
                            break
                    else:
                        sp.append((2, s if isinstance(s, Tensor) else _const(s)))
            spec = tuple(sp)
        nondiff = ()
        nd = d.pop("_non_diff", None)
        if nd:
            nondiff = tuple(
                [j for j, o in enumerate(raws) if any(o is s or outs[j]._array is s for s in nd)]
            )
        return outs, ctx, multi, spec, nondiff

    @classmethod
    def _record_small(cls, top, args, params, a, b, two):
        """The common case, unrolled: one or two inputs, one level recording, concrete primals
        (a first-order transform). Returns None to defer to :meth:`_record` otherwise.

        The output's primal (a level-0 constant over the same array) is only built when a rule
        saved the output; otherwise ``_primal`` stays ``None`` until someone asks
        (:func:`~tapegrad.tensor._primal_of`).
        """
        ta = type(a) is Tensor
        tb = type(b) is Tensor
        pa = pb = None
        na = nb = -1
        if ta:
            la = a._level
            if la == top:
                pa = a._primal
                if pa is not None and pa._level:
                    return None
                na = a._node
                trace = a._trace
            elif la:
                return None
        if tb:
            lb = b._level
            if lb == top:
                pb = b._primal
                if pb is not None and pb._level:
                    return None
                nb = b._node
                trace = b._trace
            elif lb:
                return None
        if trace.done:
            return None  # _record raises the leaked-tracer error
        xa = a._array if ta else a
        xb = b._array if tb else b
        ctx = _new(Context)
        if (not ta or type(xa) is _ndarray) and (not tb or type(xb) is _ndarray):
            xp = np
        else:
            arrays = [xa, xb] if two else [xa]
            ctx.device = dev = _check_devices(cls, arrays)
            xp = ctx.backend = _backend.get_backend(dev)
            xa = arrays[0]
            if two:
                xb = arrays[1]
        # Integer inputs get no cotangent: forward and backward both see False for them.
        fa = na >= 0 and xa.dtype.kind in "fc"
        if two:
            ctx.needs_input_grad = _NEEDS2[fa][nb >= 0 and xb.dtype.kind in "fc"]
            try:
                raw = cls.forward(ctx, xa, xb, **params) if params else cls.forward(ctx, xa, xb)
            except (ValueError, TypeError, IndexError) as e:
                raise cls._explain(e, [xa, xb], params) from e
        else:
            ctx.needs_input_grad = _T1 if fa else _F1
            try:
                raw = cls.forward(ctx, xa, **params) if params else cls.forward(ctx, xa)
            except (ValueError, TypeError, IndexError) as e:
                raise cls._explain(e, [xa], params) from e
        if type(raw) is not _ndarray:
            if type(raw) is tuple or type(raw) is list:
                arrays = [xa, xb] if two else [xa]
                return cls._finish_multi(ctx, raw, xp, arrays, top, args, params)
            raw = _as_array(raw, xp)
        d = ctx.__dict__
        saved = d.pop("_to_save", None)
        lo = None
        if saved:
            res = []
            for v in saved:
                if v is xa and ta:
                    if na < 0:
                        res.append(a)
                    else:
                        res.append(pa if pa is not None else _primal_of(a))
                elif two and v is xb and tb:
                    if nb < 0:
                        res.append(b)
                    else:
                        res.append(pb if pb is not None else _primal_of(b))
                elif v is raw:
                    if lo is None:
                        lo = _const(raw)
                    res.append(lo)
                elif v is xa or (two and v is xb):
                    res.append(v)  # a Python value passed positionally
                else:
                    res.append(v if type(v) is Tensor else _const(v))
            ctx.saved_tensors = tuple(res)
        else:
            ctx.saved_tensors = ()
        if "_non_diff" in d:
            d.pop("_non_diff")
            ctx = None
        node = trace.n_nodes
        trace.n_nodes = node + 1
        out = _make(raw, lo, top, trace, node, None)
        # Avals live in the trace's node table (tape.record_avals): one per op, not one per
        # input and output.
        avals = trace.avals
        avals.append((raw.shape, raw.dtype))
        if two:
            trace.records.append(
                (
                    cls,
                    params,
                    ctx,
                    (na, nb),
                    _NONE2
                    if na >= 0 and nb >= 0
                    else (None if na >= 0 else a, None if nb >= 0 else b),
                    (node,),
                    avals,
                    avals,
                )
            )
        else:
            trace.records.append(
                (cls, params, ctx, (na,), _NONE1 if na >= 0 else (a,), (node,), avals, avals)
            )
        return out

    @classmethod
    def _finish_multi(cls, ctx, raw, xp, arrays, top, args, params):
        """Multi-output results of :meth:`_record_small`: record them through the general
        path, handing it the forward result already computed (forward runs once). ``arrays``
        are the very objects forward received (saved arrays are matched by identity)."""
        pre = cls._wrap_base(ctx, raw, arrays, xp)
        outs, _, multi, _, _ = cls._record(top, args, params, True, None, pre)
        return outs if multi else outs[0]

    @classmethod
    def _record(cls, top, args, params, diff, needs, pre=None):
        """Apply at level ``top``: lower the inputs, apply below, record, wrap the outputs.

        ``pre``, if given, is forward's result already computed on the level-0 arrays and
        wrapped by :meth:`_wrap_base`; it stands in for the forward call at the lowest level.

        Returns ``(outputs at level top, base ctx, multi, saved spec, non-diff outputs)``.
        One pass over the inputs builds everything the record needs (this is the hot path of
        every traced program: no comprehensions, which are function calls before Python 3.12).
        """
        trace = None
        lowered = []
        in_nodes = []
        consts = []
        in_avals = []
        level_needs = []
        arrays = []
        top_needs = []
        sub = 0
        cpu = True
        nd = cls.nondiff_argnums
        k = -1
        for a in args:
            k += 1
            if type(a) is Tensor:
                top_needs.append(a._level > 0 and k not in nd)
                lv = a._level
                if lv == top:
                    trace = a._trace
                    in_nodes.append(a._node)
                    consts.append(None)
                    a = _primal_of(a)
                    lv = a._level
                    arr = a._array
                    level_needs.append(arr.dtype.kind in "fc" and k not in nd)
                else:
                    in_nodes.append(-1)
                    consts.append(a)
                    level_needs.append(False)
                    arr = a._array
                if type(arr) is not _ndarray:
                    cpu = False
                in_avals.append((arr.shape, arr.dtype))
                arrays.append(arr)
                if lv > sub:
                    sub = lv
            else:
                top_needs.append(False)
                in_nodes.append(-1)
                consts.append(a)
                level_needs.append(False)
                in_avals.append(None)
                arrays.append(a)
            lowered.append(a)
        if trace.done:
            raise RuntimeError(
                f"{cls._name()}: an input is a traced value of a transform that has already "
                "finished (a leaked tracer, for example one stored in a global or a closure "
                "and used after grad/vjp returned). Pass it as an argument instead."
            )
        if needs is None:
            needs = tuple(top_needs)
        if sub:
            louts, ctx0, multi, spec, nondiff = cls._record(sub, lowered, params, diff, needs, pre)
        elif pre is not None:  # forward already ran: its wrapped result (see _finish_multi)
            louts, ctx0, multi, spec, nondiff = pre
        else:
            louts, ctx0, multi, spec, nondiff = cls._base(arrays, cpu, params, needs)
        ctx = None
        if diff:
            if sub:  # the base ctx serves a lower level already: this level gets a copy
                ctx = _new(Context)
                ctx.__dict__.update(ctx0.__dict__)
            else:
                ctx = ctx0
            ctx.needs_input_grad = tuple(level_needs)
            if spec:
                saved = []
                for k, v in spec:
                    saved.append(lowered[v] if k == 0 else (louts[v] if k == 1 else v))
                ctx.saved_tensors = tuple(saved)
            else:
                ctx.saved_tensors = ()
            if nondiff:
                if multi:
                    ctx._nondiff = nondiff
                else:  # the only output carries no gradient: nothing flows back
                    ctx = None
        level = trace.level
        node = trace.n_nodes
        if multi:
            out_nodes = []
            outs = []
            out_avals = []
            for lo in louts:
                out_nodes.append(node)
                outs.append(_traced(lo, level, trace, node))
                out_avals.append((lo._array.shape, lo._array.dtype))
                node += 1
            outs = tuple(outs)
            out_nodes = tuple(out_nodes)
            out_avals = tuple(out_avals)
        else:
            lo = louts[0]
            arr = lo._array
            outs = (_traced(lo, level, trace, node),)
            out_nodes = (node,)
            out_avals = ((arr.shape, arr.dtype),)
            node += 1
        trace.n_nodes = node
        trace.avals.extend(out_avals)
        trace.records.append(
            (
                cls,
                params,
                ctx,
                tuple(in_nodes),
                tuple(consts),
                out_nodes,
                tuple(in_avals),
                out_avals,
            )
        )
        return outs, ctx0, multi, spec, nondiff


def _all_concrete_py(*tensors) -> bool:
    """Whether no transform can record an op on ``tensors``: each is a level-0 Tensor and no
    lazy (``jit``) recording is open.

    A backward rule written with tapegrad ops (so that every order of derivative works) may
    then compute on the raw arrays directly and wrap the results with ``Tensor._const``: at
    first order its ops would run eagerly anyway, and skipping ``Function.apply`` for each of
    them saves its per-op cost. The results must equal the tapegrad-op path's exactly.
    """
    if _lazy_state.depth or _LAZY_GLOBAL["lazy"]:
        return False
    for t in tensors:
        if type(t) is not Tensor or t._level:
            return False
    return True


#: The compiled ``all_concrete`` (src/tapegrad/_speedups.c) replaces this when built.
_all_concrete = _all_concrete_py


def _wrap_eager(out, xp):
    """Eager forward results other than one ndarray (scalars, tuples, device arrays)."""
    if type(out) is tuple or type(out) is list:
        return tuple([_const(_as_array(o, xp)) for o in out])
    return _const(_as_array(out, xp))


def _traced(lo, level, trace, node):
    return _make(lo._array, lo, level, trace, node, None)


_FALSES = [(False,) * i for i in range(8)]
_F1 = _FALSES[1]
_F2 = _FALSES[2]
_T1 = (True,)
_NEEDS2 = {
    False: {False: (False, False), True: (False, True)},
    True: {False: (True, False), True: (True, True)},
}
_NONE1 = (None,)
_NONE2 = (None, None)
_const = Tensor._const


def _check_devices(cls, arrays: list) -> str:
    """Device of ``arrays`` (the slow path of apply: not all NumPy). Deferred (lazy) arrays are
    computed in place first.

    Raises:
        ValueError: if the arrays live on different devices, naming the op and both.
    """
    for i, a in enumerate(arrays):
        if type(a) is _LazyArray:
            arrays[i] = _realize_array(a)
    devs = {_backend.device_of(a) for a in arrays if hasattr(a, "shape")}
    if len(devs) > 1:
        raise ValueError(
            f"{cls._name()}: inputs live on different devices ({', '.join(sorted(devs))}); "
            "move them to one device first with x.to_device(...)"
        )
    return devs.pop() if devs else "cpu"


def _install_speedups() -> None:
    """Make the compiled hot paths (tapegrad/_speedups.c) ``Function.apply`` and the backward
    replay, when the extension is built (see ``tapegrad.tensor``)."""
    from tapegrad import tape

    _speedups.init_core(
        Context,
        _ndarray,
        _grad_state,
        _lazy_state,
        _LAZY_GLOBAL,
        {
            "wrap_eager": _wrap_eager,
            "as_array": _as_array,
            "unbroadcast": unbroadcast,
            "multi_grads": tape._multi_grads,
            "as_cotangent": tape._as_cotangent,
            "tape": tape,
            "numpy": np,
        },
    )
    type.__setattr__(Function, "apply", classmethod(_speedups.apply))
    tape._backward_pass = _speedups.backward_pass
    global _all_concrete
    _all_concrete = _speedups.all_concrete


if _speedups is not None:
    _install_speedups()
