"""Configuration of the SparseCore generator and of its standalone top (with an HBM
controller), validated on construction."""

from dataclasses import dataclass

from .config import Config, ConfigError, check, check_choice, check_int
from .hbm import HBMConfig, check_matching_bus

__all__ = ["SparseCoreConfig", "SparseCoreSystemConfig"]

_POW2 = tuple(2**i for i in range(31))


@dataclass(frozen=True)
class SparseCoreConfig(Config):
    """Parameters of one SparseCore.

    Parameters
    ----------
    axi_data_width, axi_addr_width, axi_id_width : int
        Its AXI4 manager bus (an HBM controller port): data 64..1024 bits (a power of two; the
        fp32 combiner has ``axi_data_width / 32`` lanes), address 12..48, ID 2..8 bits (it uses
        IDs 0..``row_ids - 1`` for rows, then one each for offsets, ids and weights).
    max_dim : int
        Largest row the accumulator holds, in fp32 elements: a multiple of the lanes, at most
        1024 (the accumulator is ``4 * max_dim`` bytes of registers).
    tables : int
        Table descriptors in the register file, 1..16.
    inflight_beats : int
        Row data beats the gather may have in flight (the row data buffer), 4..256, split
        evenly between the row IDs; a row of ``r`` beats is issued on an ID only when ``r`` of
        its beats are free, so each ID's share must hold the largest row (``max_dim`` fp32
        elements).
    row_ids : int
        AXI IDs the row reads use, 1..4 (at most ``2**axi_id_width - 3``): a row goes to the
        next ID in turn that has room. The memory may answer different IDs out of order (an
        HBM controller port keeps one reorder lane per ID's low bits, each with a share of its
        reorder buffer), so with more than one ID more rows can be in flight; each ID has its
        own row buffer and the combiner takes a row from the buffer of the ID it was read on.
    list_beats : int
        Beats buffered for each of the offsets, ids and weights lists, 2..64.
    max_burst : int
        Beats per list read burst, 1..64 (at most ``list_beats``).
    max_ids : int
        Ids of one scatter minibatch (the sorter's entries; also its limit of unique ids),
        2..256. A larger scatter is split into minibatches in CSR order.
    bad_ids : str
        Reset value of the bad-id policy (the MODE register can change it): ``"stop"`` (the
        operation stops with BAD_ID, nothing written) or ``"drop"`` (the ids are skipped and
        counted).
    """

    KIND = "SparseCore"

    axi_data_width: int = 256
    axi_addr_width: int = 32
    axi_id_width: int = 4
    max_dim: int = 128
    tables: int = 4
    inflight_beats: int = 32
    row_ids: int = 2
    list_beats: int = 8
    max_burst: int = 4
    max_ids: int = 16
    bad_ids: str = "stop"

    def validate(self):
        check_choice("axi_data_width", self.axi_data_width, _POW2[6:11])
        check_int("axi_addr_width", self.axi_addr_width, 12, 48)
        check_int("axi_id_width", self.axi_id_width, 2, 8)
        lanes = self.lanes
        check("max_dim", isinstance(self.max_dim, int) and not isinstance(self.max_dim, bool)
              and self.max_dim % lanes == 0 and lanes <= self.max_dim <= 1024,
              f"a multiple of {lanes} (the lanes) in {lanes}..1024", self.max_dim)
        check_int("tables", self.tables, 1, 16)
        check_int("inflight_beats", self.inflight_beats, 4, 256)
        check_int("row_ids", self.row_ids, 1, min(4, 2**self.axi_id_width - 3))
        if self.inflight_beats % self.row_ids:
            raise ConfigError("inflight_beats", f"must be a multiple of row_ids "
                                                f"({self.row_ids}), got {self.inflight_beats}")
        if self.id_beats < self.max_row_beats:
            raise ConfigError("inflight_beats", f"must hold the largest row "
                                                f"({self.max_row_beats} beats) per row ID "
                                                f"({self.row_ids}), got {self.inflight_beats}")
        check_int("list_beats", self.list_beats, 2, 64)
        check_int("max_burst", self.max_burst, 1, min(64, self.list_beats))
        check_int("max_ids", self.max_ids, 2, 256)
        check_choice("bad_ids", self.bad_ids, ("stop", "drop"))

    @property
    def beat_bytes(self):
        return self.axi_data_width // 8

    @property
    def lanes(self):
        """fp32 combiner lanes: the elements of one fp32 beat."""
        return self.axi_data_width // 32

    @property
    def id_beats(self):
        """Row buffer beats of each row ID."""
        return self.inflight_beats // self.row_ids

    @property
    def max_row_beats(self):
        """Beats of the largest row (fp32, ``max_dim`` elements)."""
        return self.max_dim // self.lanes

    @property
    def name(self):
        return f"podium_sc_{self.lanes}l_d{self.max_dim}_{self.digest()}"


@dataclass(frozen=True)
class SparseCoreSystemConfig(Config):
    """The SparseCore's standalone top: the SparseCore on HBM controller port 0 (its tests drive
    the golden HBM device model on the channels).

    Parameters
    ----------
    sparsecore : SparseCoreConfig
        Its AXI bus must match the controller's ports (data, address and ID widths).
    hbm : HBMConfig
        The HBM controller (with ``memory`` ``"hbm"``).
    memory : str
        ``"hbm"``: the HBM controller behind the SparseCore; ``"axi"`` (a test harness choice):
        no controller, the SparseCore's AXI4 port at the edge (its bench puts a memory model
        there with random idle and backpressure on every channel); ``hbm`` is then unused.
    """

    KIND = "SparseCore system"

    sparsecore: SparseCoreConfig = SparseCoreConfig()
    hbm: HBMConfig = HBMConfig()
    memory: str = "hbm"

    def validate(self):
        check_choice("memory", self.memory, ("hbm", "axi"))
        if self.memory == "hbm":
            check_matching_bus("sparsecore", self.sparsecore, self.hbm)

    @property
    def name(self):
        return f"podium_sc_system_{self.digest()}"
