"""The collective engine (docs/pod.md, "Collective engine"): one per chip, beside the ICI
endpoint; runs this chip's part of a ring reduce-scatter, all-gather or all-reduce along one
torus dimension by walking the golden model's schedule (verification/models/collectives.py)
and sending each of its transfers as one message to a ring neighbour.

    start ─► CollectiveEngine ─► cmd[h], data[h] ─► Sender (one per direction) ···► neighbours
                 ▲   └─► read (memory)
                 └── arrived ◄─ Receiver ◄··· neighbours' Senders

The buffer is split with a grain of one flit (``flit_bytes / 4`` elements), so every piece
starts on a flit boundary. Step ``k`` of either ring direction is sent once the neighbour's
message of step ``k - 1`` in that direction has landed here (what is sent at step ``k`` is
what arrived at step ``k - 1``): that data dependency is the only synchronisation.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..ici.packet import coord_layout
from ..lib.counter import COUNTER_WIDTH, count_events
from .config import ADDR_BITS, COLLECTIVE_SEM
from .endpoint import (
    Fmt,
    Kind,
    Op,
    Space,
    command_layout,
    completion_layout,
    flit_reads,
    read_beat_layout,
)

__all__ = ["Collective", "LENGTH_BITS", "descriptor_layout", "CollectiveEngine"]

LENGTH_BITS = 24
"""Width of a collective's length in elements."""


class Collective(enum.Enum, shape=2):
    """What a descriptor runs."""
    REDUCE_SCATTER = 0
    ALL_GATHER = 1
    ALL_REDUCE = 2


def descriptor_layout(cfg):
    """A collective for the engine: ``op`` along torus dimension ``dim`` on this chip's buffer
    of ``length`` elements of ``fmt`` (int32 or fp32) at ``address`` of ``space`` (a multiple
    of the flit bytes; every chip of the ring uses the same address)."""
    return data.StructLayout({
        "op": Collective, "dim": range(max(2, cfg.ici.ndims)), "fmt": Fmt, "space": Space,
        "address": ADDR_BITS, "length": LENGTH_BITS,
    })


