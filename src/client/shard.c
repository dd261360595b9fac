/* The shard layer (shard.h, docs/shard.md).
 *
 * Two paths, as distribute's. Operations that concern no sharded file are
 * forwarded inline, the ones whose reply may name one (a lookup, an
 * attribute call, an open, a listing) through a small wrapper that looks
 * at the reply: an object with the sticky bit (the mark of a file that may
 * be sharded) goes to a worker, which reads its CL_SHARD_XATTR and fixes
 * the reply. Everything on a sharded file's handle, creations while
 * sharding is on, and removals and truncations that may concern a sharded
 * file run on the layer's worker threads as straight-line code that waits
 * for the child (which never calls back into this layer).
 *
 * A sharded file's reads and writes run side by side (struct sfile's rw
 * lock, shared): each takes the handles of the blocks it touches from the
 * file's table of open shards, counted, and no lock is held across a round
 * trip but rw (and open_mu, while a shard missing from the table is opened
 * or made: one at a time per file). What changes the file's shape (a truncate, a fallocate, an
 * append, an fsync counting the blocks anew, a read past the recorded
 * size, which reads the record again) takes rw exclusive. The record of
 * the size and blocks is changed under f->mu and written in order by
 * meta_sync, so the last record written is never older than a change it
 * follows. Two mounts extending the same file at the same moment may
 * record the smaller size (docs/shard.md). */
#include "shard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "../lib/log.h"
#include "../rpc/opinfo.h"

/* Enough for the FUSE bridge's 16 request threads to all wait on bricks
 * at once (random I/O on one VM image). */
#define N_WORKERS 16
#define FH_BUCKETS 256
/* Shard handles a file keeps open; past that the ones not in use are
 * closed. */
#define OPEN_SHARDS 64
#define SHARD_MODE 0600

/* ---- pure arithmetic ---- */

void cl_shard_meta_encode(const struct cl_shard_meta *m, uint8_t out[CL_SHARD_XATTR_LEN])
{
    rpc_le32(out, CL_SHARD_VERSION);
    rpc_le32(out + 4, 0);
    rpc_le64(out + 8, m->block_size);
    rpc_le64(out + 16, m->size);
    rpc_le64(out + 24, m->shard_blocks);
}

int cl_shard_meta_decode(const uint8_t *p, size_t len, struct cl_shard_meta *m)
{
    if (len != CL_SHARD_XATTR_LEN || rpc_get32(p) != CL_SHARD_VERSION)
        return -EPROTO;
    m->block_size = rpc_get64(p + 8);
    m->size = rpc_get64(p + 16);
    m->shard_blocks = rpc_get64(p + 24);
    if (m->block_size < CL_SHARD_BLOCK_MIN || m->size > INT64_MAX)
        return -EPROTO;
    return 0;
}

uint64_t cl_shard_piece(uint64_t off, uint64_t len, uint64_t bs, uint64_t *block, uint64_t *inner)
{
    *block = off / bs;
    *inner = off % bs;
    uint64_t room = bs - *inner;
    return len < room ? len : room;
}

uint64_t cl_shard_blocks_of(uint64_t size, uint64_t bs)
{
    return size / bs + (size % bs != 0);
}

void cl_shard_path(const gfid_t *g, uint64_t n, char *out, size_t len)
{
    char s[GFID_STRLEN];
    gfid_format(g, s);
    snprintf(out, len, "%s/%s.%llu", CL_SHARD_DIR, s, (unsigned long long)n);
}

int cl_shard_hidden(const char *path, size_t len)
{
    size_t d = strlen(CL_SHARD_DIR);
    return len >= d && memcmp(path, CL_SHARD_DIR, d) == 0 && (len == d || path[d] == '/');
}

/* ---- state ---- */

/* An open shard. refs: the file's table holds one, each operation using
 * it one more (f->mu); the last put closes it (synced first when dirty). */
struct sshard {
    uint64_t n, fh, blocks; /* block number, the child's handle, its 512-byte blocks */
    int dirty;              /* written since its last fsync */
    int refs;
};

/* A sharded file open through this layer, shared by its handles.
 * rw: shared for reads and writes of blocks, exclusive for the rest (the
 * comment at the top). mu guards m, open, touched, mtime_ms, gen and the
 * shards' blocks and dirty; it is never held across a round trip.
 * meta_mu keeps the record's writes in order (meta_sync). */
struct sfile {
    gfid_t gfid;
    struct cl_shard_meta m;
    int refs;
    int gone;          /* its last name was removed while open: shards go at the last close */
    int touched;       /* a shard changed since settle() */
    uint64_t mtime_ms; /* when this mount last set the base file's mtime (monotonic) */
    uint64_t gen;      /* changes of m by shared writers ... */
    uint64_t put_gen;  /* ... and the last of them recorded on the bricks */
    pthread_rwlock_t rw;
    pthread_mutex_t mu, meta_mu;
    pthread_mutex_t open_mu; /* held across the open (or creation) of a shard */
    struct sshard *open[OPEN_SHARDS];
    int n_open;
    struct sfile *next;
};

/* A handle of the child this layer follows: a directory's (to name the
 * entries of its listing) or a sharded file's. */
struct sfh {
    uint64_t fh;
    int dir, append;
    char *path;
    struct sfile *f;
    struct sfh *next;
};

struct shard;

struct job {
    struct cl_op *op;
    void (*run)(struct shard *s, struct job *j);
    struct sfh *h;
    struct cl_op *sub; /* the reply to fix, for the after-reply jobs */
    struct job *next;
    char path[];
};

struct shard {
    struct cl_layer layer;
    struct cl_layer *child;
    char *volume;
    atomic_int enabled;
    atomic_ullong block_size;
    atomic_int seen; /* a sharded file went by: removals and truncations look first */
    pthread_mutex_t lock;
    struct sfh *fhs[FH_BUCKETS];
    struct sfile *files;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct job *qhead, *qtail;
    int stopping;
    pthread_t threads[N_WORKERS];
    int n_threads;
};

/* A brick numbers its file and directory handles apart: the same number
 * may name one of each. */
static struct sfh *fh_find(struct shard *s, uint64_t fh, int dir)
{
    pthread_mutex_lock(&s->lock);
    struct sfh *h = s->fhs[fh % FH_BUCKETS];
    while (h && (h->fh != fh || h->dir != dir))
        h = h->next;
    pthread_mutex_unlock(&s->lock);
    return h;
}

static struct sfh *fh_add(struct shard *s, uint64_t fh, int dir, const char *path)
{
    struct sfh *h = calloc(1, sizeof(*h));
    if (!h || !(h->path = strdup(path))) {
        free(h);
        return NULL;
    }
    h->fh = fh;
    h->dir = dir;
    pthread_mutex_lock(&s->lock);
    h->next = s->fhs[fh % FH_BUCKETS];
    s->fhs[fh % FH_BUCKETS] = h;
    pthread_mutex_unlock(&s->lock);
    return h;
}

/* Unlinks h from the table (the caller frees it). */
static void fh_remove(struct shard *s, struct sfh *h)
{
    pthread_mutex_lock(&s->lock);
    for (struct sfh **pp = &s->fhs[h->fh % FH_BUCKETS]; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    pthread_mutex_unlock(&s->lock);
}

/* The file g, with one more reference; m is taken when it is new. */
static struct sfile *file_get(struct shard *s, const gfid_t *g, const struct cl_shard_meta *m)
{
    pthread_mutex_lock(&s->lock);
    struct sfile *f = s->files;
    while (f && !gfid_equal(&f->gfid, g))
        f = f->next;
    if (!f && (f = calloc(1, sizeof(*f)))) {
        f->gfid = *g;
        f->m = *m;
        pthread_rwlockattr_t ra;
        pthread_rwlockattr_init(&ra);
        /* an fsync or a truncate must not wait for a pause in random I/O */
        pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&f->rw, &ra);
        pthread_rwlockattr_destroy(&ra);
        pthread_mutex_init(&f->mu, NULL);
        pthread_mutex_init(&f->meta_mu, NULL);
        pthread_mutex_init(&f->open_mu, NULL);
        f->next = s->files;
        s->files = f;
    }
    if (f)
        f->refs++;
    pthread_mutex_unlock(&s->lock);
    return f;
}

static void file_free(struct sfile *f)
{
    pthread_rwlock_destroy(&f->rw);
    pthread_mutex_destroy(&f->mu);
    pthread_mutex_destroy(&f->meta_mu);
    pthread_mutex_destroy(&f->open_mu);
    free(f);
}

/* Drops a reference; 1 when it was the last (f is then unlinked from the
 * list, and the caller closes its shards and frees it). */
static int file_put(struct shard *s, struct sfile *f)
{
    pthread_mutex_lock(&s->lock);
    int last = --f->refs == 0;
    if (last)
        for (struct sfile **pp = &s->files; *pp; pp = &(*pp)->next)
            if (*pp == f) {
                *pp = f->next;
                break;
            }
    pthread_mutex_unlock(&s->lock);
    return last;
}

/* ---- synchronous helpers (workers only) ---- */

static int run(struct shard *s, struct cl_op *op)
{
    return cl_op_run(s->child, op);
}

