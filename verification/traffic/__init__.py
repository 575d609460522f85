"""Traffic patterns: the stimulus of benchmarks and saturating tests, one module per block,
shared by the testbenches (verification/tb/) and the benchmarks (sim/)."""
