"""Verification: numpy golden models, cocotb testbenches and the pytest suites that run them."""