static void path_op(struct cl_op *op, uint16_t code, const char *path)
{
    cl_op_init(op, code, NULL, NULL);
    rpc_set_str(&op->args, RPC_T_PATH, &op->args.path, path);
}

static int simple(struct shard *s, struct cl_op *op)
{
    int rc = run(s, op);
    cl_op_release(op);
    return rc;
}

/* A regular file with the sticky bit: maybe sharded. */
static int maybe_sharded(const struct rpc_attr *a)
{
    return S_ISREG(a->mode) && (a->mode & S_ISVTX);
}

static int meta_get(struct shard *s, const char *path, struct cl_shard_meta *m)
{
    struct cl_op op;
    path_op(&op, RPC_OP_GETXATTR, path);
    rpc_set_str(&op.args, RPC_T_NAME, &op.args.name, CL_SHARD_XATTR);
    RPC_SET(&op.args, size, RPC_T_SIZE, CL_SHARD_XATTR_LEN);
    int rc = run(s, &op);
    if (rc == 0)
        rc = rpc_has(&op.reply->msg, RPC_T_DATA)
                 ? cl_shard_meta_decode(op.reply->msg.data.p, op.reply->msg.data.len, m)
                 : -EPROTO;
    if (rc == -ERANGE || rc == -EPROTO) {
        log_warn("volume %s: %s has a malformed %s: read as a file without shards", s->volume, path,
                 CL_SHARD_XATTR);
        rc = -ENODATA;
    }
    cl_op_release(&op);
    if (rc == 0)
        atomic_store(&s->seen, 1);
    return rc;
}

static int meta_put(struct shard *s, const char *path, const struct cl_shard_meta *m, int create)
{
    uint8_t v[CL_SHARD_XATTR_LEN];
    cl_shard_meta_encode(m, v);
    struct cl_op op;
    path_op(&op, RPC_OP_SETXATTR, path);
    rpc_set_str(&op.args, RPC_T_NAME, &op.args.name, CL_SHARD_XATTR);
    rpc_set_bytes(&op.args, RPC_T_DATA, &op.args.data, v, sizeof(v));
    if (create)
        RPC_SET(&op.args, flags, RPC_T_FLAGS, XATTR_CREATE);
    int rc = simple(s, &op);
    if (rc < 0 && !(create && rc == -EEXIST))
        log_warn("volume %s: cannot record the size of sharded file %s: %s", s->volume, path,
                 strerror(-rc));
    return rc;
}

/* What a user sees of a sharded file: the whole size, every block, no
 * sticky bit. */
static void attr_whole(struct rpc_attr *a, const struct cl_shard_meta *m)
{
    a->size = m->size;
    a->blocks += m->shard_blocks;
    a->mode &= ~(uint64_t)S_ISVTX;
}

/* A reply about a sharded file: its attributes whole, and no lease (a
 * lease on the base file does not see changes of its shards). */
static void reply_whole(struct rpc_frame *r, const struct cl_shard_meta *m)
{
    if (!r)
        return;
    if (rpc_has(&r->msg, RPC_T_ATTR))
        attr_whole(&r->msg.attr, m);
    r->msg.present &= ~(1ull << RPC_T_LEASE);
}

static int make_frame(struct rpc_buf *b, uint16_t code, struct rpc_frame **out)
{
    struct rpc_frame *fr = NULL;
    if (b->err || !(fr = calloc(1, sizeof(*fr)))) {
        rpc_buf_free(b);
        return -ENOMEM;
    }
    fr->body = b->data;
    fr->hdr.body_len = (uint32_t)b->len;
    fr->hdr.kind = 2;
    fr->hdr.opcode = code;
    if (rpc_msg_decode(fr->body, b->len, &fr->msg, NULL) < 0) {
        rpc_frame_free(fr);
        return -EPROTO;
    }
    *out = fr;
    return 0;
}

static void complete(struct cl_op *op, int status, struct rpc_frame *r)
{
    cl_op_complete(op, status, r);
}

/* Makes /.shard (every subvolume's copy, through distribute). */
static void shard_dir(struct shard *s)
{
    struct cl_op op;
    path_op(&op, RPC_OP_MKDIR, CL_SHARD_DIR);
    gfid_generate(&op.args.gfid);
    op.args.present |= 1ull << RPC_T_GFID;
    RPC_SET(&op.args, mode, RPC_T_MODE, 0700);
    RPC_SET(&op.args, umask, RPC_T_UMASK, 0);
    int rc = simple(s, &op);
    if (rc < 0 && rc != -EEXIST)
        log_warn("volume %s: cannot make %s: %s", s->volume, CL_SHARD_DIR, strerror(-rc));
}

/* Closes an open shard no one uses any more: synced first when written
 * since its last fsync (a later fsync of the file would miss it). */
static void sshard_close(struct shard *s, struct sshard *sh, int sync)
{
    struct cl_op r;
    if (sync && sh->dirty) {
        cl_op_init(&r, RPC_OP_FSYNC, NULL, NULL);
        RPC_SET(&r.args, fh, RPC_T_FH, sh->fh);
        simple(s, &r);
    }
    cl_op_init(&r, RPC_OP_RELEASE, NULL, NULL);
    RPC_SET(&r.args, fh, RPC_T_FH, sh->fh);
    simple(s, &r);
    free(sh);
}

static void shard_put(struct shard *s, struct sfile *f, struct sshard *sh)
{
    if (!sh)
        return;
    pthread_mutex_lock(&f->mu);
    int last = --sh->refs == 0;
    pthread_mutex_unlock(&f->mu);
    if (last)
        sshard_close(s, sh, 1);
}

static struct sshard *table_find(struct sfile *f, uint64_t n)
{
    for (int i = 0; i < f->n_open; i++)
        if (f->open[i]->n == n)
            return f->open[i];
    return NULL;
}

/* Opens (or makes, with create) the shard file of block n of f: its
 * handle and blocks, -ENOENT when it has none and create is 0. */
static int shard_open_child(struct shard *s, struct sfile *f, uint64_t n, int create, uint64_t *fh,
                            uint64_t *blocks)
{
    char path[128];
    cl_shard_path(&f->gfid, n, path, sizeof(path));
    struct cl_op op;
    int rc = -ENOENT;
    for (int tries = 0; tries < 3 && (rc == -ENOENT || rc == -EEXIST); tries++) {
        path_op(&op, RPC_OP_OPEN, path);
        RPC_SET(&op.args, flags, RPC_T_FLAGS, O_RDWR);
        rc = run(s, &op);
        if (rc == -ENOENT && create) {
            /* two writers may make it at once: the loser opens it */
            cl_op_release(&op);
            path_op(&op, RPC_OP_CREATE, path);
            gfid_generate(&op.args.gfid);
            op.args.present |= 1ull << RPC_T_GFID;
            RPC_SET(&op.args, mode, RPC_T_MODE, SHARD_MODE);
            RPC_SET(&op.args, umask, RPC_T_UMASK, 0);
            RPC_SET(&op.args, flags, RPC_T_FLAGS, O_RDWR | O_CREAT | O_EXCL);
            rc = run(s, &op);
            if (rc == -ENOENT) { /* no /.shard yet */
                cl_op_release(&op);
                shard_dir(s);
                continue;
            }
        }
        if (rc == 0 && !rpc_has(&op.reply->msg, RPC_T_FH))
            rc = -EPROTO;
        if (rc < 0) {
            cl_op_release(&op);
            if (!create)
                return rc;
        }
    }
    if (rc < 0)
        return rc;
    *fh = op.reply->msg.fh;
    *blocks = rpc_has(&op.reply->msg, RPC_T_ATTR) ? op.reply->msg.attr.blocks : 0;
    cl_op_release(&op);
    return 0;
}

/* The open shard of block n >= 1 of f, with a reference for the caller
 * (shard_put): 0 and *sh, -ENOENT when it has no shard and create is 0,
 * or -errno. A full table first loses the shards no one uses. */
static int shard_get(struct shard *s, struct sfile *f, uint64_t n, int create, struct sshard **sh)
{
    pthread_mutex_lock(&f->mu);
    struct sshard *x = table_find(f, n);
    if (x)
        x->refs++;
    pthread_mutex_unlock(&f->mu);
    if (x) {
        *sh = x;
        return 0;
    }
    /* One open at a time per file: two CREATEs of one shard at once (two
     * gfids) can each win on some bricks of a set, a split no heal undoes. */
    pthread_mutex_lock(&f->open_mu);
    pthread_mutex_lock(&f->mu);
    if ((x = table_find(f, n)) != NULL)
        x->refs++;
    pthread_mutex_unlock(&f->mu);
    if (x) {
        pthread_mutex_unlock(&f->open_mu);
        *sh = x;
        return 0;
    }
    uint64_t fh, blocks;
    int rc = shard_open_child(s, f, n, create, &fh, &blocks);
    if (rc < 0) {
        pthread_mutex_unlock(&f->open_mu);
        return rc;
    }
    struct sshard *fresh = calloc(1, sizeof(*fresh)), *evict[OPEN_SHARDS];
    int n_evict = 0, used = 0;
    pthread_mutex_lock(&f->mu);
    if ((x = table_find(f, n)) != NULL) { /* opened meanwhile by another user */
        x->refs++;
    } else if (fresh) {
        fresh->n = n;
        fresh->fh = fh;
        fresh->blocks = blocks;
        fresh->refs = 1;
        if (f->n_open == OPEN_SHARDS) {
            /* full: every shard no one uses goes */
            for (int i = 0; i < f->n_open;) {
                if (f->open[i]->refs == 1) {
                    evict[n_evict++] = f->open[i];
                    f->open[i] = f->open[--f->n_open];
                } else {
                    i++;
                }
            }
        }
        if (f->n_open < OPEN_SHARDS) { /* else in use by the caller alone */
            f->open[f->n_open++] = fresh;
            fresh->refs++;
        }
        x = fresh;
        used = 1;
    }
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_unlock(&f->open_mu);
    for (int i = 0; i < n_evict; i++)
        sshard_close(s, evict[i], 1);
    if (!used) { /* ours was not needed (or there is no memory for it) */
        struct cl_op r;
        cl_op_init(&r, RPC_OP_RELEASE, NULL, NULL);
        RPC_SET(&r.args, fh, RPC_T_FH, fh);
        simple(s, &r);
        free(fresh);
    }
    if (!x)
        return -ENOMEM;
    *sh = x;
    return 0;
}

