"""The TensorCore's instruction set, defined once: the sequencer's decoder (hardware), the
assembler and disassembler, the golden ISA simulator and the compiler all read this module.
docs/tensorcore.md states the semantics of every instruction.

Every instruction is one 64-bit word:

    63      58 57  54 53  50 49  46 45  42 41                                    0
    | opcode  |  a   |  b   |  c   |  d   |               immediate               |

``a`` is the destination register of scalar instructions; ``b``, ``c`` and ``d`` are source
registers; the immediate holds constants, branch targets and sub-fields (``IMM_FIELDS``). A
field an instruction does not use must be zero, or the instruction is illegal.
"""

from dataclasses import dataclass

from amaranth.lib import enum

__all__ = ["INSTR_BITS", "REG_BITS", "REGISTERS", "FIELDS", "Op", "Queue", "VOp", "DType",
           "Src2", "Cast", "ROp", "IciOp", "IciFmt", "IciSpace", "Coll", "Error", "Spec", "SPECS",
           "IMM_FIELDS", "ICI_OPS", "encode", "decode", "SEM_NONE", "MAX_SEMAPHORES", "illegal"]

INSTR_BITS = 64
REG_BITS = 4
REGISTERS = 16
"""Scalar registers r0..r15, 32 bits; r0 reads as zero and ignores writes."""

MAX_SEMAPHORES = 31
SEM_NONE = 31
"""The ``sem`` field of DMA.LOAD / DMA.STORE when the transfer signals no semaphore."""

FIELDS = {"opcode": (58, 6), "a": (54, 4), "b": (50, 4), "c": (46, 4), "d": (42, 4),
          "imm": (0, 42)}
"""(lowest bit, width) of each field of the instruction word."""


class Op(enum.Enum, shape=6):
    """Opcodes. 0x00-0x0F scalar (executed by the front end), 0x10-0x11 synchronisation,
    0x18-0x1F DMA, 0x20-0x27 MXU, 0x28-0x2F VPU, 0x30-0x37 ICI (dispatched to that engine's
    queue; the ICI's only on a TensorCore built with ``ici``, a pod's chip)."""

    NOP = 0x00
    HALT = 0x01
    LI = 0x02
    ADDI = 0x03
    ADD = 0x04
    SUB = 0x05
    MUL = 0x06
    SLLI = 0x07
    SRLI = 0x08
    BEQ = 0x09
    BNE = 0x0A
    BLT = 0x0B
    JMP = 0x0C
    WAIT = 0x10
    SIGNAL = 0x11
    DMA_SHAPE = 0x18
    DMA_LOAD = 0x19
    DMA_STORE = 0x1A
    MXU_SHAPE = 0x20
    MXU_STRIDE = 0x21
    MATMUL = 0x22
    VPU_CFG = 0x28
    VOP = 0x29
    VCAST = 0x2A
    VRED = 0x2B
    ICI_SEND = 0x30
    ICI_READ = 0x31
    ICI_COLL = 0x32


class Queue(enum.Enum, shape=2):
    """The engine queue a WAIT or SIGNAL goes to."""

    DMA = 0
    MXU = 1
    VPU = 2
    ICI = 3


class VOp(enum.Enum, shape=4):
    """Elementwise VPU operations (VOP)."""

    ADD = 0
    SUB = 1
    MUL = 2
    MAX = 3
    MIN = 4
    RELU = 5        # unary: src2 ignored
    COPY = 6        # unary: src2 ignored


class DType(enum.Enum, shape=2):
    INT32 = 0
    FP32 = 1
    BF16 = 2


class Src2(enum.Enum, shape=2):
    """Where a VOP's second operand comes from."""

    ROWS = 0        # row i of src2 for row i of src1
    BROADCAST = 1   # the row at src2 for every row (a bias row)
    SCALAR = 2      # the VPU.CFG scalar in every lane (a scale)


