"""SparseCore regression: the cocotb benches of the SparseCore's standalone top (the HBM
controller with the golden device model behind it), configuration refusals and generation."""

import pytest

from hdl.generate import make_config
from spec.config import ConfigError
from spec.sparsecore import SparseCoreConfig, SparseCoreSystemConfig
from verification.tests.suite import cases

TB = "verification.tb.sparsecore"

CONFIGS = {"hbm": SparseCoreSystemConfig(),
           "axi": SparseCoreSystemConfig(memory="axi")}


SLOW = {("axi", "test_bf16_padding_empty"), ("axi", "test_edges_duplicates_tables"),
        ("axi", "test_bad_input"), ("axi", "test_scatter_bad_input"),
        ("hbm", "test_combiners")}
"""Runs that repeat on one memory what the other configuration covers (make test-all): the
AXI harness's edge cases, the HBM one's combiners (five minutes of simulation)."""


def _marks(name, test):
    return [pytest.mark.slow] if (name, test) in SLOW else []


@pytest.mark.parametrize("name, test", cases(TB, CONFIGS, _marks))
def test_sparsecore(cocotb_run, name, test):
    cocotb_run("sparsecore", CONFIGS[name], TB, test)


ONE_ROW_ID = SparseCoreSystemConfig(sparsecore=SparseCoreConfig(row_ids=1))
"""Every row read on one ID (the default configuration uses two): its build and tests, about
three minutes of a core, in `make test-all` and CI's slow shards."""


@pytest.mark.slow
@pytest.mark.parametrize("test", ["test_zipf_batches", "test_scatter_duplicates"])
def test_sparsecore_one_row_id(cocotb_run, test):
    cocotb_run("sparsecore", ONE_ROW_ID, TB, test)


@pytest.mark.parametrize("params, path, allowed", [
    ({"max_dim": 12}, "max_dim", "a multiple of 8"),
    ({"axi_id_width": 1}, "axi_id_width", "2..8"),
    ({"inflight_beats": 8}, "inflight_beats", "largest row"),
    ({"inflight_beats": 33}, "inflight_beats", "multiple of row_ids"),
    ({"row_ids": 5}, "row_ids", "1..4"),
    ({"axi_id_width": 2}, "row_ids", "1..1"),
    ({"bad_ids": "ignore"}, "bad_ids", "'stop', 'drop'"),
    ({"max_burst": 16, "list_beats": 8}, "max_burst", "1..8"),
    ({"tables": 0}, "tables", "1..16"),
])
def test_config_refused(params, path, allowed):
    with pytest.raises(ConfigError) as e:
        SparseCoreConfig(**params)
    assert e.value.path == path and allowed in str(e.value)


def test_system_bus_must_match_hbm():
    with pytest.raises(ConfigError, match=r"sparsecore.axi_data_width must equal"):
        make_config("sparsecore", {"sparsecore": {"axi_data_width": 512, "max_dim": 128}})
    with pytest.raises(ConfigError, match=r"^sparsecore.sparsecore.max_dim"):
        make_config("sparsecore", {"sparsecore": {"max_dim": 7}})


def test_scale_unit_matches_model(seed):
    """The scale unit alone (Amaranth's simulator): the mean / sqrtn / sqrtn_count scale of
    random bags of weights over the whole fp32 range (subnormals, underflow of w * w, huge
    values) equals the golden model's, bit for bit."""
    import numpy as np
    from amaranth.sim import Simulator

    from hdl.sparsecore.scale import ScaleUnit
    from verification.models.sparsecore import Batch, bag_scales

    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(150):
        kind = int(rng.integers(1, 4))
        ws = (rng.standard_normal(int(rng.integers(1, 5)))
              * 10.0 ** rng.integers(-40, 38)).astype(np.float32)
        cases.append((kind, np.abs(ws) if rng.random() < 0.2 else ws))
    dut = ScaleUnit()
    got = []

    async def bench(ctx):
        for kind, ws in cases:
            ctx.set(dut.kind, kind)
            for i, w in enumerate(ws):
                ctx.set(dut.took, 1)
                ctx.set(dut.weight, int(w.view(np.uint32)))
                ctx.set(dut.bag_end, i == len(ws) - 1)
                await ctx.tick()
            ctx.set(dut.took, 0)
            ctx.set(dut.bag_end, 0)
            for _ in range(40):
                await ctx.tick()
                if ctx.get(dut.valid):
                    break
            got.append(ctx.get(dut.scale))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    names = {1: "mean", 2: "sqrtn", 3: "sqrtn_count"}
    for (kind, ws), g in zip(cases, got, strict=True):
        with np.errstate(all="ignore"):
            want = bag_scales(Batch([0, len(ws)], np.zeros(len(ws)), ws), 1, names[kind])[0]
        bits = 0x7FC00000 if np.isnan(want) else int(want.view(np.uint32))
        assert g == bits, f"{names[kind]} of {ws}: {g:#x}, golden {bits:#x}"


