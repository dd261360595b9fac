/* File data heal: a full copy, or a range heal that asks both bricks for
 * per-block checksums (CHECKSUM, op 73) and copies only the blocks that
 * differ. Both go through the rate limiter (cluster.heal-rate-limit). The
 * file is taken a chunk at a time and nothing is locked, so writers never
 * wait for a heal; heal.c checks afterwards that the source did not change
 * meanwhile and heals again if it did. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "heal_int.h"

#define COPY_CHUNK (1u << 20)
#define SUM_BLOCK (128u << 10)
#define SUM_CHUNK (16u << 20) /* bytes per CHECKSUM request (the brick's cap) */
#define SUM_BLOCKS (SUM_CHUNK / SUM_BLOCK)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits until bytes more may be copied: a shared schedule, so the limit
 * holds for all heal threads together. */
void cl__heal_throttle(struct hctx *h, uint64_t bytes)
{
    if (!h->p.rate_bps)
        return;
    pthread_mutex_lock(&h->lock);
    uint64_t now = now_ns(), start = h->next_ns > now ? h->next_ns : now;
    h->next_ns = start + (uint64_t)((double)bytes * 1e9 / (double)h->p.rate_bps);
    pthread_mutex_unlock(&h->lock);
    if (start > now) {
        uint64_t d = start - now;
        struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

static int open_src(struct cl_layer *src, const char *path, uint64_t *fh)
{
    struct cl_op op;
    cl__heal_path_op(&op, RPC_OP_OPEN, path);
    RPC_SET(&op.args, flags, RPC_T_FLAGS, O_RDONLY);
    int rc = cl_op_run(src, &op);
    if (rc == 0)
        *fh = op.reply->msg.fh;
    cl_op_release(&op);
    return rc;
}

static void release(struct cl_layer *c, uint64_t fh)
{
    struct cl_op op;
    cl_op_init(&op, RPC_OP_RELEASE, NULL, NULL);
    RPC_SET(&op.args, fh, RPC_T_FH, fh);
    cl__heal_simple(c, &op);
}

/* Copies [off, off + len) from sfh to dfh. */
static int copy_range(struct hctx *h, struct cl_layer *src, struct cl_layer *dst, uint64_t sfh,
                      uint64_t dfh, uint64_t off, uint64_t len)
{
    int rc = 0;
    for (uint64_t end = off + len; off < end && rc == 0;) {
        uint64_t want = end - off < COPY_CHUNK ? end - off : COPY_CHUNK;
        cl__heal_throttle(h, want);
        struct cl_op op;
        cl_op_init(&op, RPC_OP_READ, NULL, NULL);
        RPC_SET(&op.args, fh, RPC_T_FH, sfh);
        RPC_SET(&op.args, offset, RPC_T_OFFSET, off);
        RPC_SET(&op.args, size, RPC_T_SIZE, want);
        if ((rc = cl_op_run(src, &op)) < 0) {
            cl_op_release(&op);
            break;
        }
        struct rpc_bytes d = op.reply->msg.data;
        if (d.len == 0) {
            cl_op_release(&op);
            break;
        }
        struct cl_op w;
        cl_op_init(&w, RPC_OP_WRITE, NULL, NULL);
        RPC_SET(&w.args, fh, RPC_T_FH, dfh);
        RPC_SET(&w.args, offset, RPC_T_OFFSET, off);
        rpc_set_bytes(&w.args, RPC_T_DATA, &w.args.data, d.p, d.len);
        rc = cl__heal_simple(dst, &w);
        if (rc == 0) {
            __atomic_add_fetch(&h->st->bytes_copied, d.len, __ATOMIC_RELAXED);
            if (h->p.progress)
                __atomic_add_fetch(&h->p.progress->bytes_copied, d.len, __ATOMIC_RELAXED);
        }
        off += d.len;
        cl_op_release(&op);
    }
    return rc;
}

/* CHECKSUM of [off, off + SUM_CHUNK) on fh; the reply stays in *op. */
static int sums(struct cl_layer *c, uint64_t fh, uint64_t off, struct cl_op *op)
{
    cl_op_init(op, RPC_OP_CHECKSUM, NULL, NULL);
    RPC_SET(&op->args, fh, RPC_T_FH, fh);
    RPC_SET(&op->args, offset, RPC_T_OFFSET, off);
    RPC_SET(&op->args, size, RPC_T_SIZE, SUM_CHUNK);
    RPC_SET(&op->args, flags, RPC_T_FLAGS, SUM_BLOCK);
    return cl_op_run(c, op);
}

static int range_heal(struct hctx *h, struct cl_layer *src, struct cl_layer *dst, uint64_t sfh,
                      uint64_t dfh, uint64_t size)
{
    uint64_t bits[(SUM_BLOCKS + 63) / 64];
    int rc = 0;
    for (uint64_t off = 0; off < size && rc == 0; off += SUM_CHUNK) {
        struct cl_op a, b;
        rc = sums(src, sfh, off, &a);
        int rb = rc == 0 ? sums(dst, dfh, off, &b) : -1;
        if (rc < 0 || rb < 0) {
            /* A brick without CHECKSUM: copy the rest whole. */
            cl_op_release(&a);
            if (rc == 0)
                cl_op_release(&b);
            rc = rc < 0 ? rc : rb;
            if (rc == -ENOSYS || rc == -EPROTO)
                return copy_range(h, src, dst, sfh, dfh, off, size - off);
            return rc;
        }
        struct rpc_bytes sa = a.reply->msg.data, sb = b.reply->msg.data;
        int k = cl_heal_diff_sums(sa.p, sa.len, sb.p, sb.len, bits, SUM_BLOCKS);
        cl_op_release(&a);
        cl_op_release(&b);
        if (k < 0)
            return k;
        uint64_t nblocks = sa.len / 8;
        for (uint64_t i = 0; i < nblocks && rc == 0;) {
            if (!(bits[i / 64] >> (i % 64) & 1)) {
                uint64_t at = off + i * SUM_BLOCK;
                uint64_t len = size - at < SUM_BLOCK ? size - at : SUM_BLOCK;
                __atomic_add_fetch(&h->st->bytes_same, len, __ATOMIC_RELAXED);
                i++;
                continue;
            }
            uint64_t j = i;
            while (j < nblocks && (bits[j / 64] >> (j % 64) & 1))
                j++;
            uint64_t at = off + i * SUM_BLOCK, end = off + j * SUM_BLOCK;
            if (end > size)
                end = size;
            rc = copy_range(h, src, dst, sfh, dfh, at, end - at);
            i = j;
        }
    }
    return rc;
}

int cl__heal_data(struct hctx *h, struct cl_layer *src, struct cl_layer *dst, const char *path,
                  uint64_t dfh, uint64_t size, int ranged)
{
    uint64_t sfh = 0;
    int rc = open_src(src, path, &sfh);
    if (rc < 0)
        return rc;
    if (ranged) {
        /* The sink's size first: blocks past the source's end go, missing
         * ones read as zeros and differ. */
        struct cl_op op;
        cl_op_init(&op, RPC_OP_SETATTR, NULL, NULL);
        RPC_SET(&op.args, fh, RPC_T_FH, dfh);
        RPC_SET(&op.args, valid, RPC_T_VALID, RPC_SET_SIZE);
        RPC_SET(&op.args, size, RPC_T_SIZE, size);
        rc = cl__heal_simple(dst, &op);
        if (rc == 0)
            rc = range_heal(h, src, dst, sfh, dfh, size);
    } else {
        rc = copy_range(h, src, dst, sfh, dfh, 0, size);
    }
    release(src, sfh);
    if (rc < 0)
        log_warn("heal: copying the data of %s failed: %s", path, strerror(-rc));
    return rc;
}
