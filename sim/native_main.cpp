// The native host of the chip and of the pod (sim/native.py, sim/pod_native.py): the Verilated
// top (a chip, or a pod of N_CHIPS TensorCore chips with HBM controllers) clocked by a C++ loop
// with no cocotb, a host on every chip's AXI4-Lite control port and an HBM device on every
// pseudo-channel of every chip.
//
// Cycle for cycle it is the cocotb run: of verification/tb/chip.py (``run_program``, flow
// none_none) on a chip, of verification/tb/pod_programs.py (``run_pod_program``) on a pod. The
// host issues the same AXI4-Lite writes and reads at the same clock edges as cocotbext-axi's
// AxiLiteMaster (an operation issued at edge n drives its valid after edge n + 1; a handshake
// is sampled just before an edge; the next operation is issued at the edge of the previous
// one's response), one at a time, chip after chip, in the order the spec lists them (``load``:
// the programs, clear and start; the caller's order is the testbench's), then polls every
// chip's ``running`` edge by edge as TensorCoreHost.run does, reads every chip's outcome, and
// settles every chip's HBM controller, chip after chip, as HBMBench.settle does. The device
// (native_device.h) answers the controller's pins as verification/tb/hbm.py's device loop
// drives the golden model: read data in the BL/2 cycles from RD + CL, write data taken in the
// BL/2 cycles from WR + CWL (data in any other cycle, or missing in one of those, is a
// violation), storage of raw 72-bit codewords keyed by (bank, open row, column). Every command
// is written to the chip's trace in the golden model's format (``cycle channel pc command bank
// address``); the golden model checks the traces after the run (timing, state and refresh
// rules).
//
// Usage: main <spec> <files>: the spec is "key value..." lines (``load``: the host's writes
// before the run, as chip, address, data triples); <files>.image<c> and <files>.dump<c> are
// chip c's device storage before and after the run (records of u32 pc, bank, row, col, then
// per codeword a u64 of bits 0..63 and a u64 of bits 64..71), <files>.trace<c> its trace,
// <files>.report the outcome. The top's pins are reached through the generated io.h.

#include <chrono>
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
#include "io.h"

double sc_time_stamp() { return 0; }

#include "native_device.h"

namespace {

// Every TIMED_EVERY-th cycle is timed, the model's evaluations apart from the whole cycle (the
// rest is the host and the HBM devices): the report's ``model_share``, the fraction of the run
// the Verilated model takes. Timing every cycle would add its five clock reads (21 ns each,
// measured on the benchmark machine) to every cycle: 0.1 us, 1.4% of a default chip's cycle.
constexpr int64_t TIMED_EVERY = 64;
using Clock = std::chrono::steady_clock;

double nanoseconds(Clock::duration d) {
    return std::chrono::duration<double, std::nano>(d).count();
}

// One AXI4-Lite operation of the host, on chip ``chip``'s control port.
struct Op {
    int chip;
    bool write;
    uint32_t addr, data;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s spec files\n", argv[0]);
        return 2;
    }
    auto spec = read_spec(argv[1]);
    const std::string files = argv[2];
    auto one = [&](const std::string& key) -> int64_t {
        auto it = spec.find(key);
        if (it == spec.end() || it->second.empty()) {
            fprintf(stderr, "spec lacks %s\n", key.c_str());
            exit(2);
        }
        return it->second[0];
    };
    std::vector<Device> devs(N_CHIPS);
    for (int n = 0; n < N_CHIPS; n++) {
        Device& dev = devs[n];
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
        read_store((files + ".image" + std::to_string(n)).c_str(), dev);
        if (one("traces")) {
            dev.trace = fopen((files + ".trace" + std::to_string(n)).c_str(), "w");
            setvbuf(dev.trace, nullptr, _IOFBF, 1 << 20);
        }
    }
    const int64_t budget = one("budget"), abort_cycles = one("abort_cycles");
    const int64_t settle_budget = one("settle_budget"), settle_extra = one("settle_extra");
    const uint32_t r_control = one("CONTROL");
    const uint32_t r_status = one("STATUS"), r_regs = one("REGS"), r_sems = one("SEMS");
    const uint32_t r_counters = one("COUNTERS"), r_error = one("ERROR"), r_error_pc = one("ERROR_PC");
    const int n_sems = one("semaphores"), n_counters = one("counters");

