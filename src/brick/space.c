/* storage.reserve: the space a brick keeps free (docs/replication.md, "A
 * full brick").
 *
 * Below the reserve the brick refuses what would take more space (new
 * names and file data) with ENOSPC, so that it can still write what it
 * needs to stay correct: heal marks and index entries of the changes it
 * does take, its own metadata, removals. Heal's own writes are requests
 * like any other, so a heal never fills a brick past the reserve either.
 *
 * The free space is read with fstatfs at most once a second while it is
 * far above the reserve; the bytes granted since the last reading are
 * counted against it, and near the reserve every request reads it again
 * (one system call, only then). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/options.h"
#include "../lib/statedump.h"
#include "brick.h"

#define RECHECK_MS 1000
/* Near the reserve (closer than this beyond it) the space is read again for
 * every request that takes some. */
#define NEAR_BYTES (64ull << 20)
/* Free space beyond the reserve that ends a refusing spell (for the log). */
#define RELIEF_BYTES (16ull << 20)

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void brick_space_init(struct brick *b)
{
    struct brick_space *s = &b->space;
    pthread_mutex_init(&s->lock, NULL);
    s->percent = 1; /* the option's default until cairnd sends it */
    s->bytes = 0;
}

void brick_space_fini(struct brick *b)
{
    pthread_mutex_destroy(&b->space.lock);
}

int brick_space_set_reserve(struct brick *b, const char *value)
{
    int pct;
    int64_t bytes;
    if (opt_parse_space(value, &pct, &bytes) < 0)
        return -EINVAL;
    struct brick_space *s = &b->space;
    pthread_mutex_lock(&s->lock);
    s->percent = pct;
    s->bytes = bytes;
    s->checked_ms = 0; /* read the space again at the next request */
    pthread_mutex_unlock(&s->lock);
    log_debug("storage.reserve = %s", value);
    return 0;
}

/* Bytes of new data an operation would store; 0 for one that only makes a
 * name (it is refused below the reserve all the same). -1: it takes no
 * space, never refused. */
static int64_t takes(const struct brick_req *r)
{
    const struct rpc_msg *in = r->in;
    switch (r->opcode) {
    case RPC_OP_WRITE:
        return rpc_has(in, RPC_T_DATA) ? (int64_t)in->data.len : 0;
    case RPC_OP_MAKE_FILE:
        return rpc_has(in, RPC_T_DATA) ? (int64_t)in->data.len : 0;
    case RPC_OP_FALLOCATE:
        /* punching or collapsing gives space back; zeroing and plain
         * allocation take it */
        if (rpc_has(in, RPC_T_FLAGS) &&
            (in->flags & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE)))
            return -1;
        return in->size > INT64_MAX ? INT64_MAX : (int64_t)in->size;
    case RPC_OP_CREATE:
    case RPC_OP_MKNOD:
    case RPC_OP_MKDIR:
    case RPC_OP_SYMLINK:
    case RPC_OP_LINK:
        return 0;
    default:
        return -1;
    }
}

int brick_space_check(struct brick_req *r)
{
    int64_t need = takes(r);
    if (need < 0)
        return 0;
    struct brick_space *s = &r->b->space;
    pthread_mutex_lock(&s->lock);
    if (s->percent == 0 || (s->percent < 0 && s->bytes == 0)) {
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    uint64_t now = now_ms();
    uint64_t est = s->avail > s->taken ? s->avail - s->taken : 0;
    if (!s->checked_ms || now - s->checked_ms >= RECHECK_MS ||
        est < s->reserve + (uint64_t)need + NEAR_BYTES) {
        struct statfs st;
        int rc = r->b->vfs->fstatfs(r->b->root_fd, &st);
        if (rc == 0) {
            s->avail = (uint64_t)st.f_bavail * (uint64_t)st.f_bsize;
            s->total = (uint64_t)st.f_blocks * (uint64_t)st.f_bsize;
            s->reserve = opt_space_bytes(s->percent, s->bytes, s->total);
            s->taken = 0;
            s->checked_ms = now;
            est = s->avail;
        }
    }
    int refuse = est < s->reserve + (uint64_t)need;
    uint64_t reserve = s->reserve, quiet = 0;
    int say = 0;
    if (refuse) {
        /* One line when refusing starts, then at most one a minute. */
        s->refused++;
        if (!s->refusing || now - s->logged_ms >= 60000) {
            say = 1;
            quiet = s->refused - 1;
            s->refused = 0;
            s->logged_ms = now;
        }
        s->refusing = 1;
    } else {
        s->taken += (uint64_t)need;
        /* Done refusing once there is room to spare: small requests keep
         * passing while large ones are refused. */
        if (s->refusing && est >= s->reserve + RELIEF_BYTES) {
            s->refusing = 0;
            say = 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (refuse) {
        snprintf(r->text, sizeof(r->text),
                 "brick %s: %" PRIu64 " bytes free, storage.reserve keeps %" PRIu64, r->b->path,
                 est, reserve);
        if (say)
            log_warn("%s: %" PRIu64 " bytes free, storage.reserve keeps %" PRIu64
                     ": refusing new files and data with ENOSPC (%" PRIu64
                     " more refused since the last line)",
                     r->b->path, est, reserve, quiet);
        return -ENOSPC;
    }
    if (say)
        log_info("%s: %" PRIu64 " bytes free, above storage.reserve again", r->b->path, est);
    return 0;
}

void brick_space_dump(struct brick *b, FILE *f)
{
    struct brick_space *s = &b->space;
    if (sd_section(f, "brick.space", &s->lock) < 0)
        return;
    if (s->percent >= 0)
        fprintf(f, "reserve=%d%%\n", s->percent);
    else
        fprintf(f, "reserve=%lld bytes\n", (long long)s->bytes);
    fprintf(f, "total-bytes=%llu\navailable-bytes=%llu\nreserve-bytes=%llu\n",
            (unsigned long long)s->total, (unsigned long long)s->avail,
            (unsigned long long)s->reserve);
    fprintf(f, "granted-since-reading=%llu\nrefusing=%d\nrefused=%llu\n",
            (unsigned long long)s->taken, s->refusing, (unsigned long long)s->refused);
    pthread_mutex_unlock(&s->lock);
}
