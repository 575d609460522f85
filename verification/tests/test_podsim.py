"""The golden pod simulator (podium/podsim.py) against cases worked out by hand and against
the collectives' golden model, on the program-running pods of the regression."""

import random

import numpy as np
import pytest

from podium.asm import assemble
from podium.podsim import PodSim
from spec.isa import Error
from verification.models.collectives import random_elements, ring_collective
from verification.tests.test_pod import PROGRAM_CONFIGS

ONE_D, TWO_D = PROGRAM_CONFIGS["1x4-tc"], PROGRAM_CONFIGS["2x2-tc"]


def _run(cfg, programs, images=None, seed=None):
    sim = PodSim(cfg, seed=seed)
    for c, chip in enumerate(sim.chips):
        chip.load(assemble(programs[c] if isinstance(programs, list) else programs))
        if images:
            chip.vmem[:len(images[c])] = np.frombuffer(images[c], np.uint8)
    return sim, sim.run()


def test_send_add_read_by_hand():
    """A store, an int32 add and a read, each landing before its semaphore is signalled."""
    words = [np.arange(8, dtype=np.int32) + 100 * c for c in range(4)]
    images = [bytearray(ONE_D.tensorcore.vmem_bytes) for _ in range(4)]
    for c in range(4):
        images[c][:32] = words[c].tobytes()
        images[c][0x200:0x220] = (np.ones(8, np.int32) * 7).tobytes()
    programs = ["halt"] * 4
    programs[0] = ("li r2, 0x100\nli r3, 32\nici.send r0, r2, r3, 2, store, int32, s0\n"
                   "li r2, 0x200\nici.send r0, r2, r3, 1, add, int32, s3\nhalt")
    programs[1] = "wait dma, s3\nhalt"
    programs[2] = "wait dma, s0\nli r1, 0x300\nli r3, 32\nici.read r1, r0, r3, 3, s1\n" \
                  "wait vpu, s1\nhalt"
    sim, results = _run(ONE_D, programs, [bytes(i) for i in images])
    assert [r.status for r in results] == ["done"] * 4, results
    vm = [r.vmem for r in results]
    assert vm[2][0x100:0x120].tobytes() == words[0].tobytes()
    assert vm[1][0x200:0x220].view(np.int32).tolist() == (words[0] + 7).tolist()
    assert vm[2][0x300:0x320].tobytes() == words[3].tobytes()
    assert all(r.semaphores == [0] * ONE_D.tensorcore.semaphores for r in results)


def test_hbm_by_hand():
    """On a pod with HBM: a DMA load, a store from VMEM into another chip's HBM, an fp32 add
    from HBM into HBM and a read of HBM into VMEM land where they name; on a pod without it
    the same accesses to HBM are errors (a row each) and read as zeros."""
    ones = np.ones(8, np.float32).tobytes()
    program = ["halt"] * 4
    # (The golden simulator lands chip 0's messages in order: chip 3's add before chip 1's
    # store, which chip 1 waits for before it reads chip 3.)
    program[0] = ("li r1, 32\ndma.shape 0, r1, r0, r0\nli r2, 0x40\ndma.load r2, r0, s0\n"
                  "wait ici, s0\nli r3, 0x100\n"
                  "ici.send r2, r3, r1, 3, add, fp32, s2, lspace=hbm, rspace=hbm\n"
                  "ici.send r0, r3, r1, 1, store, fp32, s2, rspace=hbm\nhalt")
    program[1] = "wait ici, s2\nli r1, 32\nli r3, 0x100\nli r4, 0x200\n" \
                 "ici.read r4, r3, r1, 3, s1, rspace=hbm\nwait dma, s1\nhalt"
    program[3] = "wait dma, s2\nhalt"
    for cfg in (TWO_D, ONE_D):
        sim = PodSim(cfg, hbm_capacity=1 << 12)
        for c, chip in enumerate(sim.chips):
            chip.load(assemble(program[c]))
            if cfg.chip.has_hbm:
                chip.hbm.write(0x40, ones)
                chip.hbm.write(0x100, np.full(8, 2 * c, np.float32).tobytes())
        results = sim.run()
        if not cfg.chip.has_hbm:
            assert results[0].error == Error.DMA_RESPONSE
            continue
        assert [r.status for r in results] == ["done"] * 4, results
        hbm = [r.hbm.data for r in results]
        assert hbm[1][0x100:0x120].tobytes() == ones        # the VMEM the DMA loaded
        assert hbm[3][0x100:0x120].view(np.float32).tolist() == [7.0] * 8
        assert results[1].vmem[0x200:0x220].view(np.float32).tolist() == [7.0] * 8
        assert sim.errors == [0] * 4
    # Without HBM, only the messages: zeros land, a row counted per access.
    program[0] = "li r1, 32\nli r3, 0x100\nici.send r0, r3, r1, 1, store, fp32, s2, " \
                 "rspace=hbm\nici.send r0, r3, r1, 3, store, fp32, s2, lspace=hbm\nhalt"
    sim, results = _run(ONE_D, program, [b"\x11" * 64] * 4)
    assert [r.status for r in results] == ["done"] * 4, results
    assert results[3].vmem[0x100:0x120].tobytes() == bytes(32)
    assert results[1].vmem[0x200:0x220].tobytes() == bytes(32)
    assert sim.errors == [1, 1, 0, 1]     # chip 0 reads HBM, 1 and 3 are written and read


