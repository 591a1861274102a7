"""Sampling engine (never imports the UI)."""

from .sampler import Engine

__all__ = ["Engine"]
