"""Smoke tests of examples/: every script's --help, a tiny digits run with its checkpoint round
trip, the gradient_check example (which must also catch its broken rule), the helpers that
make the examples deterministic, and --resume: a run stopped after N steps and resumed
follows the uninterrupted run exactly. The full --quick runs with thresholds live in
.ci/examples."""

import importlib.util
import math
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import tapegrad as tg

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = ["digits_mlp", "digits_cnn", "char_transformer", "gradient_check"]


def load(name):
    if str(EXAMPLES) not in sys.path:  # the scripts import _common from their own folder
        sys.path.insert(0, str(EXAMPLES))
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
        for flag in ("--seed", "--threads", "--resume", "--stop-after", "--save-every", "--out"):
            assert flag in out
    assert ("--distributed" in out) == name.startswith("digits_")  # data-parallel digits


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


# -- resuming -----------------------------------------------------------------------------------

TINY = {
    "digits_mlp": ["--hidden", "16", "--threads", "1"],
    "digits_cnn": ["--channels", "4", "--batch-size", "64", "--threads", "1"],
    "char_transformer": [
        *("--steps", "12", "--dim", "16", "--layers", "1", "--heads", "2", "--context", "16"),
        *("--batch-size", "4", "--max-chars", "20000", "--eval-every", "5"),
        *("--eval-windows", "8", "--sample-chars", "5", "--threads", "1"),
    ],
}


def assert_same_run(resumed, uninterrupted):
    assert not resumed["stopped"] and resumed["step"] == uninterrupted["step"]
    np.testing.assert_allclose(resumed["losses"], uninterrupted["losses"], rtol=1e-6, atol=0)
    a, b = tg.tree.tree_leaves(resumed["params"]), tg.tree.tree_leaves(uninterrupted["params"])
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "name, first, rest",
    [
        # stopped mid-epoch, then resumed with more epochs than the first run asked for
        ("digits_mlp", ["--epochs", "1", "--stop-after", "30"], ["--epochs", "2"]),
        # stopped in the second epoch: BatchNorm statistics, AdamW + schedule, dropout keys
        ("digits_cnn", ["--epochs", "2", "--stop-after", "30"], ["--epochs", "2"]),
        # stopped between two evaluations: the validation history carries over too
        ("char_transformer", ["--stop-after", "7"], []),
    ],
)
def test_resume_continues_exactly_where_the_run_stopped(tmp_path, capsys, name, first, rest):
    mod = load(name)
    run = lambda *argv: mod.train(mod.parse_args([*TINY[name], *argv]))  # noqa: E731
    stopped = run(*first, "--out", str(tmp_path / "a"))
    assert stopped["stopped"] and stopped["step"] == int(first[first.index("--stop-after") + 1])
    assert (tmp_path / "a" / f"{name}.train-state.safetensors").is_file()
    out = capsys.readouterr().out
    assert f"stopped after step {stopped['step']}" in out and "--resume" in out

    resumed = run(*rest, "--resume", "--out", str(tmp_path / "a"))
    assert f"resumed from {tmp_path / 'a'}" in capsys.readouterr().out
    uninterrupted = run(*rest, "--out", str(tmp_path / "b"))
    assert_same_run(resumed, uninterrupted)
    assert resumed["losses"][: stopped["step"]] == stopped["losses"]
    for key in ("accuracy", "validation_bits"):
        if key in uninterrupted:
            assert resumed[key] == pytest.approx(uninterrupted[key], rel=1e-6)