@pytest.mark.parametrize("cfg, op, dim, fmt", [
    (ONE_D, "all_reduce", 0, "fp32"), (ONE_D, "reduce_scatter", 0, "bf16"),
    (TWO_D, "all_gather", 1, "int32"), (TWO_D, "all_reduce_2d", 0, "fp32"),
    (TWO_D, "all_reduce_2d", 0, "bf16"),
])
def test_collective_is_the_golden_model(seed, cfg, op, dim, fmt):
    """An ``ici.coll`` leaves every chip's buffer as ``ring_collective`` of the collectives'
    golden model says (rings formed by the pod's coordinates, the engine's grain), whatever
    the schedule."""
    rng = random.Random(seed)
    length = 301
    name = "bfloat16" if fmt == "bf16" else fmt
    buffers = [random_elements(rng, name, length) for _ in range(cfg.chips)]
    program = f"li r1, 0\nli r2, {length}\nici.coll {op}, {dim}, {fmt}, r1, r2\nhalt"
    _, results = _run(cfg, program, buffers, seed=rng.getrandbits(31))
    esize, fb = (2 if fmt == "bf16" else 4), cfg.nic.flit_bytes
    grain = fb // esize
    if len(cfg.ici.dims) == 1:
        dims, gdim = (1, cfg.ici.dims[0]), 1
    else:
        dims, gdim = tuple(cfg.ici.dims), dim
    want = ring_collective(op, name, dims, gdim, length, grain, buffers)
    for res, (offset, data) in zip(results, want, strict=True):
        assert res.status == "done"
        got = res.vmem[esize * offset:esize * offset + len(data)].tobytes()
        assert got == data


@pytest.mark.parametrize("case, error, everyone", [
    ("li r3, 32\nici.send r0, r0, r3, 4, store, int32, none\nhalt", Error.ICI, False),
    ("li r3, 8192\nici.send r0, r0, r3, 1, store, int32, none\nhalt", Error.ICI, False),
    ("li r1, 4\nici.send r1, r0, r0, 1, store, int32, none\nhalt", Error.VMEM_RANGE, False),
    ("li r3, 6\nici.send r0, r0, r3, 1, add, int32, none\nhalt", Error.ICI, False),
    ("li r2, 64\nici.coll all_reduce, 1, fp32, r0, r2\nhalt", Error.ICI, True),
    ("li r2, 5\nici.coll all_to_all, 0, int32, r0, r2\nhalt", Error.ICI, True),
    ("li r1, 32\ndma.shape 0, r1, r0, r0\ndma.load r0, r0, s0\nhalt", Error.DMA_RESPONSE, False),
])
def test_refused(case, error, everyone):
    """What the pod cannot carry stops the chip that asked with its code at the
    instruction's PC; a collective the engine refuses stops every chip."""
    programs = [case if everyone or c == 1 else "halt" for c in range(4)]
    _, results = _run(ONE_D, programs)
    pc = len(case.splitlines()) - 2
    for c, res in enumerate(results):
        if everyone or c == 1:
            assert (res.status, res.error, res.error_pc) == ("error", error, pc), res
        else:
            assert res.status == "done"


def test_waiting_for_nothing_deadlocks():
    """A chip waiting for an arrival nobody sends ends in DEADLOCK; the others finish."""
    _, results = _run(ONE_D, ["wait dma, s0\nhalt", "halt", "halt", "halt"])
    assert results[0].error == Error.DEADLOCK
    assert [r.status for r in results[1:]] == ["done"] * 3


def test_disagreeing_collectives_are_refused():
    """SPMD programs only: chips that issue different collectives are a program error."""
    programs = ["li r2, 8\nici.coll all_reduce, 0, fp32, r0, r2\nhalt"] * 3 + [
        "li r2, 9\nici.coll all_reduce, 0, fp32, r0, r2\nhalt"]
    with pytest.raises(ValueError, match="disagree"):
        _run(ONE_D, programs)
