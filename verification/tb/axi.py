"""AXI drivers for testbenches: cocotbext-axi managers and memories with the shared idle and
backpressure vocabulary, and :class:`AxiDriver`, a lean manager that keeps a port saturated.

Every AXI bus of a generated top is flattened as ``<prefix>__awid`` ... (``hdl.lib.axi``), which
cocotbext-axi finds with ``AxiBus.from_prefix(dut, prefix + "_")``. Idle applies to the
channels the testbench drives, backpressure to those it receives: for a manager AW, W and AR
idle and B and R backpressure, for a memory (a subordinate) the other way round.
"""

from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiMaster, AxiRam

from .bench import flow_pauses, new_rng, pause

__all__ = ["axi_master", "axi_ram", "axil_master", "AxiDriver"]


def _set_pauses(pairs):
    # A channel that never pauses gets no generator: cocotbext-axi would otherwise run a
    # coroutine stepping it every clock. The generator is drawn all the same, so the random
    # streams of the other channels do not depend on which ones are "none".
    for channel, kind in pairs:
        generator = pause(kind, new_rng())
        if kind != "none":
            channel.set_pause_generator(generator)


def _manager(cls, bus, dut, prefix, flow):
    idle, backpressure = flow_pauses(flow)
    master = cls(bus.from_prefix(dut, f"{prefix}_"), dut.clk, dut.rst)
    w, r = master.write_if, master.read_if
    _set_pauses([(w.aw_channel, idle), (w.w_channel, idle), (r.ar_channel, idle),
                 (w.b_channel, backpressure), (r.r_channel, backpressure)])
    return master


def axi_master(dut, prefix, flow="none_none"):
    """A cocotbext-axi ``AxiMaster`` on bus ``prefix``, paused as ``flow`` says."""
    return _manager(AxiMaster, AxiBus, dut, prefix, flow)


def axi_ram(dut, prefix, size, flow="none_none", *, mem=None):
    """A cocotbext-axi ``AxiRam`` of ``size`` bytes answering bus ``prefix`` (a DMA's memory),
    paused as ``flow`` says; ``mem``: the bytes of another ``AxiRam`` (two ports of one
    memory)."""
    idle, backpressure = flow_pauses(flow)
    ram = AxiRam(AxiBus.from_prefix(dut, f"{prefix}_"), dut.clk, dut.rst, size=size, mem=mem)
    w, r = ram.write_if, ram.read_if
    _set_pauses([(w.b_channel, idle), (r.r_channel, idle), (w.aw_channel, backpressure),
                 (w.w_channel, backpressure), (r.ar_channel, backpressure)])
    return ram


def axil_master(dut, prefix, flow="none_none"):
    """A cocotbext-axi ``AxiLiteMaster`` on the control bus ``prefix``."""
    return _manager(AxiLiteMaster, AxiLiteBus, dut, prefix, flow)


