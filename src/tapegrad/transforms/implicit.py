"""Implicit differentiation: ``custom_root`` and ``custom_linear_solve`` (JAX's
``lax.custom_root`` and ``lax.custom_linear_solve``).

A solver's iterations are never differentiated. The solution is one primitive (built on the
rule machinery of :mod:`tapegrad.transforms.custom_jvp`) whose ``forward`` runs your solver on
constants (Python loops and convergence tests are fine: nothing traces them) and whose
derivatives come from the implicit function theorem:

- ``custom_root(f, x0, solve, tangent_solve)``: ``x*`` with ``f(x*) = 0``. Along a tangent of
  the values ``f`` closes over, ``dx* = -(df/dx)^-1 (df/dtheta dtheta)``, computed by your
  ``tangent_solve(g, y)`` with ``g`` the linearization of ``f`` at ``x*``;
- ``custom_linear_solve(matvec, b, solve, transpose_solve)``: ``x = A^-1 b`` with
  ``A = matvec``. Forward mode solves again, ``dx = A^-1 (db - dA x)``; reverse mode solves the
  transposed system with ``transpose_solve``: ``b_bar = A^-T x_bar``, and the values ``matvec``
  closes over get ``-(d(A x)/dtheta)^T b_bar``.

These rules are written with tapegrad operations on the solution (itself this primitive), so
they differentiate again: second and higher derivatives, Hessians of a function defined by a
Newton solve included, are exact (up to the solver's tolerance), in forward and reverse mode,
under ``jit`` and ``vmap``.

``f`` and ``matvec`` may close over traced values (parameters being differentiated): each is
recorded once on a tape at the example input, and the traced values it reads become explicit
inputs of the primitive (closure conversion, as JAX's jaxpr tracing does). So they must not
take Python decisions on their argument's values (use ``tnp.where``), as in JAX; ``solve``
and ``transpose_solve`` receive them and must compute from them (values they close over are
constants). Under ``vmap`` the solver runs once per example.

References:
    Blondel, Berthet, Cuturi, Frostig, Hoyer, Llinares-López, Pedregosa and Vert, "Efficient
    and modular implicit differentiation", NeurIPS 2022.
    JAX, ``jax.lax.custom_root`` and ``jax.lax.custom_linear_solve``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad.core.backend import backend_of
from tapegrad.core.function import new_level
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.trace import Guard, GuardError, Trace, check_guard
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.transforms.custom_jvp import RuleCall, RuleFunction, Rules, array_leaf, zeros_like
from tapegrad.transforms.forward import jvp as _jvp
from tapegrad.transforms.forward import linearize
from tapegrad.transforms.reverse import run_traced, vjp

__all__ = ["custom_root", "custom_linear_solve", "CustomRoot", "CustomLinearSolve"]

class CustomRoot(RuleFunction):
    """The primitive of one :func:`custom_root` call: inputs the values ``f`` closes over and
    the initial guess; outputs the solution's leaves (then the auxiliary results)."""

    oper = "custom_root"


class CustomLinearSolve(RuleFunction):
    """The primitive of one :func:`custom_linear_solve` call: inputs the values ``matvec``
    closes over and ``b``; outputs the solution's leaves (then the auxiliary results)."""

    oper = "custom_linear_solve"


