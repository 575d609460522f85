"""Access patterns of the HBM benchmarks (sim/hbm_perf.py) and saturating tests: lists of AXI
commands ``(kind, id, address, beats)`` for :class:`verification.tb.axi.AxiDriver`."""

__all__ = ["PATTERNS", "pattern"]

PATTERNS = ("seq_read", "seq_write", "rand_read", "rand_read_512", "rand_mix", "stream",
            "row_walk")
BLOCK = 512  # bytes of one ``rand_read_512`` burst (an embedding row of the SparseCore benchmark)


def pattern(cfg, rng, name, accesses, port=0):
    """The commands of pattern ``name`` for port ``port``: ``accesses`` accesses of
    ``cfg.access_bytes`` (an ``HBMConfig``), random choices from ``rng``.

    * ``seq_read`` / ``seq_write`` / ``stream``: 32-beat bursts through a region of the port's
      own (ports side by side), IDs alternating.
    * ``rand_read``: single-beat reads anywhere, IDs round robin.
    * ``rand_read_512``: bursts of ``BLOCK`` bytes at random ``BLOCK``-aligned addresses, IDs
      round robin (the gather of 512 B embedding rows).
    * ``rand_mix``: 2-beat bursts anywhere, two reads to one write, every address distinct (a
      read never races a write to the same bytes).
    * ``row_walk``: reads in column order within a row, rows in turn in one bank: each row a new
      ACT.
    """
    ab = cfg.access_bytes
    ids = 1 << cfg.id_width
    cmds = []
    if name in ("seq_read", "seq_write", "stream"):
        base = port * accesses * ab
        burst = 32
        for k in range(0, accesses, burst):
            kind = "w" if name == "seq_write" else "r"
            cmds.append((kind, (k // burst) % 2, base + k * ab, min(burst, accesses - k)))
    elif name == "rand_read":
        for k in range(accesses):
            cmds.append(("r", k % ids, rng.randrange(cfg.capacity // ab) * ab, 1))
    elif name == "rand_read_512":
        beats = BLOCK // ab
        for k in range(-(-accesses // beats)):
            cmds.append(("r", k % ids, rng.randrange(cfg.capacity // BLOCK) * BLOCK, beats))
    elif name == "rand_mix":
        pairs = cfg.capacity // (2 * ab)
        used = set()
        for k in range(accesses // 2):
            kind = "w" if k % 3 == 2 else "r"
            pair = rng.randrange(pairs)
            while pair in used:
                pair = rng.randrange(pairs)
            used.add(pair)
            cmds.append((kind, k % ids, pair * 2 * ab, 2))
    elif name == "row_walk":
        per_row = 1 << cfg.col_bits
        for k in range(accesses):
            row, col = divmod(k, per_row)
            cmds.append(("r", 0, cfg.encode(0, 0, row % (1 << cfg.row_bits), col), 1))
    else:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {name!r}")
    return cmds
