"""Pod: chips on the ICI torus (docs/pod.md).

``config`` (the endpoint's parameters), ``endpoint`` (the chip's ICI endpoint: a message
segmented into ICI packets by the :class:`~hdl.pod.endpoint.Sender`, written to memory in
order and counted complete by the :class:`~hdl.pod.endpoint.Receiver`).
"""

__all__ = []
