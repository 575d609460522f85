"""A golden byte-addressed memory: what a correct memory system holds after a sequence of
writes, for scoreboards of every block that reads or writes memory (HBM controller, DMA,
SparseCore). Unwritten bytes read as zero."""

__all__ = ["ByteMemory"]


class ByteMemory:
    """Sparse bytes, address -> value."""

    def __init__(self):
        self.bytes = {}

    def write(self, address, data, strb=None):
        """Store ``data`` at ``address``; with ``strb`` (an int, bit ``k`` for byte ``k``) only
        the enabled bytes."""
        for k, b in enumerate(data):
            if strb is None or strb >> k & 1:
                self.bytes[address + k] = b

    def read(self, address, length):
        return bytes(self.bytes.get(a, 0) for a in range(address, address + length))

    def addresses(self):
        """Every address written, ascending."""
        return sorted(self.bytes)
