"""Prove your own differentiation rule: a custom Function checked by check_grads and hypothesis.

When you write a ``tg.Function`` you write its derivative by hand, so test it the way
tapegrad's own ops are tested:

1. ``tapegrad.testing.check_grads(f, args, order=2)`` compares reverse mode with central finite
   differences in float64, at first and second order (the adjoint identity
   ``<u, J t> == <J^T u, t>`` for random tangents and cotangents).
2. A hypothesis property test draws many shapes (scalars, size-1 and size-0 dimensions) and
   values and checks the forward result against a NumPy reference, the dtype, and the
   gradients, for every draw.

The script defines ``Square`` (the smallest complete Function) and ``LogCosh`` (a numerically stable
``log(cosh(x))``, the smooth Huber-like loss), proves both, then shows that the checks catch a
classic mistake: ``BadLogCosh`` keeps an array computed in ``forward`` as a constant in
``backward``, which would give correct first derivatives and wrong second ones: tapegrad
refuses that rule at second order, naming it.

Run:  python examples/gradient_check.py [--quick] [--examples 200] [--plot eps.png]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interrupted, plot_curves, stop_on_interrupt  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.testing import check_grads  # noqa: E402


class Square(tg.Function):
    """``x ** 2`` elementwise: the smallest complete Function."""

    oper = "square"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors  # a Tensor, traced by any outer transform
        return 2 * x * g


class LogCosh(tg.Function):
    """``log(cosh(x))`` elementwise, stable for large ``|x|`` (``cosh`` overflows near 710).

    Forward: ``|x| + log1p(exp(-2|x|)) - log 2``. Derivative: ``tanh(x)``, written with the
    tapegrad op ``tnp.tanh`` on the saved input, so the second derivative ``1 - tanh(x)^2``
    comes out of tanh's own rule.
    """

    oper = "logcosh"

    @staticmethod
    def forward(ctx, x):
        xp = ctx.backend
        ctx.save_for_backward(x)
        a = xp.abs(x)
        return a + xp.log1p(xp.exp(-2 * a)) - xp.log(2).astype(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return tnp.tanh(x) * g


class BadLogCosh(tg.Function):
    """A broken ``LogCosh``: ``backward`` uses ``tanh(x)`` computed in ``forward``.

    That array is a constant to every outer transform, so ``grad`` is right but
    ``grad(grad(...))`` would be zero instead of ``1 - tanh(x)^2``. Never do this; at order 2
    tapegrad raises a ``TypeError`` naming the rule (and ``check_grads`` would catch it).
    """

    oper = "bad_logcosh"

    @staticmethod
    def forward(ctx, x):
        xp = ctx.backend
        ctx.slope = xp.tanh(x)  # BUG: not an input or output, so not traced in backward
        a = xp.abs(x)
        return a + xp.log1p(xp.exp(-2 * a)) - xp.log(2).astype(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return tg.Tensor(ctx.slope) * g


def logcosh(x):
    """``log(cosh(x))`` of a Tensor or array (float32 or float64), same shape and dtype."""
    return LogCosh.apply(tnp.asarray(x))


def check_examples() -> None:
    """Fixed checks: values, first and second derivatives, the rule caught when broken."""
    x = tg.Tensor(np.array([-800.0, -2.0, -0.3, 0.0, 0.7, 3.0, 800.0]))
    # Forward against NumPy where cosh does not overflow, and the asymptote |x| - log 2.
    got = logcosh(x).numpy()
    np.testing.assert_allclose(got[1:-1], np.log(np.cosh(x.numpy()[1:-1])), rtol=1e-12)
    np.testing.assert_allclose(got[[0, -1]], 800.0 - np.log(2.0), rtol=1e-15)
    # Gradients by hand: d/dx log cosh x = tanh x; d2/dx2 = 1 - tanh(x)^2.
    g1 = tg.grad(lambda v: logcosh(v).sum())(x).numpy()
    np.testing.assert_allclose(g1, np.tanh(x.numpy()), rtol=1e-12)
    second = tg.grad(tg.grad(lambda s: logcosh(s)))(tg.Tensor(np.float64(0.7))).item()
    np.testing.assert_allclose(second, 1 - np.tanh(0.7) ** 2, rtol=1e-12)
    print("LogCosh: values and hand-derived derivatives match")

    # check_grads: reverse mode vs central finite differences, orders 1 and 2, in float64.
    rng = np.random.default_rng(0)
    a = tg.Tensor(rng.normal(size=(3, 4)))
    check_grads(lambda v: Square.apply(v), (a,), order=2)
    check_grads(logcosh, (a,), order=2)
    check_grads(lambda v, w: logcosh(v * w).sum(), (a, tg.Tensor(rng.normal(size=(4,)))), order=2)
    print("check_grads(order=2): Square and LogCosh pass (also composed with broadcasting)")

    # The broken rule: order 1 passes, order 2 is caught.
    bad = lambda v: BadLogCosh.apply(v)  # noqa: E731
    check_grads(bad, (a,), order=1)
    try:
        check_grads(bad, (a,), order=2)
    except (AssertionError, TypeError) as e:  # TypeError: tapegrad refuses the rule itself
        print(f"check_grads caught BadLogCosh at order 2, as it should: {str(e)[:90]}...")
    else:
        raise SystemExit("BadLogCosh passed the order-2 check: the check is not doing its job")


def property_test(max_examples: int, interrupt=None) -> int:
    """Run a hypothesis property test of LogCosh programmatically; returns examples tried.

    ``interrupt`` (a ``stop_on_interrupt``): after Ctrl-C the next example raises
    ``KeyboardInterrupt``, from the test itself (Ctrl-C's own ``KeyboardInterrupt`` can land in
    hypothesis's garbage-collector callback, which Python ignores).
    """
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tapegrad.testing import strategies as tst

    count = [0]

    @settings(max_examples=max_examples, derandomize=True, deadline=None, database=None)
    @given(
        data=st.data(),
        shape=tst.shapes(max_dims=3, max_side=4),  # (), size-1 and size-0 dimensions included
        dtype=st.sampled_from([np.float32, np.float64]),
    )
    def logcosh_matches_numpy_and_finite_differences(data, shape, dtype):
        if interrupt is not None and interrupt.requested:
            raise KeyboardInterrupt
        x = data.draw(tst.arrays(shape, dtype, tst.floats_in(-20.0, 20.0, width=32)))
        y = logcosh(x)
        assert y.shape == x.shape and y.dtype == x.dtype
        ref = np.log(np.cosh(x.astype(np.float64)))
        tol = 1e-6 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(y.numpy(), ref, rtol=tol, atol=tol)
        if x.size:  # gradients in float64 (check_grads converts), orders 1 and 2
            check_grads(logcosh, (tg.Tensor(x),), order=2)
        count[0] += 1

    logcosh_matches_numpy_and_finite_differences()  # calling a @given test runs it
    return count[0]


def finite_difference_errors(eps_grid):
    """|central difference - tg.grad| of sum(logcosh) at fixed points, for each step ``eps``.

    The classic V: truncation error ``O(eps^2)`` on the right, rounding ``O(1/eps)`` on the
    left; check_grads uses ``eps=1e-4``, near the bottom.
    """
    x = np.linspace(-2.0, 2.0, 9)
    exact = tg.grad(lambda v: logcosh(v).sum())(tg.Tensor(x)).numpy()
    errs = []
    for eps in eps_grid:
        num = (logcosh(tg.Tensor(x + eps)).numpy() - logcosh(tg.Tensor(x - eps)).numpy()) / (
            2 * eps
        )
        errs.append(float(np.max(np.abs(num - exact))))
    return np.asarray(errs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description="Verify a user-defined tapegrad Function with check_grads and a hypothesis "
        "property test; shows a broken rule being caught.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--examples", type=int, default=200, help="hypothesis examples to draw")
    p.add_argument("--quick", action="store_true", help="fewer hypothesis examples (CI)")
    p.add_argument(
        "--plot", default=None, metavar="PATH", help="write the finite-difference error curve"
    )
    args = p.parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:  # Ctrl-C: the shell's status for SIGINT, no traceback
        return interrupted(args)


def run(args) -> int:
    """The checks of :func:`main`; returns its exit status."""
    n = min(args.examples, 25) if args.quick else args.examples
    t0 = time.perf_counter()
    with stop_on_interrupt(verbose=False) as interrupt:  # Ctrl-C: stop before the next check
        check_examples()
        tried = property_test(0 if interrupt.requested else n, interrupt)
    if interrupt.requested:
        raise KeyboardInterrupt
    print(f"hypothesis: {tried} drawn examples passed (shapes, float32/float64, orders 1-2)")
    if args.plot:
        eps = np.logspace(-12, -1, 45)
        plot_curves(
            args.plot,
            {"max |central difference - grad|": (eps, finite_difference_errors(eps))},
            title="finite-difference error of d/dx logcosh (float64)",
            ylabel="absolute error",
            xlabel="step eps",
            log=True,
        )
    print(f"all gradient checks passed in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
