"""tapegrad.log: setup_logger and ColorFormatter on the standard logging module."""

import io
import logging
import sys
import uuid

import pytest

from tapegrad.log import DEFAULT_FORMAT, LOGGER_NAME, ColorFormatter, setup_logger

RESET = "\x1b[0m"


class TTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self):
        return True


@pytest.fixture
def name():
    """A fresh logger name; the logger's handlers are removed afterwards."""
    n = f"tapegrad.test.{uuid.uuid4().hex}"
    yield n
    logger = logging.getLogger(n)
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    logger.setLevel(logging.NOTSET)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("DEBUG", raising=False)


def ours(logger):
    return [h for h in logger.handlers if getattr(h, "_tapegrad_setup_logger", False)]


def test_default_name_is_tapegrad():
    logger = logging.getLogger(LOGGER_NAME)
    others = [h for h in logger.handlers if h not in ours(logger)]
    level = logger.level
    try:
        assert setup_logger(stream=io.StringIO()) is logger
        assert logger.name == "tapegrad" and len(ours(logger)) == 1
    finally:
        for h in ours(logger):
            logger.removeHandler(h)
        logger.setLevel(level)
    assert logger.handlers == others


def test_messages_reach_the_stream_in_the_format(name):
    stream = io.StringIO()
    logger = setup_logger(name, stream=stream, fmt="%(levelname)s|%(name)s|%(message)s")
    logger.info("loss %.2f", 0.5)
    logger.debug("hidden at INFO")
    assert stream.getvalue() == f"INFO|{name}|loss 0.50\n"


def test_default_format_has_time_level_name_and_message(name):
    stream = io.StringIO()
    setup_logger(name, stream=stream).warning("careful")
    line = stream.getvalue()
    assert f"WARNING  {name}: careful" in line and line[:4].isdigit()
    assert "%(asctime)s" in DEFAULT_FORMAT


@pytest.mark.parametrize(
    "value, level",
    [
        (None, logging.INFO),
        ("1", logging.DEBUG),
        ("yes", logging.DEBUG),
        ("0", logging.INFO),
        ("", logging.INFO),
        ("false", logging.INFO),
    ],
)
def test_level_from_the_debug_environment_variable(name, monkeypatch, value, level):
    if value is not None:
        monkeypatch.setenv("DEBUG", value)
    assert setup_logger(name, stream=io.StringIO()).level == level


def test_explicit_level_wins_and_bad_levels_are_errors(name, monkeypatch):
    monkeypatch.setenv("DEBUG", "1")
    assert setup_logger(name, level="warning", stream=io.StringIO()).level == logging.WARNING
    assert setup_logger(name, level=logging.ERROR, stream=io.StringIO()).level == logging.ERROR
    with pytest.raises(ValueError, match="setup_logger: unknown level 'LOUD'"):
        setup_logger(name, level="LOUD")
    with pytest.raises(TypeError, match="setup_logger: level must be an int or a str"):
        setup_logger(name, level=True)


def test_calling_again_replaces_only_its_own_handler(name):
    logger = logging.getLogger(name)
    other = logging.NullHandler()
    logger.addHandler(other)
    first, second = io.StringIO(), io.StringIO()
    setup_logger(name, stream=first)
    setup_logger(name, stream=second)
    assert len(ours(logger)) == 1 and other in logger.handlers
    logger.info("once")
    assert first.getvalue() == "" and second.getvalue().count("once") == 1


def test_no_color_when_the_stream_is_not_a_terminal(name):
    stream = io.StringIO()
    setup_logger(name, stream=stream).error("plain")
    assert "\x1b[" not in stream.getvalue()


def test_color_on_a_terminal(name):
    stream = TTY()
    setup_logger(name, stream=stream).error("red")
    out = stream.getvalue()
    assert out.startswith(ColorFormatter.red) and out.endswith(RESET + "\n") and "red" in out


@pytest.mark.parametrize("value, colored", [("1", False), ("", True)])
def test_no_color_environment_variable(name, monkeypatch, value, colored):
    monkeypatch.setenv("NO_COLOR", value)
    stream = TTY()
    setup_logger(name, stream=stream).info("x")
    assert ("\x1b[" in stream.getvalue()) is colored


def test_default_stream_is_the_current_stderr(name, capsys):
    logger = setup_logger(name)
    logger.warning("to stderr")
    captured = capsys.readouterr()
    assert "to stderr" in captured.err and captured.out == ""
    assert "\x1b[" not in captured.err  # capsys's stderr is no terminal


def test_default_stream_colors_follow_stderr_at_each_record(name, monkeypatch):
    logger = setup_logger(name)
    tty = TTY()
    monkeypatch.setattr(sys, "stderr", tty)
    logger.info("colored")
    monkeypatch.setenv("NO_COLOR", "1")
    logger.info("plain")
    first, second = tty.getvalue().splitlines()
    assert first.startswith(ColorFormatter.green) and "\x1b[" not in second


@pytest.mark.parametrize(
    "levelno, color",
    [
        (logging.DEBUG, ColorFormatter.cyan),
        (logging.INFO, ColorFormatter.green),
        (25, ColorFormatter.green),  # a custom level takes the nearest standard level below
        (logging.WARNING, ColorFormatter.yellow),
        (logging.ERROR, ColorFormatter.red),
        (logging.CRITICAL, ColorFormatter.bold_red),
        (60, ColorFormatter.bold_red),
        (5, ""),
    ],
)
def test_formatter_colors_by_level(levelno, color):
    record = logging.makeLogRecord({"levelno": levelno, "msg": "m %s", "args": (1,)})
    text = ColorFormatter("%(message)s", use_color=True).format(record)
    assert text == (f"{color}m 1{RESET}" if color else "m 1")
    assert ColorFormatter("%(message)s", use_color=False).format(record) == "m 1"


def test_formatter_leaves_the_record_unchanged_and_wraps_the_traceback():
    try:
        raise KeyError("boom")
    except KeyError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, "f.py", 1, "failed %d", (3,), sys.exc_info()
        )
    colored = ColorFormatter("%(levelname)s %(message)s", use_color=True).format(record)
    assert colored.startswith(ColorFormatter.red + "ERROR failed 3\nTraceback")
    assert colored.endswith("KeyError: 'boom'" + RESET)
    assert record.msg == "failed %d" and record.levelname == "ERROR"
    plain = logging.Formatter("%(levelname)s %(message)s").format(record)
    assert "\x1b[" not in plain


def test_formatter_options_pass_through_to_logging():
    record = logging.makeLogRecord({"levelno": logging.INFO, "msg": "hi"})
    fmt = ColorFormatter("{message} {extra}", style="{", defaults={"extra": "!"}, use_color=False)
    assert fmt.format(record) == "hi !"
    with pytest.raises(ValueError):
        ColorFormatter("%(message)s", style="{")  # fmt does not match style
    with pytest.raises(TypeError, match="ColorFormatter: use_color must be True, False or None"):
        ColorFormatter(use_color="yes")


def test_formatter_auto_mode_reads_no_color_and_stderr(monkeypatch):
    record = logging.makeLogRecord({"levelno": logging.INFO, "msg": "hi"})
    fmt = ColorFormatter()
    monkeypatch.setattr(sys, "stderr", TTY())
    assert fmt.format(record) == ColorFormatter.green + "hi" + RESET
    monkeypatch.setenv("NO_COLOR", "1")
    assert fmt.format(record) == "hi"
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert fmt.format(record) == "hi"
