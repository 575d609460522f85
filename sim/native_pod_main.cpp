// The native host of a pod of TensorCore chips with HBM controllers (sim/native_pod.py): the
// Verilated pod top clocked by a C++ loop with no cocotb, one host on every chip's AXI4-Lite
// control port and an HBM device on every pseudo-channel of every chip.
//
// It is sim/native_main.cpp (the chip's native host: read its header for the AXI4-Lite and
// device timing, which are the same here) for N_CHIPS chips, cycle for cycle the cocotb run of
// verification/tb/pod_programs.py ``run_pod_program``: the host's operations go one at a time,
// chip after chip, as that test awaits them (load every chip's program, clear every chip and
// set its start PC, start every chip, wait until no chip runs, read every chip's outcome, wait
// for every chip's HBM controller to drain, chip after chip). Every chip's device writes its
// own command trace, which the golden device model checks after the run.
//
// Usage: main <spec> <files>: the spec is "key value..." lines (program<c> the words of chip
// c); <files>.image<c> and <files>.dump<c> are chip c's device storage before and after the
// run (sim/native_main.cpp's format), <files>.trace<c> its trace, <files>.report the outcome.

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
#include "pod_io.h"

double sc_time_stamp() { return 0; }

#include "native_device.h"

namespace {

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
    const uint32_t r_imem = one("IMEM"), r_control = one("CONTROL"), r_start_pc = one("START_PC");
    const uint32_t r_status = one("STATUS"), r_regs = one("REGS"), r_sems = one("SEMS");
    const uint32_t r_counters = one("COUNTERS"), r_error = one("ERROR"), r_error_pc = one("ERROR_PC");
    const int n_sems = one("semaphores"), n_counters = one("counters");

    // verification/tb/pod_programs.py run_pod_program: every chip's program, then every chip
    // cleared with its start PC set, then every chip started.
    std::vector<Op> load;
    for (int n = 0; n < N_CHIPS; n++) {
        const auto& program = spec["program" + std::to_string(n)];
        for (size_t i = 0; i < program.size(); i++) {
            uint64_t w = (uint64_t)program[i];
            load.push_back({n, true, (uint32_t)(r_imem + 8 * i), (uint32_t)(w & 0xFFFFFFFFu)});
            load.push_back({n, true, (uint32_t)(r_imem + 8 * i + 4), (uint32_t)(w >> 32)});
        }
    }
    for (int n = 0; n < N_CHIPS; n++) {
        load.push_back({n, true, r_control, 4});
        load.push_back({n, true, r_start_pc, 0});
    }
    for (int n = 0; n < N_CHIPS; n++) load.push_back({n, true, r_control, 1});
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

    // Reset: as sim/native_main.cpp (verification/tb/bench.py ``start``, reset_cycles=4).
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

    int64_t edge = 0;
    for (;; edge++) {
        int64_t cycle = edge;
        t->clk = 0;
        for (int n = 0; n < N_CHIPS; n++)
            for (int c = 0; c < N_CHANNELS; c++)
                for (int k = 0; k < PER_CHANNEL; k++) {
                    bool valid = devs[n].read_beat(c * PER_CHANNEL + k, cycle, beat, beat_words);
                    drive_rd(t, n, c, k, valid, beat);
                }
        t->eval();
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
        t->eval();
        // After the edge: the host's new inputs on the chip of the operation.
        aw_valid = next_aw;
        w_valid = next_w;
        ar_valid = next_ar;
        csr_drive(t, op.chip, aw_valid, w_valid, ar_valid, op.addr, op.data);
        if (e == 1) {
            sinks_ready = true;
            for (int n = 0; n < N_CHIPS; n++) csr_ready(t, n);
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
               "\"settled\": %s, \"violation\": ",
            (long long)edge, (unsigned long long)commands, timed_out ? "true" : "false",
            abort_stuck ? "true" : "false", settled ? "true" : "false");
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
