"""Assembler and disassembler of the TensorCore's instruction set (spec/isa.py).

One instruction a line, operands separated by commas; ``#`` starts a comment; ``name:``
defines a label (alone on a line or before an instruction)::

    loop:   dma.load r4, r5, s0          # HBM r4 -> VMEM r5, signal s0 when complete
            wait mxu, s0
            matmul r1, r2, r3, 0, accumulate, emit
            vop add.int32 r6, r6, r7, src2=broadcast, relu
            vcast i32_i8 r6, r6
            addi r8, r8, -1
            bne r8, r0, loop
            halt

Operands follow the order of the instruction's :class:`~spec.isa.Spec`: registers
``r0``..``r15``; immediates in decimal or hex (``imm32`` takes -2**31 .. 2**32-1 and keeps the
low 32 bits); branch targets as labels or instruction indices; queues ``dma``, ``mxu``,
``vpu``, ``ici``; semaphores ``s<n>`` (``none`` for a DMA transfer or an ``ici.send`` that
signals nothing); the ICI's ``store|add|add_final``, ``int32|fp32|bf16`` and the collective
(``all_reduce``, ...) by name, the destination chip as its node number; ``vop`` and
``vred`` take ``op.dtype`` (``add.fp32``, ``max.int32``); ``vcast`` its kind (``i32_i8``),
``vtrans`` its dtype (``vtrans bf16 r1, r2``);
``src2=rows|broadcast|scalar|stat`` (default ``rows``), the ICI's memories ``lspace=`` /
``rspace=`` (``ici.send``, ``ici.read``: this chip's and the other chip's operand) and
``cspace=`` (``ici.coll``), each ``vmem|hbm`` (default ``vmem``), and the flags ``relu``,
``accumulate`` and ``emit`` are optional. ``.word <value>`` places a raw 64-bit word, which
is how the disassembler writes a word that is not a legal instruction, so every word list
round-trips: ``assemble(disassemble(words)) == words``.
"""

import re

from spec.isa import (
    DTYPE_NAMES,
    FIELDS,
    IMM_FIELDS,
    OPERANDS,
    REGISTERS,
    SEM_NONE,
    SEM_NONE_OPS,
    SPECS,
    DType,
    decode,
    encode,
    illegal,
)

__all__ = ["AsmError", "assemble", "disassemble", "format_instruction"]

_BY_MNEMONIC = {spec.mnemonic: spec for spec in SPECS.values()}
_FLAGS = tuple(name for name, o in OPERANDS.items() if o.kind == "flag")
_FUSED = {name: o.code for name, o in OPERANDS.items() if o.kind == "fused"}
"""Written together with the dtype: add.fp32, sum.int32."""
_KEYWORDS = {name: o.code for name, o in OPERANDS.items() if o.kind == "keyword"}
"""Operands written ``name=value``, optional: their default is the enumeration's 0."""
_NAMED = {name: o.code for name, o in OPERANDS.items() if o.kind == "code" and name != "dtype"}
_DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}
_LABEL = re.compile(r"[A-Za-z_.][A-Za-z0-9_.]*$")
_WORD_MAX = (1 << 64) - 1


class AsmError(ValueError):
    """Bad assembly input on line ``line`` (``message``); the text starts with
    ``line <n>:``."""

    def __init__(self, line, message):
        self.line, self.message = line, message
        super().__init__(f"line {line}: {message}")


def _width(name):
    return (FIELDS[name] if name in FIELDS else IMM_FIELDS[name])[1]


def _int(text, what):
    try:
        return int(text, 0)
    except ValueError:
        raise ValueError(f"{what} must be a number (decimal or 0x hex), got {text!r}") from None


def _register(text):
    m = re.fullmatch(r"r(\d+)", text)
    if not m or int(m.group(1)) >= REGISTERS:
        raise ValueError(f"bad register {text!r} (registers are r0..r{REGISTERS - 1})")
    return int(m.group(1))