# -- closure conversion ------------------------------------------------------------------------
class _Converted:
    """``fun`` recorded at an example input, with the traced values it closes over made
    explicit: ``conv(consts, *args)`` equals ``fun(*args)`` when ``consts`` are those values,
    and computes with other values in their place."""

    def __init__(self, who, entries, in_tree, in_avals, refs, out_tree, out_avals, consts):
        self.who, self.entries, self.in_tree, self.in_avals = who, entries, in_tree, in_avals
        self.refs, self.out_tree, self.out_avals, self.consts = refs, out_tree, out_avals, consts
        self._ids = [id(c) for c in consts]

    def __call__(self, consts, *args):
        leaves, tree = tree_flatten(args)
        if tree != self.in_tree:
            raise TypeError(f"{self.who}: called with arguments of structure {tree}; it was "
                            f"recorded for {self.in_tree}")
        env = {}
        for n, (leaf, (shape, dtype)) in enumerate(zip(leaves, self.in_avals)):
            if isinstance(leaf, Tensor):
                t = leaf
            elif isinstance(leaf, numbers.Number) and not isinstance(leaf, bool):
                t = const(np.asarray(leaf, dtype))
            else:
                t = Tensor(leaf)
            if t.shape != tuple(shape):
                raise ValueError(f"{self.who}: called with an argument leaf of shape {t.shape}; "
                                 f"it was recorded for shape {tuple(shape)}")
            env[n] = t
        sub = dict(zip(self._ids, consts))
        for e in self.entries:
            if type(e) is Guard:
                try:
                    check_guard(e, env[e.node], self.who)
                except GuardError as err:
                    raise GuardError(
                        f"{self.who}: the function takes a Python decision on its argument's "
                        f"value ({err}); it is recorded once, so write the branch with "
                        "tnp.where (as under JAX's tracing)."
                    ) from None
                continue
            fn, params, in_nodes, cs, out_nodes = e.fn, e.params, e.in_nodes, e.consts, e.out_nodes
            outs = fn.apply(*[env[n] if n >= 0 else sub.get(id(c), c)
                              for n, c in zip(in_nodes, cs)], **params)
            env.update(zip(out_nodes, outs if isinstance(outs, tuple) else (outs,)))
        return tree_unflatten(self.out_tree, [
            env[r] if isinstance(r, int) else sub.get(id(r[1]), r[1]) for r in self.refs])


def _closure_convert(fun, args: tuple, who: str) -> _Converted:
    """Record ``fun(*args)`` on a fresh tape; the Tensors traced by enclosing transforms that
    its entries read as constants (closed-over values) become the explicit ``consts``."""
    leaves, in_tree = tree_flatten(args)
    prims = [const(v._concrete()) if isinstance(v, Tensor) else Tensor(v) for v in leaves]
    run = run_traced(Trace(new_level(), True), fun, in_tree, prims, False, who)
    trace, out_tree = run.trace, run.out_tree
    refs = [n if n is not None else ("const", low) for n, low in zip(run.out_nodes, run.outs)]
    avals = [(low.shape, low.dtype) for low in run.outs]
    consts, seen = [], set()

    def note(c):
        if isinstance(c, Tensor) and c._level and id(c) not in seen:
            seen.add(id(c))
            consts.append(c)

    entries = []
    for e in trace.entries:
        if type(e) is Guard:
            entries.append(e)
            continue
        for c in e.consts:
            note(c)
        entries.append(e._replace(ctx=None, watch=None))  # the program, not its rules' state
    for r in refs:
        if not isinstance(r, int):
            note(r[1])
    return _Converted(who, tuple(entries), in_tree, [(p.shape, p.dtype) for p in prims],
                      refs, out_tree, avals, consts)


# -- helpers -----------------------------------------------------------------------------------
def _check_callable(v, name: str, who: str) -> None:
    if not callable(v):
        raise TypeError(f"{who}: {name} must be callable, got {type(v).__name__}")


def _float_leaves(tree, who: str, what: str) -> tuple[list, Any]:
    """The leaves of ``tree`` as Tensors, each floating or complex."""
    leaves, treedef = tree_flatten(tree)
    out = []
    for i, v in enumerate(leaves):
        if not isinstance(v, Tensor):
            if isinstance(v, bool) or not (isinstance(v, numbers.Number) or array_leaf(v)):
                raise TypeError(f"{who}: {what} leaf {i} is a {type(v).__name__}; expected a "
                                "Tensor, an array or a number")
            v = Tensor(v)
        if v.dtype.kind not in "fcV":
            raise TypeError(f"{who}: {what} leaf {i} has dtype {v.dtype}; it must be floating "
                            "or complex (cast with .astype)")
        out.append(v)
    return out, treedef