class CollectiveEngine(wiring.Component):
    """Runs one chip's part of a ring collective.

    A descriptor is taken on ``start`` when the engine is idle. With ``n`` the ring size along
    ``dim`` and ``p`` this chip's coordinate there (``coords``), the engine then walks the steps
    of the golden model's schedule (``n - 1`` for a reduce-scatter or an all-gather,
    ``2(n - 1)`` for an all-reduce); in each it sends one message to each ring neighbour, the two
    directions independently of each other: on the + ring piece ``(p - s - 1, 0)``
    (reduce-scatter step ``s``) or ``(p - s, 0)`` (all-gather step ``s``) to ``p + 1``, on the -
    ring ``(p + s + 1, 1)`` or ``(p + s, 1)`` to ``p - 1``: ``WRITE`` ``ADD`` in a
    reduce-scatter (``ADD_FINAL`` in its last step), ``STORE`` in an all-gather, ``tag`` the
    direction (0 +, 1 -). A message of direction ``h`` is one ``cmd[h]`` to a
    :class:`~.endpoint.Sender` and its flits read from memory (``read[h]``, answered in order on
    ``read_data[h]``) passed on to ``data[h]``. An empty piece is still sent, as a 0-byte
    message, so that the neighbour counts it. The message of step ``k`` in a direction waits
    until ``k`` messages of that direction have arrived (``arrived``, the
    :class:`~.endpoint.Receiver`'s completions, always taken; the engine's messages carry
    semaphore ``COLLECTIVE_SEM`` and only completions carrying it count). ``busy`` falls when
    every message has been sent and every arrival of the collective counted.

    A descriptor the engine cannot run is consumed and counted in ``errors``: a ring of one
    chip, an ``op`` or ``fmt`` it does not know (``bfloat16`` needs an fp32 staging area, not
    built), or a piece longer than ``max_message``.

    Members
    -------
    start : In(stream of descriptor_layout)
    coords : In(coord_layout)
        This chip's coordinates.
    cmd : Out(stream of command_layout).array(2)
        Per direction (+, -), to a :class:`~.endpoint.Sender`.
    data : Out(stream of flit_bits).array(2)
        Per direction, to the same :class:`~.endpoint.Sender`.
    read : Out(stream of read_beat_layout).array(2)
    read_data : In(stream of flit_bits).array(2)
    arrived : In(stream of completion_layout)
        From the :class:`~.endpoint.Receiver`'s ``done``.
    busy : Out(1)
    errors : Out(32)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        ici = cfg.ici
        super().__init__({
            "start": In(stream.Signature(descriptor_layout(cfg))),
            "coords": In(coord_layout(ici)),
            "cmd": Out(stream.Signature(command_layout(cfg))).array(2),
            "data": Out(stream.Signature(ici.flit_bits)).array(2),
            "read": Out(stream.Signature(read_beat_layout(cfg))).array(2),
            "read_data": In(stream.Signature(ici.flit_bits)).array(2),
            "arrived": In(stream.Signature(completion_layout(cfg))),
            "busy": Out(1),
            "errors": Out(COUNTER_WIDTH),
        })

    def _piece(self, m, desc, quotient, remainder, index, half):
        """(element offset, element count) of piece ``(index, half)`` of the buffer split for
        a ring of ``n`` with a grain of one flit (``split_sizes`` of the golden model), from
        the buffer's grains divided by ``n`` (``quotient``, ``remainder``)."""
        grain = self._cfg.flit_bytes // 4
        block = quotient + (index < remainder)
        first = Mux(index < remainder, index, remainder) + index * quotient
        lower = (block + 1) >> 1
        start = Signal(LENGTH_BITS, name=f"piece_start{half}")
        count = Signal(LENGTH_BITS, name=f"piece_grains{half}")
        m.d.comb += [start.eq(first + (lower if half else 0)),
                     count.eq((block >> 1) if half else lower)]
        offset = start * grain
        end = (start + count) * grain
        end = Mux(end > desc.length, desc.length, end)
        return offset, Mux(end > offset, end - offset, 0)

    def elaborate(self, platform):
        m = Module()
        cfg, ici = self._cfg, self._cfg.ici
        shift = (cfg.flit_bytes - 1).bit_length()
        width = range(4 * max(ici.dims))
        desc = Signal(descriptor_layout(cfg))
        n = Signal(range(max(ici.dims) + 1))
        p = Signal(range(max(ici.dims)))
        m.d.comb += n.eq(1)
        for d, k in enumerate(ici.dims):
            with m.If(desc.dim == d):
                m.d.comb += [n.eq(k), p.eq(self.coords[f"c{d}"])]
        grains = Signal(LENGTH_BITS)
        steps = Signal(width)
        m.d.comb += [
            grains.eq((desc.length + cfg.flit_bytes // 4 - 1) >> (shift - 2)),
            steps.eq(Mux(desc.op == Collective.ALL_REDUCE, 2 * (n - 1), n - 1)),
        ]
        quotient = Signal(LENGTH_BITS)
        remainder = Signal(range(max(ici.dims)))
        m.d.comb += [quotient.eq(grains // n), remainder.eq(grains % n)]

        running = Signal()                      # the directions are sending
        arrived = self.arrived.payload
        finished = Signal()
        sent, idle = [], []
        for h in range(2):
            step = Signal(width, name=f"step{h}")
            arrivals = Signal(width, name=f"arrivals{h}")
            landed = (self.arrived.valid & (arrived.kind == Kind.WRITE) & (arrived.tag == h)
                      & (arrived.sem == COLLECTIVE_SEM))
            m.d.sync += arrivals.eq(arrivals + landed - Mux(finished, steps, 0))
            reducing = (desc.op != Collective.ALL_GATHER) & (step < n - 1)
            s = Mux((desc.op == Collective.ALL_REDUCE) & ~reducing, step - (n - 1), step)
            lag = Mux(reducing, 1, 0)
            unwrapped = (p + s + lag) if h else (p + n - s - lag)
            index = Signal(width, name=f"index{h}")
            m.d.comb += index.eq(Mux(unwrapped >= n, unwrapped - n, unwrapped))
            offset, count = self._piece(m, desc, quotient, remainder, index, h)
            address = Signal(ADDR_BITS, name=f"address{h}")
            m.d.comb += address.eq(desc.address + (offset << 2))
            cmd, read = self.cmd[h], self.read[h]
            self._command(m, cmd.payload, desc, n, p, step, h, reducing, address, count)

            remaining = flit_reads(m, cfg, read, name=f"remaining{h}")
            m.d.comb += [read.payload.space.eq(desc.space),
                         cmd.valid.eq(running & (step < steps) & (remaining == 0)
                                      & ((step == 0) | (arrivals >= step)))]
            wiring.connect(m, wiring.flipped(self.read_data[h]), wiring.flipped(self.data[h]))
            with m.If(cmd.valid & cmd.ready):
                m.d.sync += [step.eq(step + 1),
                             remaining.eq((count + (1 << (shift - 2)) - 1) >> (shift - 2)),
                             read.payload.address.eq(address)]
            with m.If(self.start.valid & self.start.ready):
                m.d.sync += step.eq(0)
            sent.append((step >= steps) & (remaining == 0))
            idle.append(arrivals >= steps)
        m.d.comb += self.arrived.ready.eq(1)

        error = Signal()
        largest = ((quotient + (remainder != 0) + 1) >> 1) << shift
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.start.ready.eq(1)
                with m.If(self.start.valid):
                    m.d.sync += desc.eq(self.start.payload)
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += [self.busy.eq(1),
                             error.eq((n < 2) | (desc.op.as_value() == 3)
                                      | ((desc.fmt != Fmt.INT32) & (desc.fmt != Fmt.FP32))
                                      | (largest > cfg.max_message))]
                m.next = "SEND"
                with m.If(error):
                    m.next = "IDLE"
            with m.State("SEND"):
                m.d.comb += [self.busy.eq(1), running.eq(1),
                             finished.eq(sent[0] & sent[1] & idle[0] & idle[1])]
                with m.If(finished):
                    m.next = "IDLE"
        count_events(m, self, {"errors": error})
        return m

    def _command(self, m, cmd, desc, n, p, step, minus, reducing, address, count):
        """The message of ``step`` in direction ``minus`` (0 +, 1 -) on ``cmd``."""
        ici = self._cfg.ici
        neighbour = (Mux(p == 0, n - 1, p - 1) if minus else Mux(p == n - 1, 0, p + 1))
        for d in range(ici.ndims):
            m.d.comb += cmd.dst[f"c{d}"].eq(Mux(desc.dim == d, neighbour, self.coords[f"c{d}"]))
        m.d.comb += [
            cmd.kind.eq(Kind.WRITE), cmd.dst_port.eq(0), cmd.space.eq(desc.space),
            cmd.address.eq(address), cmd.bytes.eq(count << 2), cmd.fmt.eq(desc.fmt),
            cmd.op.eq(Mux(reducing, Mux(step == n - 2, Op.ADD_FINAL, Op.ADD), Op.STORE)),
            cmd.tag.eq(minus), cmd.sem.eq(COLLECTIVE_SEM),
        ]
