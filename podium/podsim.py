"""The golden simulator of a pod of program-running chips (docs/pod.md, "Programs on the
pod"): one :class:`~podium.isasim.TensorCoreSim` per chip, their components under one
schedule, and the ICI between them, written from docs/pod.md (not from the RTL).

An ``ici.send`` lands at once when the sending chip's ICI engine takes it: its bytes are
written over (``STORE``) or added to (``ADD``, ``ADD_FINAL``: int32 wrapping or fp32) the
destination's memory, then the destination's semaphore ``sem`` is signalled. An ``ici.read``
copies the remote bytes here and signals this chip's ``sem``. Each end's memory is VMEM or,
on a pod with ``hbm``, the chip's HBM (``hbm_capacity`` bytes, which the DMA reaches too).
Rows outside the memory (all of HBM on a pod without it) are dropped (a read of them gives
zeros) and counted in the ``errors`` of the chip they fall on. A collective runs when every
chip's ICI queue has an ``ici.coll`` at its front (the programs are SPMD: every chip issues
the same collectives in the same order, on buffers at the same address), as the golden model
verification/models/collectives.py defines it, with the engine's grains (a flit of 32-bit
elements, half a flit in bfloat16); each chip's part then completes. What a collective
leaves undefined is listed in the results' ``undefined`` (VMEM) and ``hbm_undefined`` (the
simulator leaves those bytes unchanged): a reduce-scatter's buffer outside the chip's own
block (partial sums pass through it), the staging area (at the top of VMEM's addresses, in
the buffer's memory) after a bfloat16 reduction. What the pod cannot carry fails with
``Error.ICI`` on the chip that asked: a destination past the pod, a message over
``max_message``, a collective the engine refuses (the same checks as hdl/pod/collective.py).

A program whose chips touch bytes another chip's message may change, without a semaphore
between them, has no defined result; so has one whose chips disagree on a collective (raised
here as a ValueError).
"""

import numpy as np

from spec.isa import Collective, Error, IciFmt, IciOp, IciSpace, Op
from spec.protocol import NO_SEM
from verification.models.collectives import add_bytes, ring_collective

from .isasim import TensorCoreSim, schedule

__all__ = ["PodSim"]

_FMT = {IciFmt.INT32: "int32", IciFmt.FP32: "fp32", IciFmt.BF16: "bfloat16"}
_RING = {Collective.REDUCE_SCATTER: "reduce_scatter", Collective.ALL_GATHER: "all_gather",
         Collective.ALL_REDUCE: "all_reduce"}