def _enum_value(kind, text, what):
    names = {m.name.lower(): m for m in kind}
    if text not in names:
        raise ValueError(f"{what} must be one of {', '.join(names)}, got {text!r}")
    return names[text].value


def _positional(spec):
    """The operands written by position: flags and ``_KEYWORDS`` are not, ``dtype`` is fused
    with ``vop`` / ``rop`` when the instruction has one (``vtrans`` writes it alone)."""
    fused = any(n in _FUSED for n in spec.operands)
    return [n for n in spec.operands
            if n not in (*_FLAGS, *_KEYWORDS, *(("dtype",) if fused else ()))]


def _parse_operand(spec, name, text, labels, pending):
    """The field value of operand ``name`` written as ``text``; returns a dict of fields."""
    if name in FIELDS and name != "imm":
        return {name: _register(text)}
    if name in _FUSED:
        op, dot, dtype = text.partition(".")
        if not dot:
            raise ValueError(f"{spec.mnemonic} takes op.dtype (such as add.int32), got {text!r}")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        return {name: _enum_value(_FUSED[name], op, name), "dtype": _DTYPES[dtype].value}
    if name in _NAMED:
        return {name: _enum_value(_NAMED[name], text, name)}
    if name == "dtype":
        if text not in _DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {text!r}")
        return {"dtype": _DTYPES[text].value}
    if name == "sem":
        if text == "none" and spec.op in SEM_NONE_OPS:
            return {"sem": SEM_NONE}
        m = re.fullmatch(r"s(\d+)", text)
        if not m:
            allowed = "s<n> or none" if spec.op in SEM_NONE_OPS else "s<n>"
            raise ValueError(f"semaphore must be {allowed}, got {text!r}")
        return {"sem": _check_range("semaphore", int(m.group(1)), 0, (1 << _width("sem")) - 1)}
    if name == "target":
        if _LABEL.match(text):
            pending.append(text)
            return {"target": labels.get(text, 0)}
        return {"target": _check_range("target", _int(text, "target"), 0,
                                       (1 << _width("target")) - 1)}
    if name == "imm32":
        value = _check_range("imm32", _int(text, "imm32"), -(1 << 31), (1 << 32) - 1)
        return {"imm32": value & 0xFFFFFFFF}
    return {name: _check_range(name, _int(text, name), 0, (1 << _width(name)) - 1)}


def _check_range(what, value, lo, hi):
    if not lo <= value <= hi:
        raise ValueError(f"{what} out of range: must be in {lo}..{hi}, got {value}")
    return value


def _parse_instruction(mnemonic, tokens, labels, pending):
    if mnemonic == ".word":
        if len(tokens) != 1:
            raise ValueError(f".word takes one value, got {len(tokens)}")
        return _check_range(".word", _int(tokens[0], ".word"), 0, _WORD_MAX)
    spec = _BY_MNEMONIC.get(mnemonic)
    if spec is None:
        raise ValueError(f"unknown mnemonic {mnemonic!r} (known: "
                         f"{', '.join(sorted(_BY_MNEMONIC))}, .word)")
    positional = _positional(spec)
    words = [t for t in tokens if t in _FLAGS or t.partition("=")[0] in _KEYWORDS]
    values = [t for t in tokens if t not in words]
    if len(values) != len(positional):
        raise ValueError(f"{mnemonic} takes {len(positional)} operand(s) "
                         f"({', '.join(positional) or 'none'}), got {len(values)}")
    fields = {}
    for name, text in zip(positional, values, strict=True):
        fields.update(_parse_operand(spec, name, text, labels, pending))
    for word in words:
        name = word.partition("=")[0]
        if name not in spec.operands:
            raise ValueError(f"{mnemonic} has no {name!r} operand")
        if name in fields:
            raise ValueError(f"{name} given twice")
        fields[name] = (_enum_value(_KEYWORDS[name], word.partition("=")[2], name)
                        if name in _KEYWORDS else 1)
    return encode(spec.op, **fields)


