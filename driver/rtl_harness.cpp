// The fast RTL device's harness: the Verilated accelerator, a C++ AXI4 memory model on its m_axi
// port and blocking AXI4-Lite transactions on its s_axil port, behind a small C API for ctypes
// (driver/ops_rtl.py). Compiled once per Verilog build, together with the Verilated model.
//
// DRAM is the caller's buffer (a numpy array), never copied. The memory model serves INCR bursts:
// read data follows an accepted AR after `read_latency` cycles, one beat per cycle, bursts in
// order (INCR, narrow beats included); a write's B response follows its last W beat after `write_latency` cycles. An access
// outside DRAM sets an error (vta_take_error) and reads zeros / drops the write. Verilator
// spells the Amaranth port m_axi__araddr as m_axi___05Faraddr.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>

#include "Vvta.h"
#include "verilated.h"

namespace {

constexpr unsigned kQueueDepth = 4;  // outstanding AR / AW bursts the model accepts
constexpr uint64_t kLiteTimeoutCycles = 10000;

struct Burst {
    uint64_t addr;
    uint32_t beats;
    uint32_t beat_bytes;   // 1 << AxSIZE: narrow transfers move fewer bytes than the bus
    uint64_t ready_cycle;  // read: first beat may go out; write: unused
};

template <class T>
void put_bytes(T& port, const uint8_t* src, unsigned n) {
    static_assert(sizeof(T) >= BUS_BYTES, "port narrower than the bus");
    std::memset(&port, 0, sizeof(T));
    std::memcpy(&port, src, n);
}

template <class T>
void get_bytes(const T& port, uint8_t* dst, unsigned n) {
    std::memcpy(dst, &port, n);
}

template <class T>
uint64_t as_u64(const T& port) {
    uint64_t v = 0;
    std::memcpy(&v, &port, sizeof(T) < 8 ? sizeof(T) : 8);
    return v;
}

struct Harness {
    VerilatedContext ctx;
    Vvta* top;
    uint8_t* dram;
    uint64_t dram_bytes;
    uint64_t read_latency, write_latency;
    uint64_t cycle = 0;
    std::deque<Burst> ar_q, aw_q;
    std::deque<uint64_t> b_q;  // cycle each B response may go out
    uint32_t r_beat = 0, w_beat = 0;
    std::string error;

    Harness(uint8_t* d, uint64_t n, uint64_t rl, uint64_t wl)
        : dram(d), dram_bytes(n), read_latency(rl), write_latency(wl) {
        top = new Vvta(&ctx);
        top->clk = 0;
        top->rst = 1;
        top->eval();
    }
    ~Harness() {
        top->final();
        delete top;
    }

    bool in_dram(uint64_t addr, unsigned n) {
        if (addr + n <= dram_bytes) return true;
        if (error.empty()) {
            char buf[160];
            std::snprintf(buf, sizeof buf,
                          "the accelerator accessed DRAM at 0x%llx, beyond its %llu bytes",
                          (unsigned long long)addr, (unsigned long long)dram_bytes);
            error = buf;
        }
        return false;
    }

    // The bus word holding beat `beat` of an INCR burst (a narrow beat uses the lanes of its
    // address within that word, so the whole word is read, and written under the strobes).
    uint64_t beat_addr(const Burst& b, uint32_t beat) const {
        uint64_t a = (b.addr & ~uint64_t(b.beat_bytes - 1)) + uint64_t(beat) * b.beat_bytes;
        return a & ~uint64_t(BUS_BYTES - 1);
    }

    // One clock cycle: drive the memory model's outputs, settle, sample handshakes, rising edge.
    void tick() {
        Vvta* t = top;
        t->m_axi___05Farready = ar_q.size() < kQueueDepth;
        bool rvalid = !ar_q.empty() && cycle >= ar_q.front().ready_cycle;
        t->m_axi___05Frvalid = rvalid;
        if (rvalid) {
            const Burst& b = ar_q.front();
            uint64_t a = beat_addr(b, r_beat);
            static const uint8_t zeros[BUS_BYTES] = {};
            put_bytes(t->m_axi___05Frdata, in_dram(a, BUS_BYTES) ? dram + a : zeros, BUS_BYTES);
            t->m_axi___05Frlast = r_beat + 1 == b.beats;
        } else {
            t->m_axi___05Frlast = 0;
        }
        t->m_axi___05Frresp = 0;
        t->m_axi___05Frid = 0;
        t->m_axi___05Fawready = aw_q.size() < kQueueDepth;
        t->m_axi___05Fwready = !aw_q.empty();
        bool bvalid = !b_q.empty() && cycle >= b_q.front();
        t->m_axi___05Fbvalid = bvalid;
        t->m_axi___05Fbresp = 0;
        t->m_axi___05Fbid = 0;
        t->clk = 0;
        t->eval();

        bool ar_fire = t->m_axi___05Farvalid && t->m_axi___05Farready;
        bool r_fire = rvalid && t->m_axi___05Frready;
        bool aw_fire = t->m_axi___05Fawvalid && t->m_axi___05Fawready;
        bool w_fire = t->m_axi___05Fwvalid && t->m_axi___05Fwready;
        bool b_fire = bvalid && t->m_axi___05Fbready;
        Burst ar{t->m_axi___05Faraddr, uint32_t(t->m_axi___05Farlen) + 1,
                 1u << t->m_axi___05Farsize, 0};
        Burst aw{t->m_axi___05Fawaddr, uint32_t(t->m_axi___05Fawlen) + 1,
                 1u << t->m_axi___05Fawsize, 0};
        uint8_t wdata[BUS_BYTES];
        uint64_t wstrb = 0;
        bool wlast = false;
        if (w_fire) {
            get_bytes(t->m_axi___05Fwdata, wdata, BUS_BYTES);
            wstrb = as_u64(t->m_axi___05Fwstrb);
            wlast = t->m_axi___05Fwlast;
        }

        t->clk = 1;
        t->eval();
        cycle++;

        if (r_fire && ++r_beat == ar_q.front().beats) {
            ar_q.pop_front();
            r_beat = 0;
        }
        if (ar_fire) {
            ar.ready_cycle = cycle + read_latency;
            ar_q.push_back(ar);
        }
        if (w_fire) {
            const Burst& b = aw_q.front();
            uint64_t a = beat_addr(b, w_beat);
            if (in_dram(a, BUS_BYTES))
                for (unsigned i = 0; i < BUS_BYTES; i++)
                    if (wstrb >> i & 1) dram[a + i] = wdata[i];
            if (wlast || ++w_beat == b.beats) {
                aw_q.pop_front();
                w_beat = 0;
                b_q.push_back(cycle + write_latency);
            }
        }
        if (aw_fire) aw_q.push_back(aw);
        if (b_fire) b_q.pop_front();
    }

