"""A jitted function calling a stateful Module sees its current parameters and states, and its
randomness advances as eagerly: eager and jit agree after any number of optimizer steps."""

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn, optim

X = tg.Tensor(np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32))


def _net(p=0.5):
    return nn.Sequential(
        nn.Linear(3, 8, key=tg.random.key(0)), nn.BatchNorm(8), nn.ReLU(),
        nn.Dropout(p, key=tg.random.key(1)), nn.Linear(8, 2, key=tg.random.key(2)),
    )


def _grads(model, seed):
    return tg.grad(lambda p: (nn.functional_call(model, p, X, key=tg.random.key(seed))[0]
                              ** 2).sum())(model.params)


def _equal(a, b):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("how", ["closure", "static"])
def test_eager_and_jit_agree_over_optimizer_steps_train_and_eval(how):
    model, twin = _net(), _net()
    if how == "closure":
        fast = tg.jit(lambda x: model(x))
    else:
        fast = tg.jit(lambda m, x: m(x), static_argnums=0)
    opt, opt_twin = optim.Adam(model, lr=0.05), optim.Adam(twin, lr=0.05)
    call = (lambda: fast(X)) if how == "closure" else (lambda: fast(model, X))
    for step in range(4):  # new parameters, new running statistics, a new dropout mask
        _equal(call(), twin(X))
        g = _grads(model, step)
        opt.step(g)
        opt_twin.step(g)
    for a, b in zip(tg.tree.tree_leaves(model.state), tg.tree.tree_leaves(twin.state)):
        _equal(a, b)
    model.eval()
    twin.eval()
    for _ in range(2):
        _equal(call(), twin(X))
    model.train()
    twin.train()
    _equal(call(), twin(X))
    assert fast.cache_size() == 2  # one program per mode, reused across the steps


def test_dropout_draws_a_new_mask_at_every_call_as_eagerly():
    drop, twin = nn.Dropout(0.5, key=tg.random.key(3)), nn.Dropout(0.5, key=tg.random.key(3))
    fast = tg.jit(lambda x: drop(x))
    x = tg.Tensor(np.ones((4, 8), np.float32))
    masks = []
    for _ in range(4):
        got = fast(x)
        _equal(got, twin(x))
        masks.append(got.numpy())
    assert not all(np.array_equal(masks[0], m) for m in masks[1:])
    _equal(drop._rng, twin._rng)  # the keys advanced alike


def test_a_jitted_training_step_reads_and_writes_the_model():
    model, twin = _net(0.0), _net(0.0)

    def loss(params, x):
        out = nn.functional_call(model, params, x)[0]
        return (out ** 2).mean()

    step = tg.jit(lambda x: tg.value_and_grad(loss)(model.params, x))
    opt, opt_twin = optim.SGD(model, lr=0.1), optim.SGD(twin, lr=0.1)
    for _ in range(3):
        value, g = step(X)
        value_t, g_t = tg.value_and_grad(
            lambda p, x: (nn.functional_call(twin, p, x)[0] ** 2).mean())(twin.params, X)
        _equal(value, value_t)
        opt.step(g)
        opt_twin.step(g_t)
    assert step.cache_size() == 1


def test_assigned_parameters_and_a_changed_structure_are_seen():
    lin = nn.Linear(3, 2, key=tg.random.key(0))
    fast = tg.jit(lambda x: lin(x))
    fast(X)
    lin.params = tg.tree.tree_map(lambda p: p * 2.0, lin.params)
    _equal(fast(X), lin(X))
    lin.weight = tg.Tensor(np.ones((3, 2), np.float32))  # the same shape: the same program
    _equal(fast(X), lin(X))
    assert fast.cache_size() == 1
    lin.weight = tg.Tensor(np.ones((3, 2)))  # float64: recorded again
    _equal(fast(X), lin(X))
    lin.bias = None
    _equal(fast(X), lin(X))
    seq = nn.Sequential(nn.Linear(3, 2, key=tg.random.key(1)))
    fast_seq = tg.jit(lambda x: seq(x))
    fast_seq(X)
    seq.append(nn.ReLU())
    _equal(fast_seq(X), seq(X))


