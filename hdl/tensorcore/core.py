"""The TensorCore top: sequencer, VMEM, DMA, matrix engine and VPU, with its control and
status registers on AXI4-Lite (the memory map is in docs/tensorcore.md).

VMEM ports: reads by the MXU's activation and weight readers, the VPU's two sources and the
DMA's stores; writes by the MXU's result writer, the VPU and the DMA's loads; with ``ici``,
the pod chip's ICI endpoint's reads and writes besides (``ICI_READ_PORTS``,
``ICI_WRITE_PORTS``).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.axi import engine_members
from ..lib.axilite import AxiLiteRegisters
from ..top import Top
from .dma import DMA
from .ici_port import ICI_READ_PORTS, ICI_WRITE_PORTS, ici_command_layout
from .matmul import MatmulEngine
from .sequencer import EVENTS, Sequencer
from .vmem import VMEM
from .vmem_ports import vmem_read_signature, vmem_write_signature
from .vpu import VPU

__all__ = ["TensorCore", "COUNTERS", "ICI_COUNTERS", "counter_names", "REG", "CSR_ADDR_WIDTH",
           "ID_VALUE"]

CSR_ADDR_WIDTH = 16
ID_VALUE = 0x50444D01
REG = {"ID": 0x0000, "CONTROL": 0x0004, "STATUS": 0x0008, "ERROR": 0x000C, "ERROR_PC": 0x0010,
       "PC": 0x0014, "START_PC": 0x0018, "COUNTERS": 0x0100, "REGS": 0x0200, "SEMS": 0x0300,
       "IMEM": 0x8000}
"""Byte addresses of the registers and windows (docs/tensorcore.md)."""
COUNTERS = ("cycles", "retired", "mxu_busy", "dma_busy", "vpu_busy", "dma_wait", "mxu_wait",
            "vpu_wait", "sem_stalls", "bytes_read", "bytes_written", "dispatch_stalls",
            "mxu_vectors", "mxu_starved")
"""The counters, in register order (COUNTERS + 4k)."""
ICI_COUNTERS = ("ici_busy", "ici_wait", "arrivals")
"""With ``ici``, the counters after COUNTERS: the ICI engine not idle, the ICI queue's front
a ``wait`` that cannot proceed, messages from other chips that signalled a semaphore."""


def counter_names(cfg):
    """The counters of a TensorCore of ``cfg``, in register order."""
    return COUNTERS + (ICI_COUNTERS if cfg.ici else ())


class TensorCore(Top):
    """The TensorCore (see docs/tensorcore.md).

    Members
    -------
    csr : In(AXI4LiteSignature)
        Control, status, counters, registers, instruction memory.
    axi : Out(AXI4Signature)
        The DMA's manager port (to an HBM controller port).
    running, done, error : Out(1)
        STATUS bits, for a host that watches pins rather than polling.
    ici : Out(stream of ici_command_layout), ici_idle, ici_error : In(1), ici_error_pc : In(16)
    arrive : In(1), arrive_sem : In(5)
        With ``ici``: as the :class:`~.sequencer.Sequencer`'s.
    vmem_rd : In(vmem_read_signature).array(ICI_READ_PORTS)
    vmem_wr : In(vmem_write_signature).array(ICI_WRITE_PORTS)
        With ``ici``: VMEM ports for the chip's ICI endpoint.
    """

    def __init__(self, config):
        cfg = config
        self._seq = Sequencer(cfg, imem_name=f"{cfg.name}_imem")
        extra = (ICI_READ_PORTS, ICI_WRITE_PORTS) if cfg.ici else (0, 0)
        self._vmem = VMEM(cfg, reads=5 + extra[0], writes=3 + extra[1],
                          name=f"{cfg.name}_vmem_bank")
        self._matmul = MatmulEngine(cfg)
        self._vpu = VPU(cfg, prefix=cfg.name)
        members = engine_members(cfg, CSR_ADDR_WIDTH)
        if cfg.ici:
            members.update({
                "ici": Out(stream.Signature(ici_command_layout(cfg))),
                "ici_idle": In(1), "ici_error": In(1), "ici_error_pc": In(16),
                "arrive": In(1), "arrive_sem": In(5),
                "vmem_rd": In(vmem_read_signature(cfg)).array(ICI_READ_PORTS),
                "vmem_wr": In(vmem_write_signature(cfg)).array(ICI_WRITE_PORTS),
            })
        super().__init__(config, members)

    @property
    def submodules(self):
        return [*self._seq.submodules, *self._vmem.submodules, *self._matmul.submodules,
                *self._vpu.submodules]

    @property
    def extras(self):
        """The register map, for hosts that drive the Verilog."""
        return {"csr": {"registers": REG, "counters": list(counter_names(self.config)),
                        "id": ID_VALUE}}

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.seq = seq = self._seq
        m.submodules.vmem = vmem = self._vmem
        m.submodules.matmul = mm = self._matmul
        m.submodules.dma = dma = DMA(cfg)
        m.submodules.vpu = vpu = self._vpu
        # VMEM's ports in order: the engines' first, then the ICI endpoint's.
        readers = [mm.a_rd, mm.w_rd, vpu.src1, vpu.src2, dma.rd]
        writers = [mm.c_wr, vpu.dst, dma.wr]
        if cfg.ici:
            readers += [wiring.flipped(port) for port in self.vmem_rd]
            writers += [wiring.flipped(port) for port in self.vmem_wr]
        for port, vmem_port in zip(readers, vmem.rd, strict=True):
            wiring.connect(m, port, vmem_port)
        for port, vmem_port in zip(writers, vmem.wr, strict=True):
            wiring.connect(m, port, vmem_port)
        if cfg.ici:
            wiring.connect(m, seq.ici, wiring.flipped(self.ici))
            m.d.comb += [seq.ici_idle.eq(self.ici_idle), seq.ici_error.eq(self.ici_error),
                         seq.ici_error_pc.eq(self.ici_error_pc), seq.arrive.eq(self.arrive),
                         seq.arrive_sem.eq(self.arrive_sem)]
        wiring.connect(m, seq.dma, dma.cmd)
        wiring.connect(m, seq.mxu, mm.cmd)
        wiring.connect(m, seq.vpu, vpu.cmd)
        wiring.connect(m, dma.axi, wiring.flipped(self.axi))
        m.d.comb += [
            seq.dma_idle.eq(dma.idle), seq.mxu_idle.eq(mm.idle), seq.vpu_idle.eq(vpu.idle),
            seq.dma_signal.eq(dma.signal), seq.dma_sem.eq(dma.sem),
            seq.dma_signal_pc.eq(dma.signal_pc), seq.dma_error.eq(dma.error),
            seq.dma_error_pc.eq(dma.error_pc), dma.flush.eq(seq.dma_flush),
            self.running.eq(seq.running), self.done.eq(seq.done), self.error.eq(seq.error),
        ]
        events = {name: seq.events[k] for k, name in enumerate(EVENTS)}
        events.update({"mxu_busy": mm.mxu_busy, "dma_busy": ~dma.idle, "vpu_busy": ~vpu.idle,
                       "bytes_read": Mux(dma.read_beat, cfg.beat_bytes, 0),
                       "bytes_written": Mux(dma.write_beat, cfg.beat_bytes, 0)})
        if cfg.ici:
            events.update({"ici_busy": ~self.ici_idle, "ici_wait": seq.ici_wait,
                           "arrivals": self.arrive})
        names = counter_names(cfg)
        counters = [Signal(32, name=f"counter_{name}") for name in names]
        mac_at_go = Signal(32)
        with m.If(seq.go):
            m.d.sync += mac_at_go.eq(mm.mac)
        for name, counter in zip(names, counters, strict=True):
            if name == "mxu_vectors":
                m.d.comb += counter.eq(mm.mac - mac_at_go)
                continue
            with m.If(seq.go):
                m.d.sync += counter.eq(0)
            with m.Elif(events[name]):
                m.d.sync += counter.eq(counter + events[name])
        self._registers(m, seq, counters)
        return m

    def _registers(self, m, seq, counters):
        """The AXI4-Lite register map."""
        cfg = self.config
        m.submodules.csr = csr = AxiLiteRegisters(addr_width=CSR_ADDR_WIDTH)
        wiring.connect(m, wiring.flipped(self.csr), csr.bus)
        start_pc = Signal(16)
        control = csr.write & (csr.waddr == REG["CONTROL"])
        imem = csr.write & (csr.waddr >= REG["IMEM"])
        word = (csr.waddr - REG["IMEM"]) >> 3
        high = csr.waddr[2]
        m.d.comb += [
            seq.start.eq(control & csr.wdata[0]), seq.abort.eq(control & csr.wdata[1]),
            seq.clear.eq(control & csr.wdata[2]), seq.start_pc.eq(start_pc),
            seq.imem_we.eq(imem & ~seq.running & (word < cfg.imem_depth)),
            seq.imem_addr.eq(word), seq.imem_data.eq(Cat(csr.wdata, csr.wdata)),
            seq.imem_strb.eq(Mux(high, 0xF0, 0x0F)),
        ]
        with m.If(csr.write & (csr.waddr == REG["START_PC"])):
            m.d.sync += start_pc.eq(csr.wdata)
        a = csr.raddr
        value = Signal(32)
        fixed = {REG["ID"]: ID_VALUE,
                 REG["STATUS"]: Cat(seq.running, seq.done, seq.error),
                 REG["ERROR"]: seq.error_code.as_value(), REG["ERROR_PC"]: seq.error_pc,
                 REG["PC"]: seq.pc, REG["START_PC"]: start_pc}
        with m.Switch(a):
            for addr, v in fixed.items():
                with m.Case(addr):
                    m.d.comb += value.eq(v)
            with m.Default():
                windows = [(REG["COUNTERS"], counters), (REG["REGS"], seq.regs),
                           (REG["SEMS"], seq.sems)]
                for base, regs in windows:
                    with m.If((a >= base) & (a < base + 4 * len(regs))):
                        m.d.comb += value.eq(Array(regs)[(a - base) >> 2])
        m.d.comb += csr.rdata.eq(value)