class Cast(enum.Enum, shape=2):
    F32_BF16 = 0    # round to nearest even
    BF16_F32 = 1    # exact
    I32_I8 = 2      # requantize: multiply, shift with rounding, saturate
    I8_I32 = 3      # sign-extend


class ROp(enum.Enum, shape=1):
    """Row reductions (VRED)."""

    SUM = 0
    MAX = 1


class IciOp(enum.Enum, shape=2):
    """What an ``ici.send`` does with its bytes at the destination (docs/pod.md)."""

    STORE = 0
    ADD = 1         # add to the elements there, keep a partial (bfloat16: fp32 staging)
    ADD_FINAL = 2   # add and store the format's result


class IciFmt(enum.Enum, shape=2):
    """Element format of an ICI add or a collective."""

    INT32 = 0
    FP32 = 1
    BF16 = 2


class IciSpace(enum.Enum, shape=1):
    """The memory an ICI operand is in: the chip's VMEM (the default) or its HBM."""

    VMEM = 0
    HBM = 1


class Coll(enum.Enum, shape=3):
    """The collective an ``ici.coll`` runs (docs/pod.md, "Collectives")."""

    REDUCE_SCATTER = 0
    ALL_GATHER = 1
    ALL_REDUCE = 2
    ALL_TO_ALL = 3
    ALL_REDUCE_2D = 4


ICI_OPS = (Op.ICI_SEND, Op.ICI_READ, Op.ICI_COLL)
"""The ICI queue's instructions."""


class Error(enum.Enum, shape=4):
    """The sequencer's sticky error code (status register ERROR)."""

    NONE = 0
    ILLEGAL_INSTRUCTION = 1     # unknown opcode, a bad field, a reserved field not zero
    PC_RANGE = 2                # fetch or branch target past the instruction memory
    VMEM_RANGE = 3              # a VMEM operand out of range or misaligned
    DMA_ALIGN = 4               # a DMA shape or HBM address not aligned to the AXI beat
    DMA_RESPONSE = 5            # the memory answered SLVERR or DECERR
    SEM_OVERFLOW = 6            # a SIGNAL on a semaphore already at its maximum (255)
    DEADLOCK = 7                # nothing could make progress for deadlock_cycles cycles
    ABORTED = 8                 # the host wrote CONTROL.abort
    ICI = 9                     # an ICI message or collective the pod cannot carry


IMM_FIELDS = {
    "imm32": (0, 32),           # LI, ADDI
    "shamt": (0, 5),            # SLLI, SRLI
    "target": (0, 16),          # BEQ, BNE, BLT, JMP: instruction index
    "queue": (0, 2),            # WAIT, SIGNAL
    "sem": (8, 5),              # WAIT, SIGNAL, DMA.LOAD, DMA.STORE
    "dim": (0, 2),              # DMA.SHAPE: 0 run bytes, 1..3 outer dimensions
    "acc_addr": (0, 16),        # MATMUL
    "accumulate": (16, 1),      # MATMUL
    "emit": (17, 1),            # MATMUL
    "vop": (0, 4),              # VOP
    "dtype": (4, 2),            # VOP, VRED
    "src2": (6, 2),             # VOP
    "relu": (8, 1),             # VOP: ReLU applied after the operation
    "cast": (0, 2),             # VCAST
    "rop": (0, 1),              # VRED
    "iop": (0, 2),              # ICI.SEND
    "ifmt": (2, 2),             # ICI.SEND
    "lspace": (4, 1),           # ICI.SEND, ICI.READ: this chip's operand's memory
    "rspace": (5, 1),           # ICI.SEND, ICI.READ: the other chip's operand's memory
    "chip": (16, 16),           # ICI.SEND, ICI.READ: the destination (pod node number)
    "coll": (0, 3),             # ICI.COLL
    "cdim": (3, 2),             # ICI.COLL: the torus dimension of a ring collective
    "cfmt": (5, 2),             # ICI.COLL
    "cspace": (7, 1),           # ICI.COLL: the memory of the buffer (or all-to-all messages)
}
"""Sub-fields of the immediate: name -> (lowest bit within the immediate, width)."""


