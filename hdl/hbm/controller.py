"""The HBM controller top: AXI4 ports, the crossbar that joins them to the pseudo-channels,
one controller per pseudo-channel, and per channel the arbiter of its shared command buses.

    s0_axi ─► AxiPort ─┐              ┌─► PseudoChannel 0 ─┬─ CommandArbiter ─► ch0 (commands,
    s1_axi ─► AxiPort ─┼─► crossbar ──┼─► PseudoChannel 1 ─┘                 two data buses)
       ...             └─◄ responses ◄┘   ...

Each port decodes the address of every beat (pseudo-channel, bank, row, column: the mapping
interleaves pseudo-channels at access granularity by default) and hands it to the crossbar.
The crossbar keeps, per port and per direction (reads, writes), a two-entry queue for each
pseudo-channel (virtual output queues: a port's reads or writes stall only when the queue for
their next request's pseudo-channel is full, so a write the memory cannot take yet does not hold
up reads, and ports that stream in lockstep over the same pseudo-channels do not hold each other
back), and gives each pseudo-channel, round robin, the oldest request of one of those queues;
responses go back through a round-robin choice per port. The port number rides in
the top bits of the tag. The port and the pseudo-channel controller are emitted once each as
Verilog modules and instantiated by name. Pseudo-channels ``2c`` and ``2c + 1`` form channel
``c`` (legacy mode: controller ``c`` is channel ``c``).
"""

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import RoundRobin
from ..lib.axi import axi4_signature
from ..lib.hier import Submodule
from ..lib.queue import Queue
from ..top import Top
from .arbiter import CommandArbiter
from .axi_port import PORT_COUNTERS, AxiPort, local_tag_bits
from .channel import CHANNEL_COUNTERS, LEAVE_LIMIT, PseudoChannel
from .interface import ChannelSignature, request_layout

__all__ = ["HBMController"]

VOQ_DEPTH = 2


