/* Per-opcode operation and round-trip counters (opstats.h). */
#include "opstats.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../rpc/opinfo.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cl_opstats_init(struct cl_opstats *s)
{
    memset(s, 0, sizeof(*s));
    s->since_ns = now_ns();
}

void cl_opstats_note(struct cl_opstats *s, unsigned op, uint32_t rounds, int status)
{
    if (op >= RPC_OP_MAX)
        return;
    struct cl_opstat *c = &s->op[op];
    __atomic_add_fetch(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->rounds, rounds, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->hist[rounds < CL_OPSTATS_HIST ? rounds : CL_OPSTATS_HIST - 1], 1,
                       __ATOMIC_RELAXED);
    if (status < 0)
        __atomic_add_fetch(&c->errors, 1, __ATOMIC_RELAXED);
    uint64_t cur = __atomic_load_n(&c->max_rounds, __ATOMIC_RELAXED);
    while (rounds > cur && !__atomic_compare_exchange_n(&c->max_rounds, &cur, rounds, 1,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

void cl_opstats_clear(struct cl_opstats *s)
{
    for (unsigned op = 0; op < RPC_OP_MAX; op++) {
        uint64_t *v = &s->op[op].calls;
        for (size_t k = 0; k < sizeof(s->op[op]) / sizeof(uint64_t); k++)
            __atomic_store_n(&v[k], 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&s->since_ns, now_ns(), __ATOMIC_RELAXED);
}

size_t cl_opstats_format(const struct cl_opstats *s, char *out, size_t len)
{
    size_t n = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(out + (n < len ? n : len), n < len ? len - n : 0, __VA_ARGS__);          \
        if (w_ > 0)                                                                                \
            n += (size_t)w_;                                                                       \
    } while (0)
    if (len)
        out[0] = 0;
    uint64_t dur = now_ns() - __atomic_load_n(&s->since_ns, __ATOMIC_RELAXED);
    PUT("Client round trips (duration: %llu seconds)\n", (unsigned long long)(dur / 1000000000ull));
    PUT("%-12s %12s %12s %8s %10s %10s %10s %10s %8s\n", "Fop", "No. of calls", "Round trips",
        "Max", "0-RT", "1-RT", "2-RT", "3+-RT", "Errors");
    for (unsigned op = 0; op < RPC_OP_MAX; op++) {
        const struct cl_opstat *c = &s->op[op];
        uint64_t calls = __atomic_load_n(&c->calls, __ATOMIC_RELAXED);
        if (!calls)
            continue;
        PUT("%-12s %12llu %12llu %8llu %10llu %10llu %10llu %10llu %8llu\n", rpc_op_name(op),
            (unsigned long long)calls,
            (unsigned long long)__atomic_load_n(&c->rounds, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&c->max_rounds, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&c->hist[0], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&c->hist[1], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&c->hist[2], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&c->hist[3], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&c->errors, __ATOMIC_RELAXED));
    }
#undef PUT
    return n;
}
