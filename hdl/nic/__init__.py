"""A chip's network interface (docs/nic.md): ``endpoint`` (messages segmented into ICI packets
by the :class:`~hdl.nic.endpoint.Sender`, executed in order by the destination's
:class:`~hdl.nic.endpoint.Receiver` (stores, int32 / fp32 / bfloat16 adds, reads,
completions), and answered by its :class:`~hdl.nic.endpoint.Responder` (read data, acks)),
``collective`` (the :class:`~hdl.nic.collective.CollectiveEngine`), ``interface`` (the
endpoint as every chip has it, with its message unit), ``memory`` and ``hbm_port`` (the
memories it reaches), ``ici_unit`` (a TensorCore's ICI queue) and ``nic`` (the block).
"""
