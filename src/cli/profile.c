/* cairn volume profile NAME start|stop|info [cumulative|incremental|clear]:
 * the request counters of every brick of the volume (STATS, op 95), in
 * GlusterFS's `volume profile` layout. Run by the CLI itself as a client of
 * the bricks (the layout comes from cairnd's GETVOL), like `volume heal`.
 *
 * The bricks count always (brick/stats.c), so start only clears the
 * counters and stop changes nothing. Client-side round trips are read on a
 * mount: getfattr -n trusted.cairn.io-stats MOUNTPOINT. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../rpc/opinfo.h"
#include "cli.h"

struct row {
    unsigned op;
    uint64_t calls, ns, max, bytes;
};

static int cmp_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* Prints one block of counters from a STATS reply. */
static void print_block(const struct rpc_msg *m, const char *title)
{
    struct row rows[RPC_OP_MAX];
    int n = 0;
    uint64_t total_ns = 0, rd = 0, wr = 0;
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, m->body, m->body_len);
    while (rpc_iter_next(&it, &f) > 0 && n < RPC_OP_MAX) {
        struct rpc_msg s;
        if (f.tag != RPC_T_OPSTAT || rpc_msg_decode(f.val, f.len, &s, NULL) < 0 ||
            !rpc_has(&s, RPC_T_OP) || !rpc_has(&s, RPC_T_CALLS))
            continue;
        struct row *r = &rows[n++];
        r->op = (unsigned)s.op;
        r->calls = s.calls;
        r->ns = s.nsec;
        r->max = s.nsecmax;
        r->bytes = rpc_has(&s, RPC_T_SIZE) ? s.size : 0;
        total_ns += r->ns;
        if (r->op == RPC_OP_READ)
            rd += r->bytes;
        if (r->op == RPC_OP_WRITE)
            wr += r->bytes;
    }
    qsort(rows, (size_t)n, sizeof(rows[0]), cmp_rows);
    printf("%s:\n", title);
    printf(" %%-latency   Avg-latency   Max-Latency   No. of calls         Fop\n");
    printf(" ---------   -----------   -----------   ------------        ----\n");
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        double pct = total_ns ? 100.0 * (double)r->ns / (double)total_ns : 0.0;
        double avg = r->calls ? (double)r->ns / (double)r->calls / 1000.0 : 0.0;
        printf(" %9.2f %10.2f us %10.2f us %14llu %11s\n", pct, avg, (double)r->max / 1000.0,
               (unsigned long long)r->calls, rpc_op_name(r->op));
    }
    printf("\n    Duration: %llu seconds\n",
           (unsigned long long)(rpc_has(m, RPC_T_NSEC) ? m->nsec / 1000000000ull : 0));
    printf("   Data Read: %llu bytes\n", (unsigned long long)rd);
    printf("Data Written: %llu bytes\n\n", (unsigned long long)wr);
}

static int stats_call(struct cl_layer *l, unsigned flags, struct cl_op *op)
{
    cl_op_init(op, RPC_OP_STATS, NULL, NULL);
    RPC_SET(&op->args, flags, RPC_T_FLAGS, flags);
    return cl_op_run(l, op);
}

int cli_volume_profile(const struct net_addr *mgmt, int argc, char **argv)
{
    const char *name = argv[2], *what = argv[3], *sub = argc > 4 ? argv[4] : "";
    int info = strcmp(what, "info") == 0;
    if (argc > 5 || (!info && argc > 4) ||
        (!info && strcmp(what, "start") && strcmp(what, "stop")) ||
        (info && argc == 5 && strcmp(sub, "cumulative") && strcmp(sub, "incremental") &&
         strcmp(sub, "clear"))) {
        fprintf(stderr, "Usage: volume profile <VOLNAME> {start|info [incremental"
                        "|cumulative|clear]|stop}\n");
        return 1;
    }
    struct cl_volinfo v;
    char err[512];
    int rc = cl_volume_fetch(mgmt, name, 10000, &v, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "Profile on Volume %s is failed: %s\n", name, err);
        return 1;
    }
    int status = 0;
    int clear = strcmp(what, "start") == 0 || strcmp(sub, "clear") == 0;
    for (int i = 0; i < v.n_bricks; i++) {
        struct cl_brickinfo *b = &v.bricks[i];
        if (strcmp(what, "stop") == 0)
            break;
        struct cl_layer *l = cli_brick_connect(&v, i);
        if (!l) {
            status = 1;
            break;
        }
        struct cl_op op;
        if (info && !clear)
            printf("Brick: %s:%s\n%.*s\n", b->addr.host, b->path,
                   (int)(strlen(b->addr.host) + strlen(b->path) + 8),
                   "---------------------------------------------------------------------"
                   "---------------------------------------------------------------------"
                   "---------------------------------------------------------------------"
                   "---------------------------------------------------------------------");
        if (clear) {
            rc = stats_call(l, RPC_STATS_CLEAR, &op);
            cl_op_release(&op);
        } else {
            rc = 0;
            if (strcmp(sub, "incremental") != 0) {
                rc = stats_call(l, RPC_STATS_CUMULATIVE, &op);
                if (rc == 0)
                    print_block(&op.reply->msg, "Cumulative Stats");
                cl_op_release(&op);
            }
            if (rc == 0 && strcmp(sub, "cumulative") != 0) {
                rc = stats_call(l, RPC_STATS_INTERVAL, &op);
                if (rc == 0) {
                    char title[64];
                    snprintf(title, sizeof(title), "Interval %llu Stats",
                             (unsigned long long)(rpc_has(&op.reply->msg, RPC_T_GEN)
                                                      ? op.reply->msg.gen
                                                      : 0));
                    print_block(&op.reply->msg, title);
                }
                cl_op_release(&op);
            }
        }
        if (rc < 0) {
            /* A brick that is down is reported, the others still answer. */
            fprintf(stderr, "Brick %s:%s: %s\n", b->addr.host, b->path,
                    rc == -ENOTCONN || rc == -ETIMEDOUT ? "not connected" : strerror(-rc));
            status = 1;
        }
        cl_layer_destroy_tree(l);
    }
    if (strcmp(what, "start") == 0 && status == 0)
        printf("Starting volume profile on %s has been successful \n", name);
    else if (strcmp(what, "stop") == 0)
        printf("Stopping volume profile on %s has been successful \n", name);
    else if (clear && status == 0)
        printf("Cleared stats.\n");
    cl_volinfo_free(&v);
    return status;
}