    void reset(unsigned cycles) {
        ar_q.clear();
        aw_q.clear();
        b_q.clear();
        r_beat = w_beat = 0;
        idle_lite();
        top->rst = 1;
        for (unsigned i = 0; i < cycles; i++) tick();
        top->rst = 0;
        tick();
    }

    void idle_lite() {
        Vvta* t = top;
        t->s_axil___05Fawvalid = 0;
        t->s_axil___05Fwvalid = 0;
        t->s_axil___05Fbready = 0;
        t->s_axil___05Farvalid = 0;
        t->s_axil___05Frready = 0;
        t->s_axil___05Fwstrb = 0xF;
    }

    // The slave's ready may depend on our valid combinationally: sample it after the clk=0 eval.
    bool lite_fire(bool (*fired)(Vvta*)) {
        top->clk = 0;
        top->eval();
        bool f = fired(top);
        tick();
        return f;
    }

    int read32(uint32_t offset, uint32_t* value) {
        Vvta* t = top;
        t->s_axil___05Faraddr = offset;
        t->s_axil___05Farvalid = 1;
        t->s_axil___05Frready = 1;
        uint64_t n = 0;
        while (!lite_fire([](Vvta* v) { return bool(v->s_axil___05Farvalid && v->s_axil___05Farready); }))
            if (++n > kLiteTimeoutCycles) return -1;
        t->s_axil___05Farvalid = 0;
        for (;;) {
            top->clk = 0;
            top->eval();
            if (t->s_axil___05Frvalid) {
                *value = t->s_axil___05Frdata;
                tick();
                break;
            }
            tick();
            if (++n > kLiteTimeoutCycles) return -1;
        }
        t->s_axil___05Frready = 0;
        return 0;
    }

    int write32(uint32_t offset, uint32_t value) {
        Vvta* t = top;
        t->s_axil___05Fawaddr = offset;
        t->s_axil___05Fwdata = value;
        t->s_axil___05Fwstrb = 0xF;
        t->s_axil___05Fawvalid = 1;
        t->s_axil___05Fwvalid = 1;
        t->s_axil___05Fbready = 1;
        uint64_t n = 0;
        while (!lite_fire([](Vvta* v) { return bool(v->s_axil___05Fawvalid && v->s_axil___05Fawready); }))
            if (++n > kLiteTimeoutCycles) return -1;
        t->s_axil___05Fawvalid = 0;
        t->s_axil___05Fwvalid = 0;
        while (!lite_fire([](Vvta* v) { return bool(v->s_axil___05Fbvalid); }))
            if (++n > kLiteTimeoutCycles) return -1;
        t->s_axil___05Fbready = 0;
        return 0;
    }

    uint64_t wait(uint64_t cycles) {
        uint64_t n = 0;
        while (n < cycles) {
            tick();
            n++;
            if (top->irq) break;
        }
        return n;
    }
};

}  // namespace

extern "C" {

unsigned vta_bus_bytes() { return BUS_BYTES; }

void* vta_new(uint8_t* dram, uint64_t dram_bytes, uint64_t read_latency, uint64_t write_latency) {
    return new Harness(dram, dram_bytes, read_latency, write_latency);
}

void vta_free(void* h) { delete static_cast<Harness*>(h); }

void vta_reset(void* h, unsigned cycles) { static_cast<Harness*>(h)->reset(cycles); }

int vta_read32(void* h, uint32_t offset, uint32_t* value) {
    return static_cast<Harness*>(h)->read32(offset, value);
}

int vta_write32(void* h, uint32_t offset, uint32_t value) {
    return static_cast<Harness*>(h)->write32(offset, value);
}

uint64_t vta_wait(void* h, uint64_t cycles) { return static_cast<Harness*>(h)->wait(cycles); }

uint64_t vta_cycle(void* h) { return static_cast<Harness*>(h)->cycle; }

// The first DRAM error since the last call ("" when none); clears it.
const char* vta_take_error(void* h) {
    static thread_local std::string last;
    Harness* x = static_cast<Harness*>(h);
    last = x->error;
    x->error.clear();
    return last.c_str();
}
}
