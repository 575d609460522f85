"""Podium generator: Amaranth components for a TPU-style accelerator, by block."""