def test_a_states_update_inside_jit_is_written_back():
    bn, twin = nn.BatchNorm(3), nn.BatchNorm(3)
    fast = tg.jit(lambda x: bn(x))
    for k in range(3):
        x = tg.Tensor(np.random.default_rng(k).normal(size=(5, 3)).astype(np.float32))
        _equal(fast(x), twin(x))
        _equal(bn.running_mean, twin.running_mean)
        _equal(bn.running_var, twin.running_var)
        assert not bn.running_mean.is_traced


def test_a_failed_recording_leaves_the_model_as_it_was():
    bn = nn.BatchNorm(3)
    before = bn.running_mean

    def bad(x):
        bn(x)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tg.jit(bad)(tg.Tensor(np.ones((4, 3), np.float32)))
    assert bn.running_mean is before and not bn.running_mean.is_traced


def test_an_optimizer_step_inside_jit_is_refused_with_the_fix():
    model = nn.Linear(3, 2, key=tg.random.key(0))
    opt = optim.SGD(model, lr=0.1)

    def train(x):
        g = tg.grad(lambda p: nn.functional_call(model, p, x)[0].sum())(model.params)
        opt.step(g)

    with pytest.raises(TypeError, match="SGD.step inside tg.jit.*optim.apply_gradients"):
        tg.jit(train)(X)


def test_state_traced_by_an_outer_transform_is_differentiated():
    lin = nn.Linear(3, 1, key=tg.random.key(0))
    fast = tg.jit(lambda x: lin(x).sum())
    fast(X)

    def loss(w):
        lin.weight = w  # the model holds a value grad traces
        return fast(X)

    w0 = lin.weight
    g = tg.grad(loss)(w0)
    lin.weight = w0
    np.testing.assert_allclose(g.numpy(), np.tile(X.numpy().sum(0)[:, None], (1, 1)),
                               rtol=1e-6)


def test_an_optimizer_s_parameters_read_inside_jit_are_current():
    params = {"w": tg.Tensor(np.ones(3, np.float32))}
    opt = optim.Adam(params, lr=0.1)
    loss = tg.jit(lambda x: (x @ opt.params["w"]).sum())
    for _ in range(3):
        np.testing.assert_array_equal(loss(X).numpy(), (X @ opt.params["w"]).sum().numpy())
        opt.step({"w": tg.Tensor(np.ones(3, np.float32))})
    assert loss.cache_size() == 1


def test_an_optimizer_s_learning_rate_and_state_read_inside_jit_are_current():
    params = {"w": tg.Tensor(np.ones(3))}
    opt = optim.Adam(params, lr=0.1)
    scaled = tg.jit(lambda x: (x * opt.lr, opt.timestep, opt.opt_state[1]["mu"]["w"] * 1.0))
    x = tg.Tensor(np.ones(3))
    opt.step({"w": tg.Tensor(np.ones(3))})
    for lr in (0.1, 0.05, 0.02):
        opt.lr = lr
        out, t, mu = scaled(x)
        np.testing.assert_array_equal(out.numpy(), (x * lr).numpy())
        assert int(t) == opt.timestep
        np.testing.assert_array_equal(mu.numpy(), opt.opt_state[1]["mu"]["w"].numpy())
        opt.step({"w": tg.Tensor(np.ones(3))})
    assert scaled.cache_size() == 1


def test_assigning_a_state_keeps_it_a_state():
    bn = nn.BatchNorm(3)
    bn.running_mean = tg.Tensor(np.ones(3, np.float32))
    assert sorted(bn.states) == ["running_mean", "running_var"]
    assert sorted(bn.parameters) == ["bias", "weight"]


def test_toggling_the_mode_reuses_programs_and_changes_drop_the_old_ones():
    model = _net()
    fast = tg.jit(lambda x: model(x))
    for _ in range(4):
        model.train()
        fast(X)
        model.eval()
        fast(X)
    assert fast.cache_size() == 2
    for k in range(4):
        model[1].momentum = 0.1 * (k + 1)  # a hyperparameter: recorded again, old one dropped
        _equal(fast(X), model(X))
    assert fast.cache_size() <= 2
