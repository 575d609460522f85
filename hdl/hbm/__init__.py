"""The HBM controller: AXI4 front end, crossbar, per-pseudo-channel scheduling, refresh, ECC."""