/* Records what a shard takes now. f->mu held, or rw exclusive. */
static void account(struct sfile *f, struct sshard *sh, uint64_t blocks)
{
    int64_t total = (int64_t)f->m.shard_blocks + (int64_t)blocks - (int64_t)sh->blocks;
    f->m.shard_blocks = total < 0 ? 0 : (uint64_t)total;
    sh->blocks = blocks;
}

/* Closes every open shard of f, unused then (rw exclusive, or f's last
 * reference). */
static void shards_close(struct shard *s, struct sfile *f)
{
    for (int i = 0; i < f->n_open; i++)
        sshard_close(s, f->open[i], 0);
    f->n_open = 0;
}

/* Forgets block n's open shard (rw exclusive: no one uses it). */
static void shard_forget(struct shard *s, struct sfile *f, uint64_t n)
{
    for (int i = 0; f && i < f->n_open; i++)
        if (f->open[i]->n == n) {
            struct sshard *sh = f->open[i];
            f->open[i] = f->open[--f->n_open];
            sshard_close(s, sh, 0);
            return;
        }
}

/* Removes shard n of g; returns the blocks it took (0 if it had none). */
static uint64_t shard_remove(struct shard *s, struct sfile *f, const gfid_t *g, uint64_t n)
{
    char path[128];
    cl_shard_path(g, n, path, sizeof(path));
    shard_forget(s, f, n);
    struct cl_op op;
    path_op(&op, RPC_OP_LOOKUP, path);
    uint64_t blocks = 0;
    int rc = run(s, &op);
    if (rc == 0 && rpc_has(&op.reply->msg, RPC_T_ATTR))
        blocks = op.reply->msg.attr.blocks;
    cl_op_release(&op);
    if (rc < 0)
        return 0;
    path_op(&op, RPC_OP_UNLINK, path);
    rc = simple(s, &op);
    if (rc < 0 && rc != -ENOENT)
        log_warn("volume %s: cannot remove shard %s: %s", s->volume, path, strerror(-rc));
    return blocks;
}

/* Removes every shard of a file whose last name is gone. */
static void shards_remove_all(struct shard *s, const gfid_t *g, const struct cl_shard_meta *m)
{
    uint64_t n = cl_shard_blocks_of(m->size, m->block_size);
    for (uint64_t k = 1; k < n; k++)
        shard_remove(s, NULL, g, k);
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static int set_mtime(struct shard *s, struct sfile *f, uint64_t base_fh)
{
    struct cl_op t;
    cl_op_init(&t, RPC_OP_SETATTR, NULL, NULL);
    RPC_SET(&t.args, fh, RPC_T_FH, base_fh);
    RPC_SET(&t.args, valid, RPC_T_VALID, RPC_SET_MTIME_NOW);
    int rc = simple(s, &t);
    if (rc == 0) {
        pthread_mutex_lock(&f->mu);
        f->mtime_ms = now_ms();
        pthread_mutex_unlock(&f->mu);
    }
    return rc;
}

/* A change to a shard: the base file's mtime is set now when this mount
 * has not set it for a second (so it moves at once, and lags the last
 * change by a second at most until settle). The first to see it due
 * claims it: concurrent writers send one SETATTR, not one each. */
static void shard_changed(struct shard *s, struct sfile *f, uint64_t base_fh)
{
    pthread_mutex_lock(&f->mu);
    uint64_t now = now_ms();
    int due = f->touched && now - f->mtime_ms >= 1000;
    if (due)
        f->mtime_ms = now;
    pthread_mutex_unlock(&f->mu);
    if (due)
        set_mtime(s, f, base_fh);
}

/* ---- the worker queue ---- */

static void enqueue(struct shard *s, struct cl_op *op, void (*fn)(struct shard *, struct job *),
                    struct sfh *h, struct cl_op *sub, const char *path)
{
    size_t pl = path ? strlen(path) : 0;
    struct job *j = malloc(sizeof(*j) + pl + 1);
    if (!j) {
        if (sub) {
            cl_op_release(sub);
            free(sub);
        }
        complete(op, -ENOMEM, NULL);
        return;
    }
    j->op = op;
    j->run = fn;
    j->h = h;
    j->sub = sub;
    j->next = NULL;
    memcpy(j->path, path ? path : "", pl + 1);
    pthread_mutex_lock(&s->qlock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->qlock);
        if (sub) {
            cl_op_release(sub);
            free(sub);
        }
        free(j);
        complete(op, -ENOTCONN, NULL);
        return;
    }
    if (s->qtail)
        s->qtail->next = j;
    else
        s->qhead = j;
    s->qtail = j;
    pthread_cond_signal(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
}

static void *worker(void *arg)
{
    struct shard *s = arg;
    pthread_mutex_lock(&s->qlock);
    for (;;) {
        while (!s->qhead && !s->stopping)
            pthread_cond_wait(&s->qcond, &s->qlock);
        if (!s->qhead)
            break;
        struct job *j = s->qhead;
        s->qhead = j->next;
        if (!s->qhead)
            s->qtail = NULL;
        pthread_mutex_unlock(&s->qlock);
        j->run(s, j);
        free(j);
        pthread_mutex_lock(&s->qlock);
    }
    pthread_mutex_unlock(&s->qlock);
    return NULL;
}

/* Completes j->op with j->sub's reply. */
static void complete_sub(struct job *j)
{
    struct cl_op *sub = j->sub;
    j->op->rounds = sub->rounds;
    struct rpc_frame *r = sub->reply;
    sub->reply = NULL;
    complete(j->op, sub->status, r);
    free(sub);
    j->sub = NULL;
}

/* ---- a sharded file's data, by its handle ---- */

/* The base file's path: the request's (the bridge names the file it
 * writes), else the one it was opened by. */
static const char *base_path(const struct sfh *h, const struct cl_op *op, char *buf, size_t len)
{
    if (rpc_has(&op->args, RPC_T_PATH) && rpc_bytes_str(&op->args.path, buf, len) == 0 &&
        buf[0] == '/')
        return buf;
    return h->path;
}

/* The child's handle for block n of h's file: the base's for block 0
 * (*sh NULL), else its open shard's, with a reference (shard_put). */
static int block_fh(struct shard *s, struct sfh *h, uint64_t n, int create, uint64_t *fh,
                    struct sshard **sh)
{
    *sh = NULL;
    if (n == 0) {
        *fh = h->fh;
        return 0;
    }
    int rc = shard_get(s, h->f, n, create, sh);
    if (rc == 0)
        *fh = (*sh)->fh;
    return rc;
}

/* Reads up to len bytes at off of one block into p (already zeroed: what
 * the block lacks reads as zeros). */
static int read_block(struct shard *s, uint64_t fh, uint64_t off, uint64_t len, uint8_t *p)
{
    while (len > 0) {
        struct cl_op op;
        cl_op_init(&op, RPC_OP_READ, NULL, NULL);
        RPC_SET(&op.args, fh, RPC_T_FH, fh);
        RPC_SET(&op.args, offset, RPC_T_OFFSET, off);
        RPC_SET(&op.args, size, RPC_T_SIZE, len);
        int rc = run(s, &op);
        uint32_t got = rc == 0 && rpc_has(&op.reply->msg, RPC_T_DATA) ? op.reply->msg.data.len : 0;
        if (got > len)
            got = (uint32_t)len;
        if (got)
            memcpy(p, op.reply->msg.data.p, got);
        cl_op_release(&op);
        if (rc < 0)
            return rc;
        if (got == 0)
            break; /* the block's end: zeros */
        off += got;
        p += got;
        len -= got;
    }
    return 0;
}

/* Takes the recorded size and blocks anew (another mount may have
 * changed them). rw exclusive. */
static void refresh(struct shard *s, struct sfile *f, const char *path)
{
    struct cl_shard_meta m;
    if (meta_get(s, path, &m) == 0 && m.block_size == f->m.block_size) {
        pthread_mutex_lock(&f->mu);
        f->m = m;
        f->put_gen = f->gen;
        pthread_mutex_unlock(&f->mu);
    }
}

/* Writes the record when shared writers changed it since it was last
 * written. In order: the record written last is the newest (meta_mu),
 * and a writer returns only once its change is recorded (or the put
 * failed). */
static void meta_sync(struct shard *s, struct sfile *f, const char *path)
{
    pthread_mutex_lock(&f->meta_mu);
    pthread_mutex_lock(&f->mu);
    uint64_t gen = f->gen;
    struct cl_shard_meta m = f->m;
    pthread_mutex_unlock(&f->mu);
    if (gen != f->put_gen && meta_put(s, path, &m, 0) == 0) {
        pthread_mutex_lock(&f->mu);
        f->put_gen = gen;
        pthread_mutex_unlock(&f->mu);
    }
    pthread_mutex_unlock(&f->meta_mu);
}

static void do_read(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    struct sfh *h = j->h;
    struct sfile *f = h->f;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, op, pb, sizeof(pb));
    uint64_t off = op->args.offset, len = op->args.size;
    pthread_rwlock_rdlock(&f->rw);
    pthread_mutex_lock(&f->mu);
    int past = off + len > f->m.size;
    pthread_mutex_unlock(&f->mu);
    if (past) { /* another mount may have made it longer: the record again */
        pthread_rwlock_unlock(&f->rw);
        pthread_rwlock_wrlock(&f->rw);
        refresh(s, f, path);
    }
    pthread_mutex_lock(&f->mu);
    uint64_t size = f->m.size, bs = f->m.block_size;
    pthread_mutex_unlock(&f->mu);
    uint64_t want = off >= size ? 0 : (len < size - off ? len : size - off);
    struct rpc_buf b;
    rpc_buf_init(&b);
    size_t mark = rpc_put_begin(&b, RPC_T_DATA);
    uint8_t *p = want ? rpc_buf_grow(&b, want) : NULL;
    int rc = want && !p ? -ENOMEM : 0;
    if (p)
        memset(p, 0, want);
    for (uint64_t done = 0; rc == 0 && done < want;) {
        uint64_t n, in, piece = cl_shard_piece(off + done, want - done, bs, &n, &in);
        uint64_t fh = 0;
        struct sshard *sh;
        int r = block_fh(s, h, n, 0, &fh, &sh);
        if (r == 0)
            rc = read_block(s, fh, in, piece, p + done);
        else if (r != -ENOENT) /* no shard: a hole */
            rc = r;
        shard_put(s, f, sh);
        done += piece;
    }
    pthread_rwlock_unlock(&f->rw);
    rpc_put_end(&b, mark);
    struct rpc_frame *fr = NULL;
    if (rc == 0)
        rc = make_frame(&b, RPC_OP_READ, &fr);
    else
        rpc_buf_free(&b);
    complete(op, rc, fr);
}