def _check_like(got, treedef, avals, who: str, what: str, ref: str) -> list:
    """The leaves of ``got``, checked to have structure ``treedef`` and shapes ``avals``."""
    leaves, tree = tree_flatten(got)
    if tree != treedef:
        raise TypeError(f"{who}: {what} has structure {tree}, but {ref} has {treedef}")
    res = []
    for i, (v, (shape, dtype)) in enumerate(zip(leaves, avals)):
        if not isinstance(v, Tensor):
            v = const(np.asarray(v, dtype)) if isinstance(v, numbers.Number) else Tensor(v)
        if v.shape != tuple(shape):
            raise ValueError(f"{who}: {what} leaf {i} has shape {v.shape}, but {ref} has "
                             f"shape {tuple(shape)}")
        res.append(v)
    return res


def _split_aux(res, has_aux: bool, who: str, what: str):
    if not has_aux:
        return res, None
    if not (isinstance(res, (tuple, list)) and len(res) == 2):
        raise TypeError(f"{who}: with has_aux=True, {what} must return a pair (solution, aux), "
                        f"got {type(res).__name__}")
    return res[0], res[1]


def _fill(values: list, idx: list, new) -> list:
    full = list(values)
    for i, v in zip(idx, new):
        full[i] = v
    return full


def _aux_positions(n: int) -> range:
    """Output positions from ``n`` on (the auxiliary results): carry no derivative."""
    return range(n, 1 << 62)


