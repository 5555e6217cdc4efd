"""Module, ModuleList and functional_call: the seeds' API, state dicts, the pure bridge."""

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F


class MyModule(nn.Module):
    def forward(self, x):
        return x * 2


class Net(nn.Module):
    def __init__(self, key=None):
        super().__init__()
        k1, k2 = tg.random.split(tg.random.key(0) if key is None else key)
        self.fc = nn.Linear(3, 4, key=k1)
        self.bn = nn.BatchNorm(4)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(4, 2, key=k2)

    def forward(self, x):
        return self.head(self.drop(F.relu(self.bn(self.fc(x)))))


def test_seeds_module_examples():
    m = MyModule()
    np.testing.assert_array_equal(m(tg.Tensor(np.array([1, 2, 3]))).numpy(), [2, 4, 6])
    ml = nn.ModuleList([MyModule(), MyModule()])
    assert [m.forward(tg.Tensor(np.array([1]))).numpy().tolist() for m in ml] == [[2], [2]]
    ml.append(MyModule())
    assert len(ml) == 3
    with pytest.raises(TypeError, match="expected a Module"):
        ml.append(3)
    with pytest.raises(NotImplementedError, match="must define forward"):
        nn.Module()(1)


def test_parameters_states_and_counts():
    net = Net()
    assert sorted(net.parameters) == [
        "bn.bias",
        "bn.weight",
        "fc.bias",
        "fc.weight",
        "head.bias",
        "head.weight",
    ]
    assert sorted(net.states) == ["bn.running_mean", "bn.running_var"]
    assert net.num_parameters() == 3 * 4 + 4 + 4 + 4 + 4 * 2 + 2
    assert set(net.params) == {"fc", "bn", "drop", "head"}
    assert net.params["drop"] == {}
    assert set(net.state["bn"]) == {"running_mean", "running_var"}
    sd = net.state_dict()
    assert set(sd) == {"parameters", "states"}
    assert isinstance(sd["parameters"]["fc.weight"], np.ndarray)


def test_train_eval_apply_and_zero_grad():
    net = Net()
    assert net.training and net.bn.training
    net.eval()
    assert not net.training and not net.drop.training
    net.train()
    assert net.fc.training
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "BatchNorm", "Dropout", "Linear", "Net"]
    net.grads = {"x": 1}
    net.zero_grad()
    assert net.grads is None


def test_super_init_is_required():
    class Bad(nn.Module):
        def __init__(self):
            self.w = tg.Tensor([1.0])

    with pytest.raises(RuntimeError, match="call super\\(\\).__init__\\(\\)"):
        Bad()


