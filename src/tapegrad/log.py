"""Console logging with colored levels, on the standard :mod:`logging` module.

tapegrad's own messages go to the ``"tapegrad"`` logger (and its children, such as
``"tapegrad.examples"``). Like every library, tapegrad attaches no handler by itself:
:func:`setup_logger` is the one-call opt-in for a console handler, and anything the
:mod:`logging` module offers (``logging.basicConfig``, file handlers, ``dictConfig``) works as
usual instead.

Colors follow the `NO_COLOR <https://no-color.org>`_ convention: :func:`setup_logger` colors
its output only when the stream is a terminal (``stream.isatty()``) and the environment
variable ``NO_COLOR`` is unset or empty.

Example:
    >>> import io, logging
    >>> from tapegrad.log import setup_logger
    >>> stream = io.StringIO()  # not a terminal: no color codes
    >>> logger = setup_logger("tapegrad.demo", stream=stream, fmt="%(levelname)s %(message)s")
    >>> logger.info("step %d: loss %.3f", 10, 0.25)
    >>> stream.getvalue()
    'INFO step 10: loss 0.250\\n'
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["ColorFormatter", "setup_logger", "DEFAULT_FORMAT", "LOGGER_NAME"]

LOGGER_NAME = "tapegrad"
"""Name of tapegrad's root logger."""

DEFAULT_FORMAT = "%(asctime)s %(levelname)-8s %(name)s: %(message)s"
"""Record layout of :func:`setup_logger`'s handler (``%``-style fields of :mod:`logging`)."""

_FALSE = ("", "0", "false", "no", "off")


def _no_color() -> bool:
    """Whether the environment asks for no color (``NO_COLOR`` set and not empty)."""
    return bool(os.environ.get("NO_COLOR"))


def _is_tty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed or detached stream
        return False


class ColorFormatter(logging.Formatter):
    """A :class:`logging.Formatter` that colors each record by its level with ANSI codes.

    The whole formatted record (traceback included) is wrapped in the level's color and a
    reset code: DEBUG cyan, INFO green, WARNING yellow, ERROR red, CRITICAL bold red. A custom
    level takes the color of the nearest standard level below it; levels below DEBUG are not
    colored. The record itself is not modified, so other handlers see it unchanged.

    Args:
        fmt: Record layout, as for :class:`logging.Formatter` (``None``: ``"%(message)s"``).
        datefmt: ``time.strftime`` layout of ``%(asctime)s``.
        style: ``"%"``, ``"{"`` or ``"$"``.
        validate: Check ``fmt`` against ``style``.
        defaults: Values for custom fields of ``fmt`` missing from a record.
        use_color: ``True`` always colors, ``False`` never does, ``None`` (default) colors when
            ``NO_COLOR`` is unset or empty and ``sys.stderr`` is a terminal, which is where a
            plain ``logging.StreamHandler()`` writes. :func:`setup_logger` passes the answer
            for its own stream.

    Raises:
        ValueError: if ``fmt`` does not match ``style`` (from :class:`logging.Formatter`).

    Example:
        >>> import logging
        >>> from tapegrad.log import ColorFormatter
        >>> record = logging.makeLogRecord({"levelno": logging.WARNING, "msg": "careful"})
        >>> ColorFormatter(use_color=True).format(record)
        '\\x1b[33;20mcareful\\x1b[0m'
        >>> ColorFormatter(use_color=False).format(record)
        'careful'
    """

    grey = "\x1b[38;20m"
    yellow = "\x1b[33;20m"
    red = "\x1b[31;20m"
    bold_red = "\x1b[31;1m"
    cyan = "\x1b[36;20m"
    green = "\x1b[32;20m"
    reset = "\x1b[0m"
    FORMATS = {
        logging.DEBUG: cyan,
        logging.INFO: green,
        logging.WARNING: yellow,
        logging.ERROR: red,
        logging.CRITICAL: bold_red,
    }

    def __init__(
        self,
        fmt: str | None = None,
        datefmt: str | None = None,
        style: str = "%",
        validate: bool = True,
        *,
        defaults: dict | None = None,
        use_color: bool | None = None,
    ):
        super().__init__(fmt, datefmt, style, validate, defaults=defaults)  # pyright: ignore[reportArgumentType, reportAttributeAccessIssue]
        if use_color is not None and not isinstance(use_color, bool):
            raise TypeError(
                f"ColorFormatter: use_color must be True, False or None, got {use_color!r}"
            )
        self.use_color = use_color

    def color_for(self, levelno: int) -> str:
        """The ANSI color code for a level number (``""`` below DEBUG)."""
        below = [level for level in self.FORMATS if level <= levelno]
        return self.FORMATS[max(below)] if below else ""

    def _colors_on(self) -> bool:
        if self.use_color is not None:
            return self.use_color
        return not _no_color() and _is_tty(sys.stderr)

    def format(self, record: logging.LogRecord) -> str:
        """Format ``record`` as :class:`logging.Formatter` does, wrapped in its level's color.

        Args:
            record: The log record.

        Returns:
            The formatted text, with ANSI color codes when colors are on.
        """
        text = super().format(record)
        color = self.color_for(record.levelno) if self._colors_on() else ""
        return f"{color}{text}{self.reset}" if color else text


