"""Modules are pytrees (Equinox style) under the PyTorch-style shell.

Every layer class flattens to its arrays and rebuilds from them; transforms take models
(``grad`` returns a model-shaped gradient equal to the gradient over ``model.params`` and to
PyTorch's; ``jit`` and ``vmap`` take and return models); the shell's optimizers accept
model-shaped gradients; ``tree_at``/``partition``/``combine`` edit and split models.
"""

import inspect

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import nn, optim
from tapegrad.nn import functional as F
from tapegrad.nn.module import _NOT_STATIC

KEY = tg.random.key(0)

# Small valid values for the required constructor arguments of every layer.
REQUIRED = {
    "input_size": 4, "output_size": 2, "in_channels": 2, "out_channels": 2, "kernel_size": 2,
    "hidden_size": 4, "embedding_size": 3, "num_heads": 2, "normalized_shape": 4,
    "num_groups": 2, "num_channels": 4,
    "upscale_factor": 2, "downscale_factor": 2, "padding": 1, "value": 0.5,
    "num_features": 4, "in1_features": 2, "in2_features": 3, "out_features": 2, "dim": 1,
    "unflattened_size": (2, 2), "num_embeddings": 5, "embedding_dim": 3, "embed_dim": 4,
    "d_model": 4, "nhead": 2, "num_layers": 2,
    "encoder_layer": nn.TransformerEncoderLayer(4, 2, 8, key=KEY),
    "decoder_layer": nn.TransformerDecoderLayer(4, 2, 8, key=KEY),
}  # fmt: skip


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


# every Module class of tapegrad.nn, found by walking the subclasses: a new layer is covered
LAYERS = sorted(
    {c for c in _subclasses(nn.Module)
     if c.__module__.startswith("tapegrad.nn") and not c.__name__.startswith("_")},
    key=lambda c: c.__name__,
)  # fmt: skip


def build(cls):
    """An instance of ``cls`` with small arguments (and a key where it takes one)."""
    if cls is nn.Sequential:
        return nn.Sequential(nn.Linear(4, 3, key=KEY), nn.Tanh(), nn.Linear(3, 2, key=KEY))
    if cls is nn.ModuleList:
        return nn.ModuleList([nn.Linear(4, 4, key=KEY), nn.ReLU()])
    params = inspect.signature(cls).parameters
    kwargs = {n: REQUIRED[n] for n, p in params.items()
              if p.default is inspect.Parameter.empty
              and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}  # fmt: skip
    if "key" in params:
        kwargs["key"] = KEY
    return cls(**kwargs)


def _arrays_of(m):
    """ids of every array a Module holds: parameters, states and keys, all submodules."""
    out = set()
    for _, sub in m.named_modules():
        d = sub.__dict__
        out |= {id(v) for v in (*d["_parameters"].values(), *d["_states"].values(), d["_rng"])
                if v is not None}
    return out


def test_every_layer_class_is_found():
    names = {c.__name__ for c in LAYERS}
    assert {"Linear", "BatchNorm", "GRU", "Sequential", "ModuleList", "MultiHeadAttention",
            "Dropout", "ReLU"} <= names
    assert len(LAYERS) >= 35


@pytest.mark.parametrize("cls", LAYERS, ids=lambda c: c.__name__)
def test_every_layer_flattens_to_its_arrays_and_rebuilds(cls):
    m = build(cls)
    leaves, treedef = tg.tree.tree_flatten(m)
    # the leaves are exactly the arrays: parameters, states, keys; configuration is static
    assert all(isinstance(v, tg.Tensor) for v in leaves)
    assert {id(v) for v in leaves} == _arrays_of(m) and len(leaves) == len(_arrays_of(m))
    back = tg.tree.tree_unflatten(treedef, leaves)
    assert type(back) is cls and back is not m
    assert tg.tree.tree_structure(back) == treedef
    assert all(a is b for a, b in zip(tg.tree.tree_leaves(back), leaves, strict=True))
    for (_, a), (_, b) in zip(m.named_modules(), back.named_modules(), strict=True):
        static_a = {k: v for k, v in a.__dict__.items() if k not in _NOT_STATIC}
        static_b = {k: v for k, v in b.__dict__.items() if k not in _NOT_STATIC}
        assert static_a.keys() == static_b.keys()
        assert all(static_b[k] is v for k, v in static_a.items())
        assert list(a._modules) == list(b._modules) and list(a._parameters) == list(b._parameters)
    assert back.params.keys() == m.params.keys() and list(back.parameters) == list(m.parameters)
    assert repr(back) == repr(m)  # the configuration it prints is all there
    # paths are the dotted names of the shell
    paths = tg.tree.tree_paths(m, "m")
    assert {f"m.{n}" for n in m.parameters} <= set(paths)
    # rebuilt from its own leaves, a Module is an ordinary stateful one again
    assert not back._functional


