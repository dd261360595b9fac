/* Disperse heal: a stale or missing fragment rebuilt from k good ones
 * (docs/disperse.md, "Heal"). heal.c does everything else of a disperse
 * set's heal as it does for a replica set (names, directories, owner, mode,
 * times, xattrs, marks): only a file's data differs, since every brick
 * holds its own fragment and none is a copy of another's.
 *
 * The good fragments are those of the children holding the file (same id)
 * that no holder accuses, the sink left out; the first k (data fragments
 * first: they are plain copies) are read a batch of stripes at a time, the
 * sink's fragment computed (cl_ec_rebuild) and written over the sink's
 * file where it is not zero; zeros become holes (punched where the old file
 * had bytes, as past the new fragment's end), and the size is then set to
 * the file's (every fragment file has the file's size). Nothing is cut
 * first: a second heal of the same fragment at the same time (the CLI's
 * beside a daemon's) writes the same bytes again, never a moment of zeros
 * in a fragment the first heal already cleared. As for a copy, nothing is
 * locked: heal.c checks afterwards that the file did not change meanwhile
 * and heals again if it did. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "disperse.h"
#include "ec_codec.h"
#include "heal_int.h"

/* Stripes per batch: 256 KiB of every fragment read at once. */
#define BATCH_STRIPES 512u
/* Zeros are left as holes at this granularity (a file system block). */
#define HOLE_BLOCK 4096u

static void release(struct cl_layer *c, uint64_t fh)
{
    struct cl_op op;
    cl_op_init(&op, RPC_OP_RELEASE, NULL, NULL);
    RPC_SET(&op.args, fh, RPC_T_FH, fh);
    cl__heal_simple(c, &op);
}

/* len bytes of fh at off into buf; what the fragment does not hold (past
 * its end) reads as zeros. */
