"""Reverse-mode transforms: ``vjp``, ``grad``, ``value_and_grad`` and ``trace``.

Each transform call takes a fresh trace level (newer than every live one), wraps the input
leaves as traced Tensors of that level, runs the function, and replays what it recorded
backward with the ``backward`` rules. Because those rules are themselves tapegrad operations,
an enclosing transform records them, so transforms nest to any order (JAX semantics).
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tapegrad.core.backend import backend_of
from tapegrad.core.function import new_level, transform_scope
from tapegrad.core.tape import freeze
from tapegrad.core.tensor import Tensor, const, primal_of
from tapegrad.core.trace import Trace, _seed_cotangents, backward_pass
from tapegrad.core.tree import (
    held_leaves,
    tree_flatten,
    tree_flatten_with_path,
    tree_map,
    tree_unflatten,
)
from tapegrad.core.weak import WeakScalar

__all__ = ["vjp", "grad", "value_and_grad", "trace", "select_argnums", "check_callable",
           "call_traced", "run_traced", "Traced"]


def check_callable(fun, who: str) -> None:
    """Raise TypeError unless ``fun`` is callable (as JAX, when the transform is made).

    Raises:
        TypeError: naming the transform and what it got.
    """
    if not callable(fun):
        shown = repr(fun)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        call = f"{who}(f, ...)" if who in ("vjp", "jvp", "linearize", "hvp") else f"{who}(f)(x)"
        raise TypeError(
            f"{who}: fun must be callable (a function), got {type(fun).__name__} {shown}. Pass "
            f"the function itself, {call}, not its value f(x)."
        )


def leaf_path(args, index: int, names) -> str:
    """Readable path of leaf ``index`` of the tuple ``args``, each argument named by ``names``
    (a list of strings, or a callable returning one: names are only worked out for errors)."""
    if callable(names):
        names = names()
    paths = []
    for a, name in zip(args, names):  # pyright: ignore[reportArgumentType]
        paths += tree_flatten_with_path(a, name)[0]
    return paths[index] if index < len(paths) else "<input>"


def as_primal(leaf, i, tree, names, who, allow_int=False, kinds="fcV") -> Tensor:
    """One input leaf as a Tensor, checked to be differentiable: of a dtype kind in ``kinds``
    (``"fc"`` floating or complex; ``"c"`` complex only, for ``holomorphic=True``; ``"f"`` real
    only, for ``jacfwd`` without it)."""
    if type(leaf) is Tensor:
        t = leaf if leaf.is_realized else leaf.realize()
    elif type(leaf) is WeakScalar:  # a Python number jit traces: as Tensor(number)
        t = leaf.strong()
    elif isinstance(leaf, bool) or not (
        isinstance(leaf, (numbers.Number, np.ndarray, np.generic))
        or hasattr(leaf, "__cuda_array_interface__")
    ):
        raise TypeError(
            f"{who}: input {leaf_path(tree, i, names)} is a {type(leaf).__name__}, which is not "
            "a differentiable value; pytree leaves must be Tensors, arrays or numbers (close "
            "over static values, pass them as arguments that argnums leaves out, or use "
            "tg.filter_grad, which differentiates the floating array leaves of a mixed tree)."
        )
    else:
        t = Tensor(leaf)
    if not allow_int and t.dtype.kind not in "fcV":
        raise TypeError(
            f"{who}: cannot differentiate with respect to {leaf_path(tree, i, names)}, which has "
            f"dtype {t.dtype} (shape {t.shape}); only floating and complex inputs have "
            "gradients. Cast it (x.astype('float32'), or write 3.0 rather than 3), leave it "
            "out of the differentiated arguments (argnums), or use tg.filter_grad, which "
            "differentiates only the floating array leaves (the others get None; for other "
            "transforms, split the tree with tg.tree.partition)."
        )
    if t.dtype.kind in "fcV" and t.dtype.kind not in kinds:
        path = leaf_path(tree, i, names)
        if kinds == "c":
            raise TypeError(
                f"{who}: holomorphic=True needs complex inputs, but {path} has dtype {t.dtype} "
                f"(shape {t.shape}). Cast it (x.astype('complex128')), or leave holomorphic "
                "out for a function of real inputs."
            )
        raise TypeError(
            f"{who}: {path} has complex dtype {t.dtype} (shape {t.shape}); without "
            f"holomorphic=True, {who} takes real inputs only (each complex entry is two real "
            f"directions). Pass holomorphic=True for the complex derivative f'(z) of a "
            "holomorphic function, use jacrev/grad for a real-valued function of complex "
            "inputs, or jvp along tangents you choose."
        )
    return t


def check_output_dtype(out: Tensor, path: str, who: str, holomorphic: bool) -> None:
    """Raise TypeError unless output leaf ``out`` suits a reverse-mode derivative: complex
    with ``holomorphic=True``, else not complex (JAX's rule)."""
    kind = out.dtype.kind
    if holomorphic and kind != "c":
        raise TypeError(
            f"{who}: holomorphic=True needs complex outputs, but {path} has dtype {out.dtype} "
            f"(shape {out.shape}). A real-valued function of complex inputs is differentiated "
            "without holomorphic (JAX's convention: df/dx - i df/dy)."
        )
    if not holomorphic and kind == "c":
        raise TypeError(
            f"{who}: {path} has complex dtype {out.dtype} (shape {out.shape}), but {who} needs "
            "real outputs. Pass holomorphic=True for the complex derivative f'(z) of a "
            "holomorphic function, take the real part or abs (tnp.real(out), tnp.abs(out)) for "
            "a real-valued function, or use vjp for a non-holomorphic complex output."
        )


def lower_output(o, trace, i, out, who):
    """An output leaf one level below ``trace`` (its value), and its node id or None."""
    if not isinstance(o, Tensor):
        if isinstance(o, bool) or not isinstance(o, (numbers.Number, np.ndarray, np.generic)):
            raise TypeError(
                f"{who}: output leaf {leaf_path((out,), i, ['out'])} is a {type(o).__name__}; "
                "the function must return Tensors, arrays or numbers (use has_aux=True for "
                "other values)."
            )
        return Tensor(o), None
    if o._level == trace.level and o._trace is trace:
        return primal_of(o), o._node
    if o._level >= trace.level:
        raise RuntimeError(
            f"{who}: output {leaf_path((out,), i, ['out'])} is traced by an inner transform "
            "that has already finished (a leaked tracer)"
        )
    return o, None


def _lower_aux(v, trace, who):
    if isinstance(v, Tensor) and v._level >= trace.level:
        if v._trace is trace:
            return primal_of(v)
        raise RuntimeError(f"{who}: aux holds a leaked tracer of a finished inner transform")
    return v


def split_aux(out, has_aux, trace, who):
    """``(out, aux)`` of a ``has_aux`` function, with ``aux`` lowered below ``trace``."""
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(
            f"{who}: has_aux=True needs the function to return a pair (output, aux), got "
            f"{type(out).__name__}" + (f" of length {len(out)}" if isinstance(out, (tuple, list))
                                       else "")
        )
    return out[0], tree_map(lambda v: _lower_aux(v, trace, who), out[1])


class Traced(NamedTuple):
    """A function run on traced inputs (:func:`call_traced`).

    Attributes:
        trace: The :class:`Trace` it recorded on (finished).
        in_treedef: The pytree structure of the arguments.
        primals: The input leaves, as Tensors one level down.
        out_tree: The pytree structure of the output.
        out_nodes: Per output leaf, its node id, or None for a leaf that does not depend on
            the inputs.
        outs: The output leaves one level down (their values).
        aux: The auxiliary output (``has_aux``), lowered; None without.
    """

    trace: Trace
    in_treedef: Any
    primals: list
    out_tree: Any
    out_nodes: list
    outs: list
    aux: Any


def call_traced(fun, args: tuple, has_aux, who, names, allow_int=False, replays=False,
                kinds="fcV") -> Traced:
    """Run ``fun(*args)`` with every leaf of ``args`` (of a dtype kind in ``kinds``, see
    :func:`as_primal`) traced on a fresh :class:`Trace`."""
    leaves, treedef = tree_flatten(args)
    primals = _primals(leaves, treedef, args, names, who, allow_int, kinds)
    return run_traced(Trace(new_level(), replays), fun, treedef, primals, has_aux, who)


def run_traced(trace, fun, treedef, primals, has_aux, who) -> Traced:
    """Run ``fun`` on ``primals`` (the input leaves, of structure ``treedef``) traced on the
    fresh ``trace`` (their nodes are 0, 1, ...), and lower its outputs below it."""
    traced = [trace.new_input(p) for p in primals]
    try:
        with transform_scope():
            out = fun(*tree_unflatten(treedef, traced))
    finally:
        trace.done = True
    out, aux = split_aux(out, has_aux, trace, who)
    out_leaves, out_tree = tree_flatten(out)
    nodes, lowered = [], []
    for i, o in enumerate(out_leaves):
        low, node = lower_output(o, trace, i, out, who)
        nodes.append(node)
        lowered.append(low)
    return Traced(trace, treedef, primals, out_tree, nodes, lowered, aux)


def _primals(leaves, treedef, args, names, who, allow_int, kinds) -> list:
    """The input leaves as Tensors (:func:`as_primal`). An integer or boolean array inside a
    node registered with ``static_non_float`` (a Module's random key or counter) is held: it
    is traced as a constant and its cotangent is ``None``."""
    out, held = [], None
    for i, v in enumerate(leaves):
        try:
            out.append(as_primal(v, i, args, names, who, allow_int, kinds))
        except TypeError:
            if held is None:
                held = held_leaves(treedef)
            kind = getattr(getattr(v, "dtype", None), "kind", None)
            if i not in held or kind not in ("b", "i", "u"):
                raise
            out.append(as_primal(v, i, args, names, who, True, kinds))
    return out


def zeros_like(p: Tensor) -> Tensor:
    """A constant zero Tensor of ``p``'s shape, dtype and device."""
    return const(backend_of(p._concrete()).zeros(p.shape, p.dtype))


def _input_cotangents(ct: dict, primals, treedef):
    leaves = [None if p.dtype.kind not in "fcV" else ct[i] if i in ct else zeros_like(p)
              for i, p in enumerate(primals)]  # a held integer leaf has no cotangent
    return tree_unflatten(treedef, leaves)


def vjp(fun, *primals, has_aux: bool = False) -> tuple[Any, ...]:
    """Vector-Jacobian product: run ``fun`` and return a function that pulls cotangents back.

    Args:
        fun: Function of pytrees of Tensors/arrays/numbers returning a pytree of Tensors (or
            ``(out, aux)`` with ``has_aux=True``).
        *primals: The positional arguments, each a pytree; every leaf is differentiated and must
            be floating or complex (Python floats become float32).
        has_aux: ``fun`` returns ``(out, aux)``; ``aux`` is returned as is, not differentiated.

    Returns:
        ``(primals_out, vjp_fn)``, or ``(primals_out, vjp_fn, aux)``. ``vjp_fn(cotangent)``
        takes a pytree with ``primals_out``'s structure, shapes and dtypes and returns a tuple
        with one cotangent per primal, matching the primals' structure, shapes and dtypes. It
        can be called any number of times, from several threads.

    Raises:
        TypeError: for a non-callable ``fun``; integer/boolean or non-numeric leaves (naming
            the leaf's path), a non-pair output with ``has_aux``, or a cotangent of the wrong
            structure; ``numpy()``, ``float()`` or ``item()`` of a traced floating value
            inside ``fun`` (the result would carry no derivative).
        ValueError: for a cotangent leaf of the wrong shape or dtype.

    Example:
        >>> import tapegrad as tg
        >>> out, vjp_fn = tg.vjp(lambda a, b: a * b, tg.Tensor(2.0), tg.Tensor(3.0))
        >>> [float(c) for c in vjp_fn(tg.Tensor(1.0))]
        [3.0, 2.0]
    """
    check_callable(fun, "vjp")
    run = call_traced(
        fun, primals, has_aux, "vjp", lambda: [f"primals[{i}]" for i in range(len(primals))]
    )
    entries, avals = tuple(run.trace.entries), run.trace.avals
    refs = [n if n is not None else ("const", low) for n, low in zip(run.out_nodes, run.outs)]
    out_avals = [(low.shape, low.dtype) for low in run.outs]
    primals_out = tree_unflatten(run.out_tree, run.outs)

    def vjp_fn(cotangent):
        ct = _seed_cotangents(cotangent, refs, out_avals, run.out_tree, "vjp_fn")
        with transform_scope():
            backward_pass(list(entries), ct, avals, consume=True)
        return tuple(_input_cotangents(ct, run.primals, run.in_treedef))

    if has_aux:
        return primals_out, vjp_fn, run.aux
    return primals_out, vjp_fn


def check_argnums(argnums, who):
    """Raise TypeError unless ``argnums`` is an int or a non-empty tuple of ints."""
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

    Repeated entries (``argnums=(0, 0)`` or ``(0, -2)`` for two arguments) name one argument:
    it is differentiated once, and each entry gets its full gradient.

    Returns:
        ``(positions, diff, partial)``: for each entry of ``argnums``, its position in
        ``diff``; the distinct selected arguments; and ``partial(*diff)`` calling ``fun`` with
        the other arguments fixed.

    Raises:
        ValueError: if an entry of ``argnums`` is out of range for ``args``, naming ``who``.
    """
    nums = (argnums,) if isinstance(argnums, int) else argnums
    n = len(args)
    for a in nums:
        if not -n <= a < n:
            raise ValueError(
                f"{who}: argnums {argnums!r} out of range: the function was called with {n} "
                "positional argument(s)"
            )
    nums = [a % n for a in nums]
    unique = list(dict.fromkeys(nums))
    diff = tuple(args[i] for i in unique)

    def partial(*d):
        full = list(args)
        for k, i in enumerate(unique):
            full[i] = d[k]
        return fun(*full, **kwargs)

    return tuple(unique.index(a) for a in nums), diff, partial


def arg_name(fun, i: int) -> str:
    """The name of positional parameter ``i`` of ``fun`` (``args[i]`` when unknown)."""
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


def value_and_grad(
    fun, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """Make a function returning ``fun``'s value and its gradient.

    Args:
        fun: Function whose output is a real scalar (shape ``()``, floating dtype; an array of
            one element, such as shape ``(1, 1)``, counts as its scalar, as in HIPS autograd);
            with ``holomorphic=True``, a complex scalar.
        argnums: Int or tuple of ints: the positional arguments to differentiate. Each may be
            any pytree of floating (or complex) Tensors, arrays or numbers. A repeated entry
            gets the full gradient of that argument each time.
        has_aux: ``fun`` returns ``(value, aux)``.
        holomorphic: ``fun`` is holomorphic (complex differentiable) in the selected arguments,
            which must all be complex; the result is then the complex derivative ``f'(z)`` (for
            ``f(z) = z**2``, ``2 z``), not a gradient of a real function. As JAX's
            ``holomorphic=True``; for a non-holomorphic ``fun`` the result is meaningless.

    Returns:
        A function with ``fun``'s signature returning ``(value, grads)`` (``((value, aux),
        grads)`` with ``has_aux``). ``grads`` matches the selected argument's structure, shapes
        and dtypes; a tuple of such for a tuple ``argnums``. For complex inputs of a real
        ``fun`` the gradient follows JAX's convention, ``df/dx - i df/dy``: the conjugate of
        PyTorch's (docs/conventions.md).

    Raises:
        TypeError: for a non-callable ``fun`` (when the transform is made); a bad
            ``argnums``; ``numpy()``, ``float()`` or ``item()`` of a traced floating value
            inside ``fun``; a non-scalar or non-real output (a complex one names
            ``holomorphic=True``; use :func:`vjp` or ``jacrev`` for non-scalar outputs);
            integer inputs (naming the leaf's path); with ``holomorphic=True``, a real input
            or a real output.
        ValueError: if an ``argnums`` entry is out of range.

    Example:
        >>> import tapegrad as tg
        >>> v, g = tg.value_and_grad(lambda p: (p["w"] ** 2).sum())({"w": tg.Tensor([1., 2.])})
        >>> float(v), g["w"]
        (5.0, Tensor([2., 4.], dtype=float32))
        >>> complex(tg.grad(lambda z: z**2, holomorphic=True)(tg.Tensor(1 + 2j)))  # 2 z
        (2+4j)
    """
    check_callable(fun, "value_and_grad")
    check_argnums(argnums, "value_and_grad")
    kinds, want = ("c", "c") if holomorphic else ("fcV", "fV")

    def value_and_grad_f(*args, **kwargs):
        pos, diff, call = select_argnums(fun, argnums, args, kwargs, "grad")

        def names():  # inspect.signature is slow: only for error messages
            return [arg_name(fun, i) for i in (argnums if isinstance(argnums, tuple)
                                                else (argnums,))]

        with transform_scope():
            run = call_traced(call, diff, has_aux, "grad", names, kinds=kinds)
            lowered, nodes = run.outs, run.out_nodes
            if len(lowered) != 1 or lowered[0].size != 1 or lowered[0].dtype.kind not in want:
                if len(lowered) == 1 and lowered[0].size == 1:
                    check_output_dtype(lowered[0], "the output", "grad", holomorphic)
                shapes = ", ".join(f"shape {v.shape} dtype {v.dtype}" for v in lowered)
                what = ("a complex scalar (one element and a complex dtype)" if holomorphic else
                        "a real scalar (one element and a floating dtype)")
                raise TypeError(
                    f"grad: fun must return {what}, got {len(lowered)} output leaf/leaves "
                    f"({shapes or 'none'}). Reduce it first (for example out.sum()), "
                    + ("" if holomorphic else "take its real part or abs for a complex output "
                       "(or pass holomorphic=True for a holomorphic one), ")
                    + "or use vjp/jacrev for non-scalar outputs."
                )
            value = lowered[0]
            ct = {}
            if nodes[0] is not None:
                # The seed is 1 in both modes, never conjugated: backward rules pull cotangents
                # back through the transpose of the derivative, so for a holomorphic fun the
                # cotangent of z is 1 * f'(z); for a real fun it is df/dx - i df/dy (JAX's).
                one = _one(value)
                if value.shape != ():  # a one-element array counts as its scalar (autograd)
                    one = backend_of(one).ones(value.shape, one.dtype)
                ct[nodes[0]] = const(one)
            backward_pass(run.trace.entries, ct, run.trace.avals, consume=True)
            cts = _input_cotangents(ct, run.primals, run.in_treedef)
        g = cts[pos[0]] if isinstance(argnums, int) else tuple(cts[p] for p in pos)
        if has_aux:
            return (value, run.aux), g
        return value, g

    value_and_grad_f.__name__ = f"value_and_grad_{getattr(fun, '__name__', 'fun')}"
    value_and_grad_f.__doc__ = f"Value and gradient of {getattr(fun, '__name__', 'fun')}."
    return value_and_grad_f


_ONES: dict = {}


def _one(value: Tensor):
    """A read-only 0-d one of ``value``'s dtype and device (the seed of a scalar output)."""
    arr = value._concrete()
    if type(arr) is not np.ndarray:
        return backend_of(arr).ones((), arr.dtype)
    one = _ONES.get(arr.dtype)
    if one is None:
        one = np.ones((), arr.dtype)
        one.flags.writeable = False
        _ONES[arr.dtype] = one
    return one


def grad(
    fun, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """Make a function returning the gradient of scalar-valued ``fun``.

    Args:
        fun: Function whose output is a real scalar (shape ``()``, floating dtype, or an array
            of one element, as in HIPS autograd); with ``holomorphic=True``, a complex scalar.
        argnums: Int or tuple of ints selecting the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(value, aux)``; the result is then ``(grads, aux)``.
        holomorphic: ``fun`` is holomorphic in complex inputs: return the complex derivative
            ``f'(z)`` (JAX's ``holomorphic=True``; see :func:`value_and_grad`).

    Returns:
        A function with ``fun``'s signature returning gradients with the selected arguments'
        pytree structure, shapes and dtypes (a tuple of them for a tuple ``argnums``).

    Raises:
        See :func:`value_and_grad`.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> float(tg.grad(tg.grad(tnp.sin))(tg.Tensor(0.5)))  # -sin(0.5)
        -0.4794255495071411
        >>> complex(tg.grad(tnp.exp, holomorphic=True)(tg.Tensor(0j)))  # exp'(0)
        (1+0j)
    """
    check_callable(fun, "grad")
    check_argnums(argnums, "grad")
    vg = value_and_grad(fun, argnums, has_aux, holomorphic)

    def grad_f(*args, **kwargs):
        v, g = vg(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    grad_f.__name__ = f"grad_{getattr(fun, '__name__', 'fun')}"
    grad_f.__doc__ = f"Gradient of {getattr(fun, '__name__', 'fun')}."
    return grad_f


def trace(fun):
    """Make a function that runs ``fun`` and also returns its explicit, immutable ``Tape``.

    Every positional argument is an input of the tape (any pytree; integer leaves allowed, they
    are replayed but not differentiated).

    Python decisions on traced values (``if x > 0``, ``float(x)``, ``x.numpy()``) are recorded
    as guards: a replay whose inputs change one raises :class:`GuardError`.

    Returns:
        A function returning ``(out, tape)``.

    Raises:
        TypeError: if ``fun`` is not callable (when the transform is made).

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
    check_callable(fun, "trace")

    def traced_f(*args):
        run = call_traced(fun, args, False, "trace", [f"args[{i}]" for i in range(len(args))],
                          allow_int=True, replays=True)
        refs = [n if n is not None else ("const", low) for n, low in zip(run.out_nodes, run.outs)]
        tape = freeze(run.trace, range(len(run.primals)), run.in_treedef, refs,
                      [(low.shape, low.dtype) for low in run.outs], run.out_tree)
        return tree_unflatten(run.out_tree, run.outs), tape

    traced_f.__name__ = f"trace_{getattr(fun, '__name__', 'fun')}"
    return traced_f
