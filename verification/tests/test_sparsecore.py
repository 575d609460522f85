"""SparseCore regression: the cocotb benches of the SparseCore's standalone top (the HBM
controller with the golden device model behind it), configuration refusals and generation."""

import pytest

from hdl.config import ConfigError
from hdl.generate import make_config
from hdl.sparsecore.config import SparseCoreConfig, SparseCoreSystemConfig
from verification.tests.suite import cases

TB = "verification.tb.sparsecore"

CONFIGS = {"hbm": SparseCoreSystemConfig(),
           "axi": SparseCoreSystemConfig(memory="axi")}


SLOW = {("axi", "test_bf16_padding_empty"), ("axi", "test_edges_duplicates_tables"),
        ("axi", "test_bad_input"), ("axi", "test_scatter_bad_input")}
"""Runs that repeat on the AXI harness what the HBM configuration covers (make test-all)."""


def _marks(name, test):
    return [pytest.mark.slow] if (name, test) in SLOW else []


@pytest.mark.parametrize("name, test", cases(TB, CONFIGS, _marks))
def test_sparsecore(cocotb_run, name, test):
    cocotb_run("sparsecore", CONFIGS[name], TB, test)


ONE_ROW_ID = SparseCoreSystemConfig(sparsecore=SparseCoreConfig(row_ids=1))
"""Every row read on one ID (the default configuration uses two)."""


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
