"""Integrations with other systems (each needs its own extra)."""