static int read_frag(struct cl_layer *c, uint64_t fh, uint64_t off, uint8_t *buf, size_t len)
{
    size_t got = 0;
    int rc = 0;
    while (got < len) {
        struct cl_op op;
        cl_op_init(&op, RPC_OP_READ, NULL, NULL);
        RPC_SET(&op.args, fh, RPC_T_FH, fh);
        RPC_SET(&op.args, offset, RPC_T_OFFSET, off + got);
        RPC_SET(&op.args, size, RPC_T_SIZE, len - got);
        if ((rc = cl_op_run(c, &op)) < 0) {
            cl_op_release(&op);
            return rc;
        }
        struct rpc_bytes d = op.reply->msg.data;
        size_t n = d.len < len - got ? d.len : len - got;
        memcpy(buf + got, d.p, n);
        got += n;
        cl_op_release(&op);
        if (n == 0)
            break;
    }
    memset(buf + got, 0, len - got);
    return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* Makes [off, off + len) of dfh zeros: a hole punched, or zeros written
 * where the brick's file system cannot punch. */
static int zero_range(struct hctx *h, struct cl_layer *dst, uint64_t dfh, uint64_t off,
                      uint64_t len)
{
    struct cl_op op;
    cl_op_init(&op, RPC_OP_FALLOCATE, NULL, NULL);
    RPC_SET(&op.args, fh, RPC_T_FH, dfh);
    RPC_SET(&op.args, flags, RPC_T_FLAGS, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
    RPC_SET(&op.args, offset, RPC_T_OFFSET, off);
    RPC_SET(&op.args, size, RPC_T_SIZE, len);
    int rc = cl__heal_simple(dst, &op);
    if (rc != -EOPNOTSUPP)
        return rc;
    static const uint8_t zeros[HOLE_BLOCK];
    for (rc = 0; len && rc == 0;) {
        uint32_t n = len < HOLE_BLOCK ? (uint32_t)len : HOLE_BLOCK;
        struct cl_op w;
        cl_op_init(&w, RPC_OP_WRITE, NULL, NULL);
        RPC_SET(&w.args, fh, RPC_T_FH, dfh);
        RPC_SET(&w.args, offset, RPC_T_OFFSET, off);
        rpc_set_bytes(&w.args, RPC_T_DATA, &w.args.data, zeros, n);
        rc = cl__heal_simple(dst, &w);
        off += n, len -= n;
    }
    return rc;
}

/* Puts buf (len bytes for offset off) into dfh, whose file held had bytes
 * before: blocks of data written, blocks of zeros left a hole (punched
 * where the old file had bytes). Nothing is cut first, so a second heal
 * of the same fragment beside this one only writes the same bytes again. */
static int put(struct hctx *h, struct cl_layer *dst, uint64_t dfh, uint64_t off, const uint8_t *buf,
               size_t len, uint64_t had)
{
    for (size_t at = 0; at < len;) {
        int zero = all_zero(buf + at, len - at < HOLE_BLOCK ? len - at : HOLE_BLOCK);
        size_t end = at; /* a run of blocks all zero, or all holding data */
        while (end < len) {
            size_t nb = len - end < HOLE_BLOCK ? len - end : HOLE_BLOCK;
            if (all_zero(buf + end, nb) != zero)
                break;
            end += nb;
        }
        int rc = 0;
        if (zero) {
            if (off + at < had)
                rc = zero_range(h, dst, dfh, off + at,
                                (had < off + end ? had : off + end) - (off + at));
        } else {
            cl__heal_throttle(h, end - at);
            struct cl_op w;
            cl_op_init(&w, RPC_OP_WRITE, NULL, NULL);
            RPC_SET(&w.args, fh, RPC_T_FH, dfh);
            RPC_SET(&w.args, offset, RPC_T_OFFSET, off + at);
            rpc_set_bytes(&w.args, RPC_T_DATA, &w.args.data, buf + at, (uint32_t)(end - at));
            if ((rc = cl__heal_simple(dst, &w)) == 0) {
                __atomic_add_fetch(&h->st->bytes_copied, end - at, __ATOMIC_RELAXED);
                if (h->p.progress)
                    __atomic_add_fetch(&h->p.progress->bytes_copied, end - at, __ATOMIC_RELAXED);
            }
        }
        if (rc < 0)
            return rc;
        at = end;
    }
    return 0;
}

/* Rebuilds fragment dst from the children in use (k of them, open as
 * sfh[]) over [0, used) of the fragment; dst's file held had bytes. */
static int rebuild(struct hctx *h, int dst, uint32_t use, const uint64_t *sfh, uint64_t dfh,
                   uint64_t used, uint64_t had)
{
    const size_t chunk = CL_DISP_CHUNK, blen = (size_t)BATCH_STRIPES * chunk;
    uint8_t *buf = malloc(blen * (size_t)(h->n + 1)), *frag[CL_EC_MAX] = {0};
    if (!buf)
        return -ENOMEM;
    for (int j = 0; j < h->n; j++)
        frag[j] = buf + (size_t)j * blen;
    int rc = 0;
    for (uint64_t off = 0; off < used && rc == 0; off += blen) {
        uint64_t left = used - off;
        size_t stripes = left >= blen ? BATCH_STRIPES : (size_t)((left + chunk - 1) / chunk);
        size_t len = stripes * chunk;
        for (int j = 0; j < h->n && rc == 0; j++)
            if (use >> j & 1)
                rc = read_frag(h->ch[j], sfh[j], off, frag[j], len);
        if (rc == 0)
            rc = cl_ec_rebuild(h->ec, chunk, stripes, use, 1u << dst, frag);
        if (rc == 0)
            rc = put(h, h->ch[dst], dfh, off, frag[dst], left < len ? left : len, had);
    }
    free(buf);
    return rc;
}

int cl__heal_ec_data(struct hctx *h, int dst, const char *path, const gfid_t *g, uint64_t dfh,
                     uint64_t size, uint64_t had)
{
    int k = cl_ec_data(h->ec);
    struct cl__heal_view v;
    int rc = cl__heal_view(h, path, g, &v);
    if (rc < 0)
        return rc;
    uint32_t good = v.sources & ~(1u << dst), use = 0;
    for (int j = 0; j < h->n && __builtin_popcount(use) < k; j++)
        if (good >> j & 1)
            use |= 1u << j;
    if (__builtin_popcount(use) < k) {
        log_info("heal: %s has %d good fragments up (0x%x), %d needed to rebuild fragment %d: "
                 "left for later",
                 path, __builtin_popcount(good), good, k, dst);
        return -EAGAIN;
    }
    uint64_t sfh[CL_EC_MAX] = {0};
    uint32_t opened = 0;
    for (int j = 0; j < h->n && rc == 0; j++) {
        if (!(use >> j & 1))
            continue;
        struct cl_op op;
        cl__heal_path_op(&op, RPC_OP_OPEN, path);
        RPC_SET(&op.args, flags, RPC_T_FLAGS, O_RDONLY);
        if ((rc = cl_op_run(h->ch[j], &op)) == 0) {
            sfh[j] = op.reply->msg.fh;
            opened |= 1u << j;
        }
        cl_op_release(&op);
    }
    uint64_t used = cl_disp_frag_used(k, CL_DISP_CHUNK, dst, size);
    if (rc == 0)
        rc = rebuild(h, dst, use, sfh, dfh, used, had);
    if (rc == 0 && had > used) /* the old fragment's bytes past the new ones */
        rc = zero_range(h, h->ch[dst], dfh, used, had - used);
    for (int j = 0; j < h->n; j++)
        if (opened >> j & 1)
            release(h->ch[j], sfh[j]);
    if (rc == 0) {
        /* the fragment file's size is the file's: zeros (a hole) past the
         * fragment's bytes */
        struct cl_op op;
        cl_op_init(&op, RPC_OP_SETATTR, NULL, NULL);
        RPC_SET(&op.args, fh, RPC_T_FH, dfh);
        RPC_SET(&op.args, valid, RPC_T_VALID, RPC_SET_SIZE);
        RPC_SET(&op.args, size, RPC_T_SIZE, size);
        rc = cl__heal_simple(h->ch[dst], &op);
    }
    if (rc < 0)
        log_warn("heal: rebuilding fragment %d of %s failed: %s", dst, path, strerror(-rc));
    else
        log_debug("heal: rebuilt fragment %d of %s (%llu bytes) from 0x%x", dst, path,
                  (unsigned long long)size, use);
    return rc;
}