def test_state_dict_round_trip():
    a, b = Net(tg.random.key(1)), Net(tg.random.key(2))
    x = tg.random.normal(tg.random.key(3), (5, 3))
    a(x)  # updates a's running statistics
    b.load_state_dict(a.state_dict())
    for name, v in a.parameters.items():
        np.testing.assert_array_equal(v.numpy(), b.parameters[name].numpy())
    for name, v in a.states.items():
        np.testing.assert_array_equal(v.numpy(), b.states[name].numpy())
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_load_state_dict_errors_list_every_problem():
    net = Net()
    sd = net.state_dict()
    del sd["parameters"]["fc.bias"]
    sd["parameters"]["extra.weight"] = np.zeros(2)
    sd["parameters"]["head.weight"] = np.zeros((3, 3))
    with pytest.raises(ValueError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "missing parameters: fc.bias" in msg
    assert "unexpected parameters: extra.weight" in msg
    assert "head.weight: checkpoint (3, 3), module (4, 2)" in msg
    before = net.parameters["fc.weight"].numpy().copy()
    np.testing.assert_array_equal(net.parameters["fc.weight"].numpy(), before)  # nothing loaded
    with pytest.raises(ValueError, match="shape mismatch"):
        net.load_state_dict(sd, strict=False)
    del sd["parameters"]["head.weight"]
    sd["parameters"]["fc.weight"] = np.ones((3, 4))
    net.load_state_dict(sd, strict=False)  # loads the matching keys, ignores the rest
    np.testing.assert_array_equal(net.fc.weight.numpy(), np.ones((3, 4)))
    assert net.fc.weight.dtype == np.float32
    with pytest.raises(TypeError, match="expected a dict"):
        net.load_state_dict({"weights": {}})
    with pytest.raises(ValueError, match="missing group 'states'"):
        net.load_state_dict({"parameters": net.state_dict()["parameters"]})


def test_params_setter_validates_structure_and_shapes():
    net = Net()
    new = tg.tree.tree_map(lambda t: t * 0.0, net.params)
    net.params = new
    assert float(net.fc.weight.sum()) == 0.0
    bad = net.params
    bad["fc"]["weight"] = tg.Tensor(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="fc.weight has shape \\(2, 2\\), expected \\(3, 4\\)"):
        net.params = bad
    with pytest.raises(ValueError, match="missing \\['head'\\]"):
        net.params = {k: v for k, v in net.params.items() if k != "head"}


def test_functional_call_grad_is_pure_and_matches_manual_grad():
    model = nn.Linear(3, 2, key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (4, 3))
    y = tg.random.normal(tg.random.key(2), (4, 2))
    before = {k: v.numpy().copy() for k, v in model.parameters.items()}

    def loss(p):
        return F.mse_loss(nn.functional_call(model, p, x)[0], y)

    g = tg.grad(loss)(model.params)
    w, b = model.weight.numpy(), model.bias.numpy()
    r = x.numpy() @ w + b - y.numpy()
    np.testing.assert_allclose(g["weight"].numpy(), 2 * x.numpy().T @ r / r.size, rtol=1e-5)
    np.testing.assert_allclose(g["bias"].numpy(), 2 * r.sum(0) / r.size, rtol=1e-5)
    for k, v in model.parameters.items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_functional_call_returns_batchnorm_state_and_needs_key_for_dropout():
    net = Net()
    x = tg.random.normal(tg.random.key(4), (6, 3))
    with pytest.raises(ValueError, match="pass key=tg.random.key"):
        nn.functional_call(net, net.params, x)
    key = tg.random.key(9)
    out, state = nn.functional_call(net, net.params, x, key=key)
    out2, _ = nn.functional_call(net, net.params, x, key=key)
    np.testing.assert_array_equal(out.numpy(), out2.numpy())
    assert not np.allclose(state["bn"]["running_mean"].numpy(), 0)
    np.testing.assert_array_equal(net.bn.running_mean.numpy(), np.zeros(4))  # module untouched

    def loss(p):
        o, s = nn.functional_call(net, p, x, key=key)
        return (o * o).sum(), s

    (g, new_state) = tg.grad(loss, has_aux=True)(net.params)
    assert g["fc"]["weight"].shape == (3, 4)
    np.testing.assert_allclose(
        new_state["bn"]["running_mean"].numpy(), state["bn"]["running_mean"].numpy()
    )
    net.eval()
    out_e, state_e = nn.functional_call(net, net.params, x)  # eval: no randomness, no update
    assert state_e["bn"]["running_mean"] is net.bn.running_mean
    with pytest.raises(ValueError, match="structure does not match"):
        nn.functional_call(net, {"fc": net.params["fc"]}, x)


def test_stateful_batchnorm_inside_grad_stores_concrete_values():
    net = Net()
    x = tg.random.normal(tg.random.key(4), (6, 3))
    tg.grad(lambda inp: net(inp).sum())(x)  # stateful call inside a transform
    rm = net.bn.running_mean
    assert not rm.is_traced
    np.testing.assert_allclose(
        rm.numpy(), 0.1 * F.linear(x, net.fc.weight, net.fc.bias).numpy().mean(0), rtol=1e-5
    )
    net(x)  # the stored value is usable afterwards (no leaked tracer)


def test_dropout_module_keys_advance_in_stateful_use():
    d = nn.Dropout(0.5, key=tg.random.key(0))
    x = tg.Tensor(np.ones((20, 20), np.float32))
    a, b = d(x), d(x)
    assert not np.array_equal(a.numpy(), b.numpy())
    d2 = nn.Dropout(0.5, key=tg.random.key(0))
    np.testing.assert_array_equal(d2(x).numpy(), a.numpy())


def test_optimizer_built_from_a_module_writes_parameters_back():
    from tapegrad import optim

    model = nn.Linear(3, 1, key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (8, 3))
    y = tg.random.normal(tg.random.key(2), (8, 1))
    opt = optim.SGD(model, lr=0.1)
    w0 = model.weight.numpy().copy()

    def loss(p):
        return F.mse_loss(nn.functional_call(model, p, x)[0], y)

    grads = tg.grad(loss)(model.params)
    opt.step(grads)
    np.testing.assert_allclose(model.weight.numpy(), w0 - 0.1 * grads["weight"].numpy(), rtol=1e-6)
    assert opt.params["weight"] is model.weight
    with pytest.raises(ValueError, match="weight has shape"):
        model._set_params({"weight": tg.Tensor(np.zeros((1, 1), np.float32)), "bias": model.bias})


# -- PyTorch's names: parameters(), named_parameters(), Sequential ---------------------------
def test_parameters_call_iterates_the_pytree_leaves_in_order():
    net = Net()
    leaves = tg.tree.tree_leaves(net.params)
    assert [id(p) for p in net.parameters()] == [id(p) for p in leaves]
    names = [n for n, _ in net.named_parameters()]
    assert names == list(net.parameters)  # the seeds' flat dict, same order
    assert names == ["bn.bias", "bn.weight", "fc.bias", "fc.weight", "head.bias", "head.weight"]
    net.eval()
    grads = tg.grad(lambda p: F.mse_loss(nn.functional_call(net, p, X)[0], 0.0))(net.params)
    for (name, p), g in zip(net.named_parameters(), tg.tree.tree_leaves(grads)):
        assert g.shape == p.shape, name  # named_parameters zips with a gradient pytree
    assert [n for n, _ in net.named_parameters(prefix="model")][0] == "model.bn.bias"
    assert list(net.named_parameters(recurse=False)) == []
    assert list(net.parameters(recurse=False)) == []
    lin = nn.Linear(2, 3, bias=False)
    assert [n for n, _ in lin.named_parameters()] == ["weight"]  # a None bias is no leaf
    assert list(lin.parameters(recurse=False)) == [lin.weight]
    it = net.parameters()
    assert iter(it) is it and next(it) is leaves[0]
    assert sum(p.size for p in net.parameters()) == net.num_parameters()


X = tg.Tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))