    // The writes before the run, in the testbench's order (the programs, clear, start PC,
    // start).
    std::vector<Op> load;
    const auto& writes = spec["load"];
    if (writes.empty() || writes.size() % 3) {
        fprintf(stderr, "spec: load must be chip, address, data triples\n");
        return 2;
    }
    for (size_t i = 0; i < writes.size(); i += 3) {
        if (writes[i] < 0 || writes[i] >= N_CHIPS) {
            fprintf(stderr, "spec: load names chip %lld of %d\n", (long long)writes[i], N_CHIPS);
            return 2;
        }
        load.push_back({(int)writes[i], true, (uint32_t)writes[i + 1], (uint32_t)writes[i + 2]});
    }
    std::vector<Op> outcome;
    for (int n = 0; n < N_CHIPS; n++) {
        outcome.push_back({n, false, r_status, 0});
        for (int r = 0; r < 16; r++) outcome.push_back({n, false, (uint32_t)(r_regs + 4 * r), 0});
        for (int s = 0; s < n_sems; s++) outcome.push_back({n, false, (uint32_t)(r_sems + 4 * s), 0});
        for (int k = 0; k < n_counters; k++)
            outcome.push_back({n, false, (uint32_t)(r_counters + 4 * k), 0});
        outcome.push_back({n, false, r_error, 0});
        outcome.push_back({n, false, r_error_pc, 0});
    }
    std::vector<Op> abort_ops;
    for (int n = 0; n < N_CHIPS; n++) abort_ops.push_back({n, true, r_control, 2});
    std::vector<uint32_t> values;

    auto contextp = std::make_unique<VerilatedContext>();
    contextp->commandArgs(argc, argv);
    auto top = std::make_unique<Vtop>(contextp.get(), "");
    Vtop* t = top.get();

    // Reset: the design sees rst high at the four edges before edge 0 and low from edge 0 on,
    // as verification/tb/bench.py ``start`` with reset_cycles=4 gives it. It sees rst through
    // the top's register (sim/native.py ``reset_shim``, initially high), one edge late, so the
    // host lowers rst before the last of the four.
    t->clk = 0;
    t->rst = 1;
    t->eval();
    for (int i = 0; i < 4; i++) {
        if (i == 3) t->rst = 0;
        t->clk = 1;
        t->eval();
        t->clk = 0;
        t->eval();
    }

    // Phases: 0 load, 1 wait for every chip's running to fall, 2 abort writes, 3 wait after
    // the abort, 4 outcome reads, 5 wait for chip ``settling``'s controller to turn idle, 6 its
    // last cycles, 7 end.
    int phase = 0;
    size_t op_index = 0;
    const std::vector<Op>* ops = &load;
    Op op = load[0];
    int64_t drive_edge = 1;
    bool aw_valid = false, w_valid = false, ar_valid = false, in_flight = false;
    bool sinks_ready = false;
    int64_t wait_from = 0, wait_for = 0;
    bool timed_out = false, abort_stuck = false, settled = false;
    int settling = 0;
    int64_t end_edge = -1;
    const int beat_words = BEAT_WORDS32;
    uint32_t beat[BEAT_WORDS32 + 1];
    std::string violation;

    auto issue = [&](const Op& next, int64_t edge) {
        op = next;
        drive_edge = edge + 1;
        in_flight = false;
    };

