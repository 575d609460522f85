"""Real workloads compiled for the TensorCore: ``digits`` (the UCI digits MLP),
``vit`` (a Vision Transformer on the same digits, trained in numpy)."""
__all__ = []
