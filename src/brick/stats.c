/* Request counters of a brick, read by STATS (`cairn volume profile`, and
 * cairnd's metrics endpoint with RPC_STATS_MONITOR).
 *
 * Per opcode: requests, the sum and maximum of their execution times, and
 * the bytes they moved (READ, WRITE). Counting is always on: two clock
 * reads and a few relaxed atomic adds per request. The counters are per
 * process (cairn-brickd serves one brick). Cumulative counters run from
 * the start (or the last clear); the interval counters are the difference
 * from a snapshot taken at the previous interval request. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "brick.h"

struct opc {
    uint64_t calls, ns, max, bytes;
};

static struct opc cum[RPC_OP_MAX], snap[RPC_OP_MAX];
static uint64_t ival_max[RPC_OP_MAX];
static uint64_t start_ns, snap_ns, interval_no;
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;

/* Upper bounds of the latency buckets, in nanoseconds; the last bucket
 * (+Inf) is implicit. docs/metrics.md lists them: dashboards name them. */
static const uint64_t bounds[] = {
    100000ull,     250000ull,     500000ull,     1000000ull,     2500000ull,   5000000ull,
    10000000ull,   25000000ull,   50000000ull,   100000000ull,   250000000ull, 500000000ull,
    1000000000ull, 2500000000ull, 5000000000ull, 10000000000ull,
};
#define N_BOUNDS (sizeof(bounds) / sizeof(bounds[0]))
/* errnos above this are counted as ERRNO_MAX (none of Linux's are) */
#define ERRNO_MAX 150

static struct opc mon[RPC_OP_MAX];
static uint64_t hist[RPC_OP_MAX][N_BOUNDS + 1];
static uint64_t errs[RPC_OP_MAX][ERRNO_MAX + 1];
static uint64_t counters[BRICK_C_MAX];
static const char *const counter_names[BRICK_C_MAX] = {
    [BRICK_C_LEASE_GRANTS] = "lease_grants",
    [BRICK_C_LEASE_RECALLS] = "lease_recalls",
    [BRICK_C_LEASE_RECALLS_ENDED] = "lease_recalls_ended",
    [BRICK_C_LEASE_RECALL_MS] = "lease_recall_ms",
    [BRICK_C_LEASE_REVOCATIONS] = "lease_revocations",
};

void brick_stats_count(enum brick_counter c, uint64_t n)
{
    __atomic_add_fetch(&counters[c], n, __ATOMIC_RELAXED);
}

