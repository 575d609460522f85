"""The sequencer's engine queues and semaphores.

Each engine (DMA, MXU, VPU, and on a pod chip the ICI) has a queue of entries in program
order (``EngineQueue``). Its front entry is a command, handed to the engine when the engine
takes it; a ``wait``, which leaves when it can take one count of its semaphore; or a
``signal``, which leaves when the engine is idle (every earlier entry has completed) and adds
one to its semaphore. The ``Semaphores`` grant the waits of one cycle in queue order (DMA,
MXU, VPU, ICI) while counts last, add the signals (and the DMA's completion signals, and the
ICI's arrivals), and report an overflow past 255.
``flush`` empties a queue without executing its entries (after an error).
"""

from amaranth.hdl import Cat, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec.isa import MAX_SEMAPHORES

from ..lib.queue import Queue
from .frontend import EntryKind, entry_layout

__all__ = ["EngineQueue", "Semaphores", "SEM_MAX"]

SEM_MAX = 255


class EngineQueue(wiring.Component):
    """One engine's queue (see the module docstring).

    Members
    -------
    i : In(stream of entry_layout)
    cmd : Out(stream of the engine's command layout)
    engine_idle : In(1)
    take : Out(1), take_sem : Out, granted : In(1)
        The front entry is a wait on ``take_sem``; ``granted`` lets it leave this cycle.
    give : Out(1), give_sem : Out, give_pc : Out(16)
        The front entry is a signal leaving this cycle.
    flush : In(1)
    waiting : Out(1)
        The front entry is a wait that was not granted.
    popped : Out(1)
        An entry left (progress).
    empty : Out(1)
    """

    def __init__(self, cmd_layout, depth):
        self._layout, self._depth = cmd_layout, depth
        super().__init__({
            "i": In(stream.Signature(entry_layout(cmd_layout))),
            "cmd": Out(stream.Signature(cmd_layout)),
            "engine_idle": In(1),
            "take": Out(1), "take_sem": Out(range(MAX_SEMAPHORES + 1)), "granted": In(1),
            "give": Out(1), "give_sem": Out(range(MAX_SEMAPHORES + 1)), "give_pc": Out(16),
            "flush": In(1), "waiting": Out(1), "popped": Out(1), "empty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.entries = q = Queue(entry_layout(self._layout), self._depth)
        wiring.connect(m, wiring.flipped(self.i), q.i)
        front = q.o.payload
        live = q.o.valid & ~self.flush
        is_cmd = front.kind == EntryKind.CMD
        is_wait = front.kind == EntryKind.WAIT
        is_signal = front.kind == EntryKind.SIGNAL
        m.d.comb += [
            self.cmd.valid.eq(live & is_cmd), self.cmd.payload.eq(front.cmd),
            self.take.eq(live & is_wait), self.take_sem.eq(front.sem),
            self.give.eq(live & is_signal & self.engine_idle), self.give_sem.eq(front.sem),
            self.give_pc.eq(front.pc),
            self.waiting.eq(self.take & ~self.granted),
            q.o.ready.eq(self.flush | (is_cmd & self.cmd.ready) | (self.take & self.granted)
                         | self.give),
            self.popped.eq(q.o.valid & q.o.ready),
            self.empty.eq(~q.o.valid),
        ]
        return m


class Semaphores(wiring.Component):
    """Counting semaphores 0..255 (see the module docstring).

    Members
    -------
    clear : In(1)
    take : In(takes), take_sem : In.array(takes), granted : Out(takes)
        The queues' waits, in priority order.
    give : In(gives), give_sem : In.array(gives)
        The queues' signals, then the DMA's completion signal (and others).
    overflow : Out(1), overflow_source : Out(range(gives))
        A signal would pass 255 (the first signaller that did).
    values : Out(8).array(count)
    """

    def __init__(self, count, *, takes=3, gives=4):
        self._count, self._takes, self._gives = count, takes, gives
        sem = range(MAX_SEMAPHORES + 1)
        super().__init__({
            "clear": In(1),
            "take": In(takes), "take_sem": In(sem).array(takes), "granted": Out(takes),
            "give": In(gives), "give_sem": In(sem).array(gives),
            "overflow": Out(1), "overflow_source": Out(range(gives)),
            "values": Out(8).array(count),
        })

    def elaborate(self, platform):
        m = Module()
        over = []
        for s, value in enumerate(self.values):
            left = value
            taken = []
            for q in range(self._takes):
                want = self.take[q] & (self.take_sem[q] == s)
                ok = want & (left != 0)
                taken.append(ok)
                left = left - ok
            gives = [self.give[g] & (self.give_sem[g] == s) for g in range(self._gives)]
            total = value + sum(gives) - sum(taken)
            over.append(Cat(*gives).any() & (total > SEM_MAX))
            with m.If(self.clear):
                m.d.sync += value.eq(0)
            with m.Elif(total <= SEM_MAX):
                m.d.sync += value.eq(total)
            for q in range(self._takes):
                with m.If(taken[q]):
                    m.d.comb += self.granted[q].eq(1)
        m.d.comb += self.overflow.eq(Cat(*over).any())
        for g in reversed(range(self._gives)):
            hits = Cat(*[self.give[g] & (self.give_sem[g] == s) & over[s]
                         for s in range(self._count)]).any()
            with m.If(hits):
                m.d.comb += self.overflow_source.eq(g)
        return m
