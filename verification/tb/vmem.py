"""The VMEM in Python, behind a DUT's VMEM ports (hdl/tensorcore/vmem_ports.py), for benches of
the engines that use them (VPU, and the MXU feeder, result writer and DMA alike).

The memory is a numpy array of rows of bytes. Each port's ``ready`` follows its own pause
generator (random backpressure). A read port answers on ``data`` exactly in the cycle after
the handshake and drives random bits in every other cycle, so an engine that samples at the
wrong time reads garbage; a read of a row that a write port writes in the same cycle also
answers garbage (the VMEM promises neither order). A write applies ``data`` under ``strb`` at
its handshake. Every port checks the request rule (``valid`` held, request unchanged, until
the handshake) and logs its handshakes and their cycles, so a bench can compare the requests
with the ones its golden model expects.

Attach the model to the bench's loop (``StreamBench.attach``); it drives at the falling edge
and samples once the cycle has settled, like the stream drivers.
"""

import itertools

import numpy as np

__all__ = ["VMEMModel"]


class _Port:
    def __init__(self, dut, name, fields, pauses):
        self.name = name
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._fields = {f: getattr(dut, f"{name}__{f}") for f in fields}
        self._pauses = pauses if pauses is not None else itertools.repeat(False)
        self._accepting = False
        self._held = None
        self.log = []
        self.cycles = []
        self._ready.value = 0

    def _request(self):
        """The handshake this cycle as a tuple of the request's fields, or None; checks that a
        pending request stayed as it was."""
        valid = bool(self._valid.value)
        request = tuple(self._fields[f].value.to_unsigned() for f in self._fields) if valid \
            else None
        if self._held is not None:
            assert request == self._held, (
                f"{self.name}: valid dropped or the request changed before the handshake "
                f"({self._held} -> {request})")
        self._held = request if valid and not self._accepting else None
        return request if valid and self._accepting else None


class VMEMModel:
    """VMEM rows behind read and write ports (see the module docstring).

    Parameters
    ----------
    dut : the cocotb DUT
    rows, row_bytes : int
    rng : random.Random
        For the garbage on idle read data.
    """

    def __init__(self, dut, rows, row_bytes, rng):
        self._dut = dut
        self.mem = np.zeros((rows, row_bytes), dtype=np.uint8)
        self._row_bytes = row_bytes
        self._rng = rng
        self._reads = []
        self._writes = []

    def read_port(self, name, backpressure=None):
        """Serve read port ``name``; its handshakes are logged as row indices."""
        port = _Port(self._dut, name, ("addr",), backpressure)
        port._data = getattr(self._dut, f"{name}__data")
        port._answer = None
        self._reads.append(port)
        return port

    def write_port(self, name, backpressure=None):
        """Serve write port ``name``; its handshakes are logged as ``(addr, data, strb)``."""
        port = _Port(self._dut, name, ("addr", "data", "strb"), backpressure)
        self._writes.append(port)
        return port

    def row(self, index):
        return int.from_bytes(self.mem[index].tobytes(), "little")

    def _drive(self):
        for port in self._reads:
            answer = port._answer
            port._data.value = (answer if answer is not None
                                else self._rng.getrandbits(8 * self._row_bytes))
        for port in self._reads + self._writes:
            port._accepting = not next(port._pauses)
            port._ready.value = int(port._accepting)

    def _sample(self, cycle):
        writes = [(port, port._request()) for port in self._writes]
        written = {req[0] for _, req in writes if req is not None}
        for port in self._reads:
            req = port._request()
            port._answer = None
            if req is not None:
                port.log.append(req[0])
                port.cycles.append(cycle)
                port._answer = (self._rng.getrandbits(8 * self._row_bytes) if req[0] in written
                                else self.row(req[0]))
        for port, req in writes:
            if req is None:
                continue
            addr, data, strb = req
            port.log.append(req)
            port.cycles.append(cycle)
            new = np.frombuffer(data.to_bytes(self._row_bytes, "little"), dtype=np.uint8)
            mask = np.array([(strb >> i) & 1 for i in range(self._row_bytes)], dtype=bool)
            self.mem[addr][mask] = new[mask]
