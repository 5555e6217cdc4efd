"""The character transformer of ``char_transformer.py``, built from PyTorch's layer names.

The same data (the Python standard library's docstrings), the same training loop, optimizer,
schedule and GPT-2 style initialization as ``char_transformer.py``; only the model differs: it
is written the way a PyTorch user writes it, with ``nn.Embedding`` for tokens and positions,
an ``nn.TransformerEncoder`` of pre-LayerNorm ``nn.TransformerEncoderLayer`` blocks
(``batch_first=True``, ``norm_first=True``, GELU, no dropout) run with the causal mask of
``nn.Transformer.generate_square_subsequent_mask``, and an ``nn.Linear`` head. Its parameters
carry PyTorch's names (``encoder.layers.0.self_attn.in_proj_weight``, ...), so a
``torch.nn`` twin of this model could load them (``load_torch_state_dict`` goes the other way).

It reports the validation loss in bits per character beside the unigram baseline, as
``char_transformer.py`` does; with the same flags the two land within a few percent of each
other.

Run:  python examples/char_transformer_layers.py          (a few minutes on one CPU core)
      python examples/char_transformer_layers.py --quick  (CI: must end below the baseline)
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import char_transformer as base  # noqa: E402
from _common import run_main  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad import nn  # noqa: E402


class CharTransformerLayers(nn.Module):
    """Decoder-only transformer over characters from PyTorch-named layers: ``(B, T)`` int ids
    -> ``(B, T, vocab)`` logits.

    Args:
        key: Init key. vocab: Number of characters. context: Longest sequence ``T``.
        dim: Model width. heads: Attention heads (divide ``dim``). layers: Encoder layers.
    """

    def __init__(self, key, vocab: int, context: int, dim: int, heads: int, layers: int):
        super().__init__()
        k_tok, k_pos, k_layer, k_head = tg.random.split(key, 4)
        self.context = context
        self.tok = nn.Embedding(vocab, dim, key=k_tok)
        self.pos = nn.Embedding(context, dim, key=k_pos)
        block = nn.TransformerEncoderLayer(
            d_model=dim, nhead=heads, dim_feedforward=4 * dim, dropout=0.0,
            activation="gelu", batch_first=True, norm_first=True, key=k_layer,
        )
        self.encoder = nn.TransformerEncoder(block, num_layers=layers, norm=nn.LayerNorm(dim))
        self.head = nn.Linear(dim, vocab, key=k_head)

    def forward(self, idx):
        t = idx.shape[-1]
        x = self.tok(idx) + self.pos(np.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        x = self.encoder(x, mask=mask, is_causal=True)
        return self.head(x)


def scaled_init(model: CharTransformerLayers, key) -> dict:
    """``char_transformer.py``'s GPT-2 style initialization under these layers' names:
    N(0, 0.02) weights (the residual projections ``out_proj`` and ``linear2`` scaled by
    ``1/sqrt(2 * layers)``), zero biases, unit LayerNorm gains. Returns a params pytree of
    ``model.params``' structure (layers without parameters, such as ``Dropout``, keep their
    empty entries)."""
    n_layers = len(model.encoder.layers)
    names = sorted(model.parameters)
    keys = dict(zip(names, tg.random.split(key, len(names))))

    def init(tree, prefix=""):
        out = {}
        for part, p in tree.items():
            name = prefix + part
            if isinstance(p, dict):
                out[part] = init(p, name + ".")
            elif p is None or (".norm" in name and part == "weight"):  # LayerNorm gains: 1
                out[part] = p
            elif part.endswith("bias"):
                out[part] = tnp.zeros(p.shape, dtype=p.dtype)
            else:
                residual = name.endswith(("out_proj.weight", "linear2.weight"))
                std = 0.02 / math.sqrt(2 * n_layers) if residual else 0.02
                out[part] = tg.random.normal(keys[name], p.shape, p.dtype, std=std)
        return out

    return init(model.params)


def build_model(args, vocab: int, key_model, key_init):
    """This example's model and its initial params pytree (for ``char_transformer.train``)."""
    model = CharTransformerLayers(key_model, vocab, args.context, args.dim, args.heads,
                                  args.layers)
    return model, scaled_init(model, key_init)


def train(args) -> dict:
    """``char_transformer.train`` with this model; see there for the result."""
    return base.train(args, build=build_model, name="char_transformer_layers")


def parse_args(argv=None):
    """``char_transformer.py``'s flags (the same defaults, so the runs compare)."""
    return base.parse_args(argv)


def main(argv=None) -> int:
    """Run the script; the exit status, as ``char_transformer.py``'s: 0, 2 when ``--resume``
    cannot continue, 130 after Ctrl-C (the training state saved)."""
    return run_main(parse_args, train, argv)


if __name__ == "__main__":
    raise SystemExit(main())