@dataclass(frozen=True)
class Spec:
    """How one instruction is written and encoded.

    ``operands`` lists, in assembly order, the register fields (``a``..``d``) and immediate
    sub-fields it takes; ``imm`` names the immediate sub-fields it uses (every other
    immediate bit must be zero); ``queue`` is the engine it is dispatched to, or None for a
    scalar instruction.
    """

    op: Op
    mnemonic: str
    operands: tuple
    imm: tuple = ()
    queue: Queue | None = None


_SCALAR_RRR = ("a", "b", "c")
SPECS = {s.op: s for s in [
    Spec(Op.NOP, "nop", ()),
    Spec(Op.HALT, "halt", ()),
    Spec(Op.LI, "li", ("a", "imm32"), ("imm32",)),
    Spec(Op.ADDI, "addi", ("a", "b", "imm32"), ("imm32",)),
    Spec(Op.ADD, "add", _SCALAR_RRR),
    Spec(Op.SUB, "sub", _SCALAR_RRR),
    Spec(Op.MUL, "mul", _SCALAR_RRR),
    Spec(Op.SLLI, "slli", ("a", "b", "shamt"), ("shamt",)),
    Spec(Op.SRLI, "srli", ("a", "b", "shamt"), ("shamt",)),
    Spec(Op.BEQ, "beq", ("b", "c", "target"), ("target",)),
    Spec(Op.BNE, "bne", ("b", "c", "target"), ("target",)),
    Spec(Op.BLT, "blt", ("b", "c", "target"), ("target",)),
    Spec(Op.JMP, "jmp", ("target",), ("target",)),
    Spec(Op.WAIT, "wait", ("queue", "sem"), ("queue", "sem")),
    Spec(Op.SIGNAL, "signal", ("queue", "sem"), ("queue", "sem")),
    Spec(Op.DMA_SHAPE, "dma.shape", ("dim", "b", "c", "d"), ("dim",), Queue.DMA),
    Spec(Op.DMA_LOAD, "dma.load", ("b", "c", "sem"), ("sem",), Queue.DMA),
    Spec(Op.DMA_STORE, "dma.store", ("b", "c", "sem"), ("sem",), Queue.DMA),
    Spec(Op.MXU_SHAPE, "mxu.shape", ("b", "c", "d"), (), Queue.MXU),
    Spec(Op.MXU_STRIDE, "mxu.stride", ("b", "c", "d"), (), Queue.MXU),
    Spec(Op.MATMUL, "matmul", ("b", "c", "d", "acc_addr", "accumulate", "emit"),
         ("acc_addr", "accumulate", "emit"), Queue.MXU),
    Spec(Op.VPU_CFG, "vpu.cfg", ("b", "c", "d"), (), Queue.VPU),
    Spec(Op.VOP, "vop", ("vop", "dtype", "b", "c", "d", "src2", "relu"),
         ("vop", "dtype", "src2", "relu"), Queue.VPU),
    Spec(Op.VCAST, "vcast", ("cast", "b", "c"), ("cast",), Queue.VPU),
    Spec(Op.VRED, "vred", ("rop", "dtype", "b", "c", "d"), ("rop", "dtype"), Queue.VPU),
    Spec(Op.ICI_SEND, "ici.send", ("b", "c", "d", "chip", "iop", "ifmt", "sem", "lspace",
                                   "rspace"),
         ("chip", "iop", "ifmt", "sem", "lspace", "rspace"), Queue.ICI),
    Spec(Op.ICI_READ, "ici.read", ("b", "c", "d", "chip", "sem", "lspace", "rspace"),
         ("chip", "sem", "lspace", "rspace"), Queue.ICI),
    Spec(Op.ICI_COLL, "ici.coll", ("coll", "cdim", "cfmt", "b", "c", "cspace"),
         ("coll", "cdim", "cfmt", "cspace"), Queue.ICI),
]}
"""Every instruction. WAIT and SIGNAL go to the queue their ``queue`` field names."""


