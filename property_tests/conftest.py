"""Hypothesis profiles: ``ci`` (derandomized, bounded, no deadline: reproducible CI) and
``dev`` (searches harder). Select with HYPOTHESIS_PROFILE=dev; CI=true selects ``ci``."""

import os

from hypothesis import HealthCheck, settings

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
