"""Checking an op's rules against each other: :func:`check_rule`.

Every derivative and batching transform of tapegrad is built from an op's rules (``backward``,
``jvp``, ``batch``); :func:`check_rule` runs the transforms on one op (or any function) and
compares each result with the same quantity computed the slow, loop-free-of-batching way:

- ``vmap``: ``vmap(f)`` with each argument batched alone on axis 0, on a non-leading axis and
  on the last axis, and all of them batched together, equals ``f`` applied to each example in
  a Python loop and stacked; where the loop raises, ``vmap`` raises the same kind of error.
- ``jit``: ``jit(f)``, traced at the first example and replayed at the others, and
  ``Tape.replay`` of the first example's tape equal the eager call in value, dtype and
  structure (a replay refused by a guard, a branch that changed, is right and not compared).
- ``jacfwd``: ``jacfwd(f)`` equals the columns ``jvp(f, x, e_j)`` for each basis vector.
- ``jacrev``: ``jacrev(f)`` equals the rows ``vjp(f, x)(e_i)`` for each basis cotangent.
- ``jvp_vjp``: those two loops give the same Jacobian (the forward-mode rule agrees with the
  backward rule).
- ``hessian``: ``hessian(f)`` contracted with a random output weight ``u`` equals the rows
  ``vjp(x -> vjp(f, x)(u), x)(e_i)`` (reverse over reverse, no ``vmap``).
- ``vmap_grad``: ``vmap(grad(x -> sum(w * f(x))))`` equals the loop of ``grad``.
- ``fd``: reverse and forward mode agree with central finite differences
  (:func:`~tapegrad.testing.check_grads`, order 1).

Derivatives are taken in float64 with respect to each floating argument in turn (a complex one
as its real and imaginary parts); complex outputs are compared as their real and imaginary
parts, and integer or boolean outputs only in the ``vmap`` check.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np

from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor
from tapegrad.core.trace import GuardError
from tapegrad.core.tree import tree_flatten
from tapegrad.transforms.forward import jvp
from tapegrad.transforms.jacobians import hessian, jacfwd, jacrev
from tapegrad.transforms.jit import jit
from tapegrad.transforms.reverse import grad, trace, vjp
from tapegrad.transforms.vmap import vmap

__all__ = ["check_rule", "CHECKS"]

#: Every check :func:`check_rule` knows, in the order it runs them.
CHECKS = ("vmap", "jit", "jacfwd", "jacrev", "jvp_vjp", "hessian", "vmap_grad", "fd")
_DERIVATIVE_CHECKS = ("jacfwd", "jacrev", "jvp_vjp", "hessian", "vmap_grad", "fd")
_NO_RULE = "vmap: .* has no batching rule"


class _Failure(Exception):
    """One failed comparison (collected, then reported together)."""


def _as_value(a):
    """A positional argument as ``check_rule`` uses it: arrays, NumPy scalars and Tensors
    become Tensors (floating ones float64 or complex128; integer and boolean ones keep their
    dtype); other values (Python numbers, tuples, None) stay, static."""
    if isinstance(a, Tensor):
        a = a.numpy()
    if isinstance(a, np.generic):  # a NumPy scalar (a 0-d reduction's result) is an array
        a = np.asarray(a)
    if isinstance(a, np.ndarray):
        if a.dtype.kind == "f":
            a = a.astype(np.float64)
        elif a.dtype.kind == "c":
            a = a.astype(np.complex128)
        return Tensor(a)
    return a


def _np(v) -> np.ndarray:
    return np.asarray(v.numpy() if isinstance(v, Tensor) else v)


def _leaves(out) -> list:
    return [_np(v) for v in tree_flatten(out)[0]]


def _real_leaves(out) -> list:
    """The differentiable outputs as real Tensors: floating leaves, complex leaves split into
    their real and imaginary parts (integer and boolean leaves dropped)."""
    from tapegrad.ops import Imag, Real  # pyright: ignore[reportAttributeAccessIssue]

    res = []
    for v in tree_flatten(out)[0]:
        if not isinstance(v, Tensor):
            continue
        if v.dtype.kind == "f":
            res.append(v)
        elif v.dtype.kind == "c":
            res.extend([Real.apply(v), Imag.apply(v)])
    return res


def _close(got, want, atol, rtol) -> float | None:
    """The largest difference when ``got`` and ``want`` differ beyond the tolerances (or in
    shape), else None."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise _Failure(f"shape {got.shape} where the loop gives {want.shape}")
    if got.size == 0:
        return None
    scale = float(np.nanmax(np.abs(want))) if np.isfinite(want).any() else 0.0
    if np.allclose(got, want, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True):
        return None
    diff = np.abs(got.astype(np.complex128) - want)
    return float(np.nanmax(np.where(np.isnan(diff), np.inf, diff)))