def encode(op, **fields):
    """The 64-bit word of instruction ``op`` (an :class:`Op`) with ``fields`` (register fields
    ``a``..``d`` and the immediate sub-fields of its :class:`Spec`); unnamed fields are zero.
    Raises ValueError naming a field that is not the instruction's or does not fit."""
    spec = SPECS[op]
    allowed = set(spec.operands)
    word = op.value << FIELDS["opcode"][0]
    for name, value in fields.items():
        if name not in allowed:
            raise ValueError(f"{spec.mnemonic} has no operand {name!r}; it takes "
                             f"{', '.join(spec.operands) or 'none'}")
        lo, width = FIELDS[name] if name in FIELDS else IMM_FIELDS[name]
        value = int(value.value if hasattr(value, "value") else value)
        if not 0 <= value < 1 << width:
            raise ValueError(f"{spec.mnemonic}: {name} must be in 0..{(1 << width) - 1}, "
                             f"got {value}")
        word |= value << lo
    return word


def decode(word):
    """``(op, fields)`` of a 64-bit word, or raise ValueError for an illegal instruction:
    unknown opcode, or a bit set in a field the instruction does not use."""
    code = word >> FIELDS["opcode"][0] & 0x3F
    try:
        op = Op(code)
    except ValueError:
        raise ValueError(f"unknown opcode {code:#04x}") from None
    spec = SPECS[op]
    fields, used = {}, 0
    for name in spec.operands:
        lo, width = FIELDS[name] if name in FIELDS else IMM_FIELDS[name]
        fields[name] = word >> lo & ((1 << width) - 1)
        used |= ((1 << width) - 1) << lo
    used |= ((1 << FIELDS["opcode"][1]) - 1) << FIELDS["opcode"][0]
    if word & ~used & ((1 << INSTR_BITS) - 1):
        raise ValueError(f"{spec.mnemonic}: reserved bits set in {word:#018x}")
    return op, fields


_ENUMS = {"queue": Queue, "vop": VOp, "dtype": DType, "src2": Src2, "cast": Cast, "rop": ROp,
          "iop": IciOp, "ifmt": IciFmt, "coll": Coll, "cfmt": IciFmt,
          "lspace": IciSpace, "rspace": IciSpace, "cspace": IciSpace}


def illegal(op, fields, *, semaphores, ici=True):
    """Why the decoded instruction ``(op, fields)`` is illegal on a TensorCore with
    ``semaphores`` semaphores (and, with ``ici``, an ICI queue), or None: an enumerated field
    with no meaning, an ICI instruction or queue without one, or a semaphore number past the
    last one (DMA.LOAD / DMA.STORE may also name ``SEM_NONE``; ICI.SEND's names a semaphore
    of the destination, any but the collectives' 30)."""
    if not ici and (op in ICI_OPS or fields.get("queue") == Queue.ICI.value):
        return "this TensorCore has no ICI queue (a pod chip's has)"
    for name, value in fields.items():
        kind = _ENUMS.get(name)
        if kind is not None and value not in {m.value for m in kind}:
            return f"{name} {value} is not one of {', '.join(m.name for m in kind)}"
    sem = fields.get("sem")
    if op == Op.ICI_SEND:
        if sem == SEM_NONE - 1:
            return f"semaphore {sem} is the collective engine's"
        if fields["iop"] != IciOp.STORE.value and fields["ifmt"] == IciFmt.BF16.value:
            return "ici.send adds int32 or fp32 (bfloat16 adds are the collectives')"
    elif sem is not None and sem >= semaphores and not (
            op in (Op.DMA_LOAD, Op.DMA_STORE) and sem == SEM_NONE):
        return f"semaphore {sem} does not exist (0..{semaphores - 1})"
    return None