def _level_from_env() -> int:
    debug = os.environ.get("DEBUG", "")
    return logging.DEBUG if debug.strip().lower() not in _FALSE else logging.INFO


def setup_logger(
    name: str | None = None,
    *,
    level: int | str | None = None,
    stream=None,
    fmt: str = DEFAULT_FORMAT,
    datefmt: str | None = None,
) -> logging.Logger:
    """A logger with one colored console handler, ready to use.

    Calling it again for the same logger replaces the handler it added before (and nothing
    else), so a script or notebook cell can run it many times without duplicating messages.
    The logger still propagates to the root logger; if the root logger has handlers of its
    own (``logging.basicConfig``), messages appear there too.

    Args:
        name: Logger name; ``None`` is tapegrad's logger, ``"tapegrad"``. A child name such as
            ``"tapegrad.train"`` or any other name works too.
        level: Logging level (``logging.INFO``, ``"DEBUG"``, ...). ``None``: ``DEBUG`` when the
            environment variable ``DEBUG`` is set to anything but an empty string, ``0``,
            ``false``, ``no`` or ``off``; ``INFO`` otherwise.
        stream: Where the handler writes. ``None`` is ``sys.stderr``, looked up at each
            record (so pytest's and Jupyter's captures work), and colors are then decided at
            each record too; for a given stream they are decided once, here.
        fmt: Record layout (``%``-style); default :data:`DEFAULT_FORMAT`, with the time, the
            level, the logger's name and the message.
        datefmt: ``time.strftime`` layout of the time.

    Returns:
        The configured :class:`logging.Logger`.

    Raises:
        ValueError: for an unknown level name.
        TypeError: for a level that is neither an int nor a str.

    Example:
        >>> import io
        >>> from tapegrad.log import setup_logger
        >>> logger = setup_logger(stream=io.StringIO())
        >>> logger.name
        'tapegrad'
    """
    logger = logging.getLogger(LOGGER_NAME if name is None else name)
    if level is None:
        level = _level_from_env()
    elif isinstance(level, str):
        resolved = logging.getLevelName(level.upper())
        if not isinstance(resolved, int):
            raise ValueError(
                f"setup_logger: unknown level {level!r}; expected one of DEBUG, INFO, "
                "WARNING, ERROR, CRITICAL or a number"
            )
        level = resolved
    elif not isinstance(level, int) or isinstance(level, bool):
        raise TypeError(f"setup_logger: level must be an int or a str, got {level!r}")
    if stream is None:  # colors decided at each record, for whatever sys.stderr is then
        handler, use_color = _StderrHandler(), None
    else:
        handler = logging.StreamHandler(stream)
        use_color = not _no_color() and _is_tty(stream)
    handler.setFormatter(ColorFormatter(fmt, datefmt, use_color=use_color))
    handler._tapegrad_setup_logger = True  # marks the handler a later call replaces  # pyright: ignore[reportAttributeAccessIssue]
    for old in [h for h in logger.handlers if getattr(h, "_tapegrad_setup_logger", False)]:
        logger.removeHandler(old)
        old.close()
    logger.addHandler(handler)
    logger.setLevel(level)
    return logger


class _StderrHandler(logging.StreamHandler):
    """A StreamHandler on whatever ``sys.stderr`` is at each write (captures replace it)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler.__init__ assigns it; the property wins
        pass
