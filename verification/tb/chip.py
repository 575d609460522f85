"""cocotb testbench of the chip: the TensorCore's programs run against the HBM controller, with
the golden HBM device model on every pseudo-channel (verification/tb/hbm.py) checking each
command; operands go into HBM and results come out through the device model's backdoor
(through the controller's address map and ECC). The ICI router's ports are idle.
"""

from hdl.chip import ChipConfig
from verification.tb.bench import SHORT_FLOWS, new_rng
from verification.tb.hbm import HBMBench
from verification.tb.packing import load_sidecar
from verification.tb.tensorcore import TESTS, TensorCoreHost, cocotb_tests

__all__ = ["ChipBench"]


class ChipBench:
    """The bench interface of verification/tb/tensorcore.py on the chip."""

    def __init__(self, dut, flow="random_random"):
        self.dut = dut
        self.chip = ChipConfig.from_dict(load_sidecar()["parameters"])
        self.cfg = self.chip.tensorcore
        self.rng = new_rng()
        self.hbm = HBMBench(dut, flow, masters=False, config=self.chip.hbm, prefix="hbm_pc")
        self.host = TensorCoreHost(dut, "csr", self.cfg, flow)

    async def start(self):
        dut = self.dut
        for p in range(self.chip.ici.net_ports):
            getattr(dut, f"ici_link_in__{p}__flit").value = 0
        for lp in range(self.chip.ici.local_ports):
            getattr(dut, f"ici_inject__{lp}__valid").value = 0
            getattr(dut, f"ici_eject__{lp}__ready").value = 1
        await self.hbm.start()

    def write_hbm(self, address, data):
        """Backdoor write of any bytes (whole accesses around them are read and rewritten)."""
        ab = self.chip.hbm.access_bytes
        start = address - address % ab
        end = -(-(address + len(data)) // ab) * ab
        image = bytearray(self.hbm.dump(start, end - start))
        image[address - start: address - start + len(data)] = data
        self.hbm.load(start, bytes(image))

    def read_hbm(self, address, length):
        return self.hbm.dump(address, length)

    async def run(self, program, **kw):
        await self.host.load(program)
        out = await self.host.run(self.dut.running, **kw)
        assert self.hbm.error is None, str(self.hbm.error)
        return out


globals().update(cocotb_tests(ChipBench, TESTS, SHORT_FLOWS, __name__))
