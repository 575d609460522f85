"""On-chip SRAM as a memory macro: one write port and transparent synchronous read ports.

A chip's large memories come from a memory compiler, and the RTL instantiates them; in
simulation a behavioural model stands in. Podium does the same for its large memories (the
MXU's accumulators): the model below is emitted as a small Verilog module and instantiated by
name. Besides matching how chips are built, it keeps generation cheap: an Amaranth
``lib.memory.Memory`` carries its initial contents through Yosys as one constant of
``depth x width`` bits, which for a few megabits costs minutes and gigabytes, while this module
clears itself with a loop in an ``initial`` block (the contents of a real SRAM at power-up are
undefined; the model's zeros are what the golden models assume).

Read ports are synchronous (address in one cycle, data the next) and transparent: a read of the
row being written in the same cycle returns the new data. With ``byte_enable`` the write port
has a byte mask ``wstrb`` and reads are read-first instead (a read of the row being written
returns its old contents), as a byte-writable SRAM macro behaves (the TensorCore's VMEM banks).
"""

from amaranth.hdl import ClockSignal, Instance

__all__ = ["SRAM"]


class SRAM:
    """A ``depth`` x ``width`` memory macro with ``write_ports`` write ports (one by default;
    two writes to one row in a cycle: the higher port wins) and ``read_ports`` read ports.

    ``name`` is the Verilog module name (unique within a design); ``modules()`` gives its text
    for ``hdl.lib.hier.convert_hierarchy``, ``instance()`` adds one to an Amaranth module.
    """

    def __init__(self, name, *, width, depth, read_ports=1, write_ports=1, byte_enable=False):
        self._name, self._width, self._depth = name, width, depth
        self._reads, self._writes = read_ports, write_ports
        if write_ports > 1 and not byte_enable:
            raise ValueError("SRAM write_ports > 1 needs byte_enable (read-first read ports)")
        self._strb = byte_enable
        self._abits = max(1, (depth - 1).bit_length())

    @property
    def name(self):
        return self._name

    def modules(self):
        return [self._verilog()]

    def _collect(self, seen, out):
        if self._name not in seen:
            seen.add(self._name)
            out.append(self._verilog())

    def _verilog(self):
        w, a, d = self._width, self._abits, self._depth
        ports = ["clk", "we", "waddr", "wdata"]
        decl = [
            "  input clk;", "  input we;", f"  input [{a - 1}:0] waddr;",
            f"  input [{w - 1}:0] wdata;",
        ]
        body = ["    if (we) mem[waddr] <= wdata;"]
        if self._strb:
            ports.append("wstrb")
            decl.append(f"  input [{w // 8 - 1}:0] wstrb;")
            body = [f"    if (we) for (j = 0; j < {w // 8}; j = j + 1)",
                    "      if (wstrb[j]) mem[waddr][j * 8 +: 8] <= wdata[j * 8 +: 8];"]
        for k in range(1, self._writes):
            ports += [f"we{k}", f"waddr{k}", f"wdata{k}"]
            decl += [f"  input we{k};", f"  input [{a - 1}:0] waddr{k};",
                     f"  input [{w - 1}:0] wdata{k};"]
            if self._strb:
                ports.append(f"wstrb{k}")
                decl.append(f"  input [{w // 8 - 1}:0] wstrb{k};")
                body += [f"    if (we{k}) for (j = 0; j < {w // 8}; j = j + 1)",
                         f"      if (wstrb{k}[j]) mem[waddr{k}][j * 8 +: 8] <= "
                         f"wdata{k}[j * 8 +: 8];"]

        for i in range(self._reads):
            ports += [f"raddr{i}", f"rdata{i}"]
            decl += [f"  input [{a - 1}:0] raddr{i};", f"  output reg [{w - 1}:0] rdata{i};"]
            read = f"mem[raddr{i}]" if self._strb else \
                f"(we && waddr == raddr{i}) ? wdata : mem[raddr{i}]"
            body.append(f"    rdata{i} <= {read};")
        return "\n".join([
            f"module {self._name}({', '.join(ports)});",
            *decl,
            f"  reg [{w - 1}:0] mem [0:{d - 1}];",
            "  integer i;",
            *(["  integer j;"] if self._strb else []),
            "  initial begin",
            f"    for (i = 0; i < {d}; i = i + 1) mem[i] = {w}'d0;",
            *[f"    rdata{i} = {w}'d0;" for i in range(self._reads)],
            "  end",
            "  always @(posedge clk) begin",
            *body,
            "  end",
            "endmodule",
            "",
        ])

    def instance(self, m, name, *, we, waddr, wdata, raddr, rdata, wstrb=None):
        """Add an instance; ``raddr`` and ``rdata`` are lists, one entry per read port;
        ``wstrb`` with ``byte_enable``. With several write ports, ``we``, ``waddr``,
        ``wdata`` and ``wstrb`` are lists too, one entry per write port."""
        if self._writes == 1:
            we, waddr, wdata, wstrb = [we], [waddr], [wdata], [wstrb]
        ports = {"i_clk": ClockSignal()}
        for k in range(self._writes):
            suffix = str(k) if k else ""
            ports.update({f"i_we{suffix}": we[k], f"i_waddr{suffix}": waddr[k][: self._abits],
                          f"i_wdata{suffix}": wdata[k]})
            if self._strb:
                ports[f"i_wstrb{suffix}"] = wstrb[k]
        for i, (addr, data) in enumerate(zip(raddr, rdata, strict=True)):
            ports[f"i_raddr{i}"] = addr[: self._abits]
            ports[f"o_rdata{i}"] = data
        m.submodules[name] = Instance(self._name, **ports)
