"""Shared settings: modest hypothesis runs with no deadline (tests never time anything)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "memci",
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# A longer hunt, by hand: pytest tests --hypothesis-profile=thorough
settings.register_profile("thorough", parent=settings.get_profile("memci"), max_examples=1000, stateful_step_count=60)
settings.load_profile("memci")
