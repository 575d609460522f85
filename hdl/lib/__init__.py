"""Gateware shared between blocks."""
