"""Fit the parameters of an ODE through its integrator, written with ``tg.scan``.

A damped oscillator ``x'' = -k x - c x'`` is integrated with the classical Runge-Kutta
method (RK4) for a few hundred steps. The integrator is one ``tg.scan``: its step is traced
once and every transform goes through it, so ``tg.jit(tg.value_and_grad(loss))`` compiles a
program whose size does not depend on the number of steps (a Python ``for`` loop would put
every step on the tape). Gradient descent then recovers ``k`` and ``c`` from a noisy
trajectory made with known values.

A second part integrates until the oscillator's energy falls below a threshold, with
``tg.while_loop`` (the number of steps depends on the parameters), and differentiates the
final state with respect to ``c`` in reverse mode.

Run:  python examples/ode_scan.py [--quick] [--steps 400] [--iters 300] [--plot fit.png]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import plot_curves  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

DT = 0.05


def rk4_step(theta, state):
    """One RK4 step of ``x'' = -k x - c x'`` (``state = [x, v]``, ``theta = [k, c]``)."""
    k, c = theta[0], theta[1]

    def f(s):
        return tnp.stack([s[1], -k * s[0] - c * s[1]])

    a = f(state)
    b = f(state + 0.5 * DT * a)
    d = f(state + 0.5 * DT * b)
    e = f(state + DT * d)
    return state + DT / 6.0 * (a + 2.0 * b + 2.0 * d + e)


def trajectory(theta, state0, steps: int):
    """The positions after each of ``steps`` RK4 steps: one scan."""
    def step(s, _):
        s = rk4_step(theta, s)
        return s, s[0]

    return tg.scan(step, state0, None, length=steps)[1]


def loss(theta, state0, observed):
    return tnp.mean((trajectory(theta, state0, observed.shape[0]) - observed) ** 2)


def settle(theta, state0, energy: float = 1e-2):
    """Integrate until the energy ``(v^2 + k x^2) / 2`` falls below ``energy``: a
    while_loop whose trip count depends on ``theta``. Returns the state and the step count."""
    def not_settled(carry):
        s, _ = carry
        return 0.5 * (s[1] * s[1] + theta[0] * s[0] * s[0]) > energy

    def step(carry):
        s, n = carry
        return rk4_step(theta, s), n + 1

    return tg.while_loop(not_settled, step, (state0, tg.Tensor(0)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a short run (for tests and CI)")
    p.add_argument("--steps", type=int, default=400, help="RK4 steps per trajectory")
    p.add_argument("--iters", type=int, default=300, help="gradient-descent iterations")
    p.add_argument("--lr", type=float, default=0.5, help="step size")
    p.add_argument("--seed", type=int, default=0, help="seed of the observation noise")
    p.add_argument("--plot", default=None, help="save the loss curve to this image file")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.iters = 100, 60
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    true = tg.Tensor(np.array([4.0, 0.3]))
    state0 = tg.Tensor(np.array([1.0, 0.0]))
    clean = trajectory(true, state0, args.steps).numpy()
    observed = tg.Tensor(clean + 0.01 * rng.normal(size=clean.shape))

    step = tg.jit(tg.value_and_grad(loss))
    theta = tg.Tensor(np.array([3.0, 0.1]))
    t0 = time.perf_counter()
    value, g = step(theta, state0, observed)
    first = time.perf_counter() - t0
    print(f"{args.steps} RK4 steps in one scan; jitted value_and_grad first call {first:.2f} s; "
          f"program steps: {step.lower(theta, state0, observed).steps}")
    losses = []
    for i in range(args.iters):
        value, g = step(theta, state0, observed)
        theta = theta - args.lr * g
        losses.append(float(value))
        if i % max(args.iters // 5, 1) == 0:
            print(f"iter {i:4d}  loss {float(value):.3e}  k {float(theta[0]):.3f}  "
                  f"c {float(theta[1]):.3f}")
    print(f"fitted k = {float(theta[0]):.3f}, c = {float(theta[1]):.3f} "
          f"(true 4.000, 0.300); final loss {losses[-1]:.3e}")

    (s, n) = settle(theta, state0)
    d_theta = tg.grad(lambda th: settle(th, state0)[0][0])(theta)
    print(f"settled after {int(n)} steps at x = {float(s[0]):.4f}; "
          f"d x_final / d (k, c) = ({float(d_theta[0]):.4f}, {float(d_theta[1]):.4f})")
    if args.plot:
        plot_curves(args.plot, {"loss": losses}, "ODE fit through tg.scan", "mean squared error",
                    xlabel="iteration", log=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