# -- custom_root -------------------------------------------------------------------------------
def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """Find a root of ``f`` with your own solver, differentiated implicitly (JAX's
    ``lax.custom_root``).

    The result is ``solve(f, initial_guess)``; derivatives with respect to the values ``f``
    closes over come from the implicit function theorem, never from ``solve``'s iterations:
    for ``f(x*(theta), theta) = 0``, ``dx* = -(df/dx)^-1 (df/dtheta) dtheta``. They are exact to
    every order (``grad(grad(.))``, ``hessian``), under ``jit`` and ``vmap``.

    Args:
        f: ``f(x) -> residual`` with ``x``'s pytree structure, shapes and dtypes; it may close
            over traced values (the parameters ``x*`` depends on). It is recorded once at
            ``initial_guess``, so it must not branch in Python on ``x``'s values.
        initial_guess: Pytree of floating Tensors/arrays: the starting point; the solution
            does not depend on it (zero derivative).
        solve: ``solve(f, x0) -> x*`` (with ``has_aux``, ``(x*, aux)``), any Python code
            (loops, convergence tests): it runs on constants and is not differentiated. Values
            it closes over are constants: compute from ``f``.
        tangent_solve: ``tangent_solve(g, y) -> x`` solving the linear system ``g(x) = y``,
            where ``g`` is the linearization of ``f`` at the solution (``g(v)`` is ``df/dx``
            applied to ``v``); written with tapegrad operations, since it is differentiated
            for second derivatives. For a scalar: ``lambda g, y: y / g(1.0)``; for a vector:
            ``lambda g, y: tnp.linalg.solve(tg.jacobian(g)(y), y)``.
        has_aux: ``solve`` returns ``(solution, aux)``; the result is then ``(solution,
            aux)``, and ``aux`` carries no derivative.

    Returns:
        The solution, with ``initial_guess``'s structure (``(solution, aux)`` with
        ``has_aux``).

    Raises:
        TypeError: if ``f``, ``solve`` or ``tangent_solve`` is not callable; an
            ``initial_guess`` leaf is not floating; ``f``, ``solve`` or ``tangent_solve``
            returns another structure than ``initial_guess``; ``solve`` uses a traced value
            it closes over (a RuntimeError names it).
        ValueError: if ``f`` or ``solve`` returns leaves of other shapes than the guess's.
        GuardError: if ``f`` takes a Python decision on ``x`` that the solver's iterates
            change.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> def newton(f, x):
        ...     for _ in range(30):
        ...         x = x - f(x) / tg.grad(f)(x)
        ...     return x
        >>> def cube_root(a):  # x**3 = a
        ...     return tg.custom_root(lambda x: x ** 3 - a, tg.Tensor(1.0), newton,
        ...                           lambda g, y: y / g(1.0))
        >>> round(float(cube_root(tg.Tensor(8.0))), 6), round(float(tg.grad(cube_root)(
        ...     tg.Tensor(8.0))), 6)  # 2 and 1 / (3 * 2**2)
        (2.0, 0.083333)

    References:
        Blondel et al., "Efficient and modular implicit differentiation", NeurIPS 2022;
        JAX, ``jax.lax.custom_root``.
    """
    who = "custom_root"
    _check_callable(f, "f", who)
    _check_callable(solve, "solve", who)
    _check_callable(tangent_solve, "tangent_solve", who)
    guess, g_tree = _float_leaves(initial_guess, who, "initial_guess")
    g_avals = [(g.shape, g.dtype) for g in guess]
    conv = _closure_convert(f, (tree_unflatten(g_tree, guess),), f"{who}: f")
    if conv.out_tree != g_tree:
        raise TypeError(f"{who}: f returns structure {conv.out_tree}, but initial_guess has "
                        f"{g_tree}; f(x) must have x's structure, shapes and dtypes")
    for i, (got, want) in enumerate(zip(conv.out_avals, g_avals)):
        if tuple(got[0]) != tuple(want[0]):
            raise ValueError(f"{who}: f's output leaf {i} has shape {tuple(got[0])}, but "
                             f"initial_guess has shape {tuple(want[0])}")
    consts = conv.consts
    nc, ng = len(consts), len(guess)
    diff_c = [c.dtype.kind in "fcV" for c in consts]
    fidx = [i for i in range(nc) if diff_c[i]]

    def fun(leaves):
        cs, x0 = leaves[:nc], tree_unflatten(g_tree, leaves[nc:])
        sol, aux = _split_aux(solve(lambda x: conv(cs, x), x0), has_aux, who, "solve")
        sol = tree_unflatten(g_tree, _check_like(sol, g_tree, g_avals, who,
                                                 "solve's solution", "initial_guess"))
        return (sol, aux) if has_aux else sol

    def jvp(leaves, tangents, outs):
        cs, tcs = leaves[:nc], tangents[:nc]
        sol = tree_unflatten(g_tree, outs[:ng])
        if fidx:  # df/dtheta along the tangents of the closed-over values, at the solution
            _, rhs = _jvp(lambda *cf: conv(_fill(cs, fidx, cf), sol),
                          tuple(cs[i] for i in fidx), tuple(tcs[i] for i in fidx))
        else:
            rhs = tree_unflatten(g_tree, [zeros_like(o) for o in outs[:ng]])
        _, g = linearize(lambda x: conv(cs, x), sol)
        y = _check_like(tangent_solve(g, rhs), g_tree, g_avals, who,
                        "tangent_solve's result", "initial_guess")
        return None, [-v for v in y] + [None] * (len(outs) - ng)

    rules = Rules(who, fun, jvp, save_outputs=True, per_example=True)
    call = RuleCall(rules, (True,) * (nc + ng), tuple(diff_c) + (False,) * ng,
                    (None,) * (nc + ng), nondiff_outs=_aux_positions(ng))
    outs = CustomRoot.apply(*consts, *guess, call=call)
    return tree_unflatten(call.out_tree, list(outs) if isinstance(outs, tuple) else [outs])


