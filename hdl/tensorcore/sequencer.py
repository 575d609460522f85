"""The TensorCore's sequencer: front end, engine queues, semaphores, errors, status.

It runs from ``start`` until the program has halted and every queue and engine has drained
(``done``), or until the first error: the front end stops dispatching, the queues are
flushed, the DMA stops walking, and once every engine is idle the error is shown with its code
and PC. The deadlock watch counts cycles in which nothing progressed (no instruction executed
or dispatched, no queue entry left, every engine idle) and stops the run with DEADLOCK after
``deadlock_cycles`` of them.
"""

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spec import isa
from spec.isa import REGISTERS

from ..lib.codes import hw
from .dma import dma_command_layout
from .frontend import FrontEnd
from .ici_port import ici_command_layout
from .matmul import matmul_command_layout
from .queues import EngineQueue, Semaphores
from .vmem_ports import vpu_command_layout

__all__ = ["Sequencer", "EVENTS"]

Error = hw(isa.Error)

EVENTS = ("cycles", "retired", "dma_wait", "mxu_wait", "vpu_wait", "sem_stalls",
          "dispatch_stalls", "mxu_starved")
"""The sequencer's own counter events (the TensorCore counts the engines' too)."""


class Sequencer(wiring.Component):
    """See the module docstring.

    Members
    -------
    start, abort, clear : In(1)
        The host's CONTROL bits (one-cycle pulses).
    start_pc, imem_* : In
        As for :class:`~.frontend.FrontEnd`.
    dma, mxu, vpu : Out(stream of the engine commands)
    dma_idle, mxu_idle, vpu_idle : In(1)
    dma_signal : In(1), dma_sem, dma_signal_pc : In
        A DMA transfer completed and signals ``dma_sem``.
    dma_error : In(1), dma_error_pc : In(16)
    dma_flush : Out(1)
    ici : Out(stream of ici_command_layout), ici_idle : In(1)
        With ``ici``: the ICI queue's commands and its engine's state.
    ici_error : In(1), ici_error_pc : In(16)
        With ``ici``: the ICI engine refused the command of ``ici_error_pc``.
    arrive : In(1), arrive_sem : In(5)
        With ``ici``: a message from another chip landed and signals ``arrive_sem`` (an
        overflow it causes is reported at the front end's PC).
    ici_wait : Out(1)
        With ``ici``: the ICI queue's front is a ``wait`` that cannot proceed.
    running, done, error : Out(1), error_code : Out(Error), error_pc, pc : Out(16)
    regs : Out(32).array(16), sems : Out(8).array(semaphores)
    go : Out(1)
        A run starts this cycle (``start`` while not running).
    events : Out(len(EVENTS))
        This cycle's counter events, in the order of ``EVENTS``.
    """

    def __init__(self, cfg, *, imem_name):
        self._cfg = cfg
        self._front = FrontEnd(cfg, imem_name=imem_name)
        pc_bits = (cfg.imem_depth - 1).bit_length()
        super().__init__({
            "start": In(1), "abort": In(1), "clear": In(1), "start_pc": In(16),
            "imem_we": In(1), "imem_addr": In(pc_bits), "imem_data": In(64),
            "imem_strb": In(8),
            "dma": Out(stream.Signature(dma_command_layout(cfg))),
            "mxu": Out(stream.Signature(matmul_command_layout(cfg))),
            "vpu": Out(stream.Signature(vpu_command_layout(cfg))),
            "dma_idle": In(1), "mxu_idle": In(1), "vpu_idle": In(1),
            "dma_signal": In(1), "dma_sem": In(5), "dma_signal_pc": In(16),
            "dma_error": In(1), "dma_error_pc": In(16), "dma_flush": Out(1),
            "running": Out(1), "done": Out(1), "error": Out(1), "error_code": Out(Error),
            "error_pc": Out(16), "pc": Out(16),
            "regs": Out(32).array(REGISTERS), "sems": Out(8).array(cfg.semaphores),
            "go": Out(1), "events": Out(len(EVENTS)),
            **({"ici": Out(stream.Signature(ici_command_layout(cfg))), "ici_idle": In(1),
                "ici_error": In(1), "ici_error_pc": In(16), "arrive": In(1),
                "arrive_sem": In(5), "ici_wait": Out(1)} if cfg.ici else {}),
        })

    @property
    def submodules(self):
        return self._front.submodules

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.submodules.front = front = self._front
        engines = [("dma", dma_command_layout(cfg)), ("mxu", matmul_command_layout(cfg)),
                   ("vpu", vpu_command_layout(cfg))]
        idle = [self.dma_idle, self.mxu_idle, self.vpu_idle]
        # Signallers besides the queues: the DMA's completions (and the ICI's arrivals).
        others = [(self.dma_signal, self.dma_sem, self.dma_signal_pc)]
        if cfg.ici:
            engines.append(("ici", ici_command_layout(cfg)))
            idle.append(self.ici_idle)
            others.append((self.arrive, self.arrive_sem, front.pc))
        n = len(engines)
        m.submodules.sems = sems = Semaphores(cfg.semaphores, takes=n, gives=n + len(others))
        queues = {}
        for name, layout in engines:
            queues[name] = q = EngineQueue(layout, cfg.queue_depth)
            m.submodules[f"{name}_queue"] = q
            wiring.connect(m, getattr(front, name), q.i)
            wiring.connect(m, q.cmd, wiring.flipped(getattr(self, name)))
        order = [queues[name] for name, _ in engines]
        for k, q in enumerate(order):
            m.d.comb += [q.engine_idle.eq(idle[k]), sems.take[k].eq(q.take),
                         sems.take_sem[k].eq(q.take_sem), q.granted.eq(sems.granted[k]),
                         sems.give[k].eq(q.give), sems.give_sem[k].eq(q.give_sem)]
        for k, (give, sem, _) in enumerate(others):
            m.d.comb += [sems.give[n + k].eq(give), sems.give_sem[n + k].eq(sem)]
        # The semaphores are cleared by ``clear``, not by ``start``: on a pod the host clears
        # every chip, then starts them, and a message that lands before its chip's start
        # keeps its signal (docs/tensorcore.md, "Control and status").
        m.d.comb += [self.go.eq(self.start & ~self.running),
                     sems.clear.eq(self.clear & ~self.running),
                     *[self.sems[s].eq(sems.values[s]) for s in range(cfg.semaphores)],
                     *[self.regs[r].eq(front.regs[r]) for r in range(REGISTERS)],
                     front.start.eq(self.go), front.start_pc.eq(self.start_pc),
                     front.imem_we.eq(self.imem_we), front.imem_addr.eq(self.imem_addr),
                     front.imem_data.eq(self.imem_data), front.imem_strb.eq(self.imem_strb),
                     self.pc.eq(front.pc)]

        stopping = Signal()          # an error or abort: flush and drain
        progress = Cat(front.executed, *[q.popped for q in order], *[~x for x in idle],
                       *([self.arrive] if cfg.ici else [])).any()
        stuck = Signal(range(cfg.deadlock_cycles + 1))
        with m.If(self.go | progress | ~self.running):
            m.d.sync += stuck.eq(0)
        with m.Else():
            m.d.sync += stuck.eq(stuck + 1)
        give_pc = Array([*[q.give_pc for q in order], *[pc for _, _, pc in others]])
        faults = [  # (condition, code, pc): the first that holds wins
            (front.error, front.error_code, front.error_pc),
            (self.dma_error, Error.DMA_RESPONSE, self.dma_error_pc),
            *([(self.ici_error, Error.ICI, self.ici_error_pc)] if cfg.ici else []),
            (sems.overflow, Error.SEM_OVERFLOW, give_pc[sems.overflow_source]),
            (stuck == cfg.deadlock_cycles, Error.DEADLOCK, front.pc),
            (self.abort & self.running, Error.ABORTED, front.pc),
        ]
        fault, code, pc = Signal(), Signal(Error), Signal(16)
        for cond, c, p in reversed(faults):
            with m.If(cond):
                m.d.comb += [fault.eq(1), code.eq(c), pc.eq(p)]
        m.d.comb += [front.stop.eq(stopping), self.dma_flush.eq(stopping),
                     *[q.flush.eq(stopping) for q in order]]

        drained = ~front.running & Cat(*[q.empty for q in order], *idle).all()
        with m.If(self.go):
            m.d.sync += [self.running.eq(1), self.done.eq(0), self.error.eq(0), stopping.eq(0),
                         self.error_code.eq(Error.NONE)]
        with m.Elif(self.clear & ~self.running):
            m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(Error.NONE)]
        with m.Elif(self.running):
            with m.If(fault & ~stopping):
                m.d.sync += [stopping.eq(1), self.error.eq(1), self.error_code.eq(code),
                             self.error_pc.eq(pc)]
            with m.Elif(drained):
                m.d.sync += [self.running.eq(0), self.done.eq(~stopping)]

        waits = [q.waiting for q in order]
        if cfg.ici:
            m.d.comb += self.ici_wait.eq(waits[3])
        events = {"cycles": self.running, "retired": front.executed, "dma_wait": waits[0],
                  "mxu_wait": waits[1], "vpu_wait": waits[2], "sem_stalls": Cat(*waits).any(),
                  "dispatch_stalls": front.stalled, "mxu_starved": waits[1] & self.mxu_idle}
        m.d.comb += self.events.eq(Cat(*[events[name] for name in EVENTS]))
        return m
