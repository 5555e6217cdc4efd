"""Transforms pause Python's cyclic garbage collector while they run, and always restore it."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.tape import gc_paused


@pytest.fixture(autouse=True)
def _gc_on():
    was = gc.isenabled()
    gc.enable()
    prev = tg.set_gc_pause(True)
    yield
    tg.set_gc_pause(prev)
    if not was:
        gc.disable()


def _probe(seen):
    def f(x):
        seen.append(gc.isenabled())
        return (tnp.tanh(x) * x).sum()

    return f


@pytest.mark.parametrize(
    "transform",
    [
        lambda f, x: tg.grad(f)(x),
        lambda f, x: tg.value_and_grad(f)(x),
        lambda f, x: tg.vjp(f, x)[1](tg.Tensor(1.0, dtype="float64")),
        lambda f, x: tg.jvp(f, (x,), (tnp.ones_like(x),)),
        lambda f, x: tg.hessian(f)(x),
    ],
)
def test_collector_paused_inside_and_restored_after(transform):
    seen = []
    x = tg.Tensor(np.linspace(-1.0, 1.0, 5))
    transform(_probe(seen), x)
    assert seen and not any(seen)  # paused while the function ran
    assert gc.isenabled()  # and back on afterwards


def test_restored_after_an_exception():
    def bad(x):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        tg.grad(bad)(tg.Tensor(1.0))
    assert gc.isenabled()


def test_left_off_if_it_was_off():
    gc.disable()
    try:
        tg.grad(lambda x: (x * x).sum())(tg.Tensor([1.0, 2.0]))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_set_gc_pause_false_leaves_the_collector_alone():
    seen = []
    assert tg.set_gc_pause(False) is True
    tg.grad(_probe(seen))(tg.Tensor([0.5, 1.5]))
    assert seen == [True]
    assert tg.set_gc_pause(True) is False


def test_set_gc_pause_rejects_non_bool():
    with pytest.raises(TypeError, match="set_gc_pause: enabled must be a bool"):
        tg.set_gc_pause(1)


def test_turning_the_pause_off_midway_keeps_the_count_balanced():
    with gc_paused():
        assert not gc.isenabled()
        tg.set_gc_pause(False)
        with gc_paused():  # not counted: must not re-enable on exit
            pass
        assert not gc.isenabled()
        tg.set_gc_pause(True)
    assert gc.isenabled()


def test_nested_and_threaded_transforms_restore_once():
    barrier = threading.Barrier(4)
    errors = []

    def work():
        try:
            barrier.wait()
            for _ in range(20):
                g = tg.grad(tg.grad(lambda x: (tnp.sin(x) * x).sum()))(tg.Tensor(0.3))
                np.testing.assert_allclose(float(g), 2 * np.cos(0.3) - 0.3 * np.sin(0.3))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert gc.isenabled()


def test_cyclic_garbage_made_inside_is_collected_afterwards():
    import weakref

    refs = []

    class Node:
        pass

    def f(x):
        a, b = Node(), Node()
        a.other, b.other = b, a  # a reference cycle: only the cyclic collector frees it
        refs.append(weakref.ref(a))
        return (x * x).sum()

    tg.grad(f)(tg.Tensor([1.0]))
    gc.collect()
    assert refs[0]() is None


def test_saved_tensors_outside_backward_is_a_clear_error():
    ctx = tg.Context()
    with pytest.raises(RuntimeError, match="only available in backward"):
        _ = ctx.saved_tensors


class _Probe(tg.Function):
    """Identity whose backward records whether the collector is on."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        _Probe.seen.append(gc.isenabled())
        return g


@pytest.mark.parametrize("n_ops, paused", [(1, False), (8, False), (9, True), (40, True)])
def test_pullback_pauses_only_replays_long_enough_to_matter(n_ops, paused):
    def f(x):
        for _ in range(n_ops):
            x = _Probe.apply(x)
        return x

    _, vjp_fn = tg.vjp(f, tg.Tensor(np.ones(3)))
    _Probe.seen = []
    vjp_fn(tg.Tensor(np.ones(3)))
    assert _Probe.seen == [not paused] * n_ops
    assert gc.isenabled()