# -- custom_linear_solve -----------------------------------------------------------------------
class _LinearProblem:
    """``A x = b`` with ``A = matvec(consts, .)``, its solvers, and its transpose."""

    def __init__(self, name, matvec, solve, transpose_solve, symmetric, has_aux, tree, avals,
                 diff_c):
        self.name, self.matvec, self.solve = name, matvec, solve
        self.transpose_solve, self.symmetric, self.has_aux = transpose_solve, symmetric, has_aux
        self.tree, self.avals, self.diff_c = tree, avals, diff_c
        self.fidx = [i for i, d in enumerate(diff_c) if d]
        self._t = None

    def transposed(self) -> _LinearProblem:
        """``A^T x = b``: ``matvec`` transposed (the vjp of ``matvec`` at zero), the solvers
        swapped."""
        if self.symmetric:
            return self
        if self._t is None:
            def vecmat(cs, v):
                like = tree_flatten(v)[0]
                zeros = tree_unflatten(self.tree, [_zeros(shape, dtype, w) for (shape, dtype), w
                                                   in zip(self.avals, like)])
                _, pull = vjp(lambda x: self.matvec(cs, x), zeros)
                return pull(v)[0]

            t = _LinearProblem(f"{self.name} (transposed)", vecmat, self.transpose_solve,
                               self.solve, False, self.has_aux, self.tree, self.avals,
                               self.diff_c)
            t._t = self
            self._t = t
        return self._t

    def apply(self, cs: list, b: list) -> tuple[list, Any]:
        """The primitive on the closed-over values ``cs`` and the leaves of ``b``: the output
        leaves (solution, then aux) and their structure."""
        n, nc = len(b), len(cs)
        rules = Rules(self.name, self._fun(nc), self._jvp(nc, n), self._vjp(nc, n),
                      save_outputs=True, per_example=True)
        call = RuleCall(rules, (True,) * (nc + n), tuple(self.diff_c) + (True,) * n,
                        (None,) * (nc + n), nondiff_outs=_aux_positions(n))
        outs = CustomLinearSolve.apply(*cs, *b, call=call)
        return (list(outs) if isinstance(outs, tuple) else [outs]), call.out_tree

    def _fun(self, nc):
        who = self.name

        def fun(leaves):
            cs, b = leaves[:nc], tree_unflatten(self.tree, leaves[nc:])
            x, aux = _split_aux(self.solve(lambda v: self.matvec(cs, v), b), self.has_aux,
                                who, "solve")
            x = tree_unflatten(self.tree, _check_like(x, self.tree, self.avals, who,
                                                      "solve's solution", "b"))
            return (x, aux) if self.has_aux else x

        return fun

    def _jvp(self, nc, n):
        def jvp(leaves, tangents, outs):
            cs, tcs, rhs = leaves[:nc], tangents[:nc], list(tangents[nc:])
            if self.fidx:  # db - dA x
                x = tree_unflatten(self.tree, outs[:n])
                _, dax = _jvp(lambda *cf: self.matvec(_fill(cs, self.fidx, cf), x),
                              tuple(cs[i] for i in self.fidx), tuple(tcs[i] for i in self.fidx))
                rhs = [r - d for r, d in zip(rhs, tree_flatten(dax)[0])]
            x_dot, _ = self.apply(cs, rhs)
            return None, x_dot[:n] + [None] * (len(outs) - n)

        return jvp

    def _vjp(self, nc, n):
        def vjp_rule(leaves, outs, gs):
            if not self.symmetric and self.transpose_solve is None:
                raise TypeError(
                    f"{self.name}: reverse-mode differentiation (grad, vjp, jacrev) needs "
                    "transpose_solve, a solver of the transposed system A^T x = b, or "
                    "symmetric=True if A is symmetric; forward mode (jvp, jacfwd) needs "
                    "neither."
                )
            cs = leaves[:nc]
            g = [gs[j] if gs[j] is not None else zeros_like(outs[j]) for j in range(n)]
            u, _ = self.transposed().apply(cs, g)
            u = u[:n]
            cts: list = [None] * nc + u
            if self.fidx:  # the closed-over values: -(d(A x)/dtheta)^T u
                x = tree_unflatten(self.tree, outs[:n])
                _, pull = vjp(lambda *cf: self.matvec(_fill(cs, self.fidx, cf), x),
                              *[cs[i] for i in self.fidx])
                for i, c in zip(self.fidx, pull(tree_unflatten(self.tree, u))):
                    cts[i] = -c
            return cts

        return vjp_rule


def _zeros(shape, dtype, like) -> Tensor:
    """Zeros of ``shape`` and ``dtype`` on the device of ``like`` (a Tensor, else the CPU)."""
    if isinstance(like, Tensor):
        return const(backend_of(like._concrete()).zeros(shape, dtype))
    return const(np.zeros(shape, dtype))


