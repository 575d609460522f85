"""hdl/lib/crc.py against amaranth.lib.crc: the same CRC-16 values over random messages of
every width the ICI's links use, from the software models and from the hardware (this
module's one-cycle XOR network against amaranth.lib.crc's ``Processor``, simulated)."""

import dataclasses
import random
import sys

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib.crc import catalog
from amaranth.sim import Simulator

from hdl.generate import BLOCKS
from hdl.ici.packet import CRC_BITS, reverse_layout, wire_layout
from hdl.lib.crc import CRC16_CCITT, CRC16_CCITT_ALGORITHM, crc_bitwise, crc_taps, crc_value
from spec.ici import ICIConfig

SEED = 35
MESSAGES = 200


def _ici_configs(config):
    """Every ICIConfig in ``config`` and the configurations it nests."""
    if isinstance(config, ICIConfig):
        yield config
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            yield from _ici_configs(value)


def _ici_widths():
    """The message widths of the links of every configuration the registry generates (ICI
    networks, routers, harnesses, NICs, pods): flits and reverse messages, each without its
    CRC field."""
    widths = set()
    for block in BLOCKS.values():
        for config in block.configurations():
            for cfg in _ici_configs(config):
                widths |= {wire_layout(cfg).size - CRC_BITS,
                           reverse_layout(cfg).size - CRC_BITS}
    return sorted(widths)


WIDTHS = _ici_widths()


def test_the_algorithm_is_amaranths_xmodem():
    assert repr(CRC16_CCITT_ALGORITHM) == repr(catalog.CRC16_XMODEM)
    assert (CRC16_CCITT_ALGORITHM.crc_width, CRC16_CCITT_ALGORITHM.polynomial) == CRC16_CCITT


@pytest.mark.parametrize("nbits", WIDTHS)
def test_software_models_agree(nbits):
    """This module's bitwise reference, amaranth.lib.crc's model (message as one word, and as
    single bits), and the taps' XOR all give the same CRC."""
    print(f"seed {SEED}")
    rng = random.Random(SEED * 1000 + nbits)
    taps = crc_taps(nbits, *CRC16_CCITT)
    whole = CRC16_CCITT_ALGORITHM(data_width=nbits)
    serial = CRC16_CCITT_ALGORITHM(data_width=1)
    for _ in range(MESSAGES):
        message = rng.getrandbits(nbits)
        expect = crc_bitwise(message, nbits, *CRC16_CCITT)
        assert whole.compute([message]) == expect
        assert serial.compute([(message >> i) & 1 for i in reversed(range(nbits))]) == expect
        assert sum((bin(message & sum(1 << i for i in t)).count("1") & 1) << b
                   for b, t in enumerate(taps)) == expect


@pytest.mark.parametrize("nbits", WIDTHS)
def test_hardware_equals_amaranths_processor(nbits):
    """crc_value's network and amaranth.lib.crc's Processor (data_width = the message, start
    and valid every cycle: its CRC one cycle after its data), simulated over the same random
    messages: equal CRCs, and equal to the model."""
    print(f"seed {SEED}")
    rng = random.Random(SEED * 1000 + nbits)
    messages = [rng.getrandbits(nbits) for _ in range(MESSAGES)]
    m = Module()
    message = Signal(nbits)
    ours = Signal(CRC_BITS)
    m.d.comb += ours.eq(crc_value(m, message, name="crc"))
    m.submodules.processor = processor = CRC16_CCITT_ALGORITHM(data_width=nbits).create()
    m.d.comb += [processor.data.eq(message), processor.start.eq(1), processor.valid.eq(1)]
    # Processor XORs bit after bit: a chain as deep as the message, which the simulator
    # compiles recursively.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20 * nbits + 1000))
    try:
        sim = Simulator(m)
    finally:
        sys.setrecursionlimit(limit)
    sim.add_clock(1e-6)
    seen = []

    async def bench(ctx):
        for value in messages:
            ctx.set(message, value)
            expect = ctx.get(ours)
            await ctx.tick()
            seen.append((value, expect, ctx.get(processor.crc)))

    sim.add_testbench(bench)
    sim.run()
    for value, ours_crc, theirs in seen:
        assert ours_crc == theirs == crc_bitwise(value, nbits, *CRC16_CCITT), hex(value)