uint64_t brick_stats_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void atomic_max(uint64_t *slot, uint64_t v)
{
    uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (v > cur &&
           !__atomic_compare_exchange_n(slot, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

void brick_stats_note(unsigned op, uint64_t ns, uint64_t bytes, int rc)
{
    if (op >= RPC_OP_MAX || op == RPC_OP_STATS)
        return;
    uint64_t z = 0;
    if (__atomic_load_n(&start_ns, __ATOMIC_RELAXED) == 0) {
        uint64_t now = brick_stats_now();
        if (__atomic_compare_exchange_n(&start_ns, &z, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            __atomic_store_n(&snap_ns, now, __ATOMIC_RELAXED);
    }
    struct opc *c = &cum[op];
    __atomic_add_fetch(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->ns, ns, __ATOMIC_RELAXED);
    if (bytes)
        __atomic_add_fetch(&c->bytes, bytes, __ATOMIC_RELAXED);
    atomic_max(&c->max, ns);
    atomic_max(&ival_max[op], ns);
    struct opc *m = &mon[op];
    __atomic_add_fetch(&m->calls, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&m->ns, ns, __ATOMIC_RELAXED);
    if (bytes)
        __atomic_add_fetch(&m->bytes, bytes, __ATOMIC_RELAXED);
    size_t b = 0;
    while (b < N_BOUNDS && ns > bounds[b])
        b++;
    __atomic_add_fetch(&hist[op][b], 1, __ATOMIC_RELAXED);
    if (rc < 0)
        __atomic_add_fetch(&errs[op][-rc < ERRNO_MAX ? -rc : ERRNO_MAX], 1, __ATOMIC_RELAXED);
}

/* RPC_STATS_MONITOR: per opcode, the totals with cumulative buckets and
 * failures by errno; then the brick-wide counters, and the heal index's
 * size as the counter "heal_pending" (counted now: a directory read). */
static void put_monitor(struct brick_req *r)
{
    for (unsigned op = 0; op < RPC_OP_MAX; op++) {
        uint64_t calls = __atomic_load_n(&mon[op].calls, __ATOMIC_RELAXED);
        if (!calls)
            continue;
        size_t mark = rpc_put_begin(r->out, RPC_T_OPSTAT);
        rpc_put_u64(r->out, RPC_T_OP, op);
        /* The buckets are read first and CALLS is their total, so that the
         * reply is consistent (the +Inf bucket equals the count) while
         * requests go on. */
        uint64_t sum = 0;
        for (size_t b = 0; b <= N_BOUNDS; b++) {
            sum += __atomic_load_n(&hist[op][b], __ATOMIC_RELAXED);
            if (b == N_BOUNDS)
                break;
            size_t bm = rpc_put_begin(r->out, RPC_T_BUCKET);
            rpc_put_u64(r->out, RPC_T_NSEC, bounds[b]);
            rpc_put_u64(r->out, RPC_T_CALLS, sum);
            rpc_put_end(r->out, bm);
        }
        rpc_put_u64(r->out, RPC_T_CALLS, sum);
        rpc_put_u64(r->out, RPC_T_NSEC, __atomic_load_n(&mon[op].ns, __ATOMIC_RELAXED));
        uint64_t bytes = __atomic_load_n(&mon[op].bytes, __ATOMIC_RELAXED);
        if (bytes)
            rpc_put_u64(r->out, RPC_T_SIZE, bytes);
        for (unsigned e = 1; e <= ERRNO_MAX; e++) {
            uint64_t n = __atomic_load_n(&errs[op][e], __ATOMIC_RELAXED);
            if (!n)
                continue;
            size_t em = rpc_put_begin(r->out, RPC_T_ERRSTAT);
            rpc_put_u64(r->out, RPC_T_ERRNO, e);
            rpc_put_u64(r->out, RPC_T_CALLS, n);
            rpc_put_end(r->out, em);
        }
        rpc_put_end(r->out, mark);
    }
    for (int c = 0; c < BRICK_C_MAX; c++) {
        size_t cm = rpc_put_begin(r->out, RPC_T_COUNTER);
        rpc_put_str(r->out, RPC_T_NAME, counter_names[c]);
        rpc_put_u64(r->out, RPC_T_CALLS, __atomic_load_n(&counters[c], __ATOMIC_RELAXED));
        rpc_put_end(r->out, cm);
    }
    long pending = r->b ? brick_index_count(r->b) : -ENODEV; /* unit tests have no brick */
    if (pending >= 0) {
        size_t cm = rpc_put_begin(r->out, RPC_T_COUNTER);
        rpc_put_str(r->out, RPC_T_NAME, "heal_pending");
        rpc_put_u64(r->out, RPC_T_CALLS, (uint64_t)pending);
        rpc_put_end(r->out, cm);
    }
}

static void put_one(struct rpc_buf *out, unsigned op, const struct opc *v)
{
    size_t mark = rpc_put_begin(out, RPC_T_OPSTAT);
    rpc_put_u64(out, RPC_T_OP, op);
    rpc_put_u64(out, RPC_T_CALLS, v->calls);
    rpc_put_u64(out, RPC_T_NSEC, v->ns);
    rpc_put_u64(out, RPC_T_NSECMAX, v->max);
    if (v->bytes)
        rpc_put_u64(out, RPC_T_SIZE, v->bytes);
    rpc_put_end(out, mark);
}

int brick_op_stats(struct brick_req *r)
{
    uint64_t flags = rpc_has(r->in, RPC_T_FLAGS) ? r->in->flags : RPC_STATS_CUMULATIVE;
    if (flags == RPC_STATS_MONITOR) {
        put_monitor(r);
        return 0;
    }
    if (flags == RPC_STATS_CLIENTS) {
        brick_conns_put_clients(r->b, r->bc, r->out);
        return 0;
    }
    if (flags > RPC_STATS_CLEAR) {
        snprintf(r->text, sizeof(r->text), "unknown STATS flags %llu", (unsigned long long)flags);
        return -EINVAL;
    }
    uint64_t now = brick_stats_now();
    pthread_mutex_lock(&snap_lock);
    if (__atomic_load_n(&start_ns, __ATOMIC_RELAXED) == 0) {
        start_ns = now;
        snap_ns = now;
    }
    if (flags == RPC_STATS_CLEAR) {
        for (unsigned op = 0; op < RPC_OP_MAX; op++) {
            struct opc *c = &cum[op];
            __atomic_store_n(&c->calls, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&c->ns, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&c->max, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&c->bytes, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&ival_max[op], 0, __ATOMIC_RELAXED);
            memset(&snap[op], 0, sizeof(snap[op]));
        }
        start_ns = snap_ns = now;
        interval_no = 0;
        pthread_mutex_unlock(&snap_lock);
        return 0;
    }
    uint64_t since = flags == RPC_STATS_INTERVAL ? snap_ns : start_ns;
    for (unsigned op = 0; op < RPC_OP_MAX; op++) {
        struct opc v = {
            .calls = __atomic_load_n(&cum[op].calls, __ATOMIC_RELAXED),
            .ns = __atomic_load_n(&cum[op].ns, __ATOMIC_RELAXED),
            .max = __atomic_load_n(&cum[op].max, __ATOMIC_RELAXED),
            .bytes = __atomic_load_n(&cum[op].bytes, __ATOMIC_RELAXED),
        };
        if (flags == RPC_STATS_INTERVAL) {
            struct opc cur = v;
            v.calls -= snap[op].calls;
            v.ns -= snap[op].ns;
            v.bytes -= snap[op].bytes;
            v.max = __atomic_exchange_n(&ival_max[op], 0, __ATOMIC_RELAXED);
            snap[op] = cur;
        }
        if (v.calls)
            put_one(r->out, op, &v);
    }
    rpc_put_u64(r->out, RPC_T_NSEC, now - since);
    if (flags == RPC_STATS_INTERVAL) {
        rpc_put_u64(r->out, RPC_T_GEN, interval_no++);
        snap_ns = now;
    }
    pthread_mutex_unlock(&snap_lock);
    return 0;
}