    double model_ns = 0, timed_ns = 0;
    int64_t edge = 0;
    for (;; edge++) {
        int64_t cycle = edge;
        const bool timed = edge % TIMED_EVERY == 0;
        Clock::time_point begin;
        double cycle_model_ns = 0;
        auto evaluate = [&]() {
            if (!timed) {
                t->eval();
                return;
            }
            Clock::time_point before = Clock::now();
            t->eval();
            cycle_model_ns += nanoseconds(Clock::now() - before);
        };
        if (timed) begin = Clock::now();
        t->clk = 0;
        for (int n = 0; n < N_CHIPS; n++)
            for (int c = 0; c < N_CHANNELS; c++)
                for (int k = 0; k < PER_CHANNEL; k++) {
                    bool valid = devs[n].read_beat(c * PER_CHANNEL + k, cycle, beat, beat_words);
                    drive_rd(t, n, c, k, valid, beat);
                }
        evaluate();
        for (int n = 0; n < N_CHIPS; n++) {
            Device& dev = devs[n];
            for (int c = 0; c < N_CHANNELS; c++) {
                for (int k = 0; k < PER_CHANNEL; k++) {
                    const uint32_t* data = nullptr;
                    bool valid = wr_sample(t, n, c, k, &data);
                    dev.write_beat(c * PER_CHANNEL + k, cycle, valid, data);
                }
                Cmd r = row_sample(t, n, c);
                if (r.valid) dev.row(c, cycle, r.op, r.pc, r.bank, r.addr);
                Cmd cc = col_sample(t, n, c);
                if (cc.valid) dev.col(c, cycle, cc.op, cc.pc, cc.bank, cc.addr);
            }
            if (!dev.violation.empty() && violation.empty())
                violation = "chip " + std::to_string(n) + ": " + dev.violation;
        }
        if (!violation.empty()) break;

        // Rising edge ``edge + 1``: the host samples the pins as they are before it.
        int64_t e = edge + 1;
        bool moved = false;
        if (phase == 7 || e == end_edge) {
            if (phase == 6 && settling + 1 < N_CHIPS) {
                settling++;          // the next chip's controller, from the next edge
                phase = 5;
                wait_from = e;
                wait_for = settle_budget;
                end_edge = -1;
                moved = true;
            } else {
                settled = phase == 6;
                break;
            }
        }
        bool next_aw = aw_valid, next_w = w_valid, next_ar = ar_valid;
        bool completed = false;
        uint32_t rdata = 0;
        if (in_flight) {
            CsrIn in = csr_sample(t, op.chip);
            if (op.write) {
                if (aw_valid && in.awready) next_aw = false;
                if (w_valid && in.wready) next_w = false;
                if (sinks_ready && in.bvalid) completed = true;
            } else {
                if (ar_valid && in.arready) next_ar = false;
                if (sinks_ready && in.rvalid) { completed = true; rdata = in.rdata; }
            }
        }
        bool running = false;
        for (int n = 0; n < N_CHIPS; n++) running = running || chip_running(t, n);
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
                settling = 0;
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
                ops = &abort_ops;
                op_index = 0;
                issue(abort_ops[0], e);
            }
        } else if (phase == 5 && !moved) {
            if (chip_idle(t, settling)) {
                phase = 6;
                end_edge = e + settle_extra;
            } else if (e - wait_from >= wait_for) {
                phase = 7;
                end_edge = e;
            }
        }
        if (drive_edge == e) {
            in_flight = true;
            if (op.write) {
                next_aw = next_w = true;
            } else {
                next_ar = true;
            }
        }
        t->clk = 1;
        evaluate();
        // After the edge: the host's new inputs on the chip of the operation.
        aw_valid = next_aw;
        w_valid = next_w;
        ar_valid = next_ar;
        csr_drive(t, op.chip, aw_valid, w_valid, ar_valid, op.addr, op.data);
        if (e == 1) {
            sinks_ready = true;
            for (int n = 0; n < N_CHIPS; n++) csr_ready(t, n);
        }
        if (timed) {
            model_ns += cycle_model_ns;
            timed_ns += nanoseconds(Clock::now() - begin);
        }
        if (phase == 5 && e - wait_from > wait_for) break;
    }
    for (int n = 0; n < N_CHIPS; n++) {
        if (devs[n].trace) fclose(devs[n].trace);
        write_store((files + ".dump" + std::to_string(n)).c_str(), devs[n]);
    }

    uint64_t commands = 0;
    for (auto& d : devs) commands += d.commands;
    FILE* r = fopen((files + ".report").c_str(), "w");
    fprintf(r, "{\"edges\": %lld, \"commands\": %llu, \"timeout\": %s, \"abort_stuck\": %s, "
               "\"settled\": %s, \"model_share\": %.4f, \"violation\": ",
            (long long)edge, (unsigned long long)commands, timed_out ? "true" : "false",
            abort_stuck ? "true" : "false", settled ? "true" : "false",
            timed_ns > 0 ? model_ns / timed_ns : 1.0);
    if (violation.empty())
        fprintf(r, "null");
    else
        fprintf(r, "\"%s\"", violation.c_str());
    fprintf(r, ", \"values\": [");
    for (size_t i = 0; i < values.size(); i++) fprintf(r, "%s%u", i ? ", " : "", values[i]);
    fprintf(r, "]}\n");
    fclose(r);
    top->final();
    return 0;
}