def test_optimizer_from_parameters_iterator_updates_the_module():
    """PyTorch's ``optim.SGD(model.parameters(), lr)`` writes the new values back."""
    from tapegrad import optim

    model = nn.Sequential(nn.Linear(3, 4, key=tg.random.key(0)), nn.Tanh(), nn.Linear(4, 1))
    y = tg.random.normal(tg.random.key(2), (5, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    w0 = model[0].weight.numpy().copy()
    grads = tg.grad(lambda p: F.mse_loss(nn.functional_call(model, p, X)[0], y))(model.params)
    opt.step(grads)
    expected = w0 - 0.1 * grads["0"]["weight"].numpy()
    np.testing.assert_allclose(model[0].weight.numpy(), expected, rtol=1e-6)


def test_parameters_view_is_a_dict_and_a_pytree():
    """``model.parameters`` (the seeds' flat dict) flattens like a dict, not as one leaf."""
    net = Net()
    view = net.parameters
    assert isinstance(view, dict) and view["fc.weight"] is net.fc.weight
    assert tg.tree.tree_leaves(view) == [view[k] for k in sorted(view)]
    doubled = tg.tree.tree_map(lambda p: p * 2, view)
    assert type(doubled) is dict and sorted(doubled) == sorted(view)
    np.testing.assert_array_equal(doubled["head.bias"].numpy(), 2 * net.head.bias.numpy())


def test_optimizer_from_the_parameters_dict_updates_the_module():
    """The seeds' ``Adam(model.parameters, lr)`` trains the module too."""
    from tapegrad import optim

    model = nn.Sequential(nn.Linear(3, 1, key=tg.random.key(0)))
    y = tg.random.normal(tg.random.key(2), (5, 1))
    opt = optim.SGD(model.parameters, lr=0.1)
    w0 = model[0].weight.numpy().copy()
    grads = tg.grad(lambda p: F.mse_loss(nn.functional_call(model, p, X)[0], y))(model.params)
    opt.step(grads)
    expected = w0 - 0.1 * grads["0"]["weight"].numpy()
    np.testing.assert_allclose(model[0].weight.numpy(), expected, rtol=1e-6)


def test_sequential_applies_in_order_with_pytorch_names():
    k1, k2 = tg.random.split(tg.random.key(0))
    seq = nn.Sequential(nn.Linear(3, 4, key=k1), nn.ReLU(), nn.Linear(4, 2, key=k2))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU)
    ref = F.linear(F.relu(F.linear(X, seq[0].weight, seq[0].bias)), seq[2].weight, seq[2].bias)
    np.testing.assert_array_equal(seq(X).numpy(), ref.numpy())
    assert sorted(seq.parameters) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert set(seq.params) == {"0", "1", "2"} and seq.params["1"] == {}
    grads = tg.grad(lambda p: nn.functional_call(seq, p, X)[0].sum())(seq.params)
    assert grads["2"]["weight"].shape == (4, 2)
    head = seq[1:]
    assert isinstance(head, nn.Sequential) and [type(m) for m in head] == [nn.ReLU, nn.Linear]
    assert sorted(head.parameters) == ["2.bias", "2.weight"]  # slicing keeps the names
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and np.all((seq(X).numpy() > 0) & (seq(X).numpy() < 1))
    assert "(3): Sigmoid()" in repr(seq)


def test_sequential_from_a_dict_and_errors():
    from collections import OrderedDict

    seq = nn.Sequential(OrderedDict([("hidden", nn.Linear(3, 4)), ("act", nn.GELU())]))
    assert list(seq._modules) == ["hidden", "act"]
    assert sorted(seq.parameters) == ["hidden.bias", "hidden.weight"]
    assert seq(X).shape == (5, 4)
    with pytest.raises(TypeError, match="Sequential: entry '1' must be a Module, got function"):
        nn.Sequential(nn.ReLU(), F.relu)
    with pytest.raises(ValueError, match="must not contain '.'"):
        nn.Sequential({"a.b": nn.ReLU()})
    with pytest.raises(TypeError, match="names must be non-empty strings"):
        nn.Sequential({"": nn.ReLU()})
    with pytest.raises(TypeError, match="must be a Module"):
        nn.Sequential().append(3)
    assert nn.Sequential()(X) is X


def test_modules_iterates_every_submodule():
    net = Net()
    assert [type(m).__name__ for m in net.modules()] == [
        "Net",
        "Linear",
        "BatchNorm",
        "Dropout",
        "Linear",
    ]


# -- AbstractLLMForwardFn --------------------------------------------------------------------
class _NextToken(nn.AbstractLLMForwardFn):
    def train(self, model, batch_data):
        return model(batch_data)

    def sample(self, model, batch_data):
        return model(batch_data)[:, -1]


def test_llm_forward_fn_dispatches_on_mode():
    embed = nn.Embedding(7, 7, key=tg.random.key(0))
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    fn = _NextToken()
    np.testing.assert_array_equal(fn(embed, ids).numpy(), embed(ids).numpy())  # "train"
    np.testing.assert_array_equal(fn(embed, ids, mode="train").numpy(), embed(ids).numpy())
    np.testing.assert_array_equal(fn(embed, ids, "sample").numpy(), embed(ids).numpy()[:, -1])
    # the model may be a pure function of the inputs, so it composes with grad
    g = tg.grad(lambda p: fn(lambda x: nn.functional_call(embed, p, x)[0], ids).sum())(embed.params)
    assert g["weight"].shape == (7, 7)
    with pytest.raises(ValueError, match="_NextToken: mode must be one of .* got 'eval'"):
        fn(embed, ids, mode="eval")


def test_llm_forward_fn_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        nn.AbstractLLMForwardFn()

    class OnlyTrain(nn.AbstractLLMForwardFn):
        def train(self, model, batch_data):
            return model(batch_data)

    with pytest.raises(TypeError, match="abstract"):
        OnlyTrain()


def test_sequential_parameter_names_match_torch():
    torch = pytest.importorskip("torch")
    ours = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Conv1d(4, 2, 3), nn.GroupNorm(1, 2))
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Conv1d(4, 2, 3), torch.nn.GroupNorm(1, 2)
    )
    assert sorted(n for n, _ in ours.named_parameters()) == sorted(
        n for n, _ in theirs.named_parameters()
    )
