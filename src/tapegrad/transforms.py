"""Reverse-mode transforms: ``vjp``, ``grad``, ``value_and_grad`` and ``trace``.

Each transform call takes a fresh trace level (newer than every live one), wraps the input leaves
as traced Tensors of that level, runs the function, freezes what it recorded and replays it
backward with the ``backward`` rules. Because those rules are themselves tapegrad operations, an
enclosing transform records them, so transforms nest to any order (JAX semantics).
"""

from __future__ import annotations

import inspect
import numbers

import numpy as np
import optree

from tapegrad import tape as _tape
from tapegrad.tape import (
    Tape,
    Trace,
    _freeze,
    _seed_cotangents,
    backward_pass,
    gc_paused,
    new_level,
)
from tapegrad.tensor import Tensor, _make, _primal_of, _speedups
from tapegrad.tree import NAMESPACE, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten

__all__ = ["vjp", "grad", "value_and_grad", "trace", "jit"]


def _leaf_path(args, index: int, names) -> str:
    """Readable path of leaf ``index`` of the tuple ``args``, each argument named by ``names``
    (a string, a list of strings, or a callable returning either: names are only worked out
    when an error needs them)."""
    if callable(names):
        names = names()
    if isinstance(names, str):
        paths = tree_flatten_with_path(args, names)[0]
    else:
        paths = []
        for a, name in zip(args, names):
            paths += tree_flatten_with_path(a, name)[0]
    return paths[index] if index < len(paths) else "<input>"


def _as_primal(leaf, i, tree, prefix, who, allow_int=False) -> Tensor:
    """Turn one input leaf into a Tensor, checking that it can be differentiated."""
    if isinstance(leaf, Tensor):
        t = leaf if leaf.is_realized else leaf.realize()
    elif (
        isinstance(leaf, bool)
        or not isinstance(leaf, (numbers.Number, np.ndarray, np.generic))
        and not hasattr(leaf, "__cuda_array_interface__")
    ):
        raise TypeError(
            f"{who}: input {_leaf_path(tree, i, prefix)} is a {type(leaf).__name__}, which is "
            "not a differentiable value; pytree leaves must be Tensors, arrays or numbers "
            "(wrap static values in a closure or pass them as non-differentiated arguments)."
        )
    else:
        t = Tensor(leaf)
    if not allow_int and t.dtype.kind not in "fc":
        raise TypeError(
            f"{who}: cannot differentiate with respect to {_leaf_path(tree, i, prefix)}, which "
            f"has dtype {t.dtype} (shape {t.shape}); only floating inputs have gradients. Cast it "
            "(x.astype('float32')) or leave it out of the differentiated arguments (argnums)."
        )
    return t


_LEAF_TREEDEF = tree_flatten(0)[1]
_FLAT_TREEDEFS: dict = {}


def _flat_treedef(n: int):
    """The treedef of a tuple of ``n`` leaves (cached)."""
    td = _FLAT_TREEDEFS.get(n)
    if td is None:
        td = _FLAT_TREEDEFS[n] = tree_flatten((0,) * n)[1]
    return td


