// The native host of the chip (sim/native.py): the Verilated chip clocked by a C++ loop with
// no cocotb, a host on the AXI4-Lite control port and an HBM device on every pseudo-channel.
//
// Cycle for cycle it is the cocotb run of verification/tb/chip.py (``run_program``, flow
// none_none): the host issues the same AXI4-Lite writes and reads at the same clock edges as
// cocotbext-axi's AxiLiteMaster (an operation issued at edge n drives its valid after edge
// n + 1; a handshake is sampled just before an edge; the next operation is issued at the edge
// of the previous one's response), polls ``running`` edge by edge as TensorCoreHost.run does,
// reads the outcome, and settles as HBMBench.settle does. The device answers the controller's
// pins as verification/tb/hbm.py's device loop drives the golden model: read data in the
// BL/2 cycles from RD + CL, write data taken in the BL/2 cycles from WR + CWL (data in any
// other cycle, or missing in one of those, is a violation), storage of raw 72-bit codewords
// keyed by (bank, open row, column). Every command is written to the trace in the golden
// model's format (``cycle channel pc command bank address``); the golden model checks the
// trace after the run (timing, state and refresh rules).
//
// Usage: main <spec> <image> <report> <dump> <trace|->. The spec is "key value..." lines; the
// image and the dump are the device's storage: records of u32 pc, bank, row, col, then per
// codeword a u64 of bits 0..63 and a u64 of bits 64..71.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "Vtop.h"
#include "verilated.h"
#include "chip_io.h"

double sc_time_stamp() { return 0; }

#include "native_device.h"

namespace {

// One AXI4-Lite operation of the host.
struct Op {
    bool write;
    uint32_t addr, data;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s spec image report dump trace|-\n", argv[0]);
        return 2;
    }
    auto spec = read_spec(argv[1]);
    auto one = [&](const char* key) -> int64_t {
        auto it = spec.find(key);
        if (it == spec.end() || it->second.empty()) {
            fprintf(stderr, "spec lacks %s\n", key);
            exit(2);
        }
        return it->second[0];
    };
    Device dev;
    dev.cl = one("cl");
    dev.cwl = one("cwl");
    dev.burst = one("burst_cycles");
    dev.words = one("words");
    dev.per_channel = one("per_channel");
    dev.pcs = one("pseudo_channels");
    dev.banks = one("banks");
    if (dev.words > MAX_WORDS || dev.cl + dev.burst >= RING || dev.cwl + dev.burst >= RING) {
        fprintf(stderr, "device geometry out of range\n");
        return 2;
    }
    dev.init();
    read_store(argv[2], dev);
    if (strcmp(argv[5], "-")) {
        dev.trace = fopen(argv[5], "w");
        static char buffer[1 << 20];
        setvbuf(dev.trace, buffer, _IOFBF, sizeof buffer);
    }
    const int64_t budget = one("budget"), abort_cycles = one("abort_cycles");
    const int64_t settle_budget = one("settle_budget"), settle_extra = one("settle_extra");
    const uint32_t r_imem = one("IMEM"), r_control = one("CONTROL"), r_start_pc = one("START_PC");
    const uint32_t r_status = one("STATUS"), r_regs = one("REGS"), r_sems = one("SEMS");
    const uint32_t r_counters = one("COUNTERS"), r_error = one("ERROR"), r_error_pc = one("ERROR_PC");
    const int n_sems = one("semaphores"), n_counters = one("counters");
    const auto& program = spec["program"];

    std::vector<Op> load;
    for (size_t i = 0; i < program.size(); i++) {
        uint64_t w = (uint64_t)program[i];
        load.push_back({true, (uint32_t)(r_imem + 8 * i), (uint32_t)(w & 0xFFFFFFFFu)});
        load.push_back({true, (uint32_t)(r_imem + 8 * i + 4), (uint32_t)(w >> 32)});
    }
    load.push_back({true, r_start_pc, 0});
    load.push_back({true, r_control, 5});
    std::vector<Op> outcome;
    outcome.push_back({false, r_status, 0});
    for (int r = 0; r < 16; r++) outcome.push_back({false, (uint32_t)(r_regs + 4 * r), 0});
    for (int s = 0; s < n_sems; s++) outcome.push_back({false, (uint32_t)(r_sems + 4 * s), 0});
    for (int k = 0; k < n_counters; k++) outcome.push_back({false, (uint32_t)(r_counters + 4 * k), 0});
    outcome.push_back({false, r_error, 0});
    outcome.push_back({false, r_error_pc, 0});
    std::vector<uint32_t> values;

    auto contextp = std::make_unique<VerilatedContext>();
    contextp->commandArgs(argc, argv);
    auto top = std::make_unique<Vtop>(contextp.get(), "");
    Vtop* t = top.get();

    // Reset: the edges before edge 0 and edge 0 itself see rst high (verification/tb/bench.py
    // ``start`` with reset_cycles=4).
    t->clk = 0;
    t->rst = 1;
    t->eval();
    for (int i = 0; i < 4; i++) {
        t->clk = 1;
        t->eval();
        t->clk = 0;
        t->eval();
    }
    t->rst = 0;

    // Host state. Phases: 0 load, 1 wait for running to fall, 2 abort write, 3 wait after the
    // abort, 4 outcome reads, 5 wait for the controller's idle, 6 the last cycles, 7 end.
    int phase = 0;
    size_t op_index = 0;
    const std::vector<Op>* ops = &load;
    Op op = load[0];
    int64_t drive_edge = 1;  // the first operation is issued at edge 0
    bool aw_valid = false, w_valid = false, ar_valid = false, in_flight = false;
    bool aw_done = false, w_done = false;
    bool sinks_ready = false;
    int64_t wait_from = 0, wait_for = 0;
    bool timed_out = false, abort_stuck = false;
    int64_t end_edge = -1;
    const int beat_words = BEAT_WORDS32;
    uint32_t beat[BEAT_WORDS32 + 1];