/* Writes len bytes of p at off, block by block; *done: how many made it.
 * rw held (shared or exclusive). */
static int write_range(struct shard *s, struct sfh *h, const struct cl_op *op, uint64_t off,
                       const uint8_t *p, uint64_t len, uint64_t *done, int *killed)
{
    struct sfile *f = h->f;
    uint64_t bs = f->m.block_size; /* never changes */
    *done = 0;
    while (*done < len) {
        uint64_t n, in, piece = cl_shard_piece(off + *done, len - *done, bs, &n, &in);
        uint64_t fh = 0;
        struct sshard *sh;
        int rc = block_fh(s, h, n, 1, &fh, &sh);
        if (rc < 0)
            return rc;
        struct cl_op w;
        cl_op_init(&w, RPC_OP_WRITE, NULL, NULL);
        RPC_SET(&w.args, fh, RPC_T_FH, fh);
        RPC_SET(&w.args, offset, RPC_T_OFFSET, in);
        rpc_set_bytes(&w.args, RPC_T_DATA, &w.args.data, p + *done, piece);
        if (n == 0 && rpc_has(&op->args, RPC_T_FLAGS))
            RPC_SET(&w.args, flags, RPC_T_FLAGS, op->args.flags);
        rc = run(s, &w);
        uint64_t put = rc == 0 && rpc_has(&w.reply->msg, RPC_T_SIZE) ? w.reply->msg.size : 0;
        if (put > piece)
            put = piece;
        pthread_mutex_lock(&f->mu);
        if (rc == 0 && sh && rpc_has(&w.reply->msg, RPC_T_ATTR) &&
            w.reply->msg.attr.blocks != sh->blocks) {
            account(f, sh, w.reply->msg.attr.blocks);
            f->gen++;
        }
        f->touched |= n > 0;
        if (sh)
            sh->dirty = 1;
        if (off + *done + put > f->m.size) {
            f->m.size = off + *done + put;
            f->gen++;
        }
        pthread_mutex_unlock(&f->mu);
        if (rc == 0 && n == 0 && rpc_has(&w.reply->msg, RPC_T_FLAGS) && w.reply->msg.flags == 1)
            *killed = 1;
        cl_op_release(&w);
        shard_put(s, f, sh);
        if (rc < 0)
            return rc;
        *done += put;
        if (put < piece)
            return -ENOSPC;
    }
    return 0;
}

static void do_write(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    struct sfh *h = j->h;
    struct sfile *f = h->f;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, op, pb, sizeof(pb));
    const struct rpc_msg *a = &op->args;
    const uint8_t *p = rpc_has(a, RPC_T_DATA) ? a->data.p : (const uint8_t *)"";
    uint64_t total = 0, done;
    int rc = 0, killed = 0;
    /* an append writes at the size it reads: alone */
    int alone = h->append && !rpc_has(a, RPC_T_EXTENTS);
    if (alone)
        pthread_rwlock_wrlock(&f->rw);
    else
        pthread_rwlock_rdlock(&f->rw);
    if (rpc_has(a, RPC_T_EXTENTS)) {
        int n = rpc_extents_check(a, NULL);
        rc = n < 0 ? n : 0;
        for (int i = 0; rc == 0 && i < n; i++) {
            uint64_t off;
            uint32_t len;
            rpc_extent_get(&a->extents, (uint32_t)i, &off, &len);
            rc = write_range(s, h, op, off, p, len, &done, &killed);
            total += done;
            p += len;
        }
    } else {
        uint64_t off = a->offset;
        if (alone) {
            refresh(s, f, path);
            off = f->m.size;
        }
        uint64_t len = rpc_has(a, RPC_T_DATA) ? a->data.len : 0;
        if (off > INT64_MAX || off + len > INT64_MAX)
            rc = -EFBIG;
        else
            rc = write_range(s, h, op, off, p, len, &total, &killed);
    }
    meta_sync(s, f, path);
    shard_changed(s, f, h->fh);
    pthread_rwlock_unlock(&f->rw);
    if (total > 0)
        rc = 0; /* as write(2): what was written counts */
    struct rpc_frame *fr = NULL;
    if (rc == 0) {
        struct rpc_buf b;
        rpc_buf_init(&b);
        rpc_put_u64(&b, RPC_T_SIZE, total);
        if (killed)
            rpc_put_u64(&b, RPC_T_FLAGS, 1);
        rc = make_frame(&b, RPC_OP_WRITE, &fr);
    }
    complete(op, rc, fr);
}

/* Block n's blocks now, by its handle. */
static void account_now(struct shard *s, struct sfile *f, struct sshard *sh)
{
    struct cl_op g;
    cl_op_init(&g, RPC_OP_GETATTR, NULL, NULL);
    RPC_SET(&g.args, fh, RPC_T_FH, sh->fh);
    if (run(s, &g) == 0 && rpc_has(&g.reply->msg, RPC_T_ATTR))
        account(f, sh, g.reply->msg.attr.blocks);
    cl_op_release(&g);
}

/* After changes to shards (f->touched): their blocks counted anew (a
 * count read right after a write may miss what the brick's file system is
 * still allocating), the record written if that changed it, and the base
 * file's mtime set, which a change to a shard leaves alone. Done when the
 * file is flushed (close), synced, closed for the last time or asked for
 * its attributes by its handle, not at each write (a round trip each).
 * rw exclusive. */
static void settle(struct shard *s, struct sfile *f, uint64_t base_fh, const char *path)
{
    if (!f->touched)
        return;
    uint64_t before = f->m.shard_blocks;
    for (int i = 0; i < f->n_open; i++)
        account_now(s, f, f->open[i]);
    if (f->m.shard_blocks != before)
        meta_put(s, path, &f->m, 0);
    if (set_mtime(s, f, base_fh) == 0)
        f->touched = 0;
}