def test_split_4k(seed):
    """The 4 KiB splitter alone (Amaranth's simulator), random idle and backpressure on every
    channel: reads and writes of 1..128 beats at random addresses near 4 KiB boundaries leave
    as bursts that never cross one; each read's beats come back in order, each write's beats
    land at their addresses, ``wlast`` ends every bus burst, and the manager sees one B per
    write with the first error of its parts."""
    import random

    from amaranth.sim import Simulator

    from hdl.lib.axi import AxiResp
    from hdl.sparsecore.split import Split4K

    rng = random.Random(seed)
    cfg = SparseCoreConfig()
    beat = cfg.beat_bytes
    dut = Split4K(cfg)
    mgr, bus = dut.mgr, dut.bus

    def burst():
        boundary = rng.randrange(1, 64) * 4096
        return boundary - beat * rng.randrange(0, 130), rng.randrange(1, 129)

    reads = [burst() for _ in range(30)]
    writes = [burst() for _ in range(30)]
    bad = {k for k in range(len(writes)) if rng.random() < 0.2}
    memory, bus_ar, bus_aw, got_reads, got_b = {}, [], [], [], []

    def crossing(addr, beats):
        return addr // 4096 != (addr + beats * beat - 1) // 4096

    async def bench(ctx):
        ar = list(reads)
        aw = list(writes)
        wbeats = [(a + k * beat, k == n - 1) for a, n in writes for k in range(n)]
        r_queue, w_parts, b_queue = [], [], []
        for _ in range(20000):
            if len(got_b) == len(writes) and len(got_reads) == sum(n for _, n in reads):
                break
            # Manager: AR, AW, W with random idle; R and B with random backpressure.
            ctx.set(mgr.arvalid, bool(ar) and rng.random() < 0.7)
            if ar:
                ctx.set(mgr.araddr, ar[0][0])
                ctx.set(mgr.arlen, ar[0][1] - 1)
            ctx.set(mgr.awvalid, bool(aw) and rng.random() < 0.7)
            if aw:
                ctx.set(mgr.awaddr, aw[0][0])
                ctx.set(mgr.awlen, aw[0][1] - 1)
            ctx.set(mgr.wvalid, bool(wbeats) and rng.random() < 0.7)
            if wbeats:
                ctx.set(mgr.wdata, wbeats[0][0])
                ctx.set(mgr.wlast, wbeats[0][1])
            ctx.set(mgr.rready, rng.random() < 0.7)
            ctx.set(mgr.bready, rng.random() < 0.7)
            # Bus: takes AR / AW / W at random, answers R in order, B once a burst's W is in.
            ctx.set(bus.arready, rng.random() < 0.7)
            ctx.set(bus.awready, rng.random() < 0.7)
            ctx.set(bus.wready, rng.random() < 0.7)
            ctx.set(bus.rvalid, bool(r_queue))
            if r_queue:
                ctx.set(bus.rdata, r_queue[0][0])
                ctx.set(bus.rlast, r_queue[0][1])
            ctx.set(bus.bvalid, bool(b_queue))
            if b_queue:
                ctx.set(bus.bresp, b_queue[0])
            await ctx.delay(1e-8)
            if ctx.get(mgr.arvalid) and ctx.get(mgr.arready):
                ar.pop(0)
            if ctx.get(mgr.awvalid) and ctx.get(mgr.awready):
                aw.pop(0)
            if ctx.get(mgr.wvalid) and ctx.get(mgr.wready):
                wbeats.pop(0)
            if ctx.get(bus.rvalid) and ctx.get(bus.rready):
                got_reads.append(r_queue.pop(0)[0])
            if ctx.get(bus.bvalid) and ctx.get(bus.bready):
                b_queue.pop(0)
            if ctx.get(mgr.bvalid) and ctx.get(mgr.bready):
                got_b.append(ctx.get(mgr.bresp))
            if ctx.get(bus.arvalid) and ctx.get(bus.arready):
                a, n = ctx.get(bus.araddr), ctx.get(bus.arlen) + 1
                assert not crossing(a, n), (hex(a), n)
                bus_ar.append((a, n))
                r_queue += [(a + k * beat, k == n - 1) for k in range(n)]
            if ctx.get(bus.awvalid) and ctx.get(bus.awready):
                a, n = ctx.get(bus.awaddr), ctx.get(bus.awlen) + 1
                assert not crossing(a, n), (hex(a), n)
                bus_aw.append((a, n))
                w_parts.append([a, n])
            if ctx.get(bus.wvalid) and ctx.get(bus.wready):
                part = w_parts[0]
                memory[part[0]] = ctx.get(bus.wdata)
                assert ctx.get(bus.wlast) == (part[1] == 1)
                part[0], part[1] = part[0] + beat, part[1] - 1
                if part[1] == 0:
                    w_parts.pop(0)
                    owner = owners[len(bus_aw) - len(w_parts) - 1]
                    b_queue.append(AxiResp.SLVERR if owner in bad else AxiResp.OKAY)
            await ctx.tick()

    # The write each bus burst belongs to (a crossing write leaves as two), for its response:
    # SLVERR for the parts of a bad write.
    owners = [k for k, (a, n) in enumerate(writes) for _ in range(1 + crossing(a, n))]

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got_reads == [a + k * beat for a, n in reads for k in range(n)]
    assert all(memory[a + k * beat] == a + k * beat for a, n in writes for k in range(n))
    assert got_b == [AxiResp.SLVERR if k in bad else AxiResp.OKAY for k in range(len(writes))]
    assert len(bus_ar) == len(reads) + sum(crossing(a, n) for a, n in reads)
    assert len(bus_aw) == len(writes) + sum(crossing(a, n) for a, n in writes)
    assert any(crossing(a, n) for a, n in reads + writes)
