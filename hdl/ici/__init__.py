"""ICI: the inter-chip interconnect of a pod, a torus (or mesh) of credit-based VC routers.

``config`` (parameters), ``packet`` (flit, header and link formats), ``link`` (CRC and go-back-N
retry), ``router`` (one router), ``network`` (the k1 x k2 [x k3] top), ``harness`` (test-only
top with synthesizable traffic generators and checkers).
"""

__all__ = []
