// The HBM device and the file formats of the native host of the chip and the pod
// (sim/native_main.cpp): a pseudo-channel's storage of raw 72-bit codewords keyed by (bank,
// open row, column), its read and write data slots at the golden model's CL / CWL timing, the
// command trace, the spec file and the storage image and dump (read sim/native_main.cpp's
// header for the timing). Included after the host's generated pin header (io.h).

#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Word72 {
    uint64_t lo = 0;
    uint64_t hi = 0;  // bits 64..71
};

constexpr int MAX_WORDS = 16;
constexpr int RING = 256;

struct Access {
    Word72 w[MAX_WORDS];
};

struct Slot {
    int64_t cycle = -1;
    uint64_t key = 0;
    int beat = 0;
};

struct PseudoChannel {
    std::unordered_map<uint64_t, Access> mem;
    std::vector<int64_t> open;  // open row per bank, -1 closed
    Slot rd[RING], wr[RING];
};

uint64_t make_key(uint64_t bank, int64_t row, uint64_t col) {
    return (bank << 56) | ((uint64_t)(row + 1) << 24) | col;
}

std::map<std::string, std::vector<int64_t>> read_spec(const char* path) {
    std::map<std::string, std::vector<int64_t>> spec;
    FILE* f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    char line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n') && !feof(f)) {   // a longer line would be read as two
            fprintf(stderr, "%s: a line longer than %zu bytes\n", path, sizeof line - 1);
            exit(2);
        }
        char* save = nullptr;
        char* tok = strtok_r(line, " \t\n", &save);
        if (!tok) continue;
        std::string key = tok;
        std::vector<int64_t> values;
        while ((tok = strtok_r(nullptr, " \t\n", &save))) values.push_back((int64_t)strtoull(tok, nullptr, 0));
        auto& v = spec[key];
        v.insert(v.end(), values.begin(), values.end());
    }
    fclose(f);
    return spec;
}

// Bits [pos, pos + n) of a little-endian array of 32-bit words, n <= 64.
uint64_t get_bits(const uint32_t* words, int pos, int n) {
    uint64_t out = 0;
    for (int i = 0; i < n; i++) {
        int b = pos + i;
        out |= (uint64_t)((words[b >> 5] >> (b & 31)) & 1) << i;
    }
    return out;
}

void set_bits(uint32_t* words, int pos, int n, uint64_t value) {
    for (int i = 0; i < n; i++) {
        int b = pos + i;
        if ((value >> i) & 1) words[b >> 5] |= 1u << (b & 31);
    }
}

struct Violation {
    std::string text;
};

class Device {
  public:
    int cl, cwl, burst, words, per_channel, pcs, banks, per_beat;
    std::vector<PseudoChannel> pc;
    FILE* trace = nullptr;
    std::string violation;
    uint64_t commands = 0;

    void init() {
        pc.resize(pcs);
        for (auto& c : pc) c.open.assign(banks, -1);
        per_beat = words / burst;
    }

    void fail(int p, int64_t cycle, const std::string& what) {
        if (violation.empty())
            violation = "HBM pc" + std::to_string(p) + " cycle " + std::to_string(cycle) + ": " + what;
    }

    // Read data of ``cycle`` on pseudo-channel p: whether a beat is driven, and its bits.
    bool read_beat(int p, int64_t cycle, uint32_t* out, int out_words) {
        Slot& s = pc[p].rd[cycle % RING];
        if (s.cycle != cycle) return false;
        s.cycle = -1;
        memset(out, 0, 4 * out_words);
        auto it = pc[p].mem.find(s.key);
        if (it == pc[p].mem.end()) return true;
        for (int i = 0; i < per_beat; i++) {
            const Word72& w = it->second.w[s.beat * per_beat + i];
            set_bits(out, 72 * i, 64, w.lo);
            set_bits(out, 72 * i + 64, 8, w.hi);
        }
        return true;
    }

    void write_beat(int p, int64_t cycle, bool valid, const uint32_t* data) {
        Slot& s = pc[p].wr[cycle % RING];
        if (s.cycle != cycle) {
            if (valid) fail(p, cycle, "write data with no WR CWL cycles earlier");
            return;
        }
        s.cycle = -1;
        if (!valid) {
            fail(p, cycle, "write data missing CWL cycles after WR");
            return;
        }
        Access& a = pc[p].mem[s.key];
        for (int i = 0; i < per_beat; i++) {
            Word72& w = a.w[s.beat * per_beat + i];
            w.lo = get_bits(data, 72 * i, 64);
            w.hi = get_bits(data, 72 * i + 64, 8);
        }
    }

