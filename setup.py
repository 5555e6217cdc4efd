"""The compiled hot paths (src/tapegrad/_speedups.c); everything else is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and tapegrad runs
the pure-Python originals of these paths (see docs/design.md). The SHA-256 of the source is
compiled in, so a test can tell a stale build (the source edited, ``pip install -e .`` not
rerun) from a current one.
"""

import hashlib
import pathlib

from setuptools import Extension, setup

SOURCE = "src/tapegrad/_speedups.c"
SHA = hashlib.sha256((pathlib.Path(__file__).parent / SOURCE).read_bytes()).hexdigest()

setup(
    ext_modules=[
        Extension(
            "tapegrad._speedups",
            sources=[SOURCE],
            define_macros=[("TAPEGRAD_SOURCE_SHA256", f'"{SHA}"')],
            optional=True,
        )
    ]
)
