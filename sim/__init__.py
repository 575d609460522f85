"""Simulator glue: Verilog per configuration, build cache, Verilator/Icarus runs, benchmarks."""