def _perturbed(a: Tensor, i: int, rng) -> Tensor:
    """Example ``i`` of a batch derived from ``a``: ``a`` itself for ``i == 0``; floating
    values scaled elementwise by factors in ``[0.9, 1)`` (signs and symmetric domains kept);
    integer and boolean values permuted (valid indices stay valid)."""
    if i == 0:
        return a
    arr = a.numpy()
    if arr.dtype.kind in "fc":
        return Tensor(arr * (1.0 - 0.1 * rng.uniform(0.0, 1.0, arr.shape)).astype(arr.dtype))
    return Tensor(rng.permutation(arr.reshape(-1)).reshape(arr.shape))


def _stack(vals: list, axis: int) -> Tensor:
    return Tensor(np.stack([_np(v) for v in vals], axis=axis))


def _call(f, args):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=_NO_RULE)
        return f(*args)


def _run(f, args):
    """``(result, None)`` or ``(None, exception)``."""
    try:
        return _call(f, args), None
    except UserWarning as w:
        return None, w
    except Exception as e:  # noqa: BLE001 - compared with the reference's behaviour below
        return None, e


def _describe(e: BaseException) -> str:
    msg = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {msg[:300]}"


class _Checker:
    def __init__(self, f, args, examples, name, atol, rtol, seed):
        self.f, self.args, self.name = f, args, name
        self.examples = examples
        self.atol, self.rtol = atol, rtol
        self.rng = np.random.default_rng(seed)
        self.failures: list[str] = []

    def fail(self, check: str, where: str, what: str) -> None:
        self.failures.append(f"{check}{' ' + where if where else ''}: {what}")

    # -- vmap --------------------------------------------------------------------------------
    def of_tensors(self, f):
        """``f`` as a function of the Tensor arguments alone (the static ones closed over)."""
        pos = [k for k, a in enumerate(self.args) if isinstance(a, Tensor)]
        args = list(self.args)

        def g(*ts):
            call = list(args)
            for k, t in zip(pos, ts):
                call[k] = t
            return f(*call)

        g.__name__ = getattr(f, "__name__", "fn")
        return g

    @staticmethod
    def unstackable(ref) -> bool:
        """Whether the loop's results differ in structure or shapes between examples."""
        sigs = set()
        for r in ref:
            leaves, tree = tree_flatten(r)
            sigs.add((str(tree), tuple(np.shape(_np(v)) for v in leaves)))
        return len(sigs) > 1

    def vmap_checks(self, in_axes_list) -> None:
        tensor_pos = [k for k, a in enumerate(self.args) if isinstance(a, Tensor)]
        cases = []
        for k in tensor_pos:
            nd = self.args[k].ndim + 1
            seen = set()
            for ax in in_axes_list:
                if -nd <= ax < nd and ax % nd not in seen:
                    seen.add(ax % nd)
                    cases.append({k: ax})
        if len(tensor_pos) > 1:
            cases.append({k: 0 for k in tensor_pos})
            cases.append({k: -1 for k in tensor_pos})
        for case in cases:
            self.one_vmap(case)

    def one_vmap(self, case: dict) -> None:
        size = len(self.examples)
        rows = [[ex[k] if k in case else a for k, a in enumerate(self.args)]
                for ex in self.examples]
        where = "over " + ", ".join(f"argument {k} (in_axes {ax})" for k, ax in case.items())
        ref = []
        ref_err = None
        for r in rows:
            out, err = _run(self.f, r)
            if err is not None:
                ref_err = err
                break
            ref.append(out)
        tensor_pos = [k for k, a in enumerate(self.args) if isinstance(a, Tensor)]
        batched = [(_stack([r[k] for r in rows], case[k]) if k in case else self.args[k])
                   for k in tensor_pos]
        in_axes = tuple(case.get(k) for k in tensor_pos)
        got, err = _run(vmap(self.of_tensors(self.f), in_axes=in_axes), batched)
        if ref_err is not None:
            if err is None:
                self.fail("vmap", where, f"returned a value where the loop raised "
                          f"{_describe(ref_err)}")
            elif not isinstance(err, type(ref_err)) and not (
                    isinstance(ref_err, ValueError) and isinstance(err, ValueError)):
                self.fail("vmap", where, f"raised {_describe(err)} where the loop raised "
                          f"{_describe(ref_err)}")
            return
        if err is not None and not self.unstackable(ref):
            self.fail("vmap", where, f"raised {_describe(err)}")
            return
        got_leaves, got_tree = tree_flatten(got)
        ref_leaves = [tree_flatten(o)[0] for o in ref]
        ref_tree = tree_flatten(ref[0])[1] if ref else got_tree
        shapes = {tuple(np.shape(_np(v)) for v in r) for r in ref_leaves}
        if self.unstackable(ref):  # results of different sizes: vmap must refuse them
            if err is None:
                self.fail("vmap", where, "returned a value although the examples' results "
                          f"have different shapes {sorted(shapes)}")
            elif not isinstance(err, ValueError):
                self.fail("vmap", where, f"raised {_describe(err)} for examples whose results "
                          "have different shapes (expected a ValueError)")
            return
        if got_tree != ref_tree:
            self.fail("vmap", where, f"output structure {got_tree}, the loop's {ref_tree}")
            return
        for j, g in enumerate(got_leaves):
            g = _np(g)
            want = np.stack([_np(r[j]) for r in ref_leaves]) if size else None
            if want is None:
                continue
            if g.dtype != want.dtype:
                self.fail("vmap", where, f"output {j} has dtype {g.dtype}, the loop {want.dtype}")
                continue
            try:
                d = _close(g, want, self.atol, self.rtol)
            except _Failure as e:
                self.fail("vmap", where, f"output {j}: {e}")
                continue
            if d is not None:
                self.fail("vmap", where, f"output {j} differs from the loop by up to {d:.3g}")

    # -- jit and replay ----------------------------------------------------------------------
    def jit_checks(self) -> None:
        """``jit`` (traced at the first example, replayed at the others) and ``Tape.replay``
        of the first example's tape give what the eager call gives, in value, dtype and
        structure."""
        pos = [k for k, a in enumerate(self.args) if isinstance(a, Tensor)]
        g = self.of_tensors(self.f)
        jitted = jit(g)
        tape = None
        for i, ex in enumerate([self.args, *self.examples]):
            ts = [ex[k] for k in pos]
            want, err = _run(g, ts)
            if err is not None:
                continue  # the vmap checks compare errors; here only values are compared
            self.same("jit", f"at example {i}", _run(jitted, ts), want)
            if tape is None:
                got, err = _run(trace(g), ts)
                if err is not None or got is None:
                    self.fail("jit", "Tape", f"tracing raised {_describe(err)}"
                              if err is not None else "tracing returned nothing")
                    return
                tape = got[1]
                continue
            got, err = _run(tape.replay, ts)
            if not isinstance(err, GuardError):  # a changed branch is refused: right
                self.same("jit", f"Tape.replay at example {i}", (got, err), want)

    def same(self, check: str, where: str, got_err, want) -> None:
        got, err = got_err
        if err is not None:
            self.fail(check, where, f"raised {_describe(err)} where the eager call returned")
            return
        got_leaves, got_tree = tree_flatten(got)
        want_leaves, want_tree = tree_flatten(want)
        if got_tree != want_tree:
            self.fail(check, where, f"output structure {got_tree}, eager {want_tree}")
            return
        for j, (a, b) in enumerate(zip(got_leaves, want_leaves)):
            a, b = _np(a), _np(b)
            if a.dtype != b.dtype:
                self.fail(check, where, f"output {j} has dtype {a.dtype}, eager {b.dtype}")
                continue
            self.compare(check, where, [a], [b], "eager", first=j)

    # -- derivatives -------------------------------------------------------------------------
    def diff_args(self, argnums) -> list:
        """``(k, part)`` per real direction: ``part`` None for a real argument, ``"re"`` or
        ``"im"`` for a complex one."""
        out = []
        for k, a in enumerate(self.args):
            if argnums is not None and k not in argnums:
                continue
            if isinstance(a, Tensor) and a.dtype.kind == "f":
                out.append((k, None))
            elif isinstance(a, Tensor) and a.dtype.kind == "c":
                out.extend([(k, "re"), (k, "im")])
        return out

    def restricted(self, k, part):
        """``(x0, f_k)``: the real point and the function of it alone, returning the tuple of
        real output leaves."""
        a = self.args[k]
        f, args = self.f, list(self.args)
        if part is None:
            x0 = a
        else:
            arr = a.numpy()
            x0 = Tensor(np.ascontiguousarray(arr.real if part == "re" else arr.imag))
            other = Tensor(np.ascontiguousarray(arr.imag if part == "re" else arr.real))

        def f_k(x):
            if part == "re":
                x = x + other * 1j
            elif part == "im":
                x = other + x * 1j
            call = list(args)
            call[k] = x
            return tuple(_real_leaves(_call(f, call)))

        return x0, f_k

    def derivative_checks(self, checks, argnums) -> None:
        for k, part in self.diff_args(argnums):
            where = f"d/d argument {k}" + (f" ({'real' if part == 're' else 'imag'} part)"
                                           if part else "")
            x0, f_k = self.restricted(k, part)
            out0, err = _run(f_k, [x0])
            if err is not None:
                return  # the function itself fails here: the vmap check compared the errors
            if not out0:
                continue
            self.jacobians(checks, where, x0, f_k, out0)
            if "hessian" in checks:
                self.guard("hessian", where, self.hessian, x0, f_k, out0)
            if "fd" in checks:
                self.guard("fd", where, self.finite_differences, x0, f_k)
        if "vmap_grad" in checks:
            self.vmap_grads(argnums)

    def guard(self, check, where, fn, *a) -> None:
        try:
            fn(*a)
        except _Failure as e:
            self.fail(check, where, str(e))
        except AssertionError as e:
            self.fail(check, where, str(e).strip().splitlines()[0][:400])
        except UserWarning as w:
            self.fail(check, where, f"raised {_describe(w)}")
        except Exception as e:  # noqa: BLE001 - a rule that crashes is a failure to report
            self.fail(check, where, f"raised {_describe(e)}")

    def compare(self, check, where, got: list, want: list, what: str, first: int = 0) -> None:
        """Report each output of ``got`` farther from ``want``'s (computed by ``what``) than
        the tolerances (outputs numbered from ``first``)."""
        for j, (g, w) in enumerate(zip(got, want), first):
            try:
                d = _close(g, w, self.atol, self.rtol)
            except _Failure as e:
                self.fail(check, where, f"output {j}: {e}")
                continue
            if d is not None:
                self.fail(check, where, f"output {j} differs from {what} by up to {d:.3g}")

    def jacobians(self, checks, where, x0, f_k, out0) -> None:
        n_in = x0.size
        basis = [Tensor(e.reshape(x0.shape)) for e in np.eye(n_in)]
        shapes = [o.shape for o in out0]
        loop_fwd = loop_rev = None
        if {"jacfwd", "jvp_vjp"} & set(checks):
            try:
                cols = [[_np(t) for t in _call(lambda x, e=e: jvp(f_k, (x,), (e,))[1], [x0])]
                        for e in basis]
                loop_fwd = [np.stack([c[j] for c in cols], axis=-1).reshape(s + x0.shape)
                            if cols else np.zeros(s + x0.shape) for j, s in enumerate(shapes)]
            except Exception as e:  # noqa: BLE001
                self.fail("jvp", where, f"raised {_describe(e)}")
        if {"jacrev", "jvp_vjp"} & set(checks):
            try:
                out, vjp_fn = vjp(f_k, x0)
                loop_rev = []
                for j, s in enumerate(shapes):
                    rows = []
                    for e in np.eye(int(np.prod(s, dtype=int))):
                        ct = tuple(Tensor(e.reshape(s).astype(o.dtype)) if i == j else
                                   Tensor(np.zeros(o.shape, o.dtype))
                                   for i, o in enumerate(out0))
                        rows.append(_np(_call(vjp_fn, [ct])[0]))
                    loop_rev.append(np.stack(rows).reshape(s + x0.shape) if rows
                                    else np.zeros(s + x0.shape))
            except Exception as e:  # noqa: BLE001
                self.fail("vjp", where, f"raised {_describe(e)}")
        if "jacfwd" in checks and loop_fwd is not None:
            self.guard("jacfwd", where, lambda: self.compare(
                "jacfwd", where, _leaves(_call(jacfwd(f_k), [x0])), loop_fwd, "the loop of jvp"))
        if "jacrev" in checks and loop_rev is not None:
            self.guard("jacrev", where, lambda: self.compare(
                "jacrev", where, _leaves(_call(jacrev(f_k), [x0])), loop_rev, "the loop of vjp"))
        if "jvp_vjp" in checks and loop_fwd is not None and loop_rev is not None:
            self.compare("jvp_vjp", where, loop_fwd, loop_rev, "the Jacobian of the vjp rule")

    def hessian(self, x0, f_k, out0) -> None:
        us = [self.rng.standard_normal(o.shape) for o in out0]
        hs = _leaves(_call(hessian(f_k), [x0]))
        got = np.zeros(x0.shape * 2)
        for u, h in zip(us, hs):
            got = got + np.tensordot(u, h, axes=u.ndim)
        ut = tuple(Tensor(u.astype(o.dtype)) for u, o in zip(us, out0))

        def pulled(x):
            return vjp(f_k, x)[1](ut)[0]

        _, vjp2 = vjp(pulled, x0)
        rows = [_np(_call(vjp2, [Tensor(e.reshape(x0.shape))])[0]) for e in np.eye(x0.size)]
        want = np.stack(rows).reshape(x0.shape * 2) if rows else np.zeros(x0.shape * 2)
        self.compare("hessian", "", [got], [want], "the loop of vjp over vjp")

    def finite_differences(self, x0, f_k) -> None:
        from tapegrad.testing.gradcheck import check_grads

        if x0.size == 0:
            return
        check_grads(f_k, (x0,), order=1, modes=("rev", "fwd"), atol=self.atol * 100,
                    rtol=max(self.rtol, 1e-5))

    def vmap_grads(self, argnums) -> None:
        diff = sorted({k for k, _ in self.diff_args(argnums)})
        if not diff:
            return
        out0, err = _run(self.f, list(self.args))
        if err is not None:
            return
        ws = [Tensor(self.rng.standard_normal(o.shape).astype(o.dtype))
              for o in _real_leaves(out0)]
        if not ws:
            return
        f = self.f

        def scalar(*a):
            total = None
            for o, w in zip(_real_leaves(f(*a)), ws):
                term = (o * w).sum()
                total = term if total is None else total + term
            return total

        tensor_pos = [k for k, a in enumerate(self.args) if isinstance(a, Tensor)]
        size = len(self.examples)
        for k in diff:
            g = grad(scalar, argnums=k)
            # every argument batched (on the first and on the last axis), then argument k
            # alone and every argument but k (shared operands: their cotangents sum)
            plans = [{j: 0 for j in tensor_pos}, {j: -1 for j in tensor_pos}]
            if len(tensor_pos) > 1:
                plans += [{k: 0}, {j: 0 for j in tensor_pos if j != k}]
            for plan in plans:
                if not self.one_vmap_grad(g, k, plan, tensor_pos, size):
                    return

    def one_vmap_grad(self, g, k, plan, tensor_pos, size) -> bool:
        """``vmap(g)`` with the arguments in ``plan`` batched against the loop of ``g``;
        False when ``g`` itself fails (nothing more to compare)."""
        rows = [[ex[j] if j in plan else a for j, a in enumerate(self.args)]
                for ex in self.examples]
        label = f"d/d argument {k} (" + ", ".join(
            f"argument {j} in_axes {ax}" for j, ax in plan.items()) + ")"
        try:
            want = [_np(_call(g, r)) for r in rows]
        except Exception as e:  # noqa: BLE001
            self.fail("vmap_grad", f"d/d argument {k}", f"grad raised {_describe(e)}")
            return False
        batched = [(_stack([r[j] for r in rows], plan[j]) if j in plan else self.args[j])
                   for j in tensor_pos]
        in_axes = tuple(plan.get(j) for j in tensor_pos)
        got, err = _run(vmap(self.of_tensors(g), in_axes=in_axes), batched)
        if err is not None:
            self.fail("vmap_grad", label, f"raised {_describe(err)}")
        elif size:
            self.compare("vmap_grad", label, [_np(got)], [np.stack(want)], "the loop of grad")
        return True


