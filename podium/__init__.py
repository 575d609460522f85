"""Podium's software side: tools that work on the chip as a whole rather than on one block of
gateware. ``podium.model`` is the analytic performance model from one chip to many slices,
calibrated on the benchmark results of Podium's own RTL. The TensorCore's software:
``asm`` (assembler, disassembler), ``isasim`` (golden ISA simulator), ``program`` (the
compiled program and its file), ``runner`` (programs on a backend), ``compiler`` (GEMMs,
MLPs), ``workloads`` (the digits MLP), ``tools`` (their command line)."""
