"""The TensorCore's instruction set, defined once: the sequencer's decoder (hardware), the
assembler and disassembler, the golden ISA simulator, the golden VPU and the compiler all read
this module. docs/tensorcore.md states the semantics of every instruction.

Every instruction is one 64-bit word:

    63      58 57  54 53  50 49  46 45  42 41                                    0
    | opcode  |  a   |  b   |  c   |  d   |               immediate               |

``a`` is the destination register of scalar instructions; ``b``, ``c`` and ``d`` are source
registers; the immediate holds constants, branch targets and sub-fields (``IMM_FIELDS``). A
field an instruction does not use must be zero, or the instruction is illegal.
"""

from dataclasses import dataclass

from .codes import Code
from .protocol import COLLECTIVE_SEM, Collective, IciFmt, IciOp, IciSpace

__all__ = ["INSTR_BITS", "REG_BITS", "REGISTERS", "FIELDS", "Op", "Queue", "VOp", "DType",
           "Src2", "Cast", "ROp", "IciOp", "IciFmt", "IciSpace", "Collective", "Error", "Spec",
           "SPECS", "IMM_FIELDS", "ICI_OPS", "Operand", "OPERANDS", "VectorOp", "VOPS",
           "DTYPE_NAMES", "SEM_NONE_OPS", "encode", "decode", "SEM_NONE", "MAX_SEMAPHORES",
           "illegal"]

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


class Op(Code, width=6):
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
    VTRANS = 0x2C
    ICI_SEND = 0x30
    ICI_READ = 0x31
    ICI_COLL = 0x32


class Queue(Code, width=2):
    """The engine queue a WAIT or SIGNAL goes to."""

    DMA = 0
    MXU = 1
    VPU = 2
    ICI = 3


class VOp(Code, width=4):
    """Elementwise VPU operations (VOP); what each does is its row of :data:`VOPS`."""

    ADD = 0
    SUB = 1
    MUL = 2
    MAX = 3
    MIN = 4
    RELU = 5
    COPY = 6
    ABS = 7
    EXP = 8             # the transcendental functions (docs/vmath.md): fp32 and bfloat16
    RECIPROCAL = 9
    RSQRT = 10
    TANH = 11
    SIGMOID = 12
    LOG = 13


class DType(Code, width=2):
    """Element type of a VOP or VRED row."""

    INT32 = 0
    FP32 = 1
    BF16 = 2


DTYPE_NAMES = {DType.INT32: "int32", DType.FP32: "fp32", DType.BF16: "bf16"}
"""How assembly writes each element type (``add.fp32``)."""


class Src2(Code, width=2):
    """Where a VOP's second operand comes from."""

    ROWS = 0        # row i of src2 for row i of src1
    BROADCAST = 1   # the row at src2 for every row (a bias row)
    SCALAR = 2      # the VPU.CFG scalar in every lane (a scale)
    STAT = 3        # word 0 of row g of src2 over the rows of group g: count groups of
                    # `scalar` rows (a per-row statistic of VRED broadcast back over its row)


class Cast(Code, width=2):
    F32_BF16 = 0    # round to nearest even
    BF16_F32 = 1    # exact
    I32_I8 = 2      # requantize: multiply, shift with rounding, saturate
    I8_I32 = 3      # sign-extend


class ROp(Code, width=1):
    """Row reductions (VRED)."""

    SUM = 0
    MAX = 1


ICI_OPS = (Op.ICI_SEND, Op.ICI_READ, Op.ICI_COLL)
"""The ICI queue's instructions."""


@dataclass(frozen=True)
class VectorOp:
    """One elementwise VPU operation.

    ``arity`` is 1 for an operation of ``src1`` alone (its ``src2`` and ``src2`` mode are
    ignored and never read), 2 for one of ``src1`` and ``src2``; ``dtypes`` the element types
    it takes; ``latency`` its latency class (docs/tensorcore.md, "VPU"): ``"pass"`` is one
    pass of the lanes per int32 / fp32 row, two per bfloat16 row; ``"vmath"`` the same passes
    through the transcendental function unit (spec/vmath.py: the function of the same name,
    ``vmath.LATENCY`` cycles), which a TensorCore has only with ``vmath``.
    """

    op: VOp
    arity: int
    dtypes: tuple = (DType.INT32, DType.FP32, DType.BF16)
    latency: str = "pass"

    @property
    def unary(self):
        return self.arity == 1