static void do_fallocate(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    struct sfh *h = j->h;
    struct sfile *f = h->f;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, op, pb, sizeof(pb));
    uint64_t mode = op->args.flags, off = op->args.offset, len = op->args.size;
    int punch = (mode & FALLOC_FL_PUNCH_HOLE) != 0, zero = (mode & FALLOC_FL_ZERO_RANGE) != 0;
    if (mode & ~(uint64_t)(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
        complete(op, -EOPNOTSUPP, NULL); /* collapse and insert would move every block */
        return;
    }
    if (len == 0 || off > INT64_MAX || len > INT64_MAX - off) {
        complete(op, -EINVAL, NULL);
        return;
    }
    int rc = 0;
    pthread_rwlock_wrlock(&f->rw);
    refresh(s, f, path);
    struct cl_shard_meta before = f->m;
    uint64_t bs = f->m.block_size;
    for (uint64_t done = 0; rc == 0 && done < len;) {
        uint64_t n, in, piece = cl_shard_piece(off + done, len - done, bs, &n, &in);
        done += piece;
        if (n > 0 && punch && in == 0 && piece == bs) {
            /* a whole block punched: its shard goes (a hole has none) */
            uint64_t gone = shard_remove(s, f, &f->gfid, n);
            f->m.shard_blocks = f->m.shard_blocks > gone ? f->m.shard_blocks - gone : 0;
            f->touched = 1;
            continue;
        }
        uint64_t fh = 0;
        struct sshard *sh;
        int r = block_fh(s, h, n, !(punch || zero), &fh, &sh);
        if (r == -ENOENT)
            continue; /* already a hole: zeros */
        if ((rc = r) < 0)
            break;
        struct cl_op x;
        cl_op_init(&x, RPC_OP_FALLOCATE, NULL, NULL);
        RPC_SET(&x.args, fh, RPC_T_FH, fh);
        RPC_SET(&x.args, offset, RPC_T_OFFSET, in);
        RPC_SET(&x.args, size, RPC_T_SIZE, piece);
        RPC_SET(&x.args, flags, RPC_T_FLAGS, mode);
        rc = simple(s, &x);
        if (rc == 0 && sh)
            account_now(s, f, sh);
        f->touched |= n > 0;
        if (sh)
            sh->dirty = 1;
        shard_put(s, f, sh);
    }
    if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > f->m.size)
        f->m.size = off + len;
    if (f->m.size != before.size || f->m.shard_blocks != before.shard_blocks)
        meta_put(s, path, &f->m, 0);
    shard_changed(s, f, h->fh);
    pthread_rwlock_unlock(&f->rw);
    complete(op, rc, NULL);
}

static void do_lseek(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    struct sfh *h = j->h;
    struct sfile *f = h->f;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, op, pb, sizeof(pb));
    uint64_t whence = op->args.whence, off = op->args.offset;
    if (whence != SEEK_DATA && whence != SEEK_HOLE) {
        complete(op, -EINVAL, NULL);
        return;
    }
    pthread_rwlock_wrlock(&f->rw);
    refresh(s, f, path);
    uint64_t size = f->m.size, bs = f->m.block_size, found = UINT64_MAX;
    int rc = 0;
    for (uint64_t k = off / bs; off < size && k < cl_shard_blocks_of(size, bs) && rc == 0; k++) {
        uint64_t start = k == off / bs ? off % bs : 0;
        uint64_t end = size - k * bs < bs ? size - k * bs : bs; /* the block's part of the file */
        uint64_t fh = 0;
        struct sshard *sh;
        int r = block_fh(s, h, k, 0, &fh, &sh);
        if (r == -ENOENT) {
            if (whence == SEEK_HOLE) {
                found = k * bs + start;
                break;
            }
            continue;
        }
        if ((rc = r) < 0)
            break;
        struct cl_op x;
        cl_op_init(&x, RPC_OP_LSEEK, NULL, NULL);
        RPC_SET(&x.args, fh, RPC_T_FH, fh);
        RPC_SET(&x.args, offset, RPC_T_OFFSET, start);
        RPC_SET(&x.args, whence, RPC_T_WHENCE, whence);
        r = run(s, &x);
        uint64_t at = r == 0 && rpc_has(&x.reply->msg, RPC_T_OFFSET) ? x.reply->msg.offset : 0;
        cl_op_release(&x);
        shard_put(s, f, sh);
        if (r == -ENXIO) {
            /* past the block's own end: a hole within the file */
            if (whence == SEEK_HOLE) {
                found = k * bs + start;
                break;
            }
            continue;
        }
        if ((rc = r) < 0)
            break;
        if (at < end) {
            found = k * bs + at;
            break;
        }
    }
    pthread_rwlock_unlock(&f->rw);
    if (rc == 0 && found == UINT64_MAX) {
        if (whence == SEEK_HOLE && off < size)
            found = size;
        else
            rc = -ENXIO;
    }
    struct rpc_frame *fr = NULL;
    if (rc == 0) {
        struct rpc_buf b;
        rpc_buf_init(&b);
        rpc_put_u64(&b, RPC_T_OFFSET, found);
        rc = make_frame(&b, RPC_OP_LSEEK, &fr);
    }
    complete(op, rc, fr);
}

static void do_fsync(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    struct sfh *h = j->h;
    struct sfile *f = h->f;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, op, pb, sizeof(pb));
    pthread_rwlock_wrlock(&f->rw);
    int rc = 0;
    for (int i = 0; i < f->n_open; i++) {
        if (!f->open[i]->dirty)
            continue;
        struct cl_op x;
        cl_op_init(&x, RPC_OP_FSYNC, NULL, NULL);
        x.args = op->args;
        x.args.fh = f->open[i]->fh;
        int r = simple(s, &x);
        if (r < 0 && rc == 0)
            rc = r;
        else if (r == 0)
            f->open[i]->dirty = 0;
    }
    settle(s, f, h->fh, path); /* the shards' blocks are stable now */
    pthread_rwlock_unlock(&f->rw);
    struct cl_op x;
    cl_op_init(&x, RPC_OP_FSYNC, NULL, NULL);
    x.args = op->args;
    int r = run(s, &x);
    struct rpc_frame *fr = x.reply;
    x.reply = NULL;
    complete(op, rc < 0 ? rc : r, fr);
}

static int forward_sync(struct shard *s, struct cl_op *op, const struct cl_shard_meta *fix);

/* close(): the base file's mtime first, then the flush (its locks). */
static void do_flush(struct shard *s, struct job *j)
{
    struct sfh *h = j->h;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, j->op, pb, sizeof(pb));
    pthread_rwlock_wrlock(&h->f->rw);
    settle(s, h->f, h->fh, path);
    pthread_rwlock_unlock(&h->f->rw);
    forward_sync(s, j->op, NULL);
}

/* ---- truncation ---- */

/* Cuts a sharded file's shards to size n (its base file is the caller's
 * business): removes the shards past it and cuts the last one. f (may be
 * NULL: not open here) is locked by the caller; m is updated. */
static void cut_shards(struct shard *s, struct sfile *f, const gfid_t *g, struct cl_shard_meta *m,
                       uint64_t n)
{
    uint64_t bs = m->block_size, count = cl_shard_blocks_of(m->size, bs);
    uint64_t last = n ? (n - 1) / bs : 0;
    if (n < m->size) {
        for (uint64_t k = count; k-- > last + 1 && k >= 1;) {
            uint64_t gone = shard_remove(s, f, g, k);
            m->shard_blocks = m->shard_blocks > gone ? m->shard_blocks - gone : 0;
        }
        if (last >= 1 && n % bs) {
            char path[128];
            cl_shard_path(g, last, path, sizeof(path));
            shard_forget(s, f, last);
            struct cl_op l;
            path_op(&l, RPC_OP_LOOKUP, path);
            int rc = run(s, &l);
            uint64_t old =
                rc == 0 && rpc_has(&l.reply->msg, RPC_T_ATTR) ? l.reply->msg.attr.blocks : 0;
            cl_op_release(&l);
            if (rc == 0) {
                struct cl_op t;
                path_op(&t, RPC_OP_SETATTR, path);
                RPC_SET(&t.args, size, RPC_T_SIZE, n - last * bs);
                RPC_SET(&t.args, valid, RPC_T_VALID, RPC_SET_SIZE);
                if (run(s, &t) == 0 && rpc_has(&t.reply->msg, RPC_T_ATTR)) {
                    int64_t b =
                        (int64_t)m->shard_blocks - (int64_t)old + (int64_t)t.reply->msg.attr.blocks;
                    m->shard_blocks = b < 0 ? 0 : (uint64_t)b;
                }
                cl_op_release(&t);
            }
        }
    }
    m->size = n;
}

/* A SETATTR of a sharded file (by h's handle, or by path when h is NULL):
 * the shards cut, the base file's own part of the size, the sticky bit
 * kept. f locked by the caller. */
static void setattr_sharded(struct shard *s, struct cl_op *op, struct sfile *f, const char *path)
{
    struct cl_op x;
    cl_op_init(&x, RPC_OP_SETATTR, NULL, NULL);
    x.args = op->args;
    x.args.present &= ~(1ull << RPC_T_LEASE);
    uint64_t valid = rpc_has(&op->args, RPC_T_VALID) ? op->args.valid : 0;
    if (valid & RPC_SET_SIZE) {
        uint64_t n = op->args.size;
        cut_shards(s, f, &f->gfid, &f->m, n);
        x.args.size = n < f->m.block_size ? n : f->m.block_size;
    }
    if (valid & RPC_SET_MODE)
        x.args.mode |= S_ISVTX;
    int rc = run(s, &x);
    if (valid & RPC_SET_SIZE)
        meta_put(s, path, &f->m, 0);
    struct rpc_frame *fr = x.reply;
    x.reply = NULL;
    if (rc == 0)
        reply_whole(fr, &f->m);
    op->rounds = x.rounds;
    complete(op, rc, fr);
}

