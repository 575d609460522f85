"""The assembler and disassembler (podium/asm.py): hand-written programs against encodings
built field by field with hdl/tensorcore/isa.encode, error messages, and round trips on random
legal instructions and random programs (hypothesis, derandomized: the same examples every
run)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.asm import AsmError, assemble, disassemble, format_instruction
from spec.isa import (
    FIELDS,
    IMM_FIELDS,
    SEM_NONE,
    SPECS,
    VOPS,
    Cast,
    Collective,
    DType,
    IciFmt,
    IciOp,
    IciSpace,
    Op,
    Queue,
    ROp,
    Src2,
    VOp,
    decode,
    encode,
    illegal,
)

PROPERTY = settings(max_examples=300, deadline=None, database=None, derandomize=True)
_ENUMS = {"queue": Queue, "vop": VOp, "dtype": DType, "src2": Src2, "cast": Cast, "rop": ROp,
          "iop": IciOp, "ifmt": IciFmt, "coll": Collective, "cfmt": IciFmt}


def test_hand_written_program():
    text = """
    # a loop that copies and accumulates
    start:  li r1, 0x1000           # HBM address
            li r2, -1
            addi r3, r2, 7
    loop:   dma.shape 1, r4, r5, r6
            dma.load r1, r3, s2
            dma.store r1, r3, none
            wait mxu, s2
            signal vpu, s0
            mxu.shape r4, r5, r6
            mxu.stride r4, r5, r6
            matmul r7, r8, r9, 12, accumulate, emit
            vpu.cfg r1, r2, r3
            vop add.int32 r6, r6, r7, src2=broadcast, relu
            vop mul.bf16 r6, r6, r0, src2=scalar
            vop copy.fp32 r1, r2, r0
            vcast i32_i8 r6, r6
            vred sum.fp32 r1, r2, r3
            slli r1, r1, 3
            srli r1, r1, 31
            sub r9, r9, r2
            mul r9, r9, r2
            add r9, r9, r2
            blt r9, r10, loop
            beq r9, r0, 0x2
            bne r9, r0, start
            jmp end
    end:    nop
            halt
    """
    expect = [
        encode(Op.LI, a=1, imm32=0x1000),
        encode(Op.LI, a=2, imm32=0xFFFFFFFF),
        encode(Op.ADDI, a=3, b=2, imm32=7),
        encode(Op.DMA_SHAPE, dim=1, b=4, c=5, d=6),
        encode(Op.DMA_LOAD, b=1, c=3, sem=2),
        encode(Op.DMA_STORE, b=1, c=3, sem=SEM_NONE),
        encode(Op.WAIT, queue=Queue.MXU, sem=2),
        encode(Op.SIGNAL, queue=Queue.VPU, sem=0),
        encode(Op.MXU_SHAPE, b=4, c=5, d=6),
        encode(Op.MXU_STRIDE, b=4, c=5, d=6),
        encode(Op.MATMUL, b=7, c=8, d=9, acc_addr=12, accumulate=1, emit=1),
        encode(Op.VPU_CFG, b=1, c=2, d=3),
        encode(Op.VOP, vop=VOp.ADD, dtype=DType.INT32, b=6, c=6, d=7, src2=Src2.BROADCAST,
               relu=1),
        encode(Op.VOP, vop=VOp.MUL, dtype=DType.BF16, b=6, c=6, d=0, src2=Src2.SCALAR),
        encode(Op.VOP, vop=VOp.COPY, dtype=DType.FP32, b=1, c=2, d=0),
        encode(Op.VCAST, cast=Cast.I32_I8, b=6, c=6),
        encode(Op.VRED, rop=ROp.SUM, dtype=DType.FP32, b=1, c=2, d=3),
        encode(Op.SLLI, a=1, b=1, shamt=3),
        encode(Op.SRLI, a=1, b=1, shamt=31),
        encode(Op.SUB, a=9, b=9, c=2),
        encode(Op.MUL, a=9, b=9, c=2),
        encode(Op.ADD, a=9, b=9, c=2),
        encode(Op.BLT, b=9, c=10, target=3),
        encode(Op.BEQ, b=9, c=0, target=2),
        encode(Op.BNE, b=9, c=0, target=0),
        encode(Op.JMP, target=26),
        encode(Op.NOP),
        encode(Op.HALT),
    ]
    words = assemble(text)
    assert words == expect
    assert assemble(disassemble(words)) == words


def test_disassembly_text():
    words = [encode(Op.LI, a=1, imm32=3), encode(Op.BNE, b=1, c=0, target=0),
             encode(Op.JMP, target=100), encode(Op.HALT), 0xFFFF_FFFF_FFFF_FFFF]
    lines = disassemble(words).splitlines()
    assert lines[0].split() == ["L0:", "li", "r1,", "3"]
    assert lines[1].split() == ["bne", "r1,", "r0,", "L0"]
    assert lines[2].split() == ["jmp", "100"]
    assert lines[4].split() == [".word", "0xffffffffffffffff"]
    assert format_instruction(encode(Op.LI, a=2, imm32=0x80000000)) == "li r2, 0x80000000"


def test_ici_memories():
    """The ICI's memory operands are keywords, ``vmem`` by default, written back only when
    ``hbm``."""
    text = ("ici.send r1, r2, r3, 2, add, fp32, s4, rspace=hbm\n"
            "ici.read r1, r2, r3, 0, s1, lspace=hbm, rspace=hbm\n"
            "ici.coll all_gather 1, bf16, r1, r2, cspace=hbm\n"
            "ici.read r1, r2, r3, 0, s1, lspace=vmem\n")
    assert assemble(text) == [
        encode(Op.ICI_SEND, b=1, c=2, d=3, chip=2, iop=IciOp.ADD, ifmt=IciFmt.FP32, sem=4,
               rspace=IciSpace.HBM),
        encode(Op.ICI_READ, b=1, c=2, d=3, chip=0, sem=1, lspace=IciSpace.HBM,
               rspace=IciSpace.HBM),
        encode(Op.ICI_COLL, coll=Collective.ALL_GATHER, cdim=1, cfmt=IciFmt.BF16, b=1, c=2,
               cspace=IciSpace.HBM),
        encode(Op.ICI_READ, b=1, c=2, d=3, chip=0, sem=1),
    ]
    assert [line.strip() for line in disassemble(assemble(text)).splitlines()] == \
        text.splitlines()[:3] + ["ici.read r1, r2, r3, 0, s1"]


def test_vtrans_text():
    """``vtrans`` writes its dtype alone, as ``vcast`` its kind; a bad one is refused."""
    text = "vtrans bf16 r1, r2\nvtrans int32 r3, r4\n"
    words = assemble(text)
    assert words == [encode(Op.VTRANS, dtype=DType.BF16, b=1, c=2),
                     encode(Op.VTRANS, dtype=DType.INT32, b=3, c=4)]
    assert [line.strip() for line in disassemble(words).splitlines()] == text.splitlines()
    with pytest.raises(AsmError, match="dtype must be one of int32, fp32, bf16, got 'int8'"):
        assemble("vtrans int8 r1, r2")


@pytest.mark.parametrize("text, message", [
    ("frob r1, r2", "line 2: unknown mnemonic 'frob'"),
    ("add r1, r2, r16", "line 2: bad register 'r16' (registers are r0..r15)"),
    ("add r1, r2, x3", "line 2: bad register 'x3'"),
    ("li r1, 0x100000000", "line 2: imm32 out of range: must be in -2147483648..4294967295"),
    ("li r1, -2147483649", "line 2: imm32 out of range"),
    ("slli r1, r1, 32", "line 2: shamt out of range: must be in 0..31, got 32"),
    ("dma.shape 4, r1, r2, r3", "line 2: dim out of range: must be in 0..3"),
    ("matmul r1, r2, r3, 65536", "line 2: acc_addr out of range"),
    ("jmp nowhere", "line 2: undefined label 'nowhere'"),
    ("jmp 65536", "line 2: target out of range"),
    ("add r1, r2", "line 2: add takes 3 operand(s) (a, b, c), got 2"),
    ("wait gpu, s1", "line 2: queue must be one of dma, mxu, vpu, ici, got 'gpu'"),
    ("ici.send r1, r2, r3, 1, move, int32, s0", "line 2: iop must be one of store, add"),
    ("ici.coll all_reduce, 0, fp16, r1, r2", "line 2: cfmt must be one of int32, fp32"),
    ("wait dma, none", "line 2: semaphore must be s<n>, got 'none'"),
    ("signal dma, s32", "line 2: semaphore out of range: must be in 0..31"),
    ("vop add.int8 r1, r2, r3", "line 2: dtype must be one of int32, fp32, bf16"),
    ("vop div.int32 r1, r2, r3", "line 2: vop must be one of add, sub, mul"),
    ("vop add r1, r2, r3", "line 2: vop takes op.dtype"),
    ("vop add.int32 r1, r2, r3, src2=twice", "line 2: src2 must be one of rows"),
    ("vcast i32_i4 r1, r2", "line 2: cast must be one of f32_bf16"),
    ("ici.read r1, r2, r3, 1, s0, lspace=sram", "line 2: lspace must be one of vmem, hbm"),
    ("ici.coll all_reduce, 0, fp32, r1, r2, rspace=hbm", "line 2: ici.coll has no 'rspace'"),
    ("matmul r1, r2, r3, 0, relu", "line 2: matmul has no 'relu' operand"),
    ("vop add.int32 r1, r2, r3, relu, relu", "line 2: relu given twice"),
    ("li r1, ten", "line 2: imm32 must be a number"),
    ("x: nop\nx: nop", "line 3: label 'x' defined twice"),
])
def test_errors_name_the_line(text, message):
    with pytest.raises(AsmError) as info:
        assemble("nop\n" + text)
    assert str(info.value).startswith(message), str(info.value)


def _field_values(name):
    if name in _ENUMS:
        return st.sampled_from([m.value for m in _ENUMS[name]])
    lo, width = FIELDS[name] if name in FIELDS else IMM_FIELDS[name]
    return st.integers(0, (1 << width) - 1)


@st.composite
def legal_words(draw):
    """A random legal instruction word: every field the instruction uses drawn from its
    range (enumerated fields from their values), every other bit zero."""
    spec = SPECS[draw(st.sampled_from(sorted(SPECS, key=lambda op: op.value)))]
    fields = {name: draw(_field_values(name)) for name in spec.operands}
    if spec.op == Op.ICI_SEND:
        # A send's semaphore is the destination's (any but the collectives' 30); its adds are
        # int32 or fp32.
        fields["sem"] = draw(st.sampled_from([*range(30), SEM_NONE]))
        if fields["iop"] != IciOp.STORE.value:
            fields["ifmt"] = draw(st.sampled_from([IciFmt.INT32.value, IciFmt.FP32.value]))
    if spec.op == Op.VOP:
        # a VOP's element type is one its operation takes (the functions: fp32, bf16)
        fields["dtype"] = draw(st.sampled_from(
            [d.value for d in VOPS[VOp(fields["vop"])].dtypes]))
    return encode(spec.op, **fields)


@PROPERTY
@given(data=st.data())
def test_round_trip_every_vop(data):
    """Every VOP operation, with each element type it takes and each src2 mode (``stat``
    included), relu or not, random registers: disassembled and assembled back to itself."""
    vop = data.draw(st.sampled_from(sorted(VOPS, key=lambda v: v.value)))
    dtype = data.draw(st.sampled_from(VOPS[vop].dtypes))
    src2 = data.draw(st.sampled_from(list(Src2)))
    regs = data.draw(st.tuples(*[st.integers(0, 15)] * 3))
    word = encode(Op.VOP, vop=vop, dtype=dtype, b=regs[0], c=regs[1], d=regs[2], src2=src2,
                  relu=data.draw(st.integers(0, 1)))
    assert illegal(*decode(word), semaphores=SEM_NONE + 1) is None
    text = format_instruction(word)
    assert text.startswith(f"vop {vop.name.lower()}."), text
    assert assemble(text) == [word]
    assert assemble(disassemble([word])) == [word]


@pytest.mark.parametrize("vop", sorted(VOPS, key=lambda v: v.value), ids=lambda v: v.name)
def test_every_vop_and_src2_assembles(vop):
    """Exhaustive over the small space: each VOP x dtype x src2 round-trips."""
    for dtype in VOPS[vop].dtypes:
        for src2 in Src2:
            word = encode(Op.VOP, vop=vop, dtype=dtype, b=1, c=2, d=3, src2=src2)
            assert assemble(format_instruction(word)) == [word]


@PROPERTY
@given(word=legal_words())
def test_round_trip_legal_word(word):
    op, fields = decode(word)
    assert illegal(op, fields, semaphores=SEM_NONE + 1) is None
    text = format_instruction(word)
    assert not text.startswith(".word")
    assert assemble(text) == [word]


@PROPERTY
@given(words=st.lists(st.one_of(legal_words(), st.integers(0, (1 << 64) - 1)), max_size=40))
def test_round_trip_program(words):
    """Any word list, legal or not, with branch targets inside and outside the program."""
    assert assemble(disassemble(words)) == words


@PROPERTY
@given(words=st.lists(legal_words(), min_size=1, max_size=40))
def test_disassembly_is_stable(words):
    text = disassemble(words)
    assert disassemble(assemble(text)) == text
