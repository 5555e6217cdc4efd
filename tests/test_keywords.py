"""No constructor of tapegrad.nn or tapegrad.optim drops a keyword it does not know.

The harness walks every public class (and every public function of tapegrad.optim: the
factories and tree helpers) and every keyword each one declares, misspells it, and checks that
the call is a TypeError naming both the misspelt keyword and the valid one it was closest to;
a foreign keyword is refused too. It needs no valid arguments: the keyword check comes first.
"""

import difflib
import inspect

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn, optim
from tapegrad.nn import layers, lm, module
from tapegrad.optim import combinators, optimizer, schedules, transforms

MODULES = (nn, layers, module, lm, optim, transforms, combinators, schedules, optimizer)

# Documented exceptions, each with its reason.
OPEN_BY_DESIGN = {
    nn.Identity,  # PyTorch's nn.Identity is argument-insensitive: it stands in for any layer
    optim.Optimizer,  # the base class: tested below (transform= plus nothing else)
    optim.apply_gradients,  # Optax's extra-args protocol: each goes to the transformations
    # whose update names it, the others never see it (tests/optim: extra arguments)
}


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _public():
    seen = {}
    for mod in MODULES:
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if isinstance(obj, type) or (inspect.isfunction(obj) and mod in
                                         (optim, transforms, combinators, schedules, optimizer)):
                seen[obj] = f"{mod.__name__}.{name}"
    # classes reachable only as subclasses (defined in tapegrad, not private)
    for base in (nn.Module, optim.Optimizer, optim.GradientTransformation):
        for sub in _subclasses(base):
            if sub.__module__.startswith("tapegrad.") and not sub.__name__.startswith("_"):
                seen.setdefault(sub, f"{sub.__module__}.{sub.__name__}")
    return [(label, obj) for obj, label in seen.items()
            if not inspect.isabstract(obj) and obj not in OPEN_BY_DESIGN]


PUBLIC = _public()


def _keywords(obj):
    target = obj.__init__ if isinstance(obj, type) else obj
    params = list(inspect.signature(target).parameters.values())
    if isinstance(obj, type):
        params = params[1:]  # self
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in params if p.kind in kinds], params


def _misspellings(name):
    """Typos of ``name``: a letter dropped, doubled, or two neighbours swapped."""
    out = [name + name[-1], name + "s"]
    for i in range(1, len(name)):
        out.append(name[:i] + name[i + 1:])
        out.append(name[:i] + name[i] + name[i:])
        if i + 1 < len(name):
            out.append(name[:i] + name[i + 1] + name[i] + name[i + 2:])
    return [m for m in dict.fromkeys(out) if m != name]


def test_the_harness_sees_the_classes_of_the_issue():
    labels = {obj for _, obj in PUBLIC}
    for cls in (nn.Linear, nn.Conv2d, nn.BatchNorm, nn.LayerNorm, nn.Embedding, nn.Dropout,
                nn.ReLU, nn.GRU, nn.Sequential, optim.SGD, optim.Adam, optim.AdamW,
                optim.Lion, optim.MultiSteps, optim.CosineScheduler, transforms.Trace,
                schedules.LinearSchedule, optim.sgd, optim.adam, optim.masked):
        assert cls in labels, cls
    assert len(PUBLIC) > 80


@pytest.mark.parametrize("label,obj", PUBLIC, ids=[label for label, _ in PUBLIC])
def test_every_misspelt_keyword_is_refused_naming_the_closest(label, obj):
    names, params = _keywords(obj)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params), (
        f"{label} takes **kwargs: an unknown keyword would be dropped"
    )
    who = obj.__name__
    with pytest.raises(TypeError, match=f"{who}: unexpected keyword argument 'zz_not_an_option'"):
        obj(zz_not_an_option=1)
    for name in names:
        if name.startswith("_"):
            continue
        typos = [m for m in _misspellings(name)
                 if m not in names and difflib.get_close_matches(m, names, n=1) == [name]]
        assert typos, name
        for typo in typos[:2]:
            with pytest.raises(TypeError) as info:
                obj(**{typo: None})
            msg = str(info.value)
            assert f"unexpected keyword argument {typo!r}" in msg, msg
            assert f"did you mean {name!r}?" in msg, msg