CALLS = {  # an input for the layers whose output the rebuilt copy must reproduce
    "Linear": (4,), "Sequential": (4,), "ModuleList": (4,), "LayerNorm": (4,),
    "RMSNorm": (4,), "BatchNorm": (4,), "GroupNorm": (4, 3), "Conv1d": (2, 5),
    "Conv2d": (2, 5, 5), "ConvTranspose2d": (2, 3, 3), "GRU": (3, 4), "LSTM": (3, 4),
    "RNN": (3, 4), "GRUCell": (4,), "RNNCell": (4,), "Tanh": (3,), "GELU": (3,),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_rebuilt_layer_computes_what_the_original_does(name):
    m = build(getattr(nn, name)).eval()
    x = tg.random.normal(tg.random.key(1), (2, *CALLS[name]))
    leaves, treedef = tg.tree.tree_flatten(m)
    back = tg.tree.tree_unflatten(treedef, leaves)
    for a, b in zip(tg.tree.tree_leaves(m(x)), tg.tree.tree_leaves(back(x)), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    jitted = tg.jit(lambda m, x: m(x))
    for a, b in zip(tg.tree.tree_leaves(m(x)), tg.tree.tree_leaves(jitted(m, x)), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


# -- grad over a model --------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, key, activation=F.tanh):
        super().__init__()
        k1, k2 = tg.random.split(key)
        self.hidden = nn.Linear(3, 5, key=k1, dtype=np.float64)
        self.out = nn.Linear(5, 2, key=k2, dtype=np.float64)
        self.activation = activation  # a static field
        self.sizes = [3, 5, 2]  # an unhashable static field

    def forward(self, x):
        return self.out(self.activation(self.hidden(x)))


def _mse(model, x, y):
    return F.mse_loss(model(x), y)


def test_grad_over_a_model_is_model_shaped_and_equals_the_params_grad_and_torch():
    torch = pytest.importorskip("torch")
    model = MLP(tg.random.key(3))
    x = tg.random.normal(tg.random.key(4), (6, 3), np.float64)
    y = tg.random.normal(tg.random.key(5), (6, 2), np.float64)
    grads = tg.grad(_mse)(model, x, y)
    assert type(grads) is MLP and type(grads.hidden) is nn.Linear
    assert grads.activation is F.tanh and grads.sizes is model.sizes
    assert grads.hidden._rng is None and grads.out._rng is None  # keys: no gradient
    by_params = tg.grad(lambda p: F.mse_loss(nn.functional_call(model, p, x)[0], y))(
        model.params)
    for a, b in zip(tg.tree.tree_leaves(grads.params), tg.tree.tree_leaves(by_params),
                    strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # the same MLP in PyTorch (its Linear weight is our weight transposed)
    lin1, lin2 = torch.nn.Linear(3, 5).double(), torch.nn.Linear(5, 2).double()
    with torch.no_grad():
        for lin, ours in ((lin1, model.hidden), (lin2, model.out)):
            lin.weight.copy_(torch.tensor(ours.weight.numpy().T))
            lin.bias.copy_(torch.tensor(ours.bias.numpy()))
    out = lin2(torch.tanh(lin1(torch.tensor(x.numpy()))))
    loss = torch.nn.functional.mse_loss(out, torch.tensor(y.numpy()))
    loss.backward()
    np.testing.assert_allclose(float(_mse(model, x, y)), loss.item(), rtol=1e-13)
    for lin, g in ((lin1, grads.hidden), (lin2, grads.out)):
        np.testing.assert_allclose(g.weight.numpy(), lin.weight.grad.numpy().T, rtol=1e-12)
        np.testing.assert_allclose(g.bias.numpy(), lin.bias.grad.numpy(), rtol=1e-12)


def test_grad_holds_keys_and_integer_states_and_differentiates_float_states():
    net = nn.Sequential(nn.Linear(3, 4, key=KEY), nn.BatchNorm(4, momentum=None))
    net(tg.random.normal(KEY, (8, 3)))  # one stateful step: counter 1
    x = tg.random.normal(tg.random.key(1), (8, 3))
    grads = tg.grad(lambda m: (m(x) ** 2).sum())(net)
    bn = grads[1]
    assert bn.num_batches_tracked is None and grads[0]._rng is None
    assert np.all(bn.running_mean.numpy() == 0)  # training mode: the running mean is unused
    assert int(net[1].num_batches_tracked.numpy()) == 1  # the model itself did not change
    net.eval()
    grads = tg.grad(lambda m: (m(x) ** 2).sum())(net)
    assert np.any(grads[1].running_mean.numpy() != 0)  # eval mode reads it: a real gradient
    # value_and_grad with has_aux returns the model the forward left (its new state)
    net.train()

    def loss(m):
        return (m(x) ** 2).sum(), m

    (_, after), _ = tg.value_and_grad(loss, has_aux=True)(net)
    assert int(after[1].num_batches_tracked.numpy()) == 2
    assert int(net[1].num_batches_tracked.numpy()) == 1
    # a plain tree with an integer leaf is still refused, pointing to filter_grad
    with pytest.raises(TypeError, match=r"params\['n'\].*tg.filter_grad"):
        tg.grad(lambda params: params["w"].sum())({"w": tg.Tensor([1.0]), "n": np.array(2)})


def test_vjp_over_a_model_gives_none_for_keys():
    model = nn.Linear(2, 2, key=KEY)
    out, vjp_fn = tg.vjp(lambda m: m(tnp.ones((1, 2))), model)
    (ct,) = vjp_fn(tnp.ones_like(out))
    assert type(ct) is nn.Linear and ct._rng is None and ct.weight.shape == (2, 2)


# -- jit and vmap take and return models -------------------------------------------------------
def test_jit_takes_models_and_compiles_once_per_structure():
    calls = []

    def predict(model, x):
        calls.append(1)
        return model(x)

    fast = tg.jit(predict)
    x = tg.random.normal(KEY, (4, 3), np.float64)
    a, b = MLP(tg.random.key(1)), MLP(tg.random.key(2))
    for m in (a, b, a):
        np.testing.assert_allclose(fast(m, x).numpy(), m(x).numpy(), rtol=1e-12)
    assert len(calls) == 1 and fast.cache_size() == 1
    fast(MLP(tg.random.key(1), activation=F.relu), x)  # another static field: compiles again
    fast(a.eval(), x)  # another mode: compiles again
    assert len(calls) == 3


def test_jit_returns_a_model_with_its_updated_state():
    net = nn.Sequential(nn.Linear(3, 4, key=KEY), nn.BatchNorm(4))
    twin = nn.Sequential(nn.Linear(3, 4, key=KEY), nn.BatchNorm(4))
    step = tg.jit(lambda m, x: (m(x), m))
    for i in range(3):
        x = tg.random.normal(tg.random.key(i), (8, 3))
        out, net = step(net, x)  # the pure form: the new state comes back in the model
        np.testing.assert_allclose(out.numpy(), twin(x).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(net[1].running_mean.numpy(), twin[1].running_mean.numpy(),
                                   rtol=1e-5, atol=1e-7)
    assert type(net) is nn.Sequential and step.cache_size() == 1


def test_jit_of_grad_over_a_closed_over_model_reads_its_current_parameters():
    model = MLP(tg.random.key(1))
    twin = MLP(tg.random.key(1))
    x = tg.random.normal(KEY, (4, 3), np.float64)
    y = tg.random.normal(tg.random.key(9), (4, 2), np.float64)
    grad_fn = tg.jit(lambda x: tg.grad(_mse)(model, x, y))  # the model is closed over
    opt, opt_twin = optim.SGD(model, lr=0.5), optim.SGD(twin, lr=0.5)
    for _ in range(3):
        g, g_twin = grad_fn(x), tg.grad(_mse)(twin, x, y)
        np.testing.assert_allclose(g.out.weight.numpy(), g_twin.out.weight.numpy(), rtol=1e-12)
        opt.step(g)  # model-shaped gradients: the optimizer takes the parameters' part
        opt_twin.step(g_twin)
    assert grad_fn.cache_size() == 1


def test_vmap_over_an_ensemble_of_stacked_models():
    members = [MLP(tg.random.key(i)) for i in range(3)]
    ensemble = tg.tree.tree_map(lambda *leaves: tnp.stack(leaves), *members)
    assert type(ensemble) is MLP and ensemble.hidden.weight.shape == (3, 3, 5)
    x = tg.random.normal(KEY, (4, 3), np.float64)
    y = tg.random.normal(tg.random.key(9), (4, 2), np.float64)
    outs = tg.vmap(lambda m, x: m(x), in_axes=(0, None))(ensemble, x)
    for i, m in enumerate(members):
        np.testing.assert_allclose(outs.numpy()[i], m(x).numpy(), rtol=1e-12)
    # in_axes given as a model-shaped tree, and per-member gradients of the ensemble
    axes = tg.tree.tree_map(lambda _: 0, ensemble)
    grads = tg.vmap(tg.grad(_mse), in_axes=(axes, None, None))(ensemble, x, y)
    assert type(grads) is MLP and grads.out.weight.shape == (3, 5, 2)
    for i, m in enumerate(members):
        np.testing.assert_allclose(grads.out.weight.numpy()[i],
                                   tg.grad(_mse)(m, x, y).out.weight.numpy(), rtol=1e-10)
    # the ensemble's members come back out with tree_map
    second = tg.tree.tree_map(lambda v: v[1], ensemble)
    np.testing.assert_allclose(second(x).numpy(), members[1](x).numpy(), rtol=1e-12)


# -- the pure form does not touch the model; the shell keeps working on the result ----------------
def test_tree_map_builds_a_new_model_and_leaves_the_old_one_alone():
    model = MLP(tg.random.key(1))
    before = [v.numpy().copy() for v in tg.tree.tree_leaves(model)]
    version = model._version
    zero = tg.tree.tree_map(lambda v: v * 0 if v.dtype.kind == "f" else v, model)
    assert zero is not model and model._version == version
    for v, b in zip(tg.tree.tree_leaves(model), before, strict=True):
        np.testing.assert_array_equal(v.numpy(), b)
    # the new model is an ordinary stateful Module: call it, train it, save it
    x = tg.random.normal(KEY, (4, 3), np.float64)
    assert np.all(zero(x).numpy() == 0)
    opt = optim.SGD(zero, lr=1.0)
    opt.step(tg.tree.tree_map(lambda g: g + 1.0, tg.grad(_mse)(zero, x, x[:, :2])))
    assert np.all(zero.hidden.bias.numpy() != 0) and zero.state_dict()["parameters"]
    assert zero.hidden.weight is not model.hidden.weight


def test_optimizer_step_takes_model_shaped_gradients():
    a, b = MLP(tg.random.key(1)), MLP(tg.random.key(1))
    x = tg.random.normal(KEY, (4, 3), np.float64)
    y = tg.random.normal(tg.random.key(9), (4, 2), np.float64)
    opt_a, opt_b = optim.Adam(a, lr=0.1), optim.Adam(b.parameters(), lr=0.1)
    for _ in range(3):
        opt_a.step(tg.grad(_mse)(a, x, y))
        opt_b.step(tg.grad(lambda p: F.mse_loss(nn.functional_call(b, p, x)[0], y))(b.params))
    for u, v in zip(tg.tree.tree_leaves(a), tg.tree.tree_leaves(b), strict=True):
        np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-12)
    opt_a.zero_grad()
    opt_a.accumulate_grads(tg.grad(_mse)(a, x, y))
    opt_a.accumulate_grads(tg.grad(_mse)(a, x, y))
    assert opt_a.grads["out"]["weight"].shape == (5, 2)


def test_the_pure_optax_loop_on_a_model():
    model = MLP(tg.random.key(1))
    x = tg.random.normal(KEY, (16, 3), np.float64)
    y = tg.random.normal(tg.random.key(9), (16, 2), np.float64)
    tx = optim.adam(0.05)
    opt_state = tx.init(tg.tree.filter(model, tg.tree.is_inexact_array))

    @tg.jit
    def step(model, opt_state):
        loss, grads = tg.value_and_grad(_mse)(model, x, y)
        params = tg.tree.filter(model, tg.tree.is_inexact_array)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optim.apply_updates(model, updates), opt_state, loss

    first = float(_mse(model, x, y))
    model, opt_state, loss = step(model, opt_state)  # the step count becomes a Tensor
    compiled = step.cache_size()
    for _ in range(60):
        model, opt_state, loss = step(model, opt_state)
    assert type(model) is MLP and float(loss) < 0.5 * first
    assert step.cache_size() == compiled + 1  # one program for the steps after the first
    assert model.hidden._rng is not None  # the key rode along unchanged
    with pytest.raises(TypeError, match="optimizers need floating leaves"):
        tx.init(model)  # the key is no parameter: filter first


def test_apply_updates_keeps_the_leaves_whose_update_is_none():
    params = {"w": tg.Tensor(np.ones(2)), "key": tg.random.key(1), "b": None}
    new = optim.apply_updates(params, {"w": tg.Tensor(np.ones(2)), "key": None, "b": None})
    assert new["key"] is params["key"] and new["b"] is None
    np.testing.assert_array_equal(new["w"].numpy(), [2.0, 2.0])
    with pytest.raises(TypeError, match="different pytree structures"):
        optim.apply_updates(params, {"w": tg.Tensor(np.ones(2))})


# -- tree_at, partition and combine on models ----------------------------------------------------
def test_tree_at_replaces_a_weight_or_a_submodule_out_of_place():
    model = MLP(tg.random.key(1))
    w = tg.Tensor(np.zeros((5, 2)))
    new = tg.tree.tree_at(lambda m: m.out.weight, model, replace=w)
    assert new.out.weight is w and model.out.weight is not w
    assert new.hidden.weight is model.hidden.weight and new.activation is F.tanh
    head = nn.Linear(5, 2, key=tg.random.key(7), dtype=np.float64)
    swapped = tg.tree.tree_at(lambda m: m.out, model, replace=head)
    assert swapped.out is head and model.out is not head
    x = tg.random.normal(KEY, (2, 3), np.float64)
    np.testing.assert_allclose(swapped(x).numpy(), head(F.tanh(model.hidden(x))).numpy())
    scaled = tg.tree.tree_at(lambda m: (m.hidden.bias, m.out.bias), model,
                             replace_fn=lambda b: b + 1.0)
    np.testing.assert_allclose(scaled.out.bias.numpy(), model.out.bias.numpy() + 1.0)
    no_bias = tg.tree.tree_at(lambda m: m.out.bias, model, replace=None)
    assert no_bias.out.bias is None and no_bias(x).shape == (2, 2)
    with pytest.raises(TypeError, match="not a node of the tree"):
        tg.tree.tree_at(lambda m: m.params["out"], model, replace={})


def test_partition_and_combine_split_a_model_into_arrays_and_the_rest():
    model = nn.Sequential(nn.Linear(3, 4, key=KEY), nn.BatchNorm(4, momentum=None))
    params, static = tg.tree.partition(model, tg.tree.is_inexact_array)
    assert params[0]._rng is None and params[1].num_batches_tracked is None
    assert static[0].weight is None and static[0]._rng is model[0]._rng
    back = tg.tree.combine(params, static)
    assert type(back) is nn.Sequential
    assert all(a is b for a, b in zip(tg.tree.tree_leaves(back), tg.tree.tree_leaves(model),
                                      strict=True))
    x = tg.random.normal(KEY, (5, 3))
    grads = tg.grad(lambda p: (tg.tree.combine(p, static)(x) ** 2).sum())(params)
    np.testing.assert_array_equal(grads[0].weight.numpy(),
                                  tg.grad(lambda m: (m(x) ** 2).sum())(model)[0].weight.numpy())


def test_filter_grad_and_filter_jit_on_a_model():
    model = MLP(tg.random.key(1))
    x = tg.random.normal(KEY, (4, 3), np.float64)
    y = tg.random.normal(tg.random.key(9), (4, 2), np.float64)
    g = tg.filter_grad(_mse)(model, x, y)
    want = tg.grad(_mse)(model, x, y)
    np.testing.assert_array_equal(g.out.weight.numpy(), want.out.weight.numpy())
    f = tg.filter_jit(lambda m, x: m(x))
    np.testing.assert_allclose(f(model, x).numpy(), model(x).numpy(), rtol=1e-12)


# -- randomness in a model a transform takes ------------------------------------------------------
def test_dropout_in_a_model_given_to_a_transform_needs_a_key_stream():
    net = nn.Sequential(nn.Linear(4, 4, key=KEY), nn.Dropout(0.5))
    x = tg.random.normal(KEY, (3, 4))
    with pytest.raises(ValueError, match=r"Dropout draws random numbers.*key_stream"):
        tg.grad(lambda m: m(x).sum())(net)

    def loss(m, key):
        with nn.key_stream(key):
            return (m(x) ** 2).sum()

    a = tg.grad(loss)(net, tg.random.key(1))
    b = tg.grad(loss)(net, tg.random.key(1))
    c = tg.grad(loss)(net, tg.random.key(2))
    np.testing.assert_array_equal(a[0].weight.numpy(), b[0].weight.numpy())
    assert not np.array_equal(a[0].weight.numpy(), c[0].weight.numpy())
    jitted = tg.jit(loss)
    np.testing.assert_allclose(float(jitted(net, tg.random.key(1))),
                               float(loss(net, tg.random.key(1))), rtol=1e-6)
    with pytest.raises(TypeError, match="key must be a key"):
        with nn.key_stream(None):
            pass
    # a Module someone holds is never marked: parts placed into a value are copies
    drop = nn.Dropout(0.5)

    def swapped(m, key):
        with nn.key_stream(key):
            return (tg.tree.tree_at(lambda m: m[1], m, replace=drop)(x) ** 2).sum()

    tg.grad(swapped)(net, tg.random.key(3))
    assert not drop._functional and not net[1]._functional
    # the stateful shell is unchanged: a closed-over model draws from its own key
    assert tg.grad(lambda w: (net(x) * w).sum())(tg.Tensor(1.0)).shape == ()


# -- functional_call: one shape of result ---------------------------------------------------------
def test_functional_call_always_returns_output_and_new_state():
    lin = nn.Linear(3, 2, key=KEY)
    x = tg.random.normal(KEY, (4, 3))
    out, state = nn.functional_call(lin, lin.params, x)
    assert out.shape == (4, 2) and state == {}
    seq = nn.Sequential(lin, nn.ReLU())
    out, state = nn.functional_call(seq, seq.params, x)
    assert state == {"0": {}, "1": {}}
    gru = nn.GRU(3, 4, key=KEY)
    (output, h_n), state = nn.functional_call(gru, gru.params, x[:, None])  # a tuple output
    assert output.shape == (4, 1, 4) and h_n.shape == (1, 1, 4) and state == {}
    bn = nn.BatchNorm(3)
    out, state = nn.functional_call(bn, bn.params, x)
    assert set(state) == {"running_mean", "running_var"}


def test_a_plain_attribute_does_not_hide_a_submodule_assigned_later():
    class Lazy(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = None
            self.head = nn.Linear(2, 3, key=KEY)
            self.w = 1.0
            self.register_parameter("w", tg.Tensor(np.ones(2)))

    m = Lazy()
    assert isinstance(m.head, nn.Linear) and "head" in m.params
    assert isinstance(m.w, tg.Tensor) and "w" in m.params


def test_forward_mode_and_jacobians_name_a_models_key_and_take_its_arrays():
    model = nn.Linear(2, 2, key=KEY, dtype=np.float64)
    x = tg.Tensor(np.ones((3, 2)))

    def loss(m):
        return (m(x) ** 2).sum()

    for make in (tg.jacrev, tg.jacfwd, tg.hessian):
        with pytest.raises(TypeError, match=r"primals\[0\]\._rng.*uint32.*tg.tree.partition"):
            make(loss)(model)
    with pytest.raises(TypeError, match=r"primals\[0\]\._rng"):
        tg.jvp(loss, (model,), (model,))
    params, static = tg.tree.partition(model, tg.tree.is_inexact_array)
    jac = tg.jacrev(lambda p: loss(tg.tree.combine(p, static)))(params)
    np.testing.assert_allclose(jac.weight.numpy(), tg.grad(loss)(model).weight.numpy())
    assert type(tg.grad(lambda m: tg.checkpoint(loss)(m))(model)) is nn.Linear