def _call_traced(
    fun,
    args: tuple,
    has_aux: bool,
    who: str,
    prefix: str,
    allow_int=False,
    replays=False,
    around=None,
):
    """Run ``fun(*args)`` on a fresh trace. Returns (trace, treedef, outs, out info, aux).

    ``replays``: the records will be replayed forward (``trace``), so every op is recorded;
    otherwise (``vjp``, ``grad``) ops with no derivative are left off (see ``Trace``).
    ``around``: ``(head, tail)``, positional arguments that are not traced, passed before and
    after ``args`` (``fun(*head, *args, *tail)``).
    """
    for a in args:
        if type(a) is not Tensor:
            leaves, treedef = optree.tree_flatten(args, namespace=NAMESPACE)  # tree_flatten
            break
    else:  # every argument a Tensor (the common case): no flattening to do
        leaves, treedef = args, _flat_treedef(len(args))
    trace = Trace(new_level(), replays)
    traced = None if _speedups is None else _speedups.trace_inputs(leaves, trace)
    if traced is not None:  # every leaf a concrete floating NumPy Tensor, in C
        primals = list(leaves)
    else:
        primals, traced = _trace_inputs(trace, leaves, args, prefix, who, allow_int)
    if treedef.num_leaves != len(args) or treedef.num_nodes != len(args) + 1:
        traced = treedef.unflatten(traced)  # else: a flat tuple of leaves, as args
    try:
        with gc_paused():
            out = fun(*traced) if around is None else fun(*around[0], *traced, *around[1])
    finally:
        trace.done = True
    aux = None
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(
                f"{who}: has_aux=True needs the function to return a pair (output, aux), got "
                f"{type(out).__name__}"
                + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
            )
        out, aux = out
        aux = tree_map(lambda v: _lower(v, trace.level, who), aux)
    if type(out) is Tensor:
        out_leaves, out_tree = (out,), _LEAF_TREEDEF
    else:
        out_leaves, out_tree = tree_flatten(out)
    refs, lowered, avals = [], [], []
    for i, o in enumerate(out_leaves):
        if not isinstance(o, Tensor):
            if isinstance(o, bool) or not isinstance(o, (numbers.Number, np.ndarray, np.generic)):
                raise TypeError(
                    f"{who}: output leaf {_leaf_path((out,), i, 'out')} is a {type(o).__name__}; "
                    "the "
                    "function must return Tensors, arrays or numbers (use has_aux=True for "
                    "other values)."
                )
            o = Tensor(o)
        if o._level == trace.level:
            refs.append(o._node)
            low = _primal_of(o)
        elif o._level > trace.level:
            raise RuntimeError(
                f"{who}: output {_leaf_path((out,), i, 'out')} is traced by an inner "
                "transform that "
                "has already finished (a leaked tracer)"
            )
        else:
            low = o
            refs.append(("const", o))
        lowered.append(low)
        arr = o._array
        avals.append((arr.shape, arr.dtype))
    return trace, treedef, len(leaves), primals, out_tree, refs, lowered, avals, aux


def _trace_inputs(trace, leaves, args, prefix, who, allow_int):
    """The traced inputs of ``_call_traced``: ``(primals, traced)``, leaf ``i`` node ``i``."""
    level, avals_in, labels = trace.level, trace.avals, trace.labels
    primals, traced = [], []
    for i, v in enumerate(leaves):  # Trace.new_input, inlined for the common case
        if type(v) is Tensor and not v._level:  # a concrete float Tensor
            arr = v._array
            if type(arr) is np.ndarray and arr.dtype.kind == "f":
                primals.append(v)
                avals_in.append((arr.shape, arr.dtype))
                if v.label is not None:
                    labels[i] = v.label
                traced.append(_make(arr, v, level, trace, i, v.label))
                continue
        v = _as_primal(v, i, args, prefix, who, allow_int)
        primals.append(v)
        trace.n_nodes = i  # new_input numbers it i, as the inlined path does
        traced.append(trace.new_input(v))
    trace.n_nodes = len(traced)
    return primals, traced


def _lower(v, level, who):
    if isinstance(v, Tensor):
        if v._level == level:
            return _primal_of(v)
        if v._level > level:
            raise RuntimeError(f"{who}: aux holds a leaked tracer of a finished inner transform")
    return v


_ONES: dict = {}


def _one(dtype):
    """A read-only 0-d array holding 1 of ``dtype`` (the seed cotangent of a scalar output;
    cached: it is never written into, and the backward replay adds into writable arrays only)."""
    one = _ONES.get(dtype)
    if one is None:
        one = np.ones((), dtype)
        one.flags.writeable = False
        _ONES[dtype] = one
    return one


def _input_cotangents(ct: dict, n: int, primals, treedef):
    leaves = list(map(ct.get, range(n)))
    for node, g in enumerate(leaves):
        if g is None:  # no path from this input to the output
            leaves[node] = Tensor._const(_zeros(primals[node]))
    if treedef.num_nodes == n + 1 and treedef.num_leaves == n:  # a flat tuple of n leaves
        return tuple(leaves)
    return treedef.unflatten(leaves)


def _zeros(p: Tensor):
    from tapegrad.backend import backend_of

    return backend_of(p._array).zeros(p.shape, p.dtype)