def custom_linear_solve(matvec: Callable, b, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False):
    """Solve the linear system ``matvec(x) = b`` with your own solver, differentiated
    implicitly (JAX's ``lax.custom_linear_solve``).

    The result is ``solve(matvec, b)``; derivatives never go through ``solve``'s iterations:
    forward mode solves again (``dx = A^-1 (db - dA x)``), reverse mode solves the transposed
    system with ``transpose_solve`` (``b_bar = A^-T x_bar``; the values ``matvec`` closes over
    get ``-(d(A x)/dtheta)^T b_bar``). These are recorded operations on the solution, so
    derivatives of every order work, under ``jit`` and ``vmap``.

    Args:
        matvec: The linear map ``x -> A x`` (``x`` with ``b``'s structure, shapes and
            dtypes); it may close over traced values (``A``'s entries being
            differentiated). Recorded once at ``b``: no Python decisions on ``x``'s values.
        b: Pytree of floating Tensors/arrays: the right-hand side.
        solve: ``solve(matvec, b) -> x`` (with ``has_aux``, ``(x, aux)``): any Python code;
            it runs on constants and is not differentiated. Values it closes over are
            constants: compute from ``matvec``. It must handle ``b = 0`` (derivatives solve
            again, and recording a tangent program, as ``jacfwd`` does, runs it on zeros).
        transpose_solve: ``transpose_solve(vecmat, b) -> x`` solving ``A^T x = b``, where
            ``vecmat`` is ``matvec`` transposed; needed by reverse mode unless ``symmetric``.
        symmetric: ``A`` is symmetric: ``solve`` serves for the transposed system too.
        has_aux: ``solve`` and ``transpose_solve`` return ``(x, aux)``; the result is then
            ``(x, aux)`` and ``aux`` carries no derivative.

    Returns:
        The solution with ``b``'s structure (``(x, aux)`` with ``has_aux``).

    Raises:
        TypeError: if ``matvec`` or ``solve`` (or a given ``transpose_solve``) is not
            callable; a ``b`` leaf is not floating; ``matvec`` or ``solve`` returns another
            structure than ``b``; reverse mode without ``transpose_solve`` and not
            ``symmetric``; ``solve`` uses a traced value it closes over (a RuntimeError names
            it).
        ValueError: if ``matvec`` or ``solve`` returns leaves of other shapes than ``b``'s.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> A = tg.Tensor([[4.0, 1.0], [1.0, 3.0]])
        >>> def dense_solve(matvec, b):  # materialize A from matvec, then solve directly
        ...     return tnp.linalg.solve(tg.jacfwd(matvec)(b), b)
        >>> x = tg.custom_linear_solve(lambda v: A @ v, tg.Tensor([1.0, 2.0]), dense_solve,
        ...                            symmetric=True)
        >>> x
        Tensor([0.09090909, 0.6363636 ], dtype=float32)

    References:
        JAX, ``jax.lax.custom_linear_solve``; Blondel et al., "Efficient and modular implicit
        differentiation", NeurIPS 2022.
    """
    who = "custom_linear_solve"
    _check_callable(matvec, "matvec", who)
    _check_callable(solve, "solve", who)
    if transpose_solve is not None:
        _check_callable(transpose_solve, "transpose_solve", who)
    b_leaves, b_tree = _float_leaves(b, who, "b")
    avals = [(v.shape, v.dtype) for v in b_leaves]
    conv = _closure_convert(matvec, (tree_unflatten(b_tree, b_leaves),), f"{who}: matvec")
    if conv.out_tree != b_tree:
        raise TypeError(f"{who}: matvec returns structure {conv.out_tree}, but b has {b_tree}; "
                        "matvec(x) must have b's structure, shapes and dtypes")
    for i, (got, want) in enumerate(zip(conv.out_avals, avals)):
        if tuple(got[0]) != tuple(want[0]):
            raise ValueError(f"{who}: matvec's output leaf {i} has shape {tuple(got[0])}, but "
                             f"b has shape {tuple(want[0])}")
    consts = conv.consts
    problem = _LinearProblem(who, conv, solve, solve if symmetric else transpose_solve,
                             bool(symmetric), has_aux, b_tree, avals,
                             [c.dtype.kind in "fcV" for c in consts])
    outs, out_tree = problem.apply(list(consts), b_leaves)
    return tree_unflatten(out_tree, outs)
