"""``print(layer)`` shows its configuration as PyTorch prints it (``extra_repr``), and a model
prints as a tree of ``(name): Layer(...)`` lines.

Every layer class exported by ``tapegrad.nn`` must appear in ``EXPECTED`` below, so a new
layer without a repr fails here; the layers PyTorch also has are compared with ``torch``'s own
repr of the same configuration.
"""

import inspect
import re

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

K = tg.random.key(0)

# class name -> [(tapegrad constructor, expected repr, the torch constructor or None)]
EXPECTED = {
    "Linear": [
        (lambda: nn.Linear(3, 16, key=K), "Linear(in_features=3, out_features=16, bias=True)",
         lambda t: t.Linear(3, 16)),
        (lambda: nn.Linear(3, 16, bias=False, key=K),
         "Linear(in_features=3, out_features=16, bias=False)",
         lambda t: t.Linear(3, 16, bias=False)),
    ],
    "Conv2d": [
        (lambda: nn.Conv2d(1, 8, 3, key=K), "Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1))",
         lambda t: t.Conv2d(1, 8, 3)),
        (lambda: nn.Conv2d(2, 8, (3, 5), 2, bias=False, padding=1, dilation=2, groups=2, key=K),
         "Conv2d(2, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(2, 2), "
         "groups=2, bias=False)",
         lambda t: t.Conv2d(2, 8, (3, 5), 2, padding=1, dilation=2, groups=2, bias=False)),
        (lambda: nn.Conv2d(2, 8, 3, padding_mode="same", key=K),
         "Conv2d(2, 8, kernel_size=(3, 3), stride=(1, 1), padding=same)",
         lambda t: t.Conv2d(2, 8, 3, padding="same")),
    ],
    "Conv1d": [
        (lambda: nn.Conv1d(2, 4, 3, key=K), "Conv1d(2, 4, kernel_size=(3,), stride=(1,))",
         lambda t: t.Conv1d(2, 4, 3)),
        (lambda: nn.Conv1d(2, 4, 3, stride=2, padding=1, dilation=3, bias=False, key=K),
         "Conv1d(2, 4, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(3,), bias=False)",
         lambda t: t.Conv1d(2, 4, 3, stride=2, padding=1, dilation=3, bias=False)),
    ],
    "ConvTranspose2d": [
        (lambda: nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1, key=K),
         "ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))",
         lambda t: t.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1)),
        (lambda: nn.ConvTranspose2d(4, 6, (1, 3), padding=1, groups=2, bias=False, key=K),
         "ConvTranspose2d(4, 6, kernel_size=(1, 3), stride=(1, 1), padding=(1, 1), groups=2, "
         "bias=False)",
         lambda t: t.ConvTranspose2d(4, 6, (1, 3), padding=1, groups=2, bias=False)),
    ],
    "MaxPool2d": [
        (lambda: nn.MaxPool2d(2), "MaxPool2d(kernel_size=2, stride=2, padding=0)",
         lambda t: t.MaxPool2d(2)),
        (lambda: nn.MaxPool2d(3, 1, padding=1), "MaxPool2d(kernel_size=3, stride=1, padding=1)",
         lambda t: t.MaxPool2d(3, 1, 1)),
        (lambda: nn.MaxPool2d(3, 1, "same"), "MaxPool2d(kernel_size=3, stride=1, padding=same)",
         None),
    ],
    "AvgPool2d": [
        (lambda: nn.AvgPool2d(2), "AvgPool2d(kernel_size=2, stride=2, padding=0)",
         lambda t: t.AvgPool2d(2)),
        (lambda: nn.AvgPool2d((2, 3), 1, 1, count_include_pad=False),
         "AvgPool2d(kernel_size=(2, 3), stride=1, padding=1, count_include_pad=False)", None),
    ],
    "AdaptiveAvgPool2d": [
        (lambda: nn.AdaptiveAvgPool2d((4, None)), "AdaptiveAvgPool2d(output_size=(4, None))",
         lambda t: t.AdaptiveAvgPool2d((4, None))),
    ],
    "BatchNorm": [
        (lambda: nn.BatchNorm(8),
         "BatchNorm(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)",
         lambda t: t.BatchNorm2d(8)),
        (lambda: nn.BatchNorm(3, 0.2, 1e-3),
         "BatchNorm(3, eps=0.001, momentum=0.2, affine=True, track_running_stats=True)",
         lambda t: t.BatchNorm1d(3, 1e-3, 0.2)),
        (lambda: nn.BatchNorm(3, None, eps=1e-3, affine=False, track_running_stats=False),
         "BatchNorm(3, eps=0.001, momentum=None, affine=False, track_running_stats=False)",
         lambda t: t.BatchNorm1d(3, 1e-3, None, affine=False, track_running_stats=False)),
    ],
    "LayerNorm": [
        (lambda: nn.LayerNorm(16),
         "LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)",
         lambda t: t.LayerNorm(16)),
        (lambda: nn.LayerNorm((4, 5), eps=1e-3, bias=False),
         "LayerNorm((4, 5), eps=0.001, elementwise_affine=True, bias=False)",
         lambda t: t.LayerNorm((4, 5), eps=1e-3, bias=False)),
        (lambda: nn.LayerNorm(3, elementwise_affine=False),
         "LayerNorm((3,), eps=1e-05, elementwise_affine=False, bias=False)",
         lambda t: t.LayerNorm(3, elementwise_affine=False)),
    ],
    "RMSNorm": [
        (lambda: nn.RMSNorm(16), "RMSNorm((16,), eps=None, elementwise_affine=True)",
         lambda t: t.RMSNorm(16)),
        (lambda: nn.RMSNorm((4, 5), 1e-3, False),
         "RMSNorm((4, 5), eps=0.001, elementwise_affine=False)",
         lambda t: t.RMSNorm((4, 5), 1e-3, False)),
    ],
    "GroupNorm": [
        (lambda: nn.GroupNorm(2, 4), "GroupNorm(2, 4, eps=1e-05, affine=True)",
         lambda t: t.GroupNorm(2, 4)),
        (lambda: nn.GroupNorm(1, 3, 1e-3, False), "GroupNorm(1, 3, eps=0.001, affine=False)",
         lambda t: t.GroupNorm(1, 3, 1e-3, False)),
    ],
    "Dropout": [(lambda: nn.Dropout(0.25), "Dropout(p=0.25)", lambda t: t.Dropout(0.25))],
    "Embedding": [
        (lambda: nn.Embedding(10, 3, key=K), "Embedding(10, 3)", lambda t: t.Embedding(10, 3)),
        (lambda: nn.Embedding(10, 3, padding_idx=0, key=K), "Embedding(10, 3, padding_idx=0)",
         lambda t: t.Embedding(10, 3, padding_idx=0)),
    ],
    "ReLU": [(lambda: nn.ReLU(), "ReLU()", lambda t: t.ReLU())],
    "Tanh": [(lambda: nn.Tanh(), "Tanh()", lambda t: t.Tanh())],
    "Sigmoid": [(lambda: nn.Sigmoid(), "Sigmoid()", lambda t: t.Sigmoid())],
    "SiLU": [(lambda: nn.SiLU(), "SiLU()", lambda t: t.SiLU())],
    "Identity": [(lambda: nn.Identity(54, unused="x"), "Identity()", lambda t: t.Identity())],
    "GELU": [
        (lambda: nn.GELU(), "GELU(approximate='none')", lambda t: t.GELU()),
        (lambda: nn.GELU("tanh"), "GELU(approximate='tanh')", lambda t: t.GELU("tanh")),
    ],
    "LeakyReLU": [(lambda: nn.LeakyReLU(0.2), "LeakyReLU(negative_slope=0.2)",
                   lambda t: t.LeakyReLU(0.2))],
    "Softmax": [(lambda: nn.Softmax(), "Softmax(dim=-1)", lambda t: t.Softmax(-1))],
    "LogSoftmax": [(lambda: nn.LogSoftmax(1), "LogSoftmax(dim=1)", lambda t: t.LogSoftmax(1))],
    "Flatten": [(lambda: nn.Flatten(0, 2), "Flatten(start_dim=0, end_dim=2)",
                 lambda t: t.Flatten(0, 2))],
    "RNNCell": [
        (lambda: nn.RNNCell(4, 8, key=K), "RNNCell(4, 8)", lambda t: t.RNNCell(4, 8)),
        (lambda: nn.RNNCell(4, 8, False, "relu", key=K),
         "RNNCell(4, 8, bias=False, nonlinearity=relu)",
         lambda t: t.RNNCell(4, 8, False, "relu")),
    ],
    "LSTMCell": [(lambda: nn.LSTMCell(4, 8, key=K), "LSTMCell(4, 8)",
                  lambda t: t.LSTMCell(4, 8))],
    "GRUCell": [(lambda: nn.GRUCell(4, 8, bias=False, key=K), "GRUCell(4, 8, bias=False)",
                 lambda t: t.GRUCell(4, 8, bias=False))],
    "RNN": [
        (lambda: nn.RNN(4, 8, key=K), "RNN(4, 8)", lambda t: t.RNN(4, 8)),
        # PyTorch leaves nonlinearity out of its RNN repr; here it is shown
        (lambda: nn.RNN(4, 8, 2, "relu", False, True, 0.5, True, key=K),
         "RNN(4, 8, num_layers=2, bias=False, batch_first=True, dropout=0.5, "
         "bidirectional=True, nonlinearity=relu)", None),
    ],
    "LSTM": [(lambda: nn.LSTM(4, 8, num_layers=2, batch_first=True, key=K),
              "LSTM(4, 8, num_layers=2, batch_first=True)",
              lambda t: t.LSTM(4, 8, num_layers=2, batch_first=True))],
    "GRU": [(lambda: nn.GRU(4, 8, 3, dropout=0.1, bidirectional=True, key=K),
             "GRU(4, 8, num_layers=3, dropout=0.1, bidirectional=True)",
             lambda t: t.GRU(4, 8, 3, dropout=0.1, bidirectional=True))],
    "ScaledDotProductAttention": [
        (lambda: nn.ScaledDotProductAttention(0.2), "ScaledDotProductAttention(dropout_prob=0.2)",
         None),
    ],
    "MultiHeadAttention": [
        (lambda: nn.MultiHeadAttention(2, 4, 0.0, key=K),
         "MultiHeadAttention(\n"
         "  num_heads=2, hidden_size=4, dropout_prob=0.0\n"
         "  (query): Linear(in_features=4, out_features=4, bias=True)\n"
         "  (key): Linear(in_features=4, out_features=4, bias=True)\n"
         "  (value): Linear(in_features=4, out_features=4, bias=True)\n"
         "  (output): Linear(in_features=4, out_features=4, bias=True)\n"
         ")", None),
    ],
    "ResidualBlock": [
        (lambda: nn.ResidualBlock(4, 4, key=K),
         "ResidualBlock(\n"
         "  4, 4, stride=1\n"
         "  (conv1): Conv2d(4, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
         "  (bn1): BatchNorm(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
         "  (conv2): Conv2d(4, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
         "  (bn2): BatchNorm(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
         ")", None),
    ],
    "RecurrentBlock": [
        (lambda: nn.RecurrentBlock(4, 8, key=K),
         "RecurrentBlock(\n"
         "  4, 8\n"
         "  (input_to_hidden): Linear(in_features=4, out_features=8, bias=True)\n"
         "  (hidden_to_hidden): Linear(in_features=8, out_features=8, bias=False)\n"
         ")", None),
    ],
    "LongShortTermMemoryBlock": [
        (lambda: nn.LongShortTermMemoryBlock(4, 8, 3, 0.5, key=K),
         "LongShortTermMemoryBlock(\n"
         "  4, 8, output_size=3, dropout_prob=0.5\n"
         "  (input_to_gates): Linear(in_features=4, out_features=32, bias=True)\n"
         "  (hidden_to_gates): Linear(in_features=8, out_features=32, bias=False)\n"
         "  (hidden_to_output): Linear(in_features=8, out_features=3, bias=True)\n"
         ")", None),
    ],
    "Sequential": [
        (lambda: nn.Sequential(nn.Linear(4, 8, key=K), nn.ReLU()),
         "Sequential(\n"
         "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
         "  (1): ReLU()\n"
         ")",
         lambda t: t.Sequential(t.Linear(4, 8), t.ReLU())),
    ],
    "ModuleList": [
        (lambda: nn.ModuleList([nn.Tanh(), nn.ModuleList([nn.Dropout(0.5)])]),
         "ModuleList(\n"
         "  (0): Tanh()\n"
         "  (1): ModuleList(\n"
         "    (0): Dropout(p=0.5)\n"
         "  )\n"
         ")",
         None),
    ],
}  # fmt: skip