    void schedule(int p, int64_t cycle, int64_t start, Slot* ring, uint64_t key) {
        for (int k = 0; k < burst; k++) {
            int64_t at = start + k;
            if (pc[p].rd[at % RING].cycle == at || pc[p].wr[at % RING].cycle == at)
                fail(p, cycle, "data bus collision in cycle " + std::to_string(at));
            Slot& s = ring[at % RING];
            s.cycle = at;
            s.key = key;
            s.beat = k;
        }
    }

    void row(int ch, int64_t cycle, int op, int p_in_ch, int bank, uint32_t addr) {
        int p = ch * per_channel + p_in_ch;
        const char* name = row_op_name(op);
        commands++;
        auto& c = pc[p];
        if (!strcmp(name, "ACT")) {
            c.open[bank] = addr;
            if (trace) fprintf(trace, "%lld %d %d ACT %d %u\n", (long long)cycle, ch, p_in_ch, bank, addr);
        } else if (!strcmp(name, "PRE")) {
            c.open[bank] = -1;
            if (trace) fprintf(trace, "%lld %d %d PRE %d -\n", (long long)cycle, ch, p_in_ch, bank);
        } else if (!strcmp(name, "PREA")) {
            for (auto& o : c.open) o = -1;
            if (trace) fprintf(trace, "%lld %d %d PREA - -\n", (long long)cycle, ch, p_in_ch);
        } else if (!strcmp(name, "REF")) {
            if (trace) fprintf(trace, "%lld %d %d REF - -\n", (long long)cycle, ch, p_in_ch);
        } else {
            if (trace) fprintf(trace, "%lld %d %d REFSB %d -\n", (long long)cycle, ch, p_in_ch, bank);
        }
    }

    void col(int ch, int64_t cycle, int op, int p_in_ch, int bank, uint32_t addr) {
        int p = ch * per_channel + p_in_ch;
        const char* name = col_op_name(op);
        commands++;
        auto& c = pc[p];
        bool write = name[0] == 'W', autop = name[2] == 'A';
        if (c.open[bank] < 0) fail(p, cycle, std::string(name) + " to bank " + std::to_string(bank) + ", which is closed");
        uint64_t key = make_key(bank, c.open[bank], addr);
        if (write)
            schedule(p, cycle, cycle + cwl, c.wr, key);
        else
            schedule(p, cycle, cycle + cl, c.rd, key);
        if (autop) c.open[bank] = -1;
        if (trace) fprintf(trace, "%lld %d %d %s %d %u\n", (long long)cycle, ch, p_in_ch, name, bank, addr);
    }
};

void write_store(const char* path, const Device& dev) {
    FILE* f = fopen(path, "wb");
    for (int p = 0; p < dev.pcs; p++) {
        for (const auto& [key, a] : dev.pc[p].mem) {
            uint32_t head[4] = {(uint32_t)p, (uint32_t)(key >> 56),
                                (uint32_t)(((key >> 24) & 0xFFFFFFFFull) - 1),
                                (uint32_t)(key & 0xFFFFFF)};
            fwrite(head, 4, 4, f);
            for (int i = 0; i < dev.words; i++) {
                uint64_t pair[2] = {a.w[i].lo, a.w[i].hi};
                fwrite(pair, 8, 2, f);
            }
        }
    }
    fclose(f);
}

void read_store(const char* path, Device& dev) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    uint32_t head[4];
    while (fread(head, 4, 4, f) == 4) {
        Access& a = dev.pc[head[0]].mem[make_key(head[1], head[2], head[3])];
        for (int i = 0; i < dev.words; i++) {
            uint64_t pair[2];
            if (fread(pair, 8, 2, f) != 2) {
                fprintf(stderr, "truncated image %s\n", path);
                exit(2);
            }
            a.w[i].lo = pair[0];
            a.w[i].hi = pair[1];
        }
    }
    fclose(f);
}

}  // namespace