static void do_getattr_fh(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    struct sfh *h = j->h;
    struct sfile *f = h->f;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, op, pb, sizeof(pb));
    pthread_rwlock_wrlock(&f->rw);
    settle(s, f, h->fh, path);
    pthread_rwlock_unlock(&f->rw);
    struct cl_op x;
    cl_op_init(&x, RPC_OP_GETATTR, NULL, NULL);
    x.args = op->args;
    x.args.present &= ~(1ull << RPC_T_LEASE);
    int rc = run(s, &x);
    pthread_rwlock_wrlock(&f->rw);
    refresh(s, f, path);
    struct cl_shard_meta m = f->m;
    pthread_rwlock_unlock(&f->rw);
    struct rpc_frame *fr = x.reply;
    x.reply = NULL;
    if (rc == 0)
        reply_whole(fr, &m);
    complete(op, rc, fr);
}

static void do_setattr_fh(struct shard *s, struct job *j)
{
    struct sfh *h = j->h;
    char pb[RPC_PATH_MAX];
    const char *path = base_path(h, j->op, pb, sizeof(pb));
    pthread_rwlock_wrlock(&h->f->rw);
    refresh(s, h->f, path);
    setattr_sharded(s, j->op, h->f, path);
    pthread_rwlock_unlock(&h->f->rw);
}

/* The last close of a file closes its shards, and removes them when its
 * last name went meanwhile. */
static void file_drop(struct shard *s, struct sfile *f)
{
    if (!file_put(s, f))
        return;
    shards_close(s, f);
    if (f->gone)
        shards_remove_all(s, &f->gfid, &f->m);
    file_free(f);
}

static void do_release(struct shard *s, struct job *j)
{
    struct sfh *h = j->h;
    fh_remove(s, h);
    pthread_rwlock_wrlock(&h->f->rw);
    settle(s, h->f, h->fh, h->path);
    pthread_rwlock_unlock(&h->f->rw);
    struct cl_op x;
    cl_op_init(&x, RPC_OP_RELEASE, NULL, NULL);
    x.args = j->op->args;
    run(s, &x); /* a handle already gone is closed all the same */
    cl_op_release(&x);
    file_drop(s, h->f);
    free(h->path);
    free(h);
    complete(j->op, 0, NULL);
}

/* ---- by path ---- */

/* The sharded file g open here, with a reference, or a new one with m. */
static struct sfile *file_for(struct shard *s, const gfid_t *g, const struct cl_shard_meta *m)
{
    /* One open here already keeps the newest values: every change this
     * mount makes is recorded under the file's lock, and m, read before
     * taking it, may predate the last one. */
    return file_get(s, g, m);
}

/* Whether path names a sharded file: 1 with its attributes and meta, 0
 * when it does not (or does not exist), -errno. */
static int sharded_at(struct shard *s, const char *path, struct rpc_attr *a,
                      struct cl_shard_meta *m)
{
    struct cl_op l;
    path_op(&l, RPC_OP_LOOKUP, path);
    int rc = run(s, &l);
    if (rc == 0 && !rpc_has(&l.reply->msg, RPC_T_ATTR))
        rc = -EPROTO;
    if (rc == 0)
        *a = l.reply->msg.attr;
    cl_op_release(&l);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    if (!maybe_sharded(a))
        return 0;
    rc = meta_get(s, path, m);
    return rc == 0 ? 1 : rc == -ENODATA || rc == -ENOENT ? 0 : rc;
}

/* Runs a copy of op's request, completes op with its reply (fixed by
 * fix when the request succeeded, may be NULL). */
static int forward_sync(struct shard *s, struct cl_op *op, const struct cl_shard_meta *fix)
{
    struct cl_op x;
    cl_op_init(&x, (uint16_t)op->args.op, NULL, NULL);
    x.args = op->args;
    if (fix)
        x.args.present &= ~(1ull << RPC_T_LEASE);
    int rc = run(s, &x);
    struct rpc_frame *fr = x.reply;
    x.reply = NULL;
    if (rc == 0 && fix)
        reply_whole(fr, fix);
    op->rounds = x.rounds;
    complete(op, rc, fr);
    return rc;
}

static void do_setattr_path(struct shard *s, struct job *j)
{
    struct rpc_attr a;
    struct cl_shard_meta m;
    int rc = sharded_at(s, j->path, &a, &m);
    if (rc <= 0) {
        forward_sync(s, j->op, NULL);
        return;
    }
    struct sfile *f = file_for(s, &a.gfid, &m);
    if (!f) {
        complete(j->op, -ENOMEM, NULL);
        return;
    }
    pthread_rwlock_wrlock(&f->rw);
    setattr_sharded(s, j->op, f, j->path);
    pthread_rwlock_unlock(&f->rw);
    file_drop(s, f);
}

/* The file whose last name went: its shards go now, or at its last close
 * here when it is open. */
static void last_name_gone(struct shard *s, const gfid_t *g, const struct cl_shard_meta *m)
{
    pthread_mutex_lock(&s->lock);
    struct sfile *f = s->files;
    while (f && !gfid_equal(&f->gfid, g))
        f = f->next;
    if (f)
        f->gone = 1;
    pthread_mutex_unlock(&s->lock);
    if (!f)
        shards_remove_all(s, g, m);
}

static void do_unlink(struct shard *s, struct job *j)
{
    struct rpc_attr a;
    struct cl_shard_meta m;
    int sharded = sharded_at(s, j->path, &a, &m) > 0 && a.nlink <= 1;
    if (forward_sync(s, j->op, NULL) == 0 && sharded)
        last_name_gone(s, &a.gfid, &m);
}

static void do_rename(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    char to[RPC_PATH_MAX];
    struct rpc_attr a, src;
    struct cl_shard_meta m, ms;
    int sharded = 0;
    uint64_t flags = rpc_has(&op->args, RPC_T_FLAGS) ? op->args.flags : 0;
    if (!(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)) &&
        rpc_bytes_str(&op->args.path2, to, sizeof(to)) == 0 && sharded_at(s, to, &a, &m) > 0 &&
        a.nlink <= 1) {
        /* not when both names are the same file's */
        sharded = sharded_at(s, j->path, &src, &ms) < 0 || !gfid_equal(&src.gfid, &a.gfid);
    }
    if (forward_sync(s, op, NULL) == 0 && sharded)
        last_name_gone(s, &a.gfid, &m);
}

/* An RMDIR that takes its tree along (write-back's removal of a whole
 * tree, docs/protocol.md): the sharded files of the tree whose last name
 * goes with it lose their shards once it is done. */
static void do_rmdir_tree(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    const struct rpc_bytes *t = &op->args.data;
    struct gone {
        gfid_t g;
        struct cl_shard_meta m;
    } *gone = NULL;
    size_t n = 0, cap = 0;
    char path[RPC_PATH_MAX];
    const char *dir = strcmp(j->path, "/") ? j->path : "";
    int entries = rpc_tree_check(t, NULL);
    for (uint32_t o = 0; entries > 0 && o < t->len;) {
        const char *e = (const char *)t->p + o;
        size_t el = strnlen(e, t->len - o);
        o += (uint32_t)el + 1;
        struct rpc_attr a;
        struct cl_shard_meta m;
        if ((size_t)snprintf(path, sizeof(path), "%s/%.*s", dir, (int)el, e) >= sizeof(path) ||
            sharded_at(s, path, &a, &m) <= 0 || a.nlink > 1)
            continue;
        if (n == cap) {
            struct gone *g = realloc(gone, (cap = cap ? cap * 2 : 16) * sizeof(*g));
            if (!g)
                break; /* out of memory: those shards stay behind */
            gone = g;
        }
        gone[n].g = a.gfid;
        gone[n++].m = m;
    }
    if (forward_sync(s, op, NULL) == 0)
        for (size_t i = 0; i < n; i++)
            last_name_gone(s, &gone[i].g, &gone[i].m);
    free(gone);
}

/* A new file while sharding is on: the sticky bit, then its meta. */
static void do_create(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op;
    uint64_t bs = atomic_load(&s->block_size);
    struct cl_op x;
    cl_op_init(&x, RPC_OP_CREATE, NULL, NULL);
    x.args = op->args;
    x.args.present &= ~(1ull << RPC_T_LEASE);
    x.args.mode |= S_ISVTX;
    uint64_t flags = rpc_has(&op->args, RPC_T_FLAGS) ? op->args.flags : 0;
    x.args.flags = flags & ~(uint64_t)O_APPEND; /* the layer appends at the whole size */
    int rc = run(s, &x);
    struct rpc_frame *fr = x.reply;
    x.reply = NULL;
    op->rounds = x.rounds;
    if (rc == 0 && (!rpc_has(&fr->msg, RPC_T_FH) || !rpc_has(&fr->msg, RPC_T_ATTR)))
        rc = -EPROTO;
    if (rc < 0) {
        rpc_frame_free(fr);
        complete(op, rc, NULL);
        return;
    }
    struct cl_shard_meta m = {.block_size = bs};
    struct rpc_attr *at = &fr->msg.attr;
    struct sfh *h = NULL;
    /* A CREATE may open a file that exists (made meanwhile by another
     * client): one sharded already keeps its record. */
    int known = maybe_sharded(at) && at->size == 0 ? meta_put(s, j->path, &m, 1) : -EEXIST;
    int existing = known == -EEXIST && maybe_sharded(at);
    if (existing)
        known = meta_get(s, j->path, &m);
    if (known == 0 && (h = fh_add(s, fr->msg.fh, 0, j->path)) != NULL) {
        atomic_store(&s->seen, 1);
        h->append = (flags & O_APPEND) != 0;
        if (!(h->f = file_for(s, &at->gfid, &m))) {
            fh_remove(s, h);
            free(h->path);
            free(h);
        } else if (existing && (flags & O_TRUNC)) {
            pthread_rwlock_wrlock(&h->f->rw);
            cut_shards(s, h->f, &h->f->gfid, &h->f->m, 0);
            meta_put(s, j->path, &h->f->m, 0);
            m = h->f->m;
            pthread_rwlock_unlock(&h->f->rw);
        }
    }
    if (known == 0)
        reply_whole(fr, &m);
    else
        fr->msg.present &= ~(1ull << RPC_T_LEASE);
    complete(op, 0, fr);
}