def test_resume_refuses_a_run_with_other_settings(tmp_path, capsys):
    mlp = load("digits_mlp")
    out = ["--out", str(tmp_path), "--epochs", "1", "--threads", "1"]
    mlp.train(mlp.parse_args([*out, "--hidden", "16", "--stop-after", "3"]))
    assert mlp.main([*out, "--hidden", "32", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "other settings (hidden: saved [16], now [32])" in err


def test_resume_without_a_saved_state_or_without_out(tmp_path, capsys):
    mlp = load("digits_mlp")
    assert mlp.main(["--out", str(tmp_path), "--resume", "--threads", "1"]) == 2
    assert "no training state at" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        mlp.parse_args(["--resume"])
    assert exc.value.code == 2
    assert "--resume needs --out DIR" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--threads", "0"), ("--stop-after", "0")])
def test_bad_run_flags_are_refused(capsys, flag, value):
    with pytest.raises(SystemExit):
        load("digits_cnn").parse_args([flag, value])
    assert f"{flag} must be at least 1" in capsys.readouterr().err


def test_without_out_the_temporary_folder_is_removed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mlp = load("digits_mlp")
    res = mlp.train(mlp.parse_args(["--epochs", "1", "--hidden", "16", "--threads", "1"]))
    assert res["reloaded_accuracy"] == res["accuracy"]
    assert "(temporary; keep it with --out DIR)" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_blas_threads_limits_and_restores_the_pool():
    from threadpoolctl import threadpool_info

    common = load("_common")
    blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]  # noqa: E731
    before = blas()
    with common.blas_threads(1):
        assert all(n == 1 for n in blas())
    assert blas() == before


@pytest.mark.parametrize("name", ["digits_mlp", "digits_cnn", "char_transformer"])
def test_one_blas_thread_unless_threads_asks_for_more(name, monkeypatch):
    """The default is one BLAS thread whatever the machine: as many threads as cores made the
    CNN 24 times slower on a busy 2-core machine, and changed its last digits."""
    module = load(name)
    assert module.parse_args([]).threads == 1
    assert module.parse_args(["--threads", "3"]).threads == 3
    seen = []  # the limit each script's training runs under
    monkeypatch.setattr(module, "blas_threads", lambda n: seen.append(n) or _stop_here())
    with pytest.raises(_Stop):
        module.train(module.parse_args([]))
    assert seen == [1]


class _Stop(Exception):
    pass


def _stop_here():
    raise _Stop


def test_agree_in_one_process_is_the_loss_and_the_request():
    common = load("_common")
    assert common.agree(None, tg.Tensor(np.float32(2.5)), False) == (2.5, False)
    assert common.agree(None, 0.125, True) == (0.125, True)


def test_first_interrupt_asks_to_stop_and_the_second_interrupts(capsys):
    common = load("_common")
    previous = signal.getsignal(signal.SIGINT)
    with common.stop_on_interrupt() as stop:
        assert not stop.requested
        signal.raise_signal(signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is previous
    assert "stopping after this step" in capsys.readouterr().out


def test_a_quiet_interrupt_stops_without_a_message(capsys):
    common = load("_common")
    with common.stop_on_interrupt(verbose=False) as stop:  # ranks other than 0
        signal.raise_signal(signal.SIGINT)
        assert stop.requested
    assert capsys.readouterr().out == ""


# -- Ctrl-C: exit status 130 ---------------------------------------------------------------------

LONG = {  # runs far longer than the tests wait, so that Ctrl-C comes during training
    "digits_mlp": ["--hidden", "16", "--epochs", "1000"],
    "digits_cnn": ["--channels", "4", "--epochs", "1000"],
    "char_transformer": [
        *("--steps", "100000", "--dim", "16", "--layers", "1", "--heads", "2"),
        *("--context", "16", "--batch-size", "4", "--max-chars", "20000", "--eval-every", "0"),
    ],
}


def _start(argv, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-W", "error", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(what, proc, deadline=120.0):
    t0 = time.monotonic()
    while not what():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the script ended before Ctrl-C (status {proc.returncode}):\n{err}")
        if time.monotonic() - t0 > deadline:
            proc.kill()
            pytest.fail("the script did not start training in time")
        time.sleep(0.05)


def test_ctrl_c_saves_the_state_and_exits_with_status_130(tmp_path):
    """Ctrl-C in a training loop stops after the step under way, saves the training state and
    exits with status 130 (128 + SIGINT, as a shell reports an interrupted program), not 0;
    Ctrl-C in the gradient check exits with 130 too, without a traceback. The four scripts
    run at once."""
    procs = {}
    try:
        for name, argv in LONG.items():
            out = tmp_path / name
            procs[name] = _start(
                [str(EXAMPLES / f"{name}.py"), *argv, "--out", str(out), "--save-every", "1"],
                tmp_path,
            )
        procs["gradient_check"] = _start(
            [str(EXAMPLES / "gradient_check.py"), "--examples", "1000000"], tmp_path
        )
        _interrupt_all(procs, tmp_path)
    finally:  # a failed check leaves no script running
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            for pipe in (proc.stdout, proc.stderr):
                pipe.close()


def _interrupt_all(procs, tmp_path):
    for name, proc in procs.items():
        if name == "gradient_check":  # its first line: the checks have started
            assert proc.stdout.readline().startswith("LogCosh:"), proc.communicate()
        else:  # a first step saved: the loop is running
            state = tmp_path / name / f"{name}.train-state.safetensors"
            _wait_for(state.is_file, proc)
        proc.send_signal(signal.SIGINT)
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{name} did not stop after Ctrl-C:\n{out}\n{err}")
        assert proc.returncode == 130, (name, proc.returncode, err)
        assert "Traceback" not in err, (name, err)
        if name == "gradient_check":
            assert err.strip().endswith("interrupted"), err
            assert "all gradient checks passed" not in out
        else:
            assert "stopping after this step" in out and "stopped after step" in out, out
            assert f"--resume --out {tmp_path / name}" in out


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_immediate_interrupt_exits_with_status_130_and_no_traceback(name, monkeypatch, capsys):
    """A second Ctrl-C (or one outside the training loop) raises KeyboardInterrupt: the
    script says so in one line and exits with status 130."""
    module = load(name)

    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run" if name == "gradient_check" else "train", interrupt)
    assert module.main([]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_an_interrupt_under_distributed_is_raised_for_the_abort_hook(monkeypatch):
    module = load("digits_mlp")

    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "train", interrupt)
    with pytest.raises(KeyboardInterrupt):  # tapegrad.distributed's hook ends every rank
        module.main(["--distributed"])


def test_distributed_without_mpi4py_says_what_to_install(tmp_path):
    code = (
        "import sys; sys.modules['mpi4py'] = None; "  # as if mpi4py were not installed
        f"sys.path.insert(0, {str(EXAMPLES)!r}); import digits_mlp; "
        "digits_mlp.main(['--distributed', '--epochs', '1', '--threads', '1'])"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("--distributed: ") and "pip install mpi4py mpich" in res.stderr


def test_char_transformer_layers_tiny_run_with_pytorch_named_layers(capsys):
    """The Transformer-layers twin of char_transformer.py: the same loop on a model built
    from nn.Embedding, nn.TransformerEncoder (causal mask) and nn.Linear."""
    ctl = load("char_transformer_layers")
    with pytest.raises(SystemExit) as exc:
        ctl.main(["--help"])
    assert exc.value.code == 0
    assert "--quick" in capsys.readouterr().out
    res = ctl.train(ctl.parse_args(TINY["char_transformer"]))
    out = capsys.readouterr().out
    assert not res["stopped"] and res["step"] == 12
    assert math.isfinite(res["validation_bits"]) and res["validation_bits"] < 8.0
    assert "validation loss:" in out and "char_transformer_layers.safetensors" in out
    layer = res["params"]["encoder"]["layers"]["0"]
    assert layer["self_attn"]["in_proj_weight"].shape == (16, 48)  # PyTorch's names
    assert set(layer) >= {"linear1", "linear2", "norm1", "norm2", "self_attn"}


def test_ode_scan_example_fits_the_parameters_through_scan(capsys):
    assert load("ode_scan").main(["--quick"]) == 0
    out = capsys.readouterr().out
    fitted = out.split("fitted k = ")[1]
    k, c = float(fitted.split(",")[0]), float(fitted.split("c = ")[1].split()[0])
    assert abs(k - 4.0) < 0.05 and abs(c - 0.3) < 0.02
    assert "settled after" in out