def check_rule(
    fn,
    args: Sequence,
    params: dict | None = None,
    *,
    checks: Sequence[str] | None = None,
    argnums: Sequence[int] | None = None,
    in_axes: Sequence[int] = (0, 1, -1),
    examples: Sequence[Sequence] | None = None,
    batch_size: int = 2,
    raises: type | None = None,
    atol: float = 1e-8,
    rtol: float = 1e-6,
    seed: int = 0,
) -> None:
    """Check that an op's rules agree with each other under every transform.

    Runs ``vmap``, ``jacfwd``, ``jacrev``, ``hessian`` and ``vmap(grad)`` on ``fn`` at
    ``args`` and compares each with a reference that uses no batching: Python loops of
    ``fn``, ``jvp``, ``vjp`` and ``grad`` (the checks are listed in :data:`CHECKS` and the
    module documentation). The ``jit`` check compares ``jit(fn)`` (traced at ``args``,
    replayed on the other examples) and ``Tape.replay`` with the eager call. Use it on your
    own :class:`~tapegrad.Function` to prove its ``backward``, ``jvp`` and ``batch`` rules
    together; use :func:`check_grads` beside it for the derivative against finite differences
    at higher orders.

    Floating arguments are converted to float64 (complex to complex128) first. The batch of
    the ``vmap`` checks has ``batch_size`` examples: ``examples`` when given, else ``args``
    and copies of it with floating values scaled by factors in ``[0.9, 1)`` and integer or
    boolean ones permuted (give ``examples`` when that leaves an op's domain, for instance
    for sorted or positive definite inputs).

    Args:
        fn: A :class:`~tapegrad.Function` subclass (applied as ``fn.apply(*args, **params)``)
            or a function of the positional ``args`` (called as ``fn(*args, **params)``)
            returning a pytree of Tensors.
        args: The positional arguments of one example: Tensors or arrays (batched and
            differentiated; integer and boolean ones are batched only) and other values
            (static: Python numbers, tuples, None).
        params: Keyword parameters (static), such as ``{"axis": 1, "keepdims": True}``.
        checks: The checks to run, a subset of :data:`CHECKS` (default: all; only ``"vmap"``
            for a Function with ``differentiable = False``). Leave out ``"hessian"`` for an
            op whose first derivative is not differentiable, ``"fd"`` where finite
            differences cannot resolve the derivative (a discontinuity nearby).
        argnums: Positions of the arguments to differentiate (default: every floating one).
        in_axes: The ``in_axes`` tried for each argument batched alone (each taken modulo the
            batched argument's rank, duplicates skipped); every argument is also batched
            together on axis 0 and on the last axis.
        examples: ``batch_size`` tuples like ``args``, the examples of the batch.
        batch_size: The number of examples when ``examples`` is not given.
        raises: An exception type ``fn`` must raise on ``args`` (an axis out of range, a
            reduction over an empty axis): then only the ``vmap`` checks run, each of which
            must raise it too. Without it, an error on ``args`` is a failure.
        atol, rtol: Tolerances of every comparison (``atol`` is scaled by the largest
            magnitude of the reference when that exceeds 1).
        seed: Seed of the random examples, weights and projections.

    Raises:
        AssertionError: listing every failed check: which check, which argument (and
            ``in_axes``), and the largest difference or the error raised.
        ValueError: for an unknown check name or examples of the wrong count.
        TypeError: if ``fn`` is neither callable nor a Function subclass.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> from tapegrad.testing import check_rule
        >>> class Cube(tg.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x ** 3
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 3 * x * x * g
        >>> check_rule(Cube, (tnp.linspace(-1.0, 1.0, 4),), checks=("jacfwd", "jacrev"))
        >>> check_rule(tnp.max, (tnp.linspace(-1.0, 1.0, 6).reshape(2, 3),), {"axis": 1})
    """
    params = dict(params or {})
    is_function = isinstance(fn, type) and issubclass(fn, Function)
    if not is_function and not callable(fn):
        raise TypeError(f"check_rule: fn must be a Function subclass or callable, got "
                        f"{type(fn).__name__}")
    checks = tuple(CHECKS if checks is None else checks)
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise ValueError(f"check_rule: unknown checks {unknown}; choose from {CHECKS}")
    if is_function and not getattr(fn, "differentiable", True):
        checks = tuple(c for c in checks if c not in _DERIVATIVE_CHECKS)
    name = fn.__name__ if hasattr(fn, "__name__") else repr(fn)
    apply: Callable = fn.apply if is_function else fn  # pyright: ignore[reportAttributeAccessIssue]

    def f(*a):
        return apply(*a, **params)

    f.__name__ = name
    args = [_as_value(a) for a in args]
    rng = np.random.default_rng(seed + 11)
    if examples is None:
        exs = [[_perturbed(a, i, rng) if isinstance(a, Tensor) else a for a in args]
               for i in range(batch_size)]
    else:
        exs = [[_as_value(a) for a in ex] for ex in examples]
        if any(len(ex) != len(args) for ex in exs):
            raise ValueError("check_rule: each example needs one entry per argument")
    checker = _Checker(f, args, exs, name, atol, rtol, seed)
    _, err = _run(f, args)
    desc = ", ".join(f"{k}={v!r}" for k, v in params.items())
    who = f"check_rule({name}{', ' + desc if desc else ''})"
    if raises is None and err is not None:
        raise AssertionError(f"{who}: the function raised {_describe(err)} on args; give "
                             "valid arguments, or raises= when the error is what is checked")
    if raises is not None:
        if err is None:
            raise AssertionError(f"{who}: expected {raises.__name__}, but the function "
                                 "returned a value")
        if not isinstance(err, raises):
            raise AssertionError(f"{who}: expected {raises.__name__}, got {_describe(err)}")
        checks = tuple(c for c in checks if c == "vmap")  # every vmap must raise it too
    with np.errstate(all="ignore"):
        if "vmap" in checks:
            checker.vmap_checks(tuple(in_axes))
        if "jit" in checks:
            checker.jit_checks()
        derivs = [c for c in checks if c in _DERIVATIVE_CHECKS]
        if derivs:
            checker.derivative_checks(derivs, None if argnums is None else tuple(argnums))
    if checker.failures:
        shown = "\n  ".join(checker.failures[:20])
        more = len(checker.failures) - 20
        extra = f"\n  ... and {more} more" if more > 0 else ""
        raise AssertionError(f"{who}: {len(checker.failures)} failed check(s):\n  "
                             f"{shown}{extra}")
