"""Collection of cocotb tests into pytest: every cocotb test of a testbench module becomes a
pytest item per configuration, so a new cocotb test is never silently left out.

A test marked ``only_if`` (verification/tb/bench.py) is collected only for the configurations
it applies to; a ``measurement`` is never collected (benchmarks run it).
"""

import importlib

__all__ = ["cocotb_tests", "cases"]


def cocotb_tests(module, params=None):
    """Names of the cocotb tests of testbench ``module`` (a dotted name) that apply to a
    configuration with ``params`` (its ``to_dict()``), in definition order."""
    mod = importlib.import_module(module)
    names = []
    for obj in vars(mod).values():
        if not (hasattr(obj, "generate_tests") and getattr(obj, "module", None) == mod.__name__):
            continue
        if getattr(obj, "podium_measurement", False):
            continue
        only_if = getattr(obj, "podium_only_if", None)
        if only_if is not None and params is not None and not only_if(params):
            continue
        names.append(obj.name)
    return names


def cases(module, configs, marks=None):
    """``(config name, test name)`` pairs of every test of ``module`` on every configuration
    of ``configs`` (a dict), as pytest params with ids ``<config>-<test>``; ``marks(config
    name, test name)`` may add marks (e.g. ``slow``)."""
    import pytest

    return [pytest.param(name, test, marks=marks(name, test) if marks else (),
                         id=f"{name}-{test}")
            for name, config in configs.items()
            for test in cocotb_tests(module, config.to_dict())]
