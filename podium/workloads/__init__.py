"""Real workloads compiled for the TensorCore: ``digits`` (the UCI digits MLP)."""
__all__ = []