# PyTorch's further layers (nn/_activation_layers.py, nn/_extra_layers.py, nn/_transformer.py)
_ENC = ("TransformerEncoderLayer(\n"
        "  (self_attn): MultiheadAttention(\n"
        "    (out_proj): Linear(in_features=4, out_features=4, bias=True)\n"
        "  )\n"
        "  (linear1): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (dropout): Dropout(p=0.1)\n"
        "  (linear2): Linear(in_features=8, out_features=4, bias=True)\n"
        "  (norm1): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)\n"
        "  (norm2): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)\n"
        "  (dropout1): Dropout(p=0.1)\n"
        "  (dropout2): Dropout(p=0.1)\n"
        ")")
# the Transformer family prints its submodules; PyTorch's differ in two names only
# (NonDynamicallyQuantizableLinear, Dropout's inplace), compared in test_nn_transformer.py
EXPECTED.update({
    "ELU": [(lambda: nn.ELU(), "ELU(alpha=1.0)", lambda t: t.ELU()),
            (lambda: nn.ELU(0.5), "ELU(alpha=0.5)", lambda t: t.ELU(0.5))],
    "SELU": [(lambda: nn.SELU(), "SELU()", lambda t: t.SELU())],
    "CELU": [(lambda: nn.CELU(2.0), "CELU(alpha=2.0)", lambda t: t.CELU(2.0))],
    "Hardtanh": [(lambda: nn.Hardtanh(-2, 3), "Hardtanh(min_val=-2, max_val=3)",
                  lambda t: t.Hardtanh(-2, 3))],
    "ReLU6": [(lambda: nn.ReLU6(), "ReLU6()", lambda t: t.ReLU6())],
    "Hardsigmoid": [(lambda: nn.Hardsigmoid(), "Hardsigmoid()", lambda t: t.Hardsigmoid())],
    "Hardswish": [(lambda: nn.Hardswish(), "Hardswish()", lambda t: t.Hardswish())],
    "Softplus": [(lambda: nn.Softplus(2, 10), "Softplus(beta=2, threshold=10)",
                  lambda t: t.Softplus(2, 10))],
    "Softsign": [(lambda: nn.Softsign(), "Softsign()", lambda t: t.Softsign())],
    "Mish": [(lambda: nn.Mish(), "Mish()", lambda t: t.Mish())],
    "GLU": [(lambda: nn.GLU(), "GLU(dim=-1)", lambda t: t.GLU())],
    "LogSigmoid": [(lambda: nn.LogSigmoid(), "LogSigmoid()", lambda t: t.LogSigmoid())],
    "PReLU": [(lambda: nn.PReLU(3), "PReLU(num_parameters=3)", lambda t: t.PReLU(3))],
    "InstanceNorm1d": [
        (lambda: nn.InstanceNorm1d(3),
         "InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, "
         "track_running_stats=False)", lambda t: t.InstanceNorm1d(3))],
    "InstanceNorm2d": [
        (lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
         "InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
         "track_running_stats=True)",
         lambda t: t.InstanceNorm2d(4, affine=True, track_running_stats=True))],
    "Bilinear": [(lambda: nn.Bilinear(2, 3, 4, key=K),
                  "Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)",
                  lambda t: t.Bilinear(2, 3, 4))],
    "Unflatten": [(lambda: nn.Unflatten(1, (2, 3)), "Unflatten(dim=1, unflattened_size=(2, 3))",
                   lambda t: t.Unflatten(1, (2, 3)))],
    "Dropout1d": [(lambda: nn.Dropout1d(), "Dropout1d(p=0.5, inplace=False)",
                   lambda t: t.Dropout1d())],
    "Dropout2d": [(lambda: nn.Dropout2d(0.3), "Dropout2d(p=0.3, inplace=False)",
                   lambda t: t.Dropout2d(0.3))],
    "Dropout3d": [(lambda: nn.Dropout3d(), "Dropout3d(p=0.5, inplace=False)",
                   lambda t: t.Dropout3d())],
    "AlphaDropout": [(lambda: nn.AlphaDropout(0.2), "AlphaDropout(p=0.2, inplace=False)",
                      lambda t: t.AlphaDropout(0.2))],
    "EmbeddingBag": [(lambda: nn.EmbeddingBag(10, 3, mode="max", padding_idx=0, key=K),
                      "EmbeddingBag(10, 3, mode='max', padding_idx=0)",
                      lambda t: t.EmbeddingBag(10, 3, mode="max", padding_idx=0))],
    "CosineSimilarity": [(lambda: nn.CosineSimilarity(), "CosineSimilarity()",
                          lambda t: t.CosineSimilarity())],
    "PairwiseDistance": [(lambda: nn.PairwiseDistance(3.0), "PairwiseDistance()",
                          lambda t: t.PairwiseDistance(3.0))],
    "MultiheadAttention": [
        (lambda: nn.MultiheadAttention(4, 2, key=K),
         "MultiheadAttention(\n"
         "  (out_proj): Linear(in_features=4, out_features=4, bias=True)\n"
         ")", None)],
    "TransformerEncoderLayer": [(lambda: nn.TransformerEncoderLayer(4, 2, 8, key=K), _ENC, None)],
    "TransformerDecoderLayer": [
        (lambda: nn.TransformerDecoderLayer(4, 2, 8, bias=False, key=K),
         "TransformerDecoderLayer(\n"
         "  (self_attn): MultiheadAttention(\n"
         "    (out_proj): Linear(in_features=4, out_features=4, bias=False)\n"
         "  )\n"
         "  (multihead_attn): MultiheadAttention(\n"
         "    (out_proj): Linear(in_features=4, out_features=4, bias=False)\n"
         "  )\n"
         "  (linear1): Linear(in_features=4, out_features=8, bias=False)\n"
         "  (dropout): Dropout(p=0.1)\n"
         "  (linear2): Linear(in_features=8, out_features=4, bias=False)\n"
         "  (norm1): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=False)\n"
         "  (norm2): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=False)\n"
         "  (norm3): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=False)\n"
         "  (dropout1): Dropout(p=0.1)\n"
         "  (dropout2): Dropout(p=0.1)\n"
         "  (dropout3): Dropout(p=0.1)\n"
         ")", None)],
    "TransformerEncoder": [
        (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, key=K), 1),
         "TransformerEncoder(\n  (layers): ModuleList(\n    (0): "
         + _ENC.replace("\n", "\n    ") + "\n  )\n)", None)],
    "TransformerDecoder": [
        (lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8, key=K), 0,
                                       nn.LayerNorm(4)),
         "TransformerDecoder(\n"
         "  (layers): ModuleList()\n"
         "  (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)\n"
         ")", None)],
    "Transformer": [
        (lambda: nn.Transformer(4, 2, 0, 0, 8, key=K),
         "Transformer(\n"
         "  (encoder): TransformerEncoder(\n"
         "    (layers): ModuleList()\n"
         "    (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)\n"
         "  )\n"
         "  (decoder): TransformerDecoder(\n"
         "    (layers): ModuleList()\n"
         "    (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)\n"
         "  )\n"
         ")", None)],
})

