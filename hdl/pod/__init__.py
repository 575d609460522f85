"""Pod: chips on the ICI torus (docs/pod.md).

``config`` (the endpoint's parameters), ``endpoint`` (the chip's ICI endpoint: messages
segmented into ICI packets by the :class:`~hdl.pod.endpoint.Sender`, executed in order by the
destination's :class:`~hdl.pod.endpoint.Receiver` (stores, int32 / fp32 adds, reads,
completions), and answered by its :class:`~hdl.pod.endpoint.Responder` (read data, acks)),
``collective`` (the :class:`~hdl.pod.collective.CollectiveEngine`, which runs a chip's part of
a ring reduce-scatter, all-gather or all-reduce through the endpoint).
"""

__all__ = []