def test_the_issue_cases_are_refused():
    params = {"w": tg.Tensor(np.ones(2))}
    cases = [
        (lambda: optim.SGD(params, lr=0.1, momentun=0.9), "momentun", "momentum"),
        (lambda: nn.Linear(2, 3, bais=False), "bais", "bias"),
        (lambda: nn.Conv2d(1, 2, 3, dtyp=np.float64), "dtyp", "dtype"),
    ]
    for make, bad, good in cases:
        with pytest.raises(TypeError, match=f"'{bad}'; did you mean '{good}'"):
            make()


def test_pytorch_names_spelt_differently_here_are_explained():
    with pytest.raises(TypeError, match="'in_features' \\(PyTorch's name; here it is input_size"):
        nn.Linear(in_features=2, out_features=3)
    with pytest.raises(TypeError, match="'max_norm' \\(a PyTorch option tapegrad does not"):
        nn.Embedding(3, 2, max_norm=1.0)
    with pytest.raises(TypeError, match="'foreach' \\(a PyTorch implementation switch"):
        optim.Adam({"w": tg.Tensor(np.ones(2))}, lr=0.1, foreach=True)
    with pytest.raises(TypeError, match="transform= is for the base Optimizer"):
        optim.Adam({"w": tg.Tensor(np.ones(2))}, lr=0.1, transform=lambda lr: optim.sgd(lr))


def test_base_optimizer_with_transform_takes_no_other_hyperparameter():
    params = {"w": tg.Tensor(np.ones(2))}
    with pytest.raises(TypeError, match="Optimizer: unexpected keyword argument 'momentum' "
                       "\\(the update is transform\\(lr\\) alone"):
        optim.Optimizer(params, lr=0.1, transform=lambda lr: optim.sgd(lr), momentum=0.9)
    with pytest.raises(TypeError, match="'max_grad_nrom'; did you mean 'max_grad_norm'"):
        optim.Optimizer(params, lr=0.1, transform=lambda lr: optim.sgd(lr), max_grad_nrom=1.0)


def test_identity_stays_argument_insensitive_as_pytorch():
    assert nn.Identity(54, unused_argument1=0.1)(tg.Tensor([1.0])).numpy().tolist() == [1.0]


def test_user_modules_get_the_same_check():
    class Net(nn.Module):
        def __init__(self, hidden_size, *, key=None):
            super().__init__()
            self.layer = nn.Linear(2, hidden_size, key=key)

        def forward(self, x):
            return self.layer(x)

    with pytest.raises(TypeError, match="Net: unexpected keyword argument 'hiden_size'; did you "
                       "mean 'hidden_size'"):
        Net(hiden_size=3)
    assert Net(3).layer.output_size == 3


def test_loss_functions_refuse_unknown_keywords():
    p, y = tg.Tensor([0.2, 0.7]), [0.0, 1.0]
    F = nn.functional
    for fn in (F.mean_squared_loss, F.binary_cross_entropy, F.binary_cross_entropy_with_logits,
               F.hinge_loss):
        with pytest.raises(TypeError, match="'reductoin'; did you mean 'reduction'"):
            fn(p, y, reductoin="sum")
    with pytest.raises(TypeError, match="'pos_weight' \\(PyTorch's positive-class weight is not"):
        F.binary_cross_entropy_with_logits(p, y, pos_weight=tg.Tensor([2.0]))


def test_jit_options_are_checked_too():
    with pytest.raises(TypeError, match="jit: unexpected keyword argument 'static_argnum'; did "
                       "you mean 'static_argnums'"):
        tg.jit(lambda x: x, static_argnum=0)