/* An open whose reply had the sticky bit: sharded or not. */
static void do_open_fix(struct shard *s, struct job *j)
{
    struct cl_op *op = j->op, *sub = j->sub;
    struct cl_shard_meta m;
    if (meta_get(s, j->path, &m) < 0) {
        complete_sub(j);
        return;
    }
    uint64_t flags = rpc_has(&op->args, RPC_T_FLAGS) ? op->args.flags : 0;
    struct rpc_frame *fr = sub->reply;
    if (flags & O_APPEND) {
        /* The brick would append at the base file's end: open again
         * without it; the layer appends at the whole size. */
        struct cl_op x;
        cl_op_init(&x, RPC_OP_OPEN, NULL, NULL);
        x.args = sub->args;
        x.args.present &= ~(1ull << RPC_T_LEASE);
        x.args.flags = flags & ~(uint64_t)(O_APPEND | O_TRUNC);
        int rc = run(s, &x);
        struct cl_op r;
        cl_op_init(&r, RPC_OP_RELEASE, NULL, NULL);
        RPC_SET(&r.args, fh, RPC_T_FH, fr->msg.fh);
        simple(s, &r);
        if (rc == 0 && !rpc_has(&x.reply->msg, RPC_T_FH))
            rc = -EPROTO;
        if (rc < 0) {
            cl_op_release(&x);
            cl_op_release(sub);
            free(sub);
            complete(op, rc, NULL);
            return;
        }
        rpc_frame_free(fr);
        fr = sub->reply = x.reply;
        x.reply = NULL;
    }
    struct sfh *h = fh_add(s, fr->msg.fh, 0, j->path);
    struct sfile *f = h ? file_for(s, &fr->msg.attr.gfid, &m) : NULL;
    if (!f) {
        struct cl_op r;
        cl_op_init(&r, RPC_OP_RELEASE, NULL, NULL);
        RPC_SET(&r.args, fh, RPC_T_FH, fr->msg.fh);
        simple(s, &r);
        if (h) {
            fh_remove(s, h);
            free(h->path);
            free(h);
        }
        cl_op_release(sub);
        free(sub);
        complete(op, -ENOMEM, NULL);
        return;
    }
    h->f = f;
    h->append = (flags & O_APPEND) != 0;
    pthread_rwlock_wrlock(&f->rw);
    if (flags & O_TRUNC) { /* the open emptied the base file */
        cut_shards(s, f, &f->gfid, &f->m, 0);
        meta_put(s, j->path, &f->m, 0);
    }
    m = f->m;
    pthread_rwlock_unlock(&f->rw);
    reply_whole(fr, &m);
    complete_sub(j);
}

/* A reply with an object that has the sticky bit. */
static void do_fix_attr(struct shard *s, struct job *j)
{
    struct cl_shard_meta m;
    if (meta_get(s, j->path, &m) == 0)
        reply_whole(j->sub->reply, &m);
    complete_sub(j);
}

/* A listing with /.shard (hidden) or files that may be sharded. */
static void do_fix_listing(struct shard *s, struct job *j)
{
    struct rpc_frame *r = j->sub->reply;
    int root = !strcmp(j->path, "/");
    struct rpc_buf out;
    rpc_buf_init(&out);
    struct rpc_iter it;
    struct rpc_field fl;
    int rc;
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while ((rc = rpc_iter_next(&it, &fl)) > 0) {
        struct rpc_msg e;
        char name[256], path[RPC_PATH_MAX];
        if (fl.tag != RPC_T_DIRENT || rpc_msg_decode(fl.val, fl.len, &e, NULL) < 0 ||
            !rpc_has(&e, RPC_T_NAME) || rpc_bytes_str(&e.name, name, sizeof(name)) < 0) {
            rpc_put_bytes(&out, fl.tag, fl.val, fl.len);
            continue;
        }
        if (root && !strcmp(name, CL_SHARD_DIR_NAME))
            continue;
        struct cl_shard_meta m;
        if (rpc_has(&e, RPC_T_ATTR) && maybe_sharded(&e.attr) &&
            (size_t)snprintf(path, sizeof(path), "%s/%s", root ? "" : j->path, name) <
                sizeof(path) &&
            meta_get(s, path, &m) == 0) {
            attr_whole(&e.attr, &m);
            /* none: an entry without one would be covered by the listing's */
            RPC_SET(&e, lease, RPC_T_LEASE, 0);
        }
        size_t mark = rpc_put_begin(&out, RPC_T_DIRENT);
        rpc_msg_encode(&e, &out);
        rpc_put_end(&out, mark);
    }
    struct rpc_frame *fr = NULL;
    if (rc < 0) {
        rpc_buf_free(&out);
        rc = -EPROTO;
    } else {
        rc = make_frame(&out, RPC_OP_READDIR, &fr);
    }
    j->op->rounds = j->sub->rounds;
    cl_op_release(j->sub);
    free(j->sub);
    j->sub = NULL;
    complete(j->op, rc, fr);
}

/* ---- the inline path ---- */

enum after_kind { A_ATTR, A_OPEN, A_OPENDIR, A_READDIR, A_MADE };

/* A request forwarded as a copy whose reply is looked at first. */
struct after {
    struct cl_op sub; /* first: a job frees the whole by it */
    struct shard *s;
    struct cl_op *op;
    enum after_kind kind;
    uint8_t *extra; /* A_MADE: the XATTRS body sent */
    char path[];
};

/* Whether a listing shows /.shard or a file that may be sharded. */
static int listing_needs_fix(const struct rpc_frame *r, int root)
{
    struct rpc_iter it;
    struct rpc_field fl;
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while (rpc_iter_next(&it, &fl) > 0) {
        struct rpc_msg e;
        if (fl.tag != RPC_T_DIRENT || rpc_msg_decode(fl.val, fl.len, &e, NULL) < 0)
            continue;
        if (rpc_has(&e, RPC_T_ATTR) && maybe_sharded(&e.attr))
            return 1;
        if (root && rpc_has(&e, RPC_T_NAME) && e.name.len == strlen(CL_SHARD_DIR_NAME) &&
            !memcmp(e.name.p, CL_SHARD_DIR_NAME, e.name.len))
            return 1;
    }
    return 0;
}

static void after_cb(struct cl_op *sub)
{
    struct after *w = (struct after *)sub;
    struct shard *s = w->s;
    struct cl_op *op = w->op;
    free(w->extra);
    w->extra = NULL;
    const struct rpc_msg *m = sub->status == 0 ? &sub->reply->msg : NULL;
    int hinted = m && rpc_has(m, RPC_T_ATTR) && maybe_sharded(&m->attr);
    switch (w->kind) {
    case A_ATTR:
        if (hinted) {
            enqueue(s, op, do_fix_attr, NULL, sub, w->path);
            return;
        }
        break;
    case A_OPEN:
        if (hinted && rpc_has(m, RPC_T_FH)) {
            enqueue(s, op, do_open_fix, NULL, sub, w->path);
            return;
        }
        break;
    case A_OPENDIR:
        if (m && rpc_has(m, RPC_T_FH) && !fh_add(s, m->fh, 1, w->path))
            log_warn("volume %s: out of memory: sharded files listed in %s show their first "
                     "block's size",
                     s->volume, w->path);
        break;
    case A_READDIR:
        if (m && listing_needs_fix(sub->reply, !strcmp(w->path, "/"))) {
            enqueue(s, op, do_fix_listing, NULL, sub, w->path);
            return;
        }
        break;
    case A_MADE: /* a whole new sharded file: the base holds it all */
        if (m && rpc_has(m, RPC_T_ATTR)) {
            struct cl_shard_meta z = {0};
            reply_whole(sub->reply, &z);
            sub->reply->msg.attr.size = m->attr.size;
        }
        break;
    }
    op->rounds = sub->rounds;
    struct rpc_frame *r = sub->reply;
    sub->reply = NULL;
    int st = sub->status;
    free(w);
    complete(op, st, r);
}

