"""Golden models: each block's results defined bit-exactly in numpy, from the spec."""