# the loss, convolution, pooling, padding and resampling layers: each text is PyTorch's own
EXPECTED.update({
    "AdaptiveAvgPool1d": [(lambda: nn.AdaptiveAvgPool1d(3), 'AdaptiveAvgPool1d(output_size=3)',
      lambda t: t.AdaptiveAvgPool1d(3))],
    "AdaptiveAvgPool3d": [(lambda: nn.AdaptiveAvgPool3d((2, 3, 4)), 'AdaptiveAvgPool3d(output_size=(2, 3, 4))',  # noqa: E501
      lambda t: t.AdaptiveAvgPool3d((2, 3, 4)))],
    "AdaptiveMaxPool1d": [(lambda: nn.AdaptiveMaxPool1d(3), 'AdaptiveMaxPool1d(output_size=3)',
      lambda t: t.AdaptiveMaxPool1d(3))],
    "AdaptiveMaxPool2d": [(lambda: nn.AdaptiveMaxPool2d((2, 3)), 'AdaptiveMaxPool2d(output_size=(2, 3))',  # noqa: E501
      lambda t: t.AdaptiveMaxPool2d((2, 3)))],
    "AdaptiveMaxPool3d": [(lambda: nn.AdaptiveMaxPool3d(2), 'AdaptiveMaxPool3d(output_size=2)',
      lambda t: t.AdaptiveMaxPool3d(2))],
    "AvgPool1d": [(lambda: nn.AvgPool1d(3, stride=2), 'AvgPool1d(kernel_size=(3,), stride=(2,), padding=(0,))',  # noqa: E501
      lambda t: t.AvgPool1d(3, stride=2))],
    "AvgPool3d": [(lambda: nn.AvgPool3d(2), 'AvgPool3d(kernel_size=2, stride=2, padding=0)',
      lambda t: t.AvgPool3d(2))],
    "BCELoss": [(lambda: nn.BCELoss(), 'BCELoss()',
      lambda t: t.BCELoss())],
    "BCEWithLogitsLoss": [(lambda: nn.BCEWithLogitsLoss(), 'BCEWithLogitsLoss()',
      lambda t: t.BCEWithLogitsLoss())],
    "CTCLoss": [(lambda: nn.CTCLoss(blank=1), 'CTCLoss()',
      lambda t: t.CTCLoss(blank=1))],
    "CircularPad1d": [(lambda: nn.CircularPad1d(2), 'CircularPad1d((2, 2))',
      lambda t: t.CircularPad1d(2))],
    "CircularPad2d": [(lambda: nn.CircularPad2d((1, 2, 3, 4)), 'CircularPad2d((1, 2, 3, 4))',
      lambda t: t.CircularPad2d((1, 2, 3, 4)))],
    "CircularPad3d": [(lambda: nn.CircularPad3d(1), 'CircularPad3d((1, 1, 1, 1, 1, 1))',
      lambda t: t.CircularPad3d(1))],
    "ConstantPad1d": [(lambda: nn.ConstantPad1d(2, 0.5), 'ConstantPad1d(padding=(2, 2), value=0.5)',
      lambda t: t.ConstantPad1d(2, 0.5))],
    "ConstantPad2d": [(lambda: nn.ConstantPad2d((1, 2, 3, 4), 1.0), 'ConstantPad2d(padding=(1, 2, 3, 4), value=1.0)',  # noqa: E501
      lambda t: t.ConstantPad2d((1, 2, 3, 4), 1.0))],
    "ConstantPad3d": [(lambda: nn.ConstantPad3d(1, 0.0), 'ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=0.0)',  # noqa: E501
      lambda t: t.ConstantPad3d(1, 0.0))],
    "Conv3d": [(lambda: nn.Conv3d(2, 4, 3, key=K), 'Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1))',  # noqa: E501
      lambda t: t.Conv3d(2, 4, 3))],
    "ConvTranspose1d": [(lambda: nn.ConvTranspose1d(2, 4, 3, stride=2, key=K), 'ConvTranspose1d(2, 4, kernel_size=(3,), stride=(2,))',  # noqa: E501
      lambda t: t.ConvTranspose1d(2, 4, 3, stride=2))],
    "ConvTranspose3d": [(lambda: nn.ConvTranspose3d(2, 4, 2, key=K), 'ConvTranspose3d(2, 4, kernel_size=(2, 2, 2), stride=(1, 1, 1))',  # noqa: E501
      lambda t: t.ConvTranspose3d(2, 4, 2))],
    "CosineEmbeddingLoss": [(lambda: nn.CosineEmbeddingLoss(margin=0.5), 'CosineEmbeddingLoss()',
      lambda t: t.CosineEmbeddingLoss(margin=0.5))],
    "CrossEntropyLoss": [(lambda: nn.CrossEntropyLoss(), 'CrossEntropyLoss()',
      lambda t: t.CrossEntropyLoss())],
    "Fold": [(lambda: nn.Fold((4, 5), 2), 'Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1)',  # noqa: E501
      lambda t: t.Fold((4, 5), 2))],
    "GaussianNLLLoss": [(lambda: nn.GaussianNLLLoss(), 'GaussianNLLLoss()',
      lambda t: t.GaussianNLLLoss())],
    "HingeEmbeddingLoss": [(lambda: nn.HingeEmbeddingLoss(margin=2.0), 'HingeEmbeddingLoss()',
      lambda t: t.HingeEmbeddingLoss(margin=2.0))],
    "HuberLoss": [(lambda: nn.HuberLoss(), 'HuberLoss()',
      lambda t: t.HuberLoss())],
    "KLDivLoss": [(lambda: nn.KLDivLoss(), 'KLDivLoss()',
      lambda t: t.KLDivLoss())],
    "L1Loss": [(lambda: nn.L1Loss(), 'L1Loss()',
      lambda t: t.L1Loss())],
    "MSELoss": [(lambda: nn.MSELoss(), 'MSELoss()',
      lambda t: t.MSELoss())],
    "MarginRankingLoss": [(lambda: nn.MarginRankingLoss(), 'MarginRankingLoss()',
      lambda t: t.MarginRankingLoss())],
    "MaxPool1d": [(lambda: nn.MaxPool1d(3), 'MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)',  # noqa: E501
      lambda t: t.MaxPool1d(3))],
    "MaxPool3d": [(lambda: nn.MaxPool3d(2, stride=1), 'MaxPool3d(kernel_size=2, stride=1, padding=0, dilation=1, ceil_mode=False)',  # noqa: E501
      lambda t: t.MaxPool3d(2, stride=1))],
    "MultiLabelMarginLoss": [(lambda: nn.MultiLabelMarginLoss(), 'MultiLabelMarginLoss()',
      lambda t: t.MultiLabelMarginLoss())],
    "MultiLabelSoftMarginLoss": [(lambda: nn.MultiLabelSoftMarginLoss(), 'MultiLabelSoftMarginLoss()',  # noqa: E501
      lambda t: t.MultiLabelSoftMarginLoss())],
    "MultiMarginLoss": [(lambda: nn.MultiMarginLoss(), 'MultiMarginLoss()',
      lambda t: t.MultiMarginLoss())],
    "NLLLoss": [(lambda: nn.NLLLoss(), 'NLLLoss()',
      lambda t: t.NLLLoss())],
    "PixelShuffle": [(lambda: nn.PixelShuffle(2), 'PixelShuffle(upscale_factor=2)',
      lambda t: t.PixelShuffle(2))],
    "PixelUnshuffle": [(lambda: nn.PixelUnshuffle(3), 'PixelUnshuffle(downscale_factor=3)',
      lambda t: t.PixelUnshuffle(3))],
    "PoissonNLLLoss": [(lambda: nn.PoissonNLLLoss(), 'PoissonNLLLoss()',
      lambda t: t.PoissonNLLLoss())],
    "ReflectionPad1d": [(lambda: nn.ReflectionPad1d(2), 'ReflectionPad1d((2, 2))',
      lambda t: t.ReflectionPad1d(2))],
    "ReflectionPad2d": [(lambda: nn.ReflectionPad2d(1), 'ReflectionPad2d((1, 1, 1, 1))',
      lambda t: t.ReflectionPad2d(1))],
    "ReflectionPad3d": [(lambda: nn.ReflectionPad3d(1), 'ReflectionPad3d((1, 1, 1, 1, 1, 1))',
      lambda t: t.ReflectionPad3d(1))],
    "ReplicationPad1d": [(lambda: nn.ReplicationPad1d(2), 'ReplicationPad1d((2, 2))',
      lambda t: t.ReplicationPad1d(2))],
    "ReplicationPad2d": [(lambda: nn.ReplicationPad2d((1, 0, 2, 1)), 'ReplicationPad2d((1, 0, 2, 1))',  # noqa: E501
      lambda t: t.ReplicationPad2d((1, 0, 2, 1)))],
    "ReplicationPad3d": [(lambda: nn.ReplicationPad3d(1), 'ReplicationPad3d((1, 1, 1, 1, 1, 1))',
      lambda t: t.ReplicationPad3d(1))],
    "SmoothL1Loss": [(lambda: nn.SmoothL1Loss(), 'SmoothL1Loss()',
      lambda t: t.SmoothL1Loss())],
    "SoftMarginLoss": [(lambda: nn.SoftMarginLoss(), 'SoftMarginLoss()',
      lambda t: t.SoftMarginLoss())],
    "TripletMarginLoss": [(lambda: nn.TripletMarginLoss(margin=0.5), 'TripletMarginLoss()',
      lambda t: t.TripletMarginLoss(margin=0.5))],
    "Unfold": [(lambda: nn.Unfold(2, stride=2), 'Unfold(kernel_size=2, dilation=1, padding=0, stride=2)',  # noqa: E501
      lambda t: t.Unfold(2, stride=2))],
    "Upsample": [(lambda: nn.Upsample(scale_factor=2.0, mode='nearest'), "Upsample(scale_factor=2.0, mode='nearest')",  # noqa: E501
      lambda t: t.Upsample(scale_factor=2.0, mode='nearest'))],
    "UpsamplingBilinear2d": [(lambda: nn.UpsamplingBilinear2d(scale_factor=2.0), "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')",  # noqa: E501
      lambda t: t.UpsamplingBilinear2d(scale_factor=2.0))],
    "UpsamplingNearest2d": [(lambda: nn.UpsamplingNearest2d(scale_factor=2.0), "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')",  # noqa: E501
      lambda t: t.UpsamplingNearest2d(scale_factor=2.0))],
    "ZeroPad1d": [(lambda: nn.ZeroPad1d(2), 'ZeroPad1d((2, 2))',
      lambda t: t.ZeroPad1d(2))],
    "ZeroPad2d": [(lambda: nn.ZeroPad2d((1, 2, 0, 1)), 'ZeroPad2d((1, 2, 0, 1))',
      lambda t: t.ZeroPad2d((1, 2, 0, 1)))],
    "ZeroPad3d": [(lambda: nn.ZeroPad3d(1), 'ZeroPad3d((1, 1, 1, 1, 1, 1))',
      lambda t: t.ZeroPad3d(1))],

})  # fmt: skip

