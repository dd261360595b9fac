/* cairn volume top NAME {open|read|write|opendir|readdir|clear} [brick B] [list-cnt N]
 * cairn volume top NAME {read-perf|write-perf} [bs BYTES count N] [brick B] [list-cnt N]
 *
 * The paths each brick of the volume served most (TOP, op 96, brick/top.c),
 * in GlusterFS's `volume top` layout. Run by the CLI itself as a client of
 * the bricks (the layout from cairnd's GETVOL), like `volume profile`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../client/client.h"
#include "../lib/options.h"
#include "cli.h"

static const struct {
    const char *word;
    unsigned flags;
} lists[] = {{"open", RPC_TOP_OPEN},
             {"read", RPC_TOP_READ},
             {"write", RPC_TOP_WRITE},
             {"opendir", RPC_TOP_OPENDIR},
             {"readdir", RPC_TOP_READDIR},
             {"read-perf", RPC_TOP_READ_PERF},
             {"write-perf", RPC_TOP_WRITE_PERF},
             {"clear", RPC_TOP_CLEAR}};

static int usage(void)
{
    fprintf(stderr, "Usage:\nvolume top <VOLNAME> {open|read|write|opendir|readdir|clear} "
                    "[brick <brick>] [list-cnt <value>] |\nvolume top <VOLNAME> "
                    "{read-perf|write-perf} [bs <size> count <count>] [brick <brick>] "
                    "[list-cnt <value>]\n");
    return 1;
}

/* A positive integer argument within max; 0 when it is not one. */
static uint64_t count_arg(const char *s, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || v == 0 || v > max || *s == '-')
        return 0;
    return v;
}

static void print_time(uint64_t ns)
{
    time_t sec = (time_t)(ns / 1000000000ull);
    struct tm tm;
    char t[64] = "-";
    if (ns && localtime_r(&sec, &tm))
        strftime(t, sizeof(t), "%Y-%m-%d %H:%M:%S", &tm);
    printf("%s.%06llu", t, (unsigned long long)(ns % 1000000000ull / 1000));
}

static void print_reply(const struct rpc_msg *m, unsigned flags)
{
    int perf = flags == RPC_TOP_READ_PERF || flags == RPC_TOP_WRITE_PERF;
    struct rpc_iter it;
    struct rpc_field f;
    if (flags == RPC_TOP_OPEN) {
        printf("Current open fds: %" PRIu64 ", Max open fds: %" PRIu64 ", Max openfd time: ",
               rpc_has(m, RPC_T_CALLS) ? m->calls : 0, rpc_has(m, RPC_T_SIZE) ? m->size : 0);
        print_time(rpc_has(m, RPC_T_NSEC) ? m->nsec : 0);
        printf("\n");
    }
    struct rpc_msg p;
    if (perf && rpc_has(m, RPC_T_TOPPERF) &&
        rpc_msg_decode(m->topperf.p, m->topperf.len, &p, NULL) == 0 && rpc_has(&p, RPC_T_SIZE) &&
        rpc_has(&p, RPC_T_NSEC)) {
        double secs = (double)p.nsec / 1e9;
        printf("Throughput %.2f MBps time %.4f secs\n",
               secs > 0 ? (double)p.size / 1e6 / secs : 0.0, secs);
    }
    if (perf)
        printf("%-10s %-60s %s\n%-10s %-60s %s\n", "MBps", "Filename", "Time",
               "====", "========", "====");
    else
        printf("Count\t\tfilename\n=======================\n");
    rpc_iter_init(&it, m->body, m->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg e;
        char path[4096];
        if (f.tag != RPC_T_TOPENTRY || rpc_msg_decode(f.val, f.len, &e, NULL) < 0 ||
            !rpc_has(&e, RPC_T_PATH) || !rpc_has(&e, RPC_T_CALLS) ||
            rpc_bytes_str(&e.path, path, sizeof(path)) < 0)
            continue;
        if (!perf) {
            printf("%" PRIu64 "\t\t%s\n", e.calls, path);
            continue;
        }
        uint64_t bytes = rpc_has(&e, RPC_T_SIZE) ? e.size : 0;
        uint64_t ns = rpc_has(&e, RPC_T_NSEC) ? e.nsec : 0;
        printf("%-10.2f %-60s %.4f\n", ns ? (double)bytes / 1e6 / ((double)ns / 1e9) : 0.0, path,
               (double)ns / 1e9);
    }
}