def _ceil(a, b):
    return -(-a // b)


class PodSim:
    """The chips of ``config`` (a PodConfig with ``tensorcore``). ``chips[n]`` is node
    ``n``'s TensorCoreSim (load its program, fill its ``vmem``); ``run`` starts every chip at
    instruction 0 and returns their :class:`~podium.isasim.Result` s. ``seed``: random speeds
    for every component (see podium/isasim.py), else turns in a fixed order."""

    def __init__(self, config, seed=None, hbm_capacity=1 << 20):
        if config.tensorcore is None:
            raise ValueError("PodSim runs pods of TensorCores (PodConfig.tensorcore)")
        self.config = config
        self.rng = None if seed is None else np.random.default_rng(seed)
        # Without ``hbm`` a chip has no HBM: every DMA transfer is answered DECERR.
        self.chips = [TensorCoreSim(config.tensorcore,
                                    hbm_capacity=hbm_capacity if config.chip.has_hbm else 1)
                      for _ in range(config.chips)]
        for n, chip in enumerate(self.chips):
            chip.pod, chip.index = self, n
        self.errors = [0] * config.chips

    def run(self, max_steps=10_000_000):
        for chip in self.chips:
            chip.begin()
        self.errors = [0] * self.config.chips
        steps = schedule(self.chips, self.rng, max_steps)
        return [chip.result(steps, timed_out=steps >= max_steps) for chip in self.chips]

    # Messages ---------------------------------------------------------------------------

    def _memory(self, chip, space):
        """``chip``'s bytes of ``space`` (an IciSpace) and how far an access reaches: VMEM, or
        HBM (nothing on a pod without ``hbm``)."""
        if space == IciSpace.HBM:
            return chip.hbm.data, chip.hbm.capacity if self.config.chip.has_hbm else 0
        return chip.vmem, len(chip.vmem)

    def _inside(self, chip, space, address, size):
        """How many of ``size`` bytes at ``address`` of ``chip``'s ``space`` are inside it."""
        limit = self._memory(chip, space)[1]
        return max(0, min(size, limit - address)) if address < limit else 0

    def _rows(self, chip, space, address, size):
        """``_inside``, the rows past it counted in ``errors``."""
        inside = self._inside(chip, space, address, size)
        self.errors[chip.index] += -(-(size - inside) // self.config.tensorcore.row_bytes)
        return inside

    def _load(self, chip, space, address, size):
        """``size`` bytes at ``address`` of ``chip``'s ``space``: zeros past it."""
        inside = self._rows(chip, space, address, size)
        data = self._memory(chip, space)[0][address:address + inside].tobytes()
        return data + bytes(size - inside)

    def _store(self, chip, space, address, data):
        """Write ``data`` at ``address`` of ``chip``'s ``space``: what falls past it is
        dropped."""
        inside = self._rows(chip, space, address, len(data))
        memory = self._memory(chip, space)[0]
        memory[address:address + inside] = np.frombuffer(data[:inside], np.uint8)

    def message(self, chip, op, pc, a):
        """Carry out ``chip``'s ``ici.send`` / ``ici.read`` ``a``; False if refused."""
        cfg = self.config
        if a["chip"] >= cfg.chips or a["bytes"] > cfg.nic.max_message:
            chip._fail(Error.ICI, pc, f"message to chip {a['chip']} of {a['bytes']} bytes: "
                                      f"the pod has {cfg.chips} chips, messages of at most "
                                      f"{cfg.nic.max_message} bytes")
            return False
        other = self.chips[a["chip"]]
        size, local, remote = a["bytes"], a["local"], a["remote"]
        if op == Op.ICI_READ:
            data = self._load(other, a["rspace"], remote, size)
            self._store(chip, a["lspace"], local, data)
            return chip._signal(a["sem"], pc)
        data = self._load(chip, a["lspace"], local, size)
        if a["op"] != IciOp.STORE:
            memory = self._memory(other, a["rspace"])[0]
            n = self._inside(other, a["rspace"], remote, size)
            data = add_bytes(_FMT[a["fmt"]], data[:n], memory[remote:remote + n].tobytes()) \
                + data[n:]
        self._store(other, a["rspace"], remote, data)
        sem = a["sem"]
        if sem != NO_SEM:
            if sem < cfg.tensorcore.semaphores:
                other._signal(sem, other.pc)
            else:
                self.errors[other.index] += 1
        return True

    # Collectives ------------------------------------------------------------------------

    def collective_ready(self):
        return all(c.queues[c.engines[-1]] and c.queues[c.engines[-1]][0].op == Op.ICI_COLL
                   for c in self.chips)

    def collective(self):
        """Every chip's front ``ici.coll``, together."""
        entries = [c.queues[c.engines[-1]].pop(0) for c in self.chips]
        first = entries[0].args
        if any(e.args != first for e in entries[1:]) and first["coll"] != Collective.ALL_TO_ALL:
            raise ValueError(f"the chips disagree on a collective: {[e.args for e in entries]}")
        refusal = self._refusal(first)
        if refusal:
            for chip, entry in zip(self.chips, entries, strict=True):
                chip._fail(Error.ICI, entry.pc, refusal)
            return
        if first["coll"] == Collective.ALL_TO_ALL:
            self._all_to_all(entries)
        else:
            self._ring(first)
        for chip in self.chips:
            chip.counters["retired"] += 1

    def _grain(self, fmt):
        """The engine's grain in elements: a flit of 32-bit elements, half a flit of
        bfloat16 ones (a flit of their fp32 partials)."""
        fb = self.config.nic.flit_bytes
        return fb // 2 if fmt == IciFmt.BF16 else fb // 4

    def _refusal(self, a):
        """Why the collective engine refuses ``a`` (hdl/pod/collective.py), or None."""
        cfg, ici = self.config, self.config.ici
        coll, fmt, length = a["coll"], a["fmt"], a["length"]
        if coll == Collective.ALL_TO_ALL:
            return None if length == ici.nodes else f"an all-to-all table has {ici.nodes} " \
                                                    f"entries, not {length}"
        dim = 0 if coll == Collective.ALL_REDUCE_2D else a["dim"]
        n = ici.dims[dim] if dim < ici.ndims else 1
        if coll == Collective.ALL_REDUCE_2D and (ici.ndims != 2 or min(ici.dims) < 2):
            return "a 2-D all-reduce needs a 2-D pod of rings of 2 chips or more"
        if n < 2:
            return f"a ring of {n} chip along dimension {dim}"
        grains = _ceil(length, self._grain(fmt))
        largest = _ceil(_ceil(grains, n), 2) * cfg.nic.flit_bytes
        if fmt == IciFmt.BF16:
            largest *= 2
        if largest > cfg.nic.max_message or (fmt == IciFmt.BF16
                                                  and largest > cfg.nic.staging_slot):
            return f"a piece of {largest} bytes: more than a message or staging slot holds"
        return None

    def _ring(self, a):
        coll, fmt, address, length = a["coll"], a["fmt"], a["address"], a["length"]
        space = a["space"]
        esize = 2 if fmt == IciFmt.BF16 else 4
        ici = self.config.ici
        buffers = [self._load(c, space, address, length * esize) for c in self.chips]
        if coll == Collective.ALL_REDUCE_2D:
            groups = [(tuple(ici.dims), 0, list(range(ici.nodes)))]
            op = "all_reduce_2d"
        else:
            op, dim = _RING[coll], a["dim"]
            rings = {}
            for node in range(ici.nodes):
                coords = [node // int(np.prod(ici.dims[:d])) % k for d, k in enumerate(ici.dims)]
                rings.setdefault(tuple(coords[:dim] + coords[dim + 1:]), []).append(node)
            groups = [((1, ici.dims[dim]), 1, ring) for ring in rings.values()]
        end = address + length * esize
        for dims, gdim, nodes in groups:
            out = ring_collective(op, _FMT[fmt], dims, gdim, length, self._grain(fmt),
                                  [buffers[n] for n in nodes])
            for node, (offset, data) in zip(nodes, out, strict=True):
                chip = self.chips[node]
                start = address + esize * offset
                self._store(chip, space, start, data)
                undefined = chip.hbm_undefined if space == IciSpace.HBM else chip.undefined
                if coll == Collective.REDUCE_SCATTER:
                    undefined += [(address, start), (start + len(data), end)]
                if fmt == IciFmt.BF16 and coll != Collective.ALL_GATHER:
                    # The staging area is in the buffer's memory.
                    undefined.append((self.config.chip.staging_base,
                                      self.config.tensorcore.vmem_bytes))

    def _all_to_all(self, entries):
        """Every chip's table: an entry per destination, a row each (``src_address``,
        ``dst_address``, ``bytes``, 32 bits each), the table and the messages in the
        collective's memory."""
        cfg, rb = self.config, self.config.tensorcore.row_bytes
        moves = []
        for chip, entry in zip(self.chips, entries, strict=True):
            base, space = entry.args["address"], entry.args["space"]
            for dst in range(cfg.chips):
                row = np.frombuffer(self._load(chip, space, base + dst * rb, rb)[:12], np.uint32)
                src_address, dst_address, size = (int(v) for v in row)
                if size > cfg.nic.max_message:
                    chip._fail(Error.ICI, entry.pc, f"all-to-all entry of {size} bytes")
                    continue
                moves.append((self.chips[dst], space, dst_address,
                              self._load(chip, space, src_address, size)))
        for dst, space, address, data in moves:
            self._store(dst, space, address, data)