# layers whose constructor takes no configuration: they print as Name() (or a tree)
NO_CONFIGURATION = {"ReLU", "Tanh", "Sigmoid", "SiLU", "Identity", "Sequential", "ModuleList"}


def _exported_modules():
    return sorted(name for name in nn.__all__
                  if inspect.isclass(getattr(nn, name))
                  and issubclass(getattr(nn, name), nn.Module) and name != "Module")  # fmt: skip


def test_every_exported_layer_has_an_expected_repr():
    """A new layer must come with its configuration in repr (and a line here)."""
    missing = [name for name in _exported_modules() if name not in EXPECTED]
    assert not missing, f"add these layers to EXPECTED (and give them extra_repr): {missing}"
    for name in _exported_modules():
        cls = getattr(nn, name)
        if name not in NO_CONFIGURATION:
            assert cls.extra_repr is not nn.Module.extra_repr, f"{name} has no extra_repr"


CASES = [(name, i) for name in EXPECTED for i in range(len(EXPECTED[name]))]


@pytest.mark.parametrize("name,i", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_repr_shows_the_configuration(name, i):
    make, expected, _ = EXPECTED[name][i]
    layer = make()
    assert type(layer).__name__ == name
    assert repr(layer) == expected
    assert str(layer) == expected  # print(layer)


def _fields(text: str) -> dict:
    """``key=value`` settings and positional values of a one-line ``Name(...)`` repr."""
    inner = text[text.index("(") + 1 : -1]
    parts = re.split(r", (?![^()]*\))", inner) if inner else []
    out = {}
    for k, part in enumerate(parts):
        key, eq, value = part.partition("=")
        out[key if eq else f"#{k}"] = value if eq else part
    return out


TORCH_CASES = [(n, i) for n, i in CASES if EXPECTED[n][i][2] is not None]


@pytest.mark.parametrize("name,i", TORCH_CASES, ids=[f"{n}-{i}" for n, i in TORCH_CASES])
def test_repr_agrees_with_pytorch(name, i):
    """The same configuration in PyTorch prints the same text, or (for layers where PyTorch
    has more settings, such as ``ceil_mode`` or ``affine``) the same value for every setting
    shown here."""
    torch_nn = pytest.importorskip("torch.nn")
    make, _, make_torch = EXPECTED[name][i]
    ours, theirs = repr(make()), repr(make_torch(torch_nn))
    if ours == theirs:
        return
    assert "\n" not in ours, (ours, theirs)
    mine, torch_fields = _fields(ours), _fields(theirs)
    shared = {k: v for k, v in mine.items()}
    assert shared == {k: torch_fields.get(k) for k in mine}, (ours, theirs)


def test_a_model_prints_as_a_tree_with_its_configuration():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 4, 3, key=K), nn.ReLU())
            self.head = nn.Linear(4, 2, key=K)

        def forward(self, x):
            return self.head(self.features(x).mean(axis=(2, 3)))

    assert repr(Net()) == (
        "Net(\n"
        "  (features): Sequential(\n"
        "    (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1))\n"
        "    (1): ReLU()\n"
        "  )\n"
        "  (head): Linear(in_features=4, out_features=2, bias=True)\n"
        ")"
    )