int cli_volume_top(const struct net_addr *mgmt, int argc, char **argv)
{
    if (argc < 4)
        return usage();
    const char *name = argv[2];
    unsigned flags = 0;
    int found = 0;
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        if (strcmp(argv[3], lists[i].word) == 0)
            flags = lists[i].flags, found = 1;
    if (!found)
        return usage();
    int perf = flags == RPC_TOP_READ_PERF || flags == RPC_TOP_WRITE_PERF;
    const char *brick = NULL;
    uint64_t list_cnt = 100, bs = 0, count = 0;
    for (int i = 4; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage();
        if (strcmp(argv[i], "brick") == 0)
            brick = argv[i + 1];
        else if (strcmp(argv[i], "list-cnt") == 0 && flags != RPC_TOP_CLEAR) {
            if (!(list_cnt = count_arg(argv[i + 1], 100))) {
                fprintf(stderr, "list-cnt must be 1-100\n");
                return 1;
            }
        } else if (strcmp(argv[i], "bs") == 0 && perf) {
            int64_t v;
            if (opt_parse_size(argv[i + 1], &v) < 0 || v <= 0 || v > (1 << 26)) {
                fprintf(stderr, "bs must be a size of 1 byte to 64MB\n");
                return 1;
            }
            bs = (uint64_t)v;
        } else if (strcmp(argv[i], "count") == 0 && perf) {
            if (!(count = count_arg(argv[i + 1], 1u << 20))) {
                fprintf(stderr, "count must be 1-1048576\n");
                return 1;
            }
        } else {
            return usage();
        }
    }
    if ((bs != 0) != (count != 0)) {
        fprintf(stderr, "bs and count go together\n");
        return 1;
    }
    struct cl_volinfo v;
    char err[512];
    int rc = cl_volume_fetch(mgmt, name, 10000, &v, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "volume top: failed: %s\n", err);
        return 1;
    }
    int status = 0, matched = 0;
    for (int i = 0; i < v.n_bricks; i++) {
        struct cl_brickinfo *b = &v.bricks[i];
        char full[4200];
        snprintf(full, sizeof(full), "%s:%s", b->addr.host, b->path);
        if (brick && strcmp(brick, full) != 0)
            continue;
        matched++;
        struct cl_layer *l = cli_brick_connect(&v, i);
        if (!l) {
            status = 1;
            break;
        }
        struct cl_op op;
        cl_op_init(&op, RPC_OP_TOP, NULL, NULL);
        RPC_SET(&op.args, flags, RPC_T_FLAGS, flags);
        RPC_SET(&op.args, size, RPC_T_SIZE, list_cnt);
        struct rpc_buf pb;
        rpc_buf_init(&pb);
        if (bs) {
            rpc_put_u64(&pb, RPC_T_SIZE, bs);
            rpc_put_u64(&pb, RPC_T_CALLS, count);
            rpc_set_bytes(&op.args, RPC_T_TOPPERF, &op.args.topperf, pb.data, pb.len);
        }
        rc = cl_op_run(l, &op);
        if (rc == 0 && flags != RPC_TOP_CLEAR) {
            printf("Brick: %s\n", full);
            print_reply(&op.reply->msg, flags);
            printf("\n");
        } else if (rc < 0) {
            /* A brick that is down is reported, the others still answer. */
            fprintf(stderr, "Brick %s: %s\n", full,
                    rc == -ENOTCONN || rc == -ETIMEDOUT ? "not connected"
                    : rc == -ENOSYS                     ? "does not count (an older brick)"
                                                        : strerror(-rc));
            status = 1;
        }
        cl_op_release(&op);
        rpc_buf_free(&pb);
        cl_layer_destroy_tree(l);
    }
    if (brick && !matched) {
        fprintf(stderr, "volume top: failed: %s is not a brick of volume %s\n", brick, name);
        status = 1;
    }
    if (flags == RPC_TOP_CLEAR && status == 0)
        printf("volume top: success\n");
    cl_volinfo_free(&v);
    return status;
}