class HBMController(Top):
    """AXI4 slave ports in, channel command/data interfaces out.

    Parameters
    ----------
    config : HBMConfig

    Members
    -------
    s<p>_axi : In(AXI4Signature)
        AXI4 port ``p``, one per port; in the Verilog ``s<p>_axi__awid`` ... , which
        cocotbext-axi's ``AxiBus.from_prefix(dut, "s<p>_axi_")`` finds.
    ch<c> : Out(ChannelSignature)
        Channel ``c``'s command buses and data buses (``ch<c>__row_valid`` ...,
        ``ch<c>__data<k>__wrdata`` for its pseudo-channel ``k``, global index ``2c + k``).
    pc<i>_<counter> : Out(32)
        That pseudo-channel's counters (see :class:`PseudoChannel`).
    s<p>_decerr, s<p>_slverr : Out(32)
        Port ``p``'s error responses, in beats.
    idle : Out(1)
        Every pseudo-channel is idle.
    """

    def __init__(self, config):
        cfg = config
        members = {}
        for p in range(cfg.ports):
            members[f"s{p}_axi"] = In(axi4_signature(cfg))
            members.update({f"s{p}_{name}": Out(32) for name in PORT_COUNTERS})
        for c in range(cfg.channels):
            members[f"ch{c}"] = Out(ChannelSignature(cfg))
        for i in range(cfg.pseudo_channels):
            members.update({f"pc{i}_{name}": Out(32) for name in CHANNEL_COUNTERS})
        members["idle"] = Out(1)
        self._port = Submodule(f"{cfg.name}_port", AxiPort(cfg))
        self._channel = Submodule(f"{cfg.name}_channel", PseudoChannel(cfg))
        super().__init__(config, members)

    @property
    def submodules(self):
        return [self._port, self._channel]

    def _channels(self, m, chans):
        """Per channel: its pseudo-channels' offers to its command arbiter, the granted
        commands and the data buses to the channel's ports."""
        n = self._config.pcs_per_channel
        for c in range(self._config.channels):
            m.submodules[f"arbiter{c}"] = arb = CommandArbiter(self._config)
            port = getattr(self, f"ch{c}")
            for name in arb.bus.signature.members:
                m.d.comb += getattr(port, name).eq(getattr(arb.bus, name))
            for k in range(n):
                chan = chans[c * n + k]
                wiring.connect(m, chan.data, wiring.flipped(getattr(port, f"data{k}")))
                m.d.comb += [arb.row[k].eq(chan.row), arb.col[k].eq(chan.col),
                             chan.row_grant.eq(arb.row_grant[k]),
                             chan.col_grant.eq(arb.col_grant[k])]

    @property
    def extras(self):
        return {"constants": {"leave_limit": LEAVE_LIMIT}}

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        P, C = cfg.ports, cfg.pseudo_channels
        ports = [self._port.instance(m, f"port{p}") for p in range(P)]
        chans = [self._channel.instance(m, f"channel{i}") for i in range(C)]
        low = local_tag_bits(cfg)

        for p, port in enumerate(ports):
            wiring.connect(m, wiring.flipped(getattr(self, f"s{p}_axi")), port.axi)
            for name in PORT_COUNTERS:
                m.d.comb += getattr(self, f"s{p}_{name}").eq(getattr(port, name))
        for i, chan in enumerate(chans):
            for name in CHANNEL_COUNTERS:
                m.d.comb += getattr(self, f"pc{i}_{name}").eq(getattr(chan, name))
        self._channels(m, chans)
        m.d.comb += self.idle.eq(Cat(*[c.idle for c in chans]).all())

        # Requests: each port sorts its requests into one small queue per pseudo-channel
        # (virtual output queues), so a busy pseudo-channel holds back only the requests for it;
        # each pseudo-channel takes from the ports' queues round robin.
        sources = [(p, kind) for p in range(P) for kind in ("rreq", "wreq")]
        voq = {src: [Queue(request_layout(cfg), VOQ_DEPTH) for _ in range(C)]
               for src in sources}
        for p, kind in sources:
            req = getattr(ports[p], kind)
            target = req.payload.pc if C > 1 else 0
            for i, q in enumerate(voq[p, kind]):
                m.submodules[f"voq_{kind}{p}_c{i}"] = q
                m.d.comb += [q.i.valid.eq(req.valid & (target == i)),
                             q.i.payload.eq(req.payload.req)]
                if P > 1:      # the port number rides in the top bits of the tag
                    m.d.comb += q.i.payload.tag[low:].eq(p)
            m.d.comb += req.ready.eq(Array(q.i.ready for q in voq[p, kind])[target])
        for i, chan in enumerate(chans):
            m.submodules[f"req_pick{i}"] = pick = RoundRobin(len(sources))
            m.d.comb += [pick.requests.eq(Cat(*[voq[src][i].o.valid for src in sources])),
                         chan.req.valid.eq(pick.valid), pick.advance.eq(chan.req.ready)]
            for k, src in enumerate(sources):
                with m.If(pick.grant == k):
                    m.d.comb += chan.req.payload.eq(voq[src][i].o.payload)
                m.d.comb += voq[src][i].o.ready.eq((pick.grant == k) & chan.req.ready)

        # Responses: per port, round robin over the pseudo-channels answering it.
        for kind in ("r", "b"):
            taken = [[Signal(name=f"{kind}ret_c{i}_p{p}") for p in range(P)] for i in range(C)]
            for p, port in enumerate(ports):
                ret = getattr(port, f"{kind}ret")
                m.submodules[f"{kind}ret_pick{p}"] = pick = RoundRobin(C)
                streams = [getattr(chan, f"{kind}resp") for chan in chans]
                asks = Cat(*[s.valid & (s.payload.tag[low:] == p) if P > 1 else s.valid
                             for s in streams])
                m.d.comb += [pick.requests.eq(asks), ret.valid.eq(pick.valid),
                             pick.advance.eq(1)]
                for i, s in enumerate(streams):
                    with m.If(pick.grant == i):
                        m.d.comb += ret.payload.eq(s.payload)
                    m.d.comb += taken[i][p].eq(asks[i] & (pick.grant == i))
            for i, chan in enumerate(chans):
                m.d.comb += getattr(chan, f"{kind}resp").ready.eq(Cat(*taken[i]).any())
        return m
