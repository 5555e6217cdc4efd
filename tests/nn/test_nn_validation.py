"""Every layer checks its arguments where it is built, with an error that names the layer and
the argument (never a bare NumPy or Python message from deep inside, never a silent
coercion such as ``bias="no"`` meaning True)."""

import inspect

import numpy as np
import pytest

from tapegrad import nn

# Valid values for the required arguments, so that one argument at a time can be made bad.
REQUIRED = {
    "input_size": 4, "output_size": 2, "in_channels": 2, "out_channels": 2, "kernel_size": 2,
    "hidden_size": 4, "embedding_size": 3, "num_heads": 2, "normalized_shape": 4,
    "num_groups": 2, "num_channels": 4,
    "upscale_factor": 2, "downscale_factor": 2, "padding": 1, "value": 0.5,
    "num_features": 4, "in1_features": 2, "in2_features": 3, "out_features": 2, "dim": 1,
    "unflattened_size": (2, 2), "num_embeddings": 5, "embedding_dim": 3, "embed_dim": 4,
    "d_model": 4, "nhead": 2, "num_layers": 2,
    "encoder_layer": nn.TransformerEncoderLayer(4, 2, 8),
    "decoder_layer": nn.TransformerDecoderLayer(4, 2, 8),
}  # fmt: skip
# Arguments that take any object, or a structure checked where the layer is called.
NOT_CHECKED = {"key", "padding", "output_size", "modules", "approximate"}

LAYERS = [c for c in (getattr(nn, n) for n in nn.__all__)
          if isinstance(c, type) and issubclass(c, nn.Module)
          and c not in (nn.Module, nn.ModuleList, nn.Sequential, nn.Identity)]


def _args(cls):
    return [p for p in inspect.signature(cls).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _build(cls, **overrides):
    kwargs = {p.name: REQUIRED[p.name] for p in _args(cls)
              if p.default is inspect.Parameter.empty}
    kwargs.update(overrides)
    return cls(**kwargs)


CASES = [(cls, p.name) for cls in LAYERS for p in _args(cls)
         if p.name not in NOT_CHECKED or (p.name == "output_size" and
                                          p.default is inspect.Parameter.empty)]


@pytest.mark.parametrize("cls,name", CASES, ids=[f"{c.__name__}.{n}" for c, n in CASES])
def test_a_bad_argument_names_the_layer_and_the_argument(cls, name):
    _build(cls)  # the defaults are valid
    for bad in ("x", -3, 2.5, [object()]):
        try:
            _build(cls, **{name: bad})
        except (TypeError, ValueError, NotImplementedError) as e:
            msg = str(e)
            assert msg.startswith(f"{cls.__name__}: "), msg
            assert name in msg or (name == "eps" and "eps" in msg), msg
        else:
            if bad == "x" or isinstance(bad, list):
                pytest.fail(f"{cls.__name__}({name}={bad!r}) was accepted")


def test_flags_are_bools_not_truthy_values():
    for make in (lambda: nn.Linear(2, 3, bias="no"), lambda: nn.GRU(2, 3, batch_first=1),
                 lambda: nn.AvgPool2d(2, count_include_pad="False")):
        with pytest.raises(TypeError, match="must be a bool"):
            make()
    assert nn.Linear(2, 3, bias=np.bool_(False)).bias is None


def test_pytorch_positional_padding_is_pointed_to():
    with pytest.raises(TypeError, match="5th positional argument here is padding_mode: pass "
                       "padding=1"):
        nn.Conv2d(3, 8, 3, 1, 1)
    with pytest.raises(TypeError, match="pass padding=1"):
        nn.MaxPool2d(2, 2, 1)