class AxiDriver:
    """A lean AXI4 manager for saturating traffic: one clocked loop keeps AR and AW/W valid
    whenever commands wait (unless the flow pauses them), so the design, not Python, sets the
    pace. Read data is checked against ``memory`` (a golden
    :class:`~verification.models.memory.ByteMemory`, updated by the writes it sends); every
    response must be OKAY.

    Commands are ``(kind, id, address, beats[, strb])`` with kind ``"r"`` or ``"w"``;
    full-width, bus-aligned INCR bursts; write data is random and its strobed bytes (all by
    default) enter ``memory``. Reads and writes keep program order loosely: neither channel runs
    more than ``WINDOW`` commands ahead of the other's next one, so a mix reaches the design in
    its ratio. A valid once raised stays until its handshake.

    ``cycle`` is a callable giving the current cycle number (the bench's clock); the driver
    records ``first_cycle`` (first request offered), ``last_cycle`` (last response) and
    ``b_latency`` (per write, AW handshake to B, in cycles). ``trace``, a file, gets a line per
    AR and AW.
    """

    WINDOW = 16

    def __init__(self, dut, prefix, memory, cycle, *, flow="none_none", trace=None):
        self.dut = dut
        self.memory = memory
        self.cycle = cycle
        self.trace = trace
        self.rng = new_rng()
        self.s = {n: getattr(dut, f"{prefix}__{n}") for n in (
            "awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready", "wdata",
            "wstrb", "wlast", "wvalid", "wready", "bid", "bresp", "bvalid", "bready", "arid",
            "araddr", "arlen", "arsize", "arburst", "arvalid", "arready", "rid", "rdata",
            "rresp", "rlast", "rvalid", "rready")}
        self.bytes = len(self.s["wstrb"])
        idle, backpressure = flow_pauses(flow)
        self.pause = {ch: pause(idle if ch in ("ar", "aw", "w") else backpressure, new_rng())
                      for ch in ("ar", "aw", "w", "r", "b")}
        self.reads, self.writes = [], []
        self.kinds = []                     # "r" / "w" in add() order
        self.w_beats = []                   # (data, last, strb) in AW order
        self.expected = {}                  # id -> list of expected read beats (ints)
        self.aw_cycles = {}                 # id -> AW handshake cycles of unanswered writes
        self.b_latency = []
        self.outstanding = 0
        self.first_cycle = None
        self.last_cycle = None

    def add(self, kind, ident, address, beats, strb=None):
        ab = self.bytes
        strb = (1 << ab) - 1 if strb is None else strb
        self.kinds.append(kind)
        if kind == "r":
            self.reads.append((ident, address, beats))
            want = self.expected.setdefault(ident, [])
            for k in range(beats):
                want.append(int.from_bytes(self.memory.read(address + k * ab, ab), "little"))
        else:
            self.writes.append((ident, address, beats))
            for k in range(beats):
                data = self.rng.getrandbits(8 * ab)
                self.memory.write(address + k * ab, data.to_bytes(ab, "little"), strb)
                self.w_beats.append((data, k == beats - 1, strb))
        self.outstanding += 1

    def _drive(self, ar, aw, w, held, r_pos, w_pos, end):
        s = self.s
        r_next = r_pos[ar] if ar < len(r_pos) else end
        w_next = w_pos[aw] if aw < len(w_pos) else end
        offer = {"ar": ar < len(self.reads) and r_next < w_next + self.WINDOW,
                 "aw": aw < len(self.writes) and w_next < r_next + self.WINDOW,
                 "w": w < len(self.w_beats)}
        for ch, want in offer.items():
            paused = next(self.pause[ch])
            s[f"{ch}valid"].value = int(held[ch] or (want and not paused))
        s["rready"].value = int(not next(self.pause["r"]))
        s["bready"].value = int(not next(self.pause["b"]))
        if ar < len(self.reads):
            ident, address, beats = self.reads[ar]
            s["arid"].value, s["araddr"].value, s["arlen"].value = ident, address, beats - 1
        if aw < len(self.writes):
            ident, address, beats = self.writes[aw]
            s["awid"].value, s["awaddr"].value, s["awlen"].value = ident, address, beats - 1
        if w < len(self.w_beats):
            s["wdata"].value, s["wlast"].value, s["wstrb"].value = self.w_beats[w]

    def _responses(self, fire):
        s = self.s
        if fire["r"]:
            ident = int(s["rid"].value)
            assert int(s["rresp"].value) == 0, f"read id {ident}: rresp {s['rresp'].value}"
            got = s["rdata"].value.to_unsigned()
            want = self.expected[ident].pop(0)
            assert got == want, f"read id {ident}: {got:#x}, expected {want:#x}"
            self.last_cycle = self.cycle()
            if s["rlast"].value:
                self.outstanding -= 1
        if fire["b"]:
            ident = int(s["bid"].value)
            assert int(s["bresp"].value) == 0, f"write id {ident}: bresp {s['bresp'].value}"
            self.b_latency.append(self.cycle() - self.aw_cycles[ident].pop(0))
            self.outstanding -= 1
            self.last_cycle = self.cycle()

    async def run(self):
        """Send every command added and wait for every response."""
        s = self.s
        clk = self.dut.clk
        for name in ("awsize", "arsize"):
            s[name].value = (self.bytes - 1).bit_length()
        s["awburst"].value = s["arburst"].value = 1
        r_pos = [p for p, kind in enumerate(self.kinds) if kind == "r"]
        w_pos = [p for p, kind in enumerate(self.kinds) if kind == "w"]
        ar = aw = w = 0
        held = {"ar": False, "aw": False, "w": False}
        while self.outstanding:
            await FallingEdge(clk)
            self._drive(ar, aw, w, held, r_pos, w_pos, len(self.kinds))
            await ReadOnly()
            if self.first_cycle is None and (s["arvalid"].value or s["awvalid"].value):
                self.first_cycle = self.cycle()
            fire = {ch: bool(s[f"{ch}valid"].value and s[f"{ch}ready"].value)
                    for ch in ("ar", "aw", "w", "r", "b")}
            for ch in held:
                held[ch] = bool(s[f"{ch}valid"].value) and not fire[ch]
            if fire["ar"]:
                if self.trace:
                    self.trace.write(f"{self.cycle()} AR {self.reads[ar]}\n")
                ar += 1
            if fire["aw"]:
                if self.trace:
                    self.trace.write(f"{self.cycle()} AW {self.writes[aw]}\n")
                self.aw_cycles.setdefault(self.writes[aw][0], []).append(self.cycle())
                aw += 1
            if fire["w"]:
                w += 1
            self._responses(fire)
            await RisingEdge(clk)
        await FallingEdge(clk)
        for name in ("arvalid", "awvalid", "wvalid"):
            s[name].value = 0
