"""Hypothesis profiles: ``ci`` (derandomized, bounded, no deadline: reproducible CI) and
``dev`` (searches harder). Select with HYPOTHESIS_PROFILE=dev; CI=true selects ``ci``."""

import os

import pytest
from hypothesis import HealthCheck, settings

import tapegrad.core.fusion as _fusion

_fusion.set_enabled(False)  # jit runs unfused here unless a test turns fusion on (``fused``)


@pytest.fixture
def fused():
    """Fusion on for one test (skipped without numba)."""
    pytest.importorskip("numba")
    before = _fusion.set_enabled(True)
    try:
        yield
    finally:
        _fusion.set_enabled(before)


settings.register_profile(
    "ci",
    max_examples=20,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
