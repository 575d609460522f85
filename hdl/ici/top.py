"""Entry point of the ICI block for ``hdl.generate``: the top a configuration asks for."""

from .harness import Harness
from .network import Network
from .router import Router

__all__ = ["ici_top"]


def ici_top(config):
    """The component of ``config.top``: Network, Router or (test-only) Harness."""
    return {"network": Network, "router": Router, "harness": Harness}[config.top](config)