def vjp(fun, *primals, has_aux: bool = False):
    """Vector-Jacobian product: run ``fun`` and return a function that pulls cotangents back.

    Args:
        fun: Function of pytrees of Tensors/arrays/numbers returning a pytree of Tensors (or
            ``(out, aux)`` with ``has_aux=True``).
        *primals: The positional arguments, each a pytree; every leaf is differentiated and
            must be floating (Python numbers become float32).
        has_aux: ``fun`` returns ``(out, aux)``; ``aux`` is returned as is, not differentiated.

    Returns:
        ``(primals_out, vjp_fn)``, or ``(primals_out, vjp_fn, aux)``. ``vjp_fn(cotangent)``
        takes a pytree with ``primals_out``'s structure, shapes and dtypes and returns a tuple
        with one cotangent per primal, matching the primals' structure, shapes and dtypes. It
        can be called any number of times, from several threads.

    Raises:
        TypeError: for integer/boolean or non-numeric leaves (naming the leaf's path), a
            non-pair output with ``has_aux``, or a cotangent of the wrong structure.
        ValueError: for a cotangent leaf of the wrong shape or dtype.

    Example:
        >>> import tapegrad as tg
        >>> out, vjp_fn = tg.vjp(lambda a, b: a * b, tg.Tensor(2.0), tg.Tensor(3.0))
        >>> [float(c) for c in vjp_fn(tg.Tensor(1.0))]
        [3.0, 2.0]
    """
    trace, treedef, n, prims, out_tree, refs, lowered, avals, aux = _call_traced(
        fun, primals, has_aux, "vjp", lambda: [f"primals[{i}]" for i in range(len(primals))]
    )
    records = trace.records
    primals_out = tree_unflatten(out_tree, lowered)

    def vjp_fn(cotangent):
        ct = _seed_cotangents(cotangent, refs, avals, out_tree, "vjp_fn")
        backward_pass(records, ct, consume=False)
        return tuple(_input_cotangents(ct, n, prims, treedef))

    if has_aux:
        return primals_out, vjp_fn, aux
    return primals_out, vjp_fn


def _check_argnums(argnums, who):
    if isinstance(argnums, bool) or not (
        isinstance(argnums, int)
        or (
            isinstance(argnums, tuple)
            and argnums
            and all(isinstance(a, int) and not isinstance(a, bool) for a in argnums)
        )
    ):
        raise TypeError(
            f"{who}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}"
        )


def select_argnums(fun, argnums, args: tuple, kwargs: dict, who: str):
    """Split a call into the differentiated arguments and a function of them alone.

    Returns:
        ``(nums, diff, partial)``: the normalized argnums (a tuple of non-negative ints), the
        selected arguments, and ``partial(*diff)`` calling ``fun`` with the others fixed.

    Raises:
        ValueError: if an entry of ``argnums`` is out of range for ``args``, naming ``who``.
    """
    if type(argnums) is int and not kwargs and 0 <= argnums < len(args):  # the common case
        nums, diff = (argnums,), (args[argnums],)
        head, tail = args[:argnums], args[argnums + 1 :]

        def partial_one(d):
            return fun(*head, d, *tail)

        return nums, diff, partial_one
    nums = (argnums,) if isinstance(argnums, int) else argnums
    for a in nums:
        if not -len(args) <= a < len(args):
            raise ValueError(
                f"{who}: argnums {argnums!r} out of range: the function was called with "
                f"{len(args)} positional argument(s)"
            )
    nums = tuple(a % len(args) for a in nums)
    diff = tuple(args[i] for i in nums)

    def partial(*d):
        full = list(args)
        for k, i in enumerate(nums):
            full[i] = d[k]
        return fun(*full, **kwargs)

    return nums, diff, partial


def _arg_name(fun, i: int) -> str:
    try:
        params = list(inspect.signature(fun).parameters.values())
        if i < len(params) and params[i].kind in (
            params[i].POSITIONAL_ONLY,
            params[i].POSITIONAL_OR_KEYWORD,
        ):
            return params[i].name
    except (TypeError, ValueError):
        pass
    return f"args[{i}]"