    auto issue = [&](const Op& next, int64_t edge) {
        op = next;
        drive_edge = edge + 1;
        in_flight = false;
    };

    int64_t edge = 0;
    for (;; edge++) {
        // Falling edge of device cycle ``edge``: read data, then the controller's pins.
        int64_t cycle = edge;
        t->clk = 0;
        for (int c = 0; c < N_CHANNELS; c++)
            for (int k = 0; k < PER_CHANNEL; k++) {
                bool valid = dev.read_beat(c * PER_CHANNEL + k, cycle, beat, beat_words);
                drive_rd(t, c, k, valid, beat);
            }
        t->eval();
        for (int c = 0; c < N_CHANNELS; c++) {
            for (int k = 0; k < PER_CHANNEL; k++) {
                const uint32_t* data = nullptr;
                bool valid = wr_sample(t, c, k, &data);
                dev.write_beat(c * PER_CHANNEL + k, cycle, valid, data);
            }
            Cmd r = row_sample(t, c);
            if (r.valid) dev.row(c, cycle, r.op, r.pc, r.bank, r.addr);
            Cmd cc = col_sample(t, c);
            if (cc.valid) dev.col(c, cycle, cc.op, cc.pc, cc.bank, cc.addr);
        }
        if (!dev.violation.empty()) break;

        // Rising edge ``edge + 1``: the host samples the pins as they are before it.
        int64_t e = edge + 1;
        if (phase == 7 || e == end_edge) break;
        bool next_aw = aw_valid, next_w = w_valid, next_ar = ar_valid;
        bool completed = false;
        uint32_t rdata = 0;
        if (in_flight) {
            if (op.write) {
                if (aw_valid && t->CSR(awready)) { next_aw = false; aw_done = true; }
                if (w_valid && t->CSR(wready)) { next_w = false; w_done = true; }
                if (sinks_ready && t->CSR(bvalid)) completed = true;
            } else {
                if (ar_valid && t->CSR(arready)) next_ar = false;
                if (sinks_ready && t->CSR(rvalid)) { completed = true; rdata = t->CSR(rdata); }
            }
        }
        bool running = t->running, idle = t->hbm_idle;
        if (completed) {
            in_flight = false;
            drive_edge = -1;
            op_index++;
            if (phase == 4) values.push_back(rdata);
            if (op_index < ops->size()) {
                issue((*ops)[op_index], e);
            } else if (phase == 0) {
                phase = 1;
                wait_from = e;
                wait_for = budget;
            } else if (phase == 2) {
                phase = 3;
                wait_from = e;
                wait_for = abort_cycles;
            } else if (phase == 4) {
                phase = 5;
                wait_from = e;
                wait_for = settle_budget;
            }
        } else if (phase == 1 || phase == 3) {
            if (!running) {
                phase = 4;
                ops = &outcome;
                op_index = 0;
                issue(outcome[0], e);
            } else if (e - wait_from >= wait_for) {
                if (phase == 3) {
                    abort_stuck = true;
                    break;
                }
                timed_out = true;
                phase = 2;
                static std::vector<Op> abort_op;
                abort_op = {{true, r_control, 2}};
                ops = &abort_op;
                op_index = 0;
                issue(abort_op[0], e);
            }
        } else if (phase == 5) {
            if (idle) {
                phase = 6;
                end_edge = e + settle_extra;
            } else if (e - wait_from >= wait_for) {
                phase = 7;
                end_edge = e;
            }
        }
        if (drive_edge == e) {
            in_flight = true;
            aw_done = w_done = false;
            if (op.write) {
                next_aw = next_w = true;
            } else {
                next_ar = true;
            }
        }
        t->clk = 1;
        t->eval();
        // After the edge: the host's new inputs.
        aw_valid = next_aw;
        w_valid = next_w;
        ar_valid = next_ar;
        t->CSR(awvalid) = aw_valid;
        t->CSR(wvalid) = w_valid;
        t->CSR(arvalid) = ar_valid;
        if (aw_valid) t->CSR(awaddr) = op.addr;
        if (w_valid) {
            t->CSR(wdata) = op.data;
            t->CSR(wstrb) = 0xF;
        }
        if (ar_valid) t->CSR(araddr) = op.addr;
        if (e == 1) {
            sinks_ready = true;
            t->CSR(bready) = 1;
            t->CSR(rready) = 1;
        }
        if (phase == 5 && e - wait_from > wait_for) break;
    }
    if (dev.trace) fclose(dev.trace);
    write_store(argv[4], dev);

    FILE* r = fopen(argv[3], "w");
    fprintf(r, "{\"edges\": %lld, \"commands\": %llu, \"timeout\": %s, \"abort_stuck\": %s, "
               "\"settled\": %s, \"violation\": ",
            (long long)edge, (unsigned long long)dev.commands, timed_out ? "true" : "false",
            abort_stuck ? "true" : "false", phase == 6 ? "true" : "false");
    if (dev.violation.empty())
        fprintf(r, "null");
    else
        fprintf(r, "\"%s\"", dev.violation.c_str());
    fprintf(r, ", \"values\": [");
    for (size_t i = 0; i < values.size(); i++) fprintf(r, "%s%u", i ? ", " : "", values[i]);
    fprintf(r, "]}\n");
    fclose(r);
    top->final();
    return 0;
}