static void after(struct shard *s, struct cl_op *op, enum after_kind kind, const char *path)
{
    size_t pl = strlen(path);
    struct after *w = malloc(sizeof(*w) + pl + 1);
    if (!w) {
        complete(op, -ENOMEM, NULL);
        return;
    }
    cl_op_init(&w->sub, (uint16_t)op->args.op, after_cb, w);
    w->sub.args = op->args;
    w->sub.spread = op->spread;
    w->sub.rounds = op->rounds;
    w->s = s;
    w->op = op;
    w->kind = kind;
    w->extra = NULL;
    memcpy(w->path, path, pl + 1);
    cl_submit(s->child, &w->sub);
}

/* MAKE_FILE while sharding is on: the sticky bit and the meta go with
 * the file (it is small: write-back makes files of at most 1 MiB, less
 * than the smallest block). */
static void make_file(struct shard *s, struct cl_op *op, const char *path)
{
    uint64_t bs = atomic_load(&s->block_size), size = 0;
    const struct rpc_msg *a = &op->args;
    if (rpc_has(a, RPC_T_DATA))
        size = a->data.len;
    if (rpc_has(a, RPC_T_SIZE) && a->size > size)
        size = a->size;
    if (size > bs || !rpc_has(a, RPC_T_MODE)) {
        cl_submit(s->child, op); /* not one write-back makes: left whole */
        return;
    }
    size_t pl = strlen(path);
    struct after *w = malloc(sizeof(*w) + pl + 1);
    struct rpc_buf x;
    rpc_buf_init(&x);
    if (rpc_has(a, RPC_T_XATTRS))
        rpc_buf_put(&x, a->xattrs.p, a->xattrs.len);
    uint8_t v[CL_SHARD_XATTR_LEN];
    struct cl_shard_meta m = {.block_size = bs, .size = size};
    cl_shard_meta_encode(&m, v);
    rpc_put_str(&x, RPC_T_NAME, CL_SHARD_XATTR);
    rpc_put_bytes(&x, RPC_T_DATA, v, sizeof(v));
    if (!w || x.err) {
        free(w);
        rpc_buf_free(&x);
        complete(op, -ENOMEM, NULL);
        return;
    }
    cl_op_init(&w->sub, RPC_OP_MAKE_FILE, after_cb, w);
    w->sub.args = *a;
    w->sub.args.mode |= S_ISVTX;
    w->sub.args.present &= ~(1ull << RPC_T_LEASE);
    rpc_set_bytes(&w->sub.args, RPC_T_XATTRS, &w->sub.args.xattrs, x.data, x.len);
    w->s = s;
    w->op = op;
    w->kind = A_MADE;
    w->extra = x.data;
    memcpy(w->path, path, pl + 1);
    atomic_store(&s->seen, 1);
    cl_submit(s->child, &w->sub);
}

static void shard_submit(struct cl_layer *self, struct cl_op *op)
{
    struct shard *s = self->priv;
    struct rpc_msg *a = &op->args;
    unsigned code = (unsigned)a->op;
    if ((rpc_has(a, RPC_T_PATH) && cl_shard_hidden((const char *)a->path.p, a->path.len)) ||
        (rpc_has(a, RPC_T_PATH2) && cl_shard_hidden((const char *)a->path2.p, a->path2.len))) {
        /* the shards are the layer's own */
        complete(op, rpc_op_is(code, RPC_OPF_MAKES | RPC_OPF_PATH2) ? -EPERM : -ENOENT, NULL);
        return;
    }
    if (rpc_has(a, RPC_T_FH)) {
        int dir = code == RPC_OP_READDIR || code == RPC_OP_RELEASEDIR;
        struct sfh *h = rpc_op_is(code, RPC_OPF_LOCK) ? NULL : fh_find(s, a->fh, dir);
        if (h && h->dir && code == RPC_OP_READDIR) {
            after(s, op, A_READDIR, h->path);
        } else if (h && h->dir && code == RPC_OP_RELEASEDIR) {
            fh_remove(s, h);
            free(h->path);
            free(h);
            cl_submit(s->child, op);
        } else if (h && !h->dir && code == RPC_OP_READ) {
            enqueue(s, op, do_read, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_WRITE) {
            enqueue(s, op, do_write, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_FALLOCATE) {
            enqueue(s, op, do_fallocate, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_LSEEK) {
            enqueue(s, op, do_lseek, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_FSYNC) {
            enqueue(s, op, do_fsync, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_GETATTR) {
            enqueue(s, op, do_getattr_fh, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_SETATTR) {
            enqueue(s, op, do_setattr_fh, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_FLUSH) {
            enqueue(s, op, do_flush, h, NULL, NULL);
        } else if (h && !h->dir && code == RPC_OP_RELEASE) {
            enqueue(s, op, do_release, h, NULL, NULL);
        } else {
            cl_submit(s->child, op); /* the base file's handle is the child's */
        }
        return;
    }
    char path[RPC_PATH_MAX];
    if (!rpc_has(a, RPC_T_PATH) || rpc_bytes_str(&a->path, path, sizeof(path)) < 0 ||
        path[0] != '/') {
        cl_submit(s->child, op);
        return;
    }
    int on = atomic_load(&s->enabled), look = on || atomic_load(&s->seen);
    uint64_t valid = rpc_has(a, RPC_T_VALID) ? a->valid : 0;
    switch (code) {
    case RPC_OP_LOOKUP:
    case RPC_OP_GETATTR:
    case RPC_OP_LINK:
        after(s, op, A_ATTR, path);
        return;
    case RPC_OP_SETATTR:
        if ((valid & RPC_SET_SIZE) || (look && (valid & RPC_SET_MODE)))
            enqueue(s, op, do_setattr_path, NULL, NULL, path);
        else
            after(s, op, A_ATTR, path);
        return;
    case RPC_OP_OPEN:
        after(s, op, A_OPEN, path);
        return;
    case RPC_OP_OPENDIR:
        after(s, op, A_OPENDIR, path);
        return;
    case RPC_OP_CREATE:
        if (on)
            enqueue(s, op, do_create, NULL, NULL, path);
        else
            cl_submit(s->child, op);
        return;
    case RPC_OP_MAKE_FILE:
        if (on)
            make_file(s, op, path);
        else
            cl_submit(s->child, op);
        return;
    case RPC_OP_UNLINK:
        if (look)
            enqueue(s, op, do_unlink, NULL, NULL, path);
        else
            cl_submit(s->child, op);
        return;
    case RPC_OP_RMDIR:
        if (look && rpc_has(a, RPC_T_DATA))
            enqueue(s, op, do_rmdir_tree, NULL, NULL, path);
        else
            cl_submit(s->child, op);
        return;
    case RPC_OP_RENAME:
        if (look)
            enqueue(s, op, do_rename, NULL, NULL, path);
        else
            cl_submit(s->child, op);
        return;
    default:
        cl_submit(s->child, op);
        return;
    }
}

/* ---- lifetime ---- */

static void shard_reconfigure(struct cl_layer *self, const struct opt_set *opts)
{
    struct shard *s = self->priv;
    int64_t bs = opt_int(opts, "features.shard-block-size");
    atomic_store(&s->block_size,
                 bs < (int64_t)CL_SHARD_BLOCK_MIN ? CL_SHARD_BLOCK_MIN : (uint64_t)bs);
    atomic_store(&s->enabled, opt_bool(opts, "features.shard"));
}

static void shard_stop(struct cl_layer *self)
{
    struct shard *s = self->priv;
    pthread_mutex_lock(&s->qlock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
    for (int i = 0; i < s->n_threads; i++)
        pthread_join(s->threads[i], NULL);
    s->n_threads = 0;
}

static void shard_destroy(struct cl_layer *self)
{
    struct shard *s = self->priv;
    shard_stop(self);
    for (int i = 0; i < FH_BUCKETS; i++)
        while (s->fhs[i]) {
            struct sfh *h = s->fhs[i];
            s->fhs[i] = h->next;
            free(h->path);
            free(h);
        }
    while (s->files) {
        struct sfile *f = s->files;
        s->files = f->next;
        for (int i = 0; i < f->n_open; i++)
            free(f->open[i]);
        file_free(f);
    }
    free(s->volume);
    free(self->children);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->qlock);
    pthread_cond_destroy(&s->qcond);
    free(s);
}

struct cl_layer *cl_shard_new(struct cl_layer *child, const char *volume)
{
    struct shard *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->layer.children = calloc(1, sizeof(*s->layer.children));
    s->volume = strdup(volume ? volume : "");
    if (!s->layer.children || !s->volume) {
        free(s->layer.children);
        free(s->volume);
        free(s);
        return NULL;
    }
    s->layer.children[0] = s->child = child;
    s->layer.n_children = 1;
    s->layer.name = "features/shard";
    s->layer.submit = shard_submit;
    s->layer.reconfigure = shard_reconfigure;
    s->layer.stop = shard_stop;
    s->layer.destroy = shard_destroy;
    s->layer.priv = s;
    atomic_init(&s->enabled, 0);
    atomic_init(&s->seen, 0);
    atomic_init(&s->block_size, 64ull << 20);
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qcond, NULL);
    for (int i = 0; i < N_WORKERS; i++)
        if (pthread_create(&s->threads[i], NULL, worker, s) == 0)
            s->n_threads++;
    if (!s->n_threads) {
        shard_destroy(&s->layer);
        return NULL;
    }
    return &s->layer;
}