def value_and_grad(fun, argnums=0, has_aux: bool = False):
    """Make a function returning ``fun``'s value and its gradient.

    Args:
        fun: Function whose output is a real scalar (shape ``()``, floating dtype).
        argnums: Int or tuple of ints: the positional arguments to differentiate. Each may be
            any pytree of floating Tensors, arrays or numbers.
        has_aux: ``fun`` returns ``(value, aux)``.

    Returns:
        A function with ``fun``'s signature returning ``(value, grads)`` (``((value, aux),
        grads)`` with ``has_aux``). ``grads`` matches the selected argument's structure, shapes
        and dtypes; a tuple of such for a tuple ``argnums``.

    Raises:
        TypeError: for a bad ``argnums``, a non-scalar or non-floating output (use
            :func:`vjp` or ``jacrev`` for those), integer inputs (naming the leaf's path).
        ValueError: if an ``argnums`` entry is out of range.

    Example:
        >>> import tapegrad as tg
        >>> v, g = tg.value_and_grad(lambda p: (p["w"] ** 2).sum())({"w": tg.Tensor([1., 2.])})
        >>> float(v), g["w"]
        (5.0, Tensor([2., 4.], dtype=float32))
    """
    _check_argnums(argnums, "value_and_grad")

    def value_and_grad_f(*args, **kwargs):
        with gc_paused():  # one pause over recording and replay (see tape.set_gc_pause)
            if type(argnums) is int and not kwargs and 0 <= argnums < len(args):
                # the common case: fun is called with the traced argument in its place
                nums, diff, call = (argnums,), (args[argnums],), fun
                around = (args[:argnums], args[argnums + 1 :])
            else:
                nums, diff, call = select_argnums(fun, argnums, args, kwargs, "grad")
                around = None

            def names():  # inspect.signature costs tens of µs: only for error messages
                return [_arg_name(fun, i) for i in nums]

            res = _call_traced(call, diff, has_aux, "grad", names, around=around)
            trace, treedef, n, prims, out_tree, refs, lowered, avals, aux = res
            if len(refs) != 1 or avals[0][0] != () or np.dtype(avals[0][1]).kind != "f":
                shapes = ", ".join(f"shape {tuple(a[0])} dtype {np.dtype(a[1])}" for a in avals)
                raise TypeError(
                    f"grad: fun must return a real scalar (shape () and a floating dtype), got "
                    f"{len(refs)} output leaf/leaves ({shapes or 'none'}). Reduce it first (for "
                    "example out.sum()), or use vjp/jacrev for non-scalar outputs."
                )
            value = lowered[0]
            ct = {}
            if isinstance(refs[0], int):
                ct[refs[0]] = Tensor._const(_one(avals[0][1]))
            _tape._backward_pass(trace.records, ct, True)  # already inside this call's pause
            cts = _input_cotangents(ct, n, prims, treedef)
            g = cts[0] if isinstance(argnums, int) else tuple(cts)
            if has_aux:
                return (value, aux), g
            return value, g

    value_and_grad_f.__name__ = f"value_and_grad_{getattr(fun, '__name__', 'fun')}"
    value_and_grad_f.__doc__ = f"Value and gradient of {getattr(fun, '__name__', 'fun')}."
    return value_and_grad_f


def grad(fun, argnums=0, has_aux: bool = False):
    """Make a function returning the gradient of scalar-valued ``fun``.

    Args:
        fun: Function whose output is a real scalar (shape ``()``, floating dtype).
        argnums: Int or tuple of ints selecting the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(value, aux)``; the result is then ``(grads, aux)``.

    Returns:
        A function with ``fun``'s signature returning gradients with the selected arguments'
        pytree structure, shapes and dtypes (a tuple of them for a tuple ``argnums``).

    Raises:
        See :func:`value_and_grad`.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> float(tg.grad(tg.grad(tnp.sin))(tg.Tensor(0.5)))  # -sin(0.5)
        -0.4794255495071411
    """
    vg = value_and_grad(fun, argnums, has_aux)

    def grad_f(*args, **kwargs):
        v, g = vg(*args, **kwargs)
        if has_aux:
            return g, v[1]
        return g

    grad_f.__name__ = f"grad_{getattr(fun, '__name__', 'fun')}"
    grad_f.__doc__ = f"Gradient of {getattr(fun, '__name__', 'fun')}."
    return grad_f


