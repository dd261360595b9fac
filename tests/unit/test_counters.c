/* Counters: the client's per-opcode round trips (opstats.c) and a brick's
 * request counters answered by STATS (brick/stats.c). */
#include <errno.h>
#include <stdlib.h>

#include "../../src/brick/brick.h"
#include "../../src/client/opstats.h"
#include "check.h"

static void test_client_opstats(void)
{
    struct cl_opstats s;
    cl_opstats_init(&s);
    char buf[4096];
    cl_opstats_format(&s, buf, sizeof(buf));
    CHECK(strstr(buf, "CREATE") == NULL);
    cl_opstats_note(&s, RPC_OP_CREATE, 1, 0);
    cl_opstats_note(&s, RPC_OP_CREATE, 2, 0);
    cl_opstats_note(&s, RPC_OP_CREATE, 7, -EIO);
    cl_opstats_note(&s, RPC_OP_FLUSH, 0, 0);
    cl_opstats_note(&s, RPC_OP_MAX + 5, 1, 0); /* ignored */
    const struct cl_opstat *c = &s.op[RPC_OP_CREATE];
    CHECK_EQ(c->calls, 3);
    CHECK_EQ(c->rounds, 10);
    CHECK_EQ(c->max_rounds, 7);
    CHECK_EQ(c->hist[1], 1);
    CHECK_EQ(c->hist[2], 1);
    CHECK_EQ(c->hist[3], 1);
    CHECK_EQ(c->errors, 1);
    CHECK_EQ(s.op[RPC_OP_FLUSH].hist[0], 1);
    size_t n = cl_opstats_format(&s, buf, sizeof(buf));
    CHECK(n < sizeof(buf));
    const char *line = strstr(buf, "\nCREATE ");
    CHECK(line != NULL);
    if (line) {
        unsigned long long v[8];
        CHECK_EQ(sscanf(line + 7, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                        &v[3], &v[4], &v[5], &v[6], &v[7]),
                 8);
        CHECK_EQ(v[0], 3);
        CHECK_EQ(v[1], 10);
        CHECK_EQ(v[2], 7);
        CHECK_EQ(v[7], 1);
    }
    /* a short buffer: truncated, NUL-terminated, the needed length returned */
    char small[16];
    CHECK_EQ(cl_opstats_format(&s, small, sizeof(small)), n);
    CHECK_EQ(strlen(small), sizeof(small) - 1);
    cl_opstats_clear(&s);
    CHECK_EQ(s.op[RPC_OP_CREATE].calls, 0);
    CHECK_EQ(s.op[RPC_OP_CREATE].hist[3], 0);
}

/* Runs STATS with flags; fills *m from the reply (buffer in *out). */
static int stats(unsigned flags, struct rpc_buf *out, struct rpc_msg *m)
{
    struct rpc_msg in;
    memset(&in, 0, sizeof(in));
    RPC_SET(&in, flags, RPC_T_FLAGS, flags);
    rpc_buf_reset(out);
    struct brick_req r = {.opcode = RPC_OP_STATS, .in = &in, .out = out};
    int rc = brick_op_stats(&r);
    if (rc == 0)
        rc = rpc_msg_decode(out->data, out->len, m, NULL);
    return rc;
}

/* calls of op in a STATS reply, or -1 */
static long long calls_of(const struct rpc_msg *m, unsigned op, uint64_t *bytes)
{
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, m->body, m->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg s;
        if (f.tag == RPC_T_OPSTAT && rpc_msg_decode(f.val, f.len, &s, NULL) == 0 && s.op == op) {
            if (bytes)
                *bytes = rpc_has(&s, RPC_T_SIZE) ? s.size : 0;
            return (long long)s.calls;
        }
    }
    return -1;
}

