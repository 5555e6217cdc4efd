"""Smoke tests of examples/: every script's --help, a tiny digits run with its checkpoint round
trip, the gradient_check example (which must also catch its broken rule), and the helpers that
make the examples deterministic. The full --quick runs with thresholds live in .ci/examples."""

import importlib.util
import math
import pathlib

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = ["digits_mlp", "digits_cnn", "char_transformer", "gradient_check"]


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_lists_the_common_flags(name, capsys):
    with pytest.raises(SystemExit) as exc:
        load(name).main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--quick", "--plot"):
        assert flag in out
    if name != "gradient_check":
        assert "--seed" in out


def test_digits_mlp_tiny_run_and_checkpoint(tmp_path, capsys):
    mlp = load("digits_mlp")
    args = mlp.parse_args(["--epochs", "1", "--hidden", "32", "--out", str(tmp_path)])
    res = mlp.train(args)
    out = capsys.readouterr().out
    assert 0.6 < res["accuracy"] <= 1.0  # one epoch is far above chance (0.1)
    assert res["reloaded_accuracy"] == res["accuracy"]
    assert f"test accuracy: {100 * res['accuracy']:.1f}%" in out.splitlines()
    assert (tmp_path / "digits_mlp.safetensors").is_file()
    assert res["losses"][-1] < res["losses"][0]


def test_digits_mlp_is_reproducible_from_its_seed(tmp_path, capsys):
    mlp = load("digits_mlp")
    runs = [
        mlp.train(mlp.parse_args(["--epochs", "1", "--hidden", "16", "--out", str(tmp_path)]))
        for _ in range(2)
    ]
    assert runs[0]["losses"] == runs[1]["losses"]


def test_gradient_check_example_passes_and_catches_the_bug(capsys):
    assert load("gradient_check").main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "caught BadLogCosh at order 2" in out
    assert "all gradient checks passed" in out


def test_docstring_corpus_is_deterministic_printable_text():
    ct = load("char_transformer")
    a = ct.collect_docstrings(max_chars=20_000)
    assert a == ct.collect_docstrings(max_chars=20_000)
    assert len(a) == 20_000
    assert all(c == "\n" or " " <= c <= "~" for c in a)


def test_unigram_baseline_is_the_cross_entropy_of_the_frequencies():
    ct = load("char_transformer")
    train = np.array([0, 0, 1, 1])  # add-one counts 3, 3 -> p = 1/2 each
    assert math.isclose(ct.unigram_bits(train, np.array([0, 1, 1]), 2), 1.0)


def test_cnn_shift_augmentation_moves_pixels_by_at_most_one():
    cnn = load("digits_cnn")
    import tapegrad as tg

    x = np.zeros((50, 8, 8), np.float32)
    x[:, 3, 4] = 1.0
    y = cnn.shift_images(tg.random.key(0), x)
    rows, cols = np.nonzero(y.reshape(50, 64))[1] // 8, np.nonzero(y.reshape(50, 64))[1] % 8
    assert y.sum() == 50 and set(rows) <= {2, 3, 4} and set(cols) <= {3, 4, 5}
    assert len(set(zip(rows, cols))) > 1  # really shifted