VOPS = {v.op: v for v in [
    VectorOp(VOp.ADD, 2),
    VectorOp(VOp.SUB, 2),
    VectorOp(VOp.MUL, 2),
    VectorOp(VOp.MAX, 2),
    VectorOp(VOp.MIN, 2),
    VectorOp(VOp.RELU, 1),       # max(x, 0): -0 and negative values become +0
    VectorOp(VOp.COPY, 1),
    VectorOp(VOp.ABS, 1),        # |x|: int32 wraps (-2^31 stays), a float's sign cleared
    *[VectorOp(op, 1, (DType.FP32, DType.BF16), "vmath")
      for op in (VOp.EXP, VOp.RECIPROCAL, VOp.RSQRT, VOp.TANH, VOp.SIGMOID, VOp.LOG)],
]}
"""Every VPU elementwise operation: the decoder's operand checks, the issue stage, the
assembler, the golden ISA simulator and the golden VPU read its arity and types here."""


class Error(Code, width=4):
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
    "dtype": (4, 2),            # VOP, VRED, VTRANS
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
class Operand:
    """What kind of value an operand field holds and how assembly writes it.

    ``kind``: ``"register"`` (``r0``..``r15``), ``"code"`` (a :class:`~spec.codes.Code` by
    name, ``code``), ``"fused"`` (a code written together with the ``dtype`` field:
    ``add.fp32``), ``"keyword"`` (a code written ``name=value``, optional, default 0),
    ``"flag"`` (0 or 1, written as its name when 1), ``"semaphore"`` (``s<n>``), ``"target"``
    (a label or instruction index), ``"imm32"`` (a 32-bit constant) or ``"number"``.
    """

    kind: str
    code: type | None = None


OPERANDS = {
    **{r: Operand("register") for r in ("a", "b", "c", "d")},
    "imm32": Operand("imm32"), "target": Operand("target"), "sem": Operand("semaphore"),
    "shamt": Operand("number"), "dim": Operand("number"), "acc_addr": Operand("number"),
    "chip": Operand("number"), "cdim": Operand("number"),
    "accumulate": Operand("flag"), "emit": Operand("flag"), "relu": Operand("flag"),
    "queue": Operand("code", Queue), "cast": Operand("code", Cast),
    "iop": Operand("code", IciOp), "ifmt": Operand("code", IciFmt),
    "coll": Operand("code", Collective), "cfmt": Operand("code", IciFmt),
    "vop": Operand("fused", VOp), "rop": Operand("fused", ROp), "dtype": Operand("code", DType),
    "src2": Operand("keyword", Src2), "lspace": Operand("keyword", IciSpace),
    "rspace": Operand("keyword", IciSpace), "cspace": Operand("keyword", IciSpace),
}
"""Every operand field (register fields and immediate sub-fields) by name."""

SEM_NONE_OPS = (Op.DMA_LOAD, Op.DMA_STORE, Op.ICI_SEND)
"""The instructions whose semaphore may be ``SEM_NONE`` (written ``none``)."""


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
    Spec(Op.VTRANS, "vtrans", ("dtype", "b", "c"), ("dtype",), Queue.VPU),
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


def illegal(op, fields, *, semaphores, ici=True, vmath=True, vtrans=True):
    """Why the decoded instruction ``(op, fields)`` is illegal on a TensorCore with
    ``semaphores`` semaphores (and, with ``ici``, an ICI queue; with ``vmath``, the
    transcendental function unit; with ``vtrans``, the transpose unit), or None: an enumerated
    field with no meaning, an ICI instruction or queue without one, a VOP function or VTRANS
    without its unit, or a semaphore number
    past the last one (DMA.LOAD / DMA.STORE may also name ``SEM_NONE``; ICI.SEND's names a
    semaphore of the destination, any but the collectives' 30)."""
    if not ici and (op in ICI_OPS or fields.get("queue") == Queue.ICI.value):
        return "this TensorCore has no ICI queue (a pod chip's has)"
    for name, value in fields.items():
        kind = OPERANDS[name].code
        if kind is not None and value not in {m.value for m in kind}:
            return f"{name} {value} is not one of {', '.join(m.name for m in kind)}"
    sem = fields.get("sem")
    if op == Op.ICI_SEND:
        if sem == COLLECTIVE_SEM:
            return f"semaphore {sem} is the collective engine's"
        if fields["iop"] != IciOp.STORE.value and fields["ifmt"] == IciFmt.BF16.value:
            return "ici.send adds int32 or fp32 (bfloat16 adds are the collectives')"
    elif sem is not None and sem >= semaphores and not (
            op in SEM_NONE_OPS and sem == SEM_NONE):
        return f"semaphore {sem} does not exist (0..{semaphores - 1})"
    if op == Op.VTRANS and not vtrans:
        return "vtrans needs the transpose unit (vtrans), which this TensorCore has not"
    if op == Op.VOP and not vmath and VOPS[VOp(fields["vop"])].latency == "vmath":
        return (f"vop {VOp(fields['vop']).name.lower()} needs the transcendental unit "
                f"(vmath), which this TensorCore has not")
    if op == Op.VOP and fields["dtype"] not in VOPS[VOp(fields["vop"])].dtypes:
        return f"vop {VOp(fields['vop']).name.lower()} does not take {DType(fields['dtype']).name}"
    return None