static void test_brick_stats(void)
{
    struct rpc_buf out;
    struct rpc_msg m;
    rpc_buf_init(&out);
    CHECK_EQ(stats(RPC_STATS_CLEAR, &out, &m), 0);
    CHECK_EQ(m.n_opstat, 0);
    brick_stats_note(RPC_OP_CREATE, 1000, 0, 0);
    brick_stats_note(RPC_OP_CREATE, 3000, 0, 0);
    brick_stats_note(RPC_OP_WRITE, 500, 4096, 0);
    brick_stats_note(RPC_OP_STATS, 1, 0, 0); /* not counted */
    CHECK_EQ(stats(RPC_STATS_CUMULATIVE, &out, &m), 0);
    CHECK_EQ(m.n_opstat, 2);
    uint64_t bytes = 0;
    CHECK_EQ(calls_of(&m, RPC_OP_CREATE, NULL), 2);
    CHECK_EQ(calls_of(&m, RPC_OP_WRITE, &bytes), 1);
    CHECK_EQ(bytes, 4096);
    CHECK_EQ(calls_of(&m, RPC_OP_STATS, NULL), -1);
    CHECK(rpc_has(&m, RPC_T_NSEC));
    /* the first interval holds everything so far, the second only what came after */
    CHECK_EQ(stats(RPC_STATS_INTERVAL, &out, &m), 0);
    CHECK_EQ(calls_of(&m, RPC_OP_CREATE, NULL), 2);
    CHECK_EQ(m.gen, 0);
    brick_stats_note(RPC_OP_CREATE, 10, 0, 0);
    CHECK_EQ(stats(RPC_STATS_INTERVAL, &out, &m), 0);
    CHECK_EQ(calls_of(&m, RPC_OP_CREATE, NULL), 1);
    CHECK_EQ(calls_of(&m, RPC_OP_WRITE, NULL), -1);
    CHECK_EQ(m.gen, 1);
    CHECK_EQ(stats(RPC_STATS_CUMULATIVE, &out, &m), 0);
    CHECK_EQ(calls_of(&m, RPC_OP_CREATE, NULL), 3);
    /* bad flags are refused */
    CHECK_EQ(stats(7, &out, &m), -EINVAL);
    rpc_buf_free(&out);
}

/* The monitor counters: never cleared, buckets cumulative and ending at
 * CALLS, failures by errno. */
static void test_brick_monitor(void)
{
    struct rpc_buf out;
    struct rpc_msg m;
    rpc_buf_init(&out);
    CHECK_EQ(stats(RPC_STATS_MONITOR, &out, &m), 0);
    long long before = calls_of(&m, RPC_OP_UNLINK, NULL);
    if (before < 0)
        before = 0;
    brick_stats_note(RPC_OP_UNLINK, 50000, 0, 0);         /* first bucket (100 us) */
    brick_stats_note(RPC_OP_UNLINK, 3000000, 0, -ENOENT); /* 5 ms */
    brick_stats_note(RPC_OP_UNLINK, 3000000, 0, -ENOENT);
    brick_stats_note(RPC_OP_UNLINK, 20000000000ull, 0, -EACCES); /* above every bound */
    CHECK_EQ(stats(RPC_STATS_CLEAR, &out, &m), 0);               /* profile's clear */
    CHECK_EQ(stats(RPC_STATS_MONITOR, &out, &m), 0);
    CHECK_EQ(calls_of(&m, RPC_OP_UNLINK, NULL), before + 4);
    CHECK(m.n_counter >= 2);
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, m.body, m.body_len);
    int seen = 0;
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg s;
        if (f.tag != RPC_T_OPSTAT || rpc_msg_decode(f.val, f.len, &s, NULL) < 0 ||
            s.op != RPC_OP_UNLINK)
            continue;
        seen = 1;
        CHECK_EQ(s.n_bucket, 16);
        uint64_t prev = 0, at_100us = 0, at_5ms = 0, last = 0;
        uint64_t enoent = 0, eacces = 0;
        struct rpc_iter jt;
        struct rpc_field g;
        rpc_iter_init(&jt, s.body, s.body_len);
        while (rpc_iter_next(&jt, &g) > 0) {
            struct rpc_msg x;
            if (rpc_msg_decode(g.val, g.len, &x, NULL) < 0)
                continue;
            if (g.tag == RPC_T_BUCKET) {
                CHECK(x.calls >= prev);
                prev = last = x.calls;
                if (x.nsec == 100000)
                    at_100us = x.calls;
                if (x.nsec == 5000000)
                    at_5ms = x.calls;
            } else if (g.tag == RPC_T_ERRSTAT) {
                if (x.err == ENOENT)
                    enoent = x.calls;
                if (x.err == EACCES)
                    eacces = x.calls;
            }
        }
        CHECK(at_100us >= 1);
        CHECK_EQ(at_5ms - at_100us >= 2, 1);
        CHECK_EQ(s.calls - last >= 1, 1); /* the 20 s one is only in +Inf */
        CHECK(enoent >= 2);
        CHECK(eacces >= 1);
    }
    CHECK(seen);
    rpc_buf_free(&out);
}

int main(void)
{
    test_client_opstats();
    test_brick_stats();
    test_brick_monitor();
    return check_summary("test_counters");
}
