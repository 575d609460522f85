"""The SparseCore: embedding lookups (gather + segment reduction) from HBM (docs/sparsecore.md)."""