def trace(fun):
    """Make a function that runs ``fun`` and also returns its explicit, immutable :class:`Tape`.

    Every positional argument is an input of the tape (any pytree; integer leaves allowed, they
    are replayed but not differentiated).

    Returns:
        A function returning ``(out, tape)``.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> out, tape = tg.trace(lambda x: tnp.tanh(x * 2.0).sum())(tg.Tensor([1.0, 2.0]))
        >>> print(tape)
        { lambda ; a:f32[2]. let
            b:f32[2] = mul a 2.0
            c:f32[2] = tanh b
            d:f32[] = sum[axis=None keepdims=False] c
          in (d) }
        >>> float(tape.replay(tg.Tensor([0.0, 0.0])))
        0.0
    """

    def traced_f(*args):
        trace_, treedef, n, prims, out_tree, refs, lowered, avals, _ = _call_traced(
            fun,
            args,
            False,
            "trace",
            [f"args[{i}]" for i in range(len(args))],
            allow_int=True,
            replays=True,
        )
        tape = Tape(
            entries=_freeze(trace_.records),
            in_nodes=tuple(range(n)),
            in_avals=tuple((p.shape, p.dtype) for p in prims),
            in_treedef=treedef,
            out_refs=tuple(r if isinstance(r, int) else ("const", r[1]) for r in refs),
            out_avals=tuple(avals),
            out_treedef=out_tree,
            labels=dict(trace_.labels),
        )
        return tree_unflatten(out_tree, lowered), tape

    traced_f.__name__ = f"trace_{getattr(fun, '__name__', 'fun')}"
    return traced_f


def jit(fun):
    """Trace ``fun`` once per input signature and replay the recorded tape afterwards.

    The first call with a given pytree structure, shapes and dtypes runs ``fun`` under
    :func:`trace`; later calls with the same signature replay the frozen tape: only the forward
    rules run, on arrays, with none of ``fun``'s Python, no pytree handling and no Tensor
    wrapping. This is the fast path for many small ops, and it composes with the transforms
    from the outside: ``tg.jit(tg.grad(loss))`` records forward and backward once.

    Semantics (as JAX's ``jit``):
        - Every positional argument is an input (a pytree of Tensors, arrays or numbers).
        - Values ``fun`` closes over are constants of the recording: rebinding them later is
          not seen. Pass changing values (parameters, batches) as arguments.
        - Python side effects (printing, appending to lists) happen only while tracing.
        - A Python decision on data (``if x.sum() > 0``) is a guard: when new inputs flip it,
          ``fun`` is traced again for them, never replayed stale.
        - Called on values another transform is tracing (inside ``grad``), ``fun`` simply
          runs, so that transform can differentiate it.

    Args:
        fun: Function of positional pytrees of Tensors/arrays/numbers.

    Returns:
        A function with ``fun``'s signature and results (leaves as Tensors).

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> fast_grad = tg.jit(tg.grad(lambda w: (tnp.sin(w) * w).sum()))
        >>> g1 = fast_grad(tg.Tensor([0.0, 1.0]))   # traces
        >>> g2 = fast_grad(tg.Tensor([2.0, 3.0]))   # replays
        >>> g2.shape
        (2,)
    """
    import threading

    from tapegrad.tape import GuardError

    cache: dict = {}
    lock = threading.Lock()

    def jitted(*args):
        leaves, treedef = tree_flatten(args)
        sig = []
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                if leaf._level:
                    return fun(*args)  # an outer transform traces this call: run it
                sig.append((leaf.shape, leaf.dtype))
            elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
                sig.append((tuple(leaf.shape), leaf.dtype))
            else:
                sig.append(type(leaf))
        key = (treedef, tuple(sig))
        tape = cache.get(key)
        if tape is not None:
            try:
                return tape.replay(*args)
            except GuardError:
                pass  # a Python decision flipped: trace again for these inputs
        out, tape = trace(fun)(*args)
        with lock:
            cache[key] = tape
        return out

    jitted.__name__ = f"jit_{getattr(fun, '__name__', 'fun')}"
    jitted.__doc__ = fun.__doc__
    jitted.cache_size = lambda: len(cache)
    return jitted
