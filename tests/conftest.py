"""Test-wide settings: ``jit`` programs run unfused unless a test turns fusion on.

Most tests check the compiled program's own passes (its listing, buffer reuse, exact equality
with eager runs); fused kernels are tested in ``tests/test_fusion.py`` and
``property_tests/test_fusion_props.py``, which turn fusion on (``fused`` fixture), so that the
suite compiles only the few kernels those tests need.
"""

import pytest

import tapegrad.core.fusion as _fusion

_fusion.set_enabled(False)


@pytest.fixture
def fused():
    """Fusion on for one test (skipped without numba)."""
    pytest.importorskip("numba")
    before = _fusion.set_enabled(True)
    try:
        yield
    finally:
        _fusion.set_enabled(before)