def test_extra_repr_of_a_user_layer_and_multi_line_configuration():
    class Scale(nn.Module):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor

        def extra_repr(self):
            return f"factor={self.factor}"

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scale(2.0)

        def extra_repr(self):
            return "first line\nsecond line"

    assert repr(Scale(3.0)) == "Scale(factor=3.0)"
    assert repr(Two()) == (
        "Two(\n  first line\n  second line\n  (inner): Scale(factor=2.0)\n)"
    )


def test_repr_after_loading_and_inside_functional_call():
    """The repr reads the configuration, not values: a module bound to traced parameters (in
    functional_call under grad) prints the same."""
    layer = nn.Linear(3, 2, key=K)
    seen = []

    def loss(params):
        def spy(module, params, x):
            seen.append(repr(module))
            return nn.functional_call(module, params, x)[0]

        return spy(layer, params, tg.Tensor(np.ones((1, 3), np.float32))).sum()

    tg.grad(loss)(layer.params)
    assert seen == [repr(layer)]


def test_llm_forward_fn_repr():
    class NextToken(nn.AbstractLLMForwardFn):
        def train(self, model, batch_data):
            return model(batch_data)

        def sample(self, model, batch_data):
            return model(batch_data)[:, -1]

    assert repr(NextToken()) == "NextToken()"
