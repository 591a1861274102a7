"""Sensors: one module per source of readings."""