def _lines(text):
    """(line number, label list, mnemonic or None, operand tokens) of each line."""
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        found = []
        while True:
            m = re.match(r"([A-Za-z_.][A-Za-z0-9_.]*)\s*:(.*)$", line)
            if not m or m.group(1).startswith(".word"):
                break
            found.append(m.group(1))
            line = m.group(2).strip()
        if not line:
            yield number, found, None, []
            continue
        mnemonic, *rest = line.split(None, 1)
        tokens = [t for t in re.split(r"[\s,]+", rest[0] if rest else "") if t]
        yield number, found, mnemonic.lower(), tokens


def assemble(text):
    """The 64-bit instruction words of assembly ``text``; raises :class:`AsmError` naming the
    line of the first error (unknown mnemonic, bad register, operand out of range, undefined
    or duplicate label)."""
    lines = list(_lines(text))
    labels, index = {}, 0
    for number, found, mnemonic, _ in lines:
        for name in found:
            if name in labels:
                raise AsmError(number, f"label {name!r} defined twice")
            labels[name] = index
        index += mnemonic is not None
    words = []
    for number, _, mnemonic, tokens in lines:
        if mnemonic is None:
            continue
        pending = []
        try:
            word = _parse_instruction(mnemonic, tokens, labels, pending)
        except ValueError as e:
            raise AsmError(number, str(e)) from None
        for name in pending:
            if name not in labels:
                raise AsmError(number, f"undefined label {name!r}")
            if labels[name] >= 1 << _width("target"):
                raise AsmError(number, f"label {name!r} is past the largest target")
        words.append(word)
    return words


def _format_operand(spec, name, fields, label_of):
    value = fields[name]
    if name in FIELDS:
        return f"r{value}"
    if name in _FUSED:
        return f"{_FUSED[name](value).name.lower()}.{DTYPE_NAMES[DType(fields['dtype'])]}"
    if name in _NAMED:
        return _NAMED[name](value).name.lower()
    if name == "dtype":
        return DTYPE_NAMES[DType(value)]
    if name == "sem":
        return "none" if value == SEM_NONE and spec.op in SEM_NONE_OPS else f"s{value}"
    if name == "target":
        return label_of(value)
    if name == "imm32":
        signed = value - (1 << 32) if value >> 31 else value
        return str(signed) if -65536 <= signed < 65536 else hex(value)
    return str(value)


def format_instruction(word, label_of=str):
    """The assembly of one word (``.word 0x...`` when it is not a legal instruction);
    ``label_of(target)`` writes a branch target."""
    try:
        op, fields = decode(word)
    except ValueError:
        op = None
    if op is None or illegal(op, fields, semaphores=SEM_NONE + 1) is not None:
        return f".word {word:#018x}"
    spec = SPECS[op]
    parts = [_format_operand(spec, n, fields, label_of) for n in _positional(spec)]
    parts += [f"{name}={kind(fields[name]).name.lower()}" for name, kind in _KEYWORDS.items()
              if fields.get(name)]
    parts += [flag for flag in _FLAGS if fields.get(flag)]
    head = spec.mnemonic
    if spec.operands and spec.operands[0] in (*_FUSED, "cast", "coll", "dtype"):
        head = f"{head} {parts.pop(0)}"
    return f"{head} {', '.join(parts)}".rstrip()


def disassemble(words):
    """Assembly text of ``words``, one instruction a line, branch targets inside the program
    as labels ``L<index>``; ``assemble`` of it gives ``words`` back."""
    targets = set()
    for word in words:
        try:
            op, fields = decode(word)
        except ValueError:
            continue
        if "target" in fields and fields["target"] < len(words):
            targets.add(fields["target"])

    def label_of(target):
        return f"L{target}" if target in targets else str(target)

    lines = []
    for index, word in enumerate(words):
        text = format_instruction(word, label_of)
        lines.append(f"{f'L{index}:' if index in targets else '':<8}{text}")
    return "\n".join(lines) + "\n"
