"""Smoke tests of the examples: each has --help, and the gradient-check example runs end to end.
(The full --quick runs with their accuracy/loss thresholds are in .ci/examples.)"""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ["digits_mlp.py", "digits_cnn.py", "char_transformer.py", "gradient_check.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_help(name):
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "--quick" in out.stdout and "--plot" in out.stdout


def test_gradient_check_example_proves_rules_and_catches_a_bad_one():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "gradient_check.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"MPLBACKEND": "Agg", "PATH": ""},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "caught BadLogCosh at order 2" in out.stdout
    assert "all gradient checks passed" in out.stdout
