/* The disperse layer (disperse.h, docs/disperse.md): a replicate layer of
 * its own for the fan-out, and the data path here. Each data operation is
 * a small state machine (struct dop) of phases: (A) the file's size
 * (GETATTR) and the stripes to read, from k readable fragments at once;
 * then (B, C) the changes through the set layer, each child given its
 * fragment. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "../rpc/opinfo.h"
#include "client.h"
#include "disperse.h"
#include "ec_codec.h"
#include "replicate.h"

/* A zero range (punch hole, zero range) is written as zeros: at most this
 * much at once. */
#define ZERO_MAX (64u << 20)

struct dop;

/* A file with data operations of this client in flight, in the order
 * they came: its changes run in turn, its reads side by side, and a read
 * and a change that touch a common stripe in the order they came (a read
 * decoding fragments a change is rewriting would mix old and new ones). */
struct dfile {
    struct dfile *next;
    gfid_t gfid;
    struct dop *head, *tail; /* linked by qnext; ->running: started */
};

struct disp {
    struct cl_layer layer; /* children[0]: the set layer */
    struct cl_layer *set;
    int k, m, n;
    size_t chunk;
    struct cl_ec *ec;
    char *volume;
    pthread_mutex_t lock; /* files */
    struct dfile *files;
};

enum dkind { D_READ, D_WRITE, D_TRUNC, D_LSEEK, D_EXTEND };

struct dop {
    struct disp *d;
    struct cl_op *parent;
    enum dkind kind;
    int phase;
    uint64_t fh;   /* the set layer's handle */
    uint32_t have; /* children holding it */
    uint32_t bad;  /* children that failed a read of this op */
    gfid_t gfid;
    int queued, running;
    /* the stripes [q0, q1) it reads or changes; whole: every one (a
     * truncate, an allocation, a write of several extents) */
    uint64_t q0, q1;
    int whole;
    int opened; /* fh is our own (a truncate by path): released at the end */
    int clip;   /* a zero range keeping the size: clipped to it first */
    /* a WRITE of several EXTENTS: written one after the other */
    uint32_t ext_n, ext_i;
    uint64_t ext_pos; /* bytes of DATA taken so far */
    uint64_t off, len;
    const uint8_t *wdata;
    uint64_t size, nsize;
    /* phase A: stripe ranges [ra, rb) read from the children in src */
    uint64_t ra[2], rb[2];
    int nr;
    uint32_t src;
    uint8_t *rbuf[2][CL_EC_MAX];
    uint8_t *old[2]; /* decoded stripes of each range */
    /* the change */
    uint64_t s0, s1;
    uint8_t *stripes;
    uint8_t *frag[CL_EC_MAX];
    uint8_t *cdata[CL_EC_MAX]; /* a child's DATA when it needs its own copy */
    uint8_t cext[CL_EC_MAX][2 * RPC_EXTENT_LEN];
    int remaining;
    struct cl_op attr;
    struct cl_op rd[2][CL_EC_MAX];
    struct cl_op sub;
    struct dop *qnext, *srun;
    uint32_t rounds;
};

static void dop_run(struct dop *o);

/* ---- helpers ---- */

static int popcount(uint32_t x)
{
    return __builtin_popcount(x);
}

static uint64_t stripe_bytes(const struct disp *d)
{
    return (uint64_t)d->k * d->chunk;
}

/* A reply frame of our own whose body is data (taken). */
static struct rpc_frame *data_reply(uint8_t *data, uint32_t len)
{
    struct rpc_frame *f = calloc(1, sizeof(*f));
    if (!f) {
        free(data);
        return NULL;
    }
    f->body = data;
    rpc_set_bytes(&f->msg, RPC_T_DATA, &f->msg.data, data, len);
    return f;
}

/* Frees o's buffers, so that it may run again (the next extent). */
static void dop_clear(struct dop *o)
{
    for (int r = 0; r < 2; r++) {
        for (int j = 0; j < CL_EC_MAX; j++) {
            free(o->rbuf[r][j]);
            o->rbuf[r][j] = NULL;
        }
        free(o->old[r]);
        o->old[r] = NULL;
    }
    for (int j = 0; j < CL_EC_MAX; j++) {
        free(o->frag[j]);
        free(o->cdata[j]);
        o->frag[j] = o->cdata[j] = NULL;
    }
    free(o->stripes);
    o->stripes = NULL;
    o->nr = 0;
    o->bad = 0;
}

static void dop_free(struct dop *o)
{
    dop_clear(o);
    free(o);
}

/* Loads extent i of o's WRITE into off, len and wdata. */
static void next_extent(struct dop *o)
{
    const struct rpc_msg *a = &o->parent->args;
    uint64_t off;
    uint32_t len;
    rpc_extent_get(&a->extents, o->ext_i, &off, &len);
    o->off = off;
    o->len = len;
    o->wdata = a->data.p + o->ext_pos;
    o->ext_pos += len;
}

/* ---- the order of a file's data operations ---- */

static int is_read(const struct dop *o)
{
    return o->kind == D_READ;
}

/* Whether b, come after a, waits for it: two changes always (one at a
 * time per file), a read and a change when they share a stripe, two reads
 * never. */
static int conflicts(const struct dop *a, const struct dop *b)
{
    if (is_read(a) && is_read(b))
        return 0;
    if (!is_read(a) && !is_read(b))
        return 1;
    return a->whole || b->whole || (a->q0 < b->q1 && b->q0 < a->q1);
}

/* Whether o may start: no operation before it in f waits for... or runs
 * against it. d->lock held. */
static int may_run(const struct dfile *f, const struct dop *o)
{
    for (const struct dop *p = f->head; p && p != o; p = p->qnext)
        if (conflicts(p, o))
            return 0;
    return 1;
}

/* 1: o runs now; 0: it waits for an operation before it (dop_run
 * later). */
static int file_enter(struct disp *d, struct dop *o)
{
    pthread_mutex_lock(&d->lock);
    struct dfile *f;
    for (f = d->files; f && !gfid_equal(&f->gfid, &o->gfid); f = f->next)
        ;
    if (!f) {
        f = calloc(1, sizeof(*f));
        if (!f) {
            pthread_mutex_unlock(&d->lock);
            return 1; /* runs unordered rather than not at all */
        }
        f->gfid = o->gfid;
        f->next = d->files;
        d->files = f;
        f->head = f->tail = o;
    } else {
        f->tail->qnext = o;
        f->tail = o;
    }
    o->queued = 1;
    o->running = may_run(f, o);
    int run = o->running;
    pthread_mutex_unlock(&d->lock);
    return run;
}

/* o is done: the operations of its file that waited for it start, when
 * nothing else before them holds them back. */
static void file_leave(struct disp *d, struct dop *o)
{
    if (!o->queued)
        return;
    struct dop *start = NULL, **last = &start;
    pthread_mutex_lock(&d->lock);
    struct dfile **pp = &d->files;
    while (*pp && !gfid_equal(&(*pp)->gfid, &o->gfid))
        pp = &(*pp)->next;
    struct dfile *f = *pp;
    if (f) {
        struct dop *prev = NULL;
        for (struct dop *p = f->head; p; prev = p, p = p->qnext)
            if (p == o) {
                if (prev)
                    prev->qnext = o->qnext;
                else
                    f->head = o->qnext;
                if (f->tail == o)
                    f->tail = prev;
                break;
            }
        if (!f->head) {
            *pp = f->next;
            free(f);
        } else {
            for (struct dop *p = f->head; p; p = p->qnext)
                if (!p->running && may_run(f, p)) {
                    p->running = 1;
                    *last = p; /* chained through srun: qnext stays the file's */
                    last = &p->srun;
                }
        }
    }
    *last = NULL;
    pthread_mutex_unlock(&d->lock);
    while (start) {
        struct dop *next = start->srun;
        dop_run(start);
        start = next;
    }
}

static void release_cb(struct cl_op *op)
{
    cl_op_release(op);
    free(op);
}

static void dop_finish(struct dop *o, int status, struct rpc_frame *reply)
{
    struct disp *d = o->d;
    struct cl_op *parent = o->parent;
    if (o->opened) { /* our own handle of a truncate by path */
        struct cl_op *rel = calloc(1, sizeof(*rel));
        if (rel) {
            cl_op_init(rel, RPC_OP_RELEASE, release_cb, NULL);
            RPC_SET(&rel->args, fh, RPC_T_FH, o->fh);
            cl_submit(d->set, rel);
        }
    }
    parent->rounds = o->rounds;
    file_leave(d, o);
    dop_free(o);
    cl_op_complete(parent, status, reply);
}

/* ---- phase A: the size and the stripes ---- */

static void phase_a_done(struct dop *o);

static void sub_cb(struct cl_op *op)
{
    struct dop *o = op->ctx;
    if (__atomic_sub_fetch(&o->remaining, 1, __ATOMIC_ACQ_REL) == 0)
        phase_a_done(o);
}

/* The k children to read from: readable ones holding the handle, data
 * fragments first. 0 when fewer than k. */
static uint32_t pick_sources(struct dop *o)
{
    struct disp *d = o->d;
    uint32_t ok = cl_repl_readable(d->set) & o->have & ~o->bad, src = 0;
    for (int j = 0; j < d->n && popcount(src) < d->k; j++)
        if (ok >> j & 1)
            src |= 1u << j;
    return popcount(src) == d->k ? src : 0;
}

static int no_sources_error(struct dop *o)
{
    struct disp *d = o->d;
    /* fewer than k fragments within reach: never a guess at the data */
    uint32_t up = cl_repl_readable(d->set) & o->have;
    log_warn("volume %s: %s refused: %d of %d fragments readable, %d needed", d->volume,
             rpc_op_name((unsigned)o->parent->args.op), popcount(up & ~o->bad), d->n, d->k);
    return o->bad ? -EIO : -ENOTCONN;
}

static void start_phase_a(struct dop *o)
{
    struct disp *d = o->d;
    o->src = pick_sources(o);
    if (!o->src) {
        dop_finish(o, no_sources_error(o), NULL);
        return;
    }
    int n = 1;
    for (int r = 0; r < o->nr; r++)
        n += popcount(o->src);
    o->remaining = n;
    int first = __builtin_ctz(o->src);
    cl_op_init(&o->attr, RPC_OP_GETATTR, sub_cb, o);
    RPC_SET(&o->attr.args, fh, RPC_T_FH, o->fh);
    /* every op is prepared before the first is sent: a completion may
     * come at once */
    for (int r = 0; r < o->nr; r++)
        for (int j = 0; j < d->n; j++) {
            if (!(o->src >> j & 1))
                continue;
            struct cl_op *s = &o->rd[r][j];
            cl_op_init(s, RPC_OP_READ, sub_cb, o);
            RPC_SET(&s->args, fh, RPC_T_FH, o->fh);
            RPC_SET(&s->args, offset, RPC_T_OFFSET, o->ra[r] * d->chunk);
            RPC_SET(&s->args, size, RPC_T_SIZE, (o->rb[r] - o->ra[r]) * d->chunk);
        }
    struct cl_layer *set = d->set;
    uint32_t src = o->src;
    int nr = o->nr;
    struct cl_op *ops[1 + 2 * CL_EC_MAX];
    int idx[1 + 2 * CL_EC_MAX], c = 0;
    ops[c] = &o->attr;
    idx[c++] = first;
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < d->n; j++)
            if (src >> j & 1) {
                ops[c] = &o->rd[r][j];
                idx[c++] = j;
            }
    for (int i = 0; i < c; i++)
        cl_repl_submit_to(set, ops[i], idx[i]);
}

/* The stripes of the reads of phase A, decoded. 0, or -errno with the
 * failed children added to bad. */
static int gather(struct dop *o)
{
    struct disp *d = o->d;
    int rc = 0;
    uint32_t rounds = o->attr.rounds;
    if (o->attr.status < 0) {
        o->bad |= 1u << __builtin_ctz(o->src);
        rc = o->attr.status;
    } else if (!o->attr.reply || !rpc_has(&o->attr.reply->msg, RPC_T_ATTR)) {
        rc = -EPROTO;
    } else {
        o->size = o->attr.reply->msg.attr.size;
    }
    cl_op_release(&o->attr);
    for (int r = 0; r < o->nr; r++) {
        size_t flen = (size_t)(o->rb[r] - o->ra[r]) * d->chunk;
        const uint8_t *in[CL_EC_MAX] = {0};
        for (int j = 0; j < d->n; j++) {
            if (!(o->src >> j & 1))
                continue;
            struct cl_op *s = &o->rd[r][j];
            if (s->rounds > rounds)
                rounds = s->rounds;
            if (s->status < 0) {
                o->bad |= 1u << j;
                if (rc == 0)
                    rc = s->status;
            } else if (rc == 0) {
                free(o->rbuf[r][j]);
                o->rbuf[r][j] = calloc(1, flen ? flen : 1);
                if (!o->rbuf[r][j]) {
                    rc = -ENOMEM;
                } else if (s->reply && rpc_has(&s->reply->msg, RPC_T_DATA)) {
                    uint32_t got = s->reply->msg.data.len;
                    memcpy(o->rbuf[r][j], s->reply->msg.data.p, got < flen ? got : flen);
                }
                in[j] = o->rbuf[r][j];
            }
            cl_op_release(s);
        }
        if (rc == 0) {
            free(o->old[r]);
            o->old[r] = malloc(flen * (size_t)d->k + 1);
            if (!o->old[r])
                rc = -ENOMEM;
            else
                rc = cl_ec_decode(d->ec, d->chunk, (size_t)(o->rb[r] - o->ra[r]), o->src, in,
                                  o->old[r]);
        }
    }
    o->rounds += rounds;
    return rc;
}

/* ---- READ ---- */

static void read_finish(struct dop *o)
{
    uint64_t sw = stripe_bytes(o->d);
    uint64_t end = o->off + o->len < o->size ? o->off + o->len : o->size;
    uint32_t n = end > o->off ? (uint32_t)(end - o->off) : 0;
    uint8_t *out = malloc(n ? n : 1);
    if (!out) {
        dop_finish(o, -ENOMEM, NULL);
        return;
    }
    if (n)
        memcpy(out, o->old[0] + (o->off - o->ra[0] * sw), n);
    struct rpc_frame *f = data_reply(out, n);
    dop_finish(o, f ? 0 : -ENOMEM, f);
}

/* ---- the change: per child arguments ---- */

/* The extents a child writes: its fragment's bytes of [s0, s1) up to what
 * the new size leaves it, and a zero byte at the new size's last byte when
 * its file must grow to it (zeros past a fragment's bytes are its layout). */
static void write_each(void *ctx, int j, struct rpc_msg *a)
{
    struct dop *o = ctx;
    struct disp *d = o->d;
    uint64_t start = o->s0 * d->chunk;
    uint64_t used = cl_disp_frag_used(d->k, d->chunk, j, o->nsize);
    uint64_t len = used > start ? used - start : 0;
    uint64_t full = (o->s1 - o->s0) * d->chunk;
    if (len > full)
        len = full;
    int grow = o->nsize > o->size && start + len < o->nsize;
    const uint8_t *piece = o->frag[j];
    a->present &= ~((1ull << RPC_T_EXTENTS) | (1ull << RPC_T_DATA) | (1ull << RPC_T_OFFSET));
    if (!grow) {
        RPC_SET(a, offset, RPC_T_OFFSET, start);
        rpc_set_bytes(a, RPC_T_DATA, &a->data, piece ? piece : (const uint8_t *)"", (uint32_t)len);
        return;
    }
    /* piece and one zero byte, as two extents (one when the piece is
     * empty) */
    uint8_t *buf = o->cdata[j] = calloc(1, len + 1);
    if (!buf) { /* the child fails the write below, and is marked */
        RPC_SET(a, fh, RPC_T_FH, UINT64_MAX);
        return;
    }
    if (len)
        memcpy(buf, piece, len);
    uint32_t n = 0;
    if (len)
        rpc_extent_put(o->cext[j], n++, start, (uint32_t)len);
    rpc_extent_put(o->cext[j], n++, o->nsize - 1, 1);
    rpc_set_bytes(a, RPC_T_EXTENTS, &a->extents, o->cext[j], n * RPC_EXTENT_LEN);
    rpc_set_bytes(a, RPC_T_DATA, &a->data, buf, (uint32_t)(len + 1));
}

/* A truncate's first step: each data fragment cut to its bytes under the
 * new size, each redundancy fragment to the start of the new last stripe
 * (its chunk there is written again in the second step). */
static void cut_each(void *ctx, int j, struct rpc_msg *a)
{
    struct dop *o = ctx;
    struct disp *d = o->d;
    uint64_t cut = cl_disp_frag_used(d->k, d->chunk, j, o->nsize);
    if (j >= d->k)
        cut = o->nsize / stripe_bytes(d) * d->chunk;
    RPC_SET(a, size, RPC_T_SIZE, cut);
}

static void change_done_cb(struct cl_op *op);

/* A change's own request carries the caller's PATH beside the handle: the
 * bricks recall the other clients' leases on the file by it (a request
 * without it changes the fragments while another mount keeps answering
 * from the attributes it cached, docs/consistency.md, "Recall"). */
static void keep_path(const struct dop *o, struct rpc_msg *a)
{
    const struct rpc_msg *p = &o->parent->args;
    if (rpc_has(p, RPC_T_PATH))
        rpc_set_bytes(a, RPC_T_PATH, &a->path, p->path.p, p->path.len);
}

/* Encodes the stripes [s0, s1) of o->stripes into the fragments. */
static int encode(struct dop *o)
{
    struct disp *d = o->d;
    size_t flen = (size_t)(o->s1 - o->s0) * d->chunk;
    for (int j = 0; j < d->n; j++)
        if (!(o->frag[j] = malloc(flen ? flen : 1)))
            return -ENOMEM;
    if (flen)
        cl_ec_encode(d->ec, d->chunk, (size_t)(o->s1 - o->s0), o->stripes, o->frag);
    return 0;
}

/* Sends the fragments of [s0, s1) (WRITE through the set layer). */
static void send_writes(struct dop *o, int phase)
{
    o->phase = phase;
    cl_op_init(&o->sub, RPC_OP_WRITE, change_done_cb, o);
    RPC_SET(&o->sub.args, fh, RPC_T_FH, o->fh);
    if (o->kind == D_WRITE && rpc_has(&o->parent->args, RPC_T_FLAGS))
        RPC_SET(&o->sub.args, flags, RPC_T_FLAGS, o->parent->args.flags);
    RPC_SET(&o->sub.args, offset, RPC_T_OFFSET, 0);
    keep_path(o, &o->sub.args);
    cl_repl_change_each(o->d->set, &o->sub, write_each, o);
}

/* ---- WRITE (and zero ranges) ---- */

static void write_build(struct dop *o)
{
    struct disp *d = o->d;
    uint64_t sw = stripe_bytes(d);
    struct cl_disp_span sp = cl_disp_span(d->k, d->chunk, o->off, o->len);
    o->s0 = sp.s0;
    o->s1 = sp.s1;
    size_t total = (size_t)((o->s1 - o->s0) * sw);
    o->stripes = calloc(1, total ? total : 1);
    if (!o->stripes) {
        dop_finish(o, -ENOMEM, NULL);
        return;
    }
    /* the old bytes of the partial stripes, then the new ones over them */
    for (int r = 0; r < o->nr; r++)
        memcpy(o->stripes + (o->ra[r] - o->s0) * sw, o->old[r],
               (size_t)((o->rb[r] - o->ra[r]) * sw));
    /* bytes past the old end of file are zero whatever the fragments held */
    if (o->size < o->s1 * sw && o->size > o->s0 * sw)
        memset(o->stripes + (o->size - o->s0 * sw), 0, (size_t)(o->s1 * sw - o->size));
    else if (o->size <= o->s0 * sw)
        memset(o->stripes, 0, total);
    if (o->wdata)
        memcpy(o->stripes + (o->off - o->s0 * sw), o->wdata, (size_t)o->len);
    else
        memset(o->stripes + (o->off - o->s0 * sw), 0, (size_t)o->len);
    o->nsize = o->len && o->off + o->len > o->size ? o->off + o->len : o->size;
    int rc = encode(o);
    if (rc < 0) {
        dop_finish(o, rc, NULL);
        return;
    }
    send_writes(o, 2);
}

/* ---- truncate ---- */

static void trunc_build(struct dop *o)
{
    struct disp *d = o->d;
    uint64_t sw = stripe_bytes(d);
    if (o->nsize >= o->size) {
        /* growing: every fragment grows alike (zeros past its bytes) */
        o->phase = 3;
        cl_op_init(&o->sub, RPC_OP_SETATTR, change_done_cb, o);
        o->sub.args = o->parent->args; /* PATH kept: the recall's key */
        RPC_SET(&o->sub.args, fh, RPC_T_FH, o->fh);
        cl_submit(d->set, &o->sub);
        return;
    }
    /* shrinking: the new last stripe, cut at the new size, is encoded
     * again for the redundancy fragments */
    o->s0 = o->nsize / sw;
    o->s1 = o->nsize % sw ? o->s0 + 1 : o->s0;
    if (o->s1 > o->s0) {
        o->stripes = calloc(1, (size_t)sw);
        if (!o->stripes) {
            dop_finish(o, -ENOMEM, NULL);
            return;
        }
        memcpy(o->stripes, o->old[0], (size_t)(o->nsize - o->s0 * sw));
    }
    int rc = encode(o);
    if (rc < 0) {
        dop_finish(o, rc, NULL);
        return;
    }
    o->phase = 1;
    cl_op_init(&o->sub, RPC_OP_SETATTR, change_done_cb, o);
    o->sub.args = o->parent->args; /* PATH kept: the recall's key */
    RPC_SET(&o->sub.args, fh, RPC_T_FH, o->fh);
    cl_repl_change_each(d->set, &o->sub, cut_each, o);
}

/* ---- completions of the changes ---- */

static void change_done_cb(struct cl_op *op)
{
    struct dop *o = op->ctx;
    o->rounds += op->rounds;
    int st = op->status;
    struct rpc_frame *reply = op->reply;
    op->reply = NULL;
    if (st < 0) {
        dop_finish(o, st, NULL);
        return;
    }
    if (o->kind == D_TRUNC && o->phase == 1) {
        /* cut: now the fragments' bytes of the last stripe and the size */
        rpc_frame_free(reply);
        o->size = 0; /* every fragment is below the new size now */
        if (o->nsize == 0) {
            /* nothing to write back: answer with the attributes */
            o->phase = 3;
            cl_op_init(&o->sub, RPC_OP_GETATTR, change_done_cb, o);
            RPC_SET(&o->sub.args, fh, RPC_T_FH, o->fh);
            cl_submit(o->d->set, &o->sub);
            return;
        }
        /* the data fragments rewrite their own bytes of the last stripe
         * (unchanged), the redundancy ones their new chunk */
        send_writes(o, 2);
        return;
    }
    if (o->kind == D_WRITE && o->ext_n && ++o->ext_i < o->ext_n) {
        rpc_frame_free(reply);
        dop_clear(o);
        next_extent(o);
        dop_run(o);
        return;
    }
    if (reply && o->kind == D_WRITE && o->wdata) {
        /* what the caller wrote, not a fragment's */
        reply->msg.size = o->ext_n ? o->ext_pos : o->len;
        reply->msg.present |= 1ull << RPC_T_SIZE;
    } else if (reply && o->parent->args.op != RPC_OP_WRITE) {
        reply->msg.present &= ~(1ull << RPC_T_SIZE);
    }
    dop_finish(o, 0, reply);
}

/* ---- LSEEK ---- */

static void lseek_finish(struct dop *o)
{
    uint64_t off = o->off;
    if (off >= o->size) {
        dop_finish(o, -ENXIO, NULL);
        return;
    }
    /* no holes are tracked: all data up to the end of file */
    uint64_t at = o->parent->args.whence == SEEK_HOLE ? o->size : off;
    struct rpc_frame *f = calloc(1, sizeof(*f));
    if (!f) {
        dop_finish(o, -ENOMEM, NULL);
        return;
    }
    RPC_SET(&f->msg, offset, RPC_T_OFFSET, at);
    dop_finish(o, 0, f);
}

/* ---- the state machine ---- */

static void phase_a_done(struct dop *o)
{
    int rc = gather(o);
    if (rc < 0) {
        /* a fragment that failed its read is left out: try the others */
        if (rc != -ENOMEM && popcount(o->have & ~o->bad) >= o->d->k && pick_sources(o)) {
            start_phase_a(o);
            return;
        }
        dop_finish(o, rc == -ENOMEM ? rc : no_sources_error(o), NULL);
        return;
    }
    switch (o->kind) {
    case D_READ:
        read_finish(o);
        break;
    case D_WRITE:
        if (o->clip) {
            o->clip = 0;
            if (o->off >= o->size) {
                dop_finish(o, 0, NULL);
                return;
            }
            if (o->len > o->size - o->off)
                o->len = o->size - o->off;
            dop_run(o);
            return;
        }
        write_build(o);
        break;
    case D_TRUNC:
        trunc_build(o);
        break;
    case D_LSEEK:
        lseek_finish(o);
        break;
    case D_EXTEND:
        break;
    }
}

/* Starts o once it is its file's turn: what phase A reads. */
static void dop_run(struct dop *o)
{
    struct disp *d = o->d;
    o->nr = 0;
    if (o->kind == D_READ) {
        struct cl_disp_span sp = cl_disp_span(d->k, d->chunk, o->off, o->len);
        if (sp.s1 > sp.s0) {
            o->ra[0] = sp.s0;
            o->rb[0] = sp.s1;
            o->nr = 1;
        }
    } else if (o->kind == D_WRITE && !o->clip) {
        struct cl_disp_span sp = cl_disp_span(d->k, d->chunk, o->off, o->len);
        if (sp.head) {
            o->ra[o->nr] = sp.s0;
            o->rb[o->nr++] = sp.s0 + 1;
        }
        if (sp.tail) {
            o->ra[o->nr] = sp.s1 - 1;
            o->rb[o->nr++] = sp.s1;
        }
    } else if (o->kind == D_TRUNC) {
        uint64_t sw = stripe_bytes(d);
        if (o->nsize % sw) {
            o->ra[0] = o->nsize / sw;
            o->rb[0] = o->ra[0] + 1;
            o->nr = 1;
        }
    }
    start_phase_a(o);
}

static struct dop *dop_new(struct disp *d, struct cl_op *op, enum dkind kind)
{
    struct dop *o = calloc(1, sizeof(*o));
    if (!o) {
        cl_op_complete(op, -ENOMEM, NULL);
        return NULL;
    }
    o->d = d;
    o->parent = op;
    o->kind = kind;
    return o;
}

/* The stripes o reads or changes (an upper bound: a zero range keeping
 * the size is clipped later). */
static void dop_range(struct dop *o)
{
    struct disp *d = o->d;
    o->whole = !(o->kind == D_READ || (o->kind == D_WRITE && !o->ext_n));
    if (!o->whole) {
        struct cl_disp_span sp = cl_disp_span(d->k, d->chunk, o->off, o->len);
        o->q0 = sp.s0;
        o->q1 = sp.s1;
    }
}

/* Binds o to its handle and starts it, in its file's order (above). */
static void dop_start(struct dop *o, uint64_t fh)
{
    struct disp *d = o->d;
    int has_gfid = 0;
    o->fh = fh;
    o->have = cl_repl_fh_children(d->set, fh, &o->gfid, &has_gfid);
    if (!o->have) {
        dop_finish(o, -EBADF, NULL);
        return;
    }
    dop_range(o);
    if (o->kind == D_LSEEK || !has_gfid || file_enter(d, o))
        dop_run(o);
}

/* ---- MAKE_FILE: a whole small file, every fragment in one request ---- */

struct make {
    struct disp *d;
    struct cl_op *parent;
    uint64_t size;
    uint8_t *frag[CL_EC_MAX];
    uint64_t len[CL_EC_MAX];
    struct cl_op sub;
};

static void make_each(void *ctx, int j, struct rpc_msg *a)
{
    struct make *mk = ctx;
    rpc_set_bytes(a, RPC_T_DATA, &a->data, mk->frag[j], (uint32_t)mk->len[j]);
    if (mk->size > mk->len[j])
        RPC_SET(a, size, RPC_T_SIZE, mk->size);
    else
        a->present &= ~(1ull << RPC_T_SIZE);
}

static void make_done_cb(struct cl_op *op)
{
    struct make *mk = op->ctx;
    struct cl_op *parent = mk->parent;
    int st = op->status;
    struct rpc_frame *reply = op->reply;
    op->reply = NULL;
    parent->rounds = op->rounds;
    for (int j = 0; j < mk->d->n; j++)
        free(mk->frag[j]);
    free(mk);
    cl_op_complete(parent, st, reply);
}

static void do_make(struct disp *d, struct cl_op *op)
{
    struct make *mk = calloc(1, sizeof(*mk));
    if (!mk) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    mk->d = d;
    mk->parent = op;
    const struct rpc_msg *a = &op->args;
    uint64_t dlen = rpc_has(a, RPC_T_DATA) ? a->data.len : 0;
    mk->size = rpc_has(a, RPC_T_SIZE) && a->size > dlen ? a->size : dlen;
    uint64_t sw = stripe_bytes(d), stripes = (dlen + sw - 1) / sw;
    uint8_t *in = calloc(1, stripes * sw + 1);
    int rc = in ? 0 : -ENOMEM;
    for (int j = 0; j < d->n && rc == 0; j++)
        if (!(mk->frag[j] = malloc(stripes * d->chunk + 1)))
            rc = -ENOMEM;
    if (rc == 0) {
        if (dlen)
            memcpy(in, a->data.p, dlen);
        if (stripes)
            cl_ec_encode(d->ec, d->chunk, stripes, in, mk->frag);
        for (int j = 0; j < d->n; j++) {
            uint64_t used = cl_disp_frag_used(d->k, d->chunk, j, dlen);
            mk->len[j] = used;
        }
    }
    free(in);
    if (rc < 0) {
        for (int j = 0; j < d->n; j++)
            free(mk->frag[j]);
        free(mk);
        cl_op_complete(op, rc, NULL);
        return;
    }
    cl_op_init(&mk->sub, RPC_OP_MAKE_FILE, make_done_cb, mk);
    mk->sub.args = op->args;
    cl_repl_change_each(d->set, &mk->sub, make_each, mk);
}

/* ---- truncate by path: through a handle of our own ---- */

struct topen {
    struct dop *o;
    struct cl_op open;
};

static void topen_cb(struct cl_op *op)
{
    struct topen *t = op->ctx;
    struct dop *o = t->o;
    if (op->status < 0 || !op->reply) {
        int st = op->status < 0 ? op->status : -EIO;
        free(t);
        dop_finish(o, st, NULL);
        return;
    }
    uint64_t fh = op->reply->msg.fh;
    cl_op_release(op);
    free(t);
    o->opened = 1;
    dop_start(o, fh);
}

static void do_truncate(struct disp *d, struct cl_op *op)
{
    struct dop *o = dop_new(d, op, D_TRUNC);
    if (!o)
        return;
    o->nsize = op->args.size;
    if (rpc_has(&op->args, RPC_T_FH)) {
        dop_start(o, op->args.fh);
        return;
    }
    struct topen *t = calloc(1, sizeof(*t));
    if (!t) {
        dop_finish(o, -ENOMEM, NULL);
        return;
    }
    t->o = o;
    cl_op_init(&t->open, RPC_OP_OPEN, topen_cb, t);
    rpc_set_bytes(&t->open.args, RPC_T_PATH, &t->open.args.path, op->args.path.p,
                  op->args.path.len);
    RPC_SET(&t->open.args, flags, RPC_T_FLAGS, O_RDWR);
    for (uint32_t i = 0; i < op->args.n_group && i < 32; i++)
        t->open.args.groups[i] = op->args.groups[i];
    const uint64_t who =
        (1ull << RPC_T_UID) | (1ull << RPC_T_GID) | (1ull << RPC_T_PID) | (1ull << RPC_T_GROUP);
    t->open.args.uid = op->args.uid;
    t->open.args.gid = op->args.gid;
    t->open.args.pid = op->args.pid;
    t->open.args.n_group = op->args.n_group;
    t->open.args.present |= op->args.present & who;
    cl_submit(d->set, &t->open);
}

/* ---- FALLOCATE ---- */

static void extend_each(void *ctx, int j, struct rpc_msg *a)
{
    struct dop *o = ctx;
    (void)j;
    /* grow only: allocating the last byte never changes data */
    RPC_SET(a, flags, RPC_T_FLAGS, 0);
    RPC_SET(a, offset, RPC_T_OFFSET, o->nsize - 1);
    RPC_SET(a, size, RPC_T_SIZE, 1);
}

static void do_fallocate(struct disp *d, struct cl_op *op)
{
    const struct rpc_msg *a = &op->args;
    uint64_t mode = a->flags, off = a->offset, len = a->size;
    if (len == 0 || off + len < off) {
        cl_op_complete(op, -EINVAL, NULL);
        return;
    }
    if (mode == FALLOC_FL_KEEP_SIZE) {
        cl_op_complete(op, 0, NULL); /* space is not reserved on fragments */
        return;
    }
    if (mode == 0) {
        struct dop *o = dop_new(d, op, D_EXTEND);
        if (!o)
            return;
        o->nsize = off + len;
        o->fh = a->fh;
        o->have = cl_repl_fh_children(d->set, a->fh, NULL, NULL);
        if (!o->have) {
            dop_finish(o, -EBADF, NULL);
            return;
        }
        o->phase = 3;
        cl_op_init(&o->sub, RPC_OP_FALLOCATE, change_done_cb, o);
        RPC_SET(&o->sub.args, fh, RPC_T_FH, a->fh);
        keep_path(o, &o->sub.args);
        cl_repl_change_each(d->set, &o->sub, extend_each, o);
        return;
    }
    int punch = mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
    int zero = mode == FALLOC_FL_ZERO_RANGE || mode == (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE);
    if ((!punch && !zero) || len > ZERO_MAX) {
        cl_op_complete(op, -EOPNOTSUPP, NULL);
        return;
    }
    /* zeros written over the range (up to the end of file when the size
     * is kept: found once the size is known, below) */
    struct dop *o = dop_new(d, op, D_WRITE);
    if (!o)
        return;
    o->off = off;
    o->len = len;
    o->clip = (mode & FALLOC_FL_KEEP_SIZE) != 0;
    dop_start(o, a->fh);
}

/* ---- STATFS: a set holds k bricks' worth of data ---- */

struct statfs_call {
    struct disp *d;
    struct cl_op *parent;
    struct cl_op sub;
};

static void statfs_done_cb(struct cl_op *op)
{
    struct statfs_call *c = op->ctx;
    struct cl_op *parent = c->parent;
    struct rpc_frame *reply = op->reply;
    op->reply = NULL;
    /* one brick's sizes, as the set's: every file takes 1/k of its size
     * on each brick (a quota limit's sizes are the volume's already) */
    if (op->status == 0 && reply && rpc_has(&reply->msg, RPC_T_STATFS) &&
        !(rpc_has(&reply->msg, RPC_T_FLAGS) && (reply->msg.flags & RPC_STATFS_QUOTA))) {
        struct rpc_statfs *st = &reply->msg.statfs;
        st->blocks *= (uint64_t)c->d->k;
        st->bfree *= (uint64_t)c->d->k;
        st->bavail *= (uint64_t)c->d->k;
    }
    parent->rounds = op->rounds;
    int status = op->status;
    free(c);
    cl_op_complete(parent, status, reply);
}

static void do_statfs(struct disp *d, struct cl_op *op)
{
    struct statfs_call *c = calloc(1, sizeof(*c));
    if (!c) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    c->d = d;
    c->parent = op;
    cl_op_init(&c->sub, RPC_OP_STATFS, statfs_done_cb, c);
    c->sub.args = op->args;
    cl_submit(d->set, &c->sub);
}

/* ---- the layer ---- */

static void disp_submit(struct cl_layer *self, struct cl_op *op)
{
    struct disp *d = self->priv;
    struct rpc_msg *a = &op->args;
    switch (a->op) {
    case RPC_OP_OPEN:
    case RPC_OP_CREATE:
        if (rpc_has(a, RPC_T_FLAGS)) {
            /* a partial stripe is read before it is written, and a
             * fragment's offset is never its end of file */
            uint64_t fl = a->flags & ~(uint64_t)O_APPEND;
            if ((fl & O_ACCMODE) == O_WRONLY)
                fl = (fl & ~(uint64_t)O_ACCMODE) | O_RDWR;
            a->flags = fl;
        }
        cl_submit(d->set, op);
        return;
    case RPC_OP_READ: {
        struct dop *o = dop_new(d, op, D_READ);
        if (!o)
            return;
        o->off = a->offset;
        o->len = a->size;
        dop_start(o, a->fh);
        return;
    }
    case RPC_OP_WRITE: {
        int n_ext = rpc_has(a, RPC_T_EXTENTS) ? rpc_extents_check(a, NULL) : 0;
        if (n_ext < 0) {
            cl_op_complete(op, n_ext, NULL);
            return;
        }
        struct dop *o = dop_new(d, op, D_WRITE);
        if (!o)
            return;
        if (n_ext) {
            o->ext_n = (uint32_t)n_ext;
            next_extent(o);
        } else {
            o->off = a->offset;
            o->len = rpc_has(a, RPC_T_DATA) ? a->data.len : 0;
            o->wdata = o->len ? a->data.p : (const uint8_t *)"";
        }
        dop_start(o, a->fh);
        return;
    }
    case RPC_OP_SETATTR:
        if (rpc_has(a, RPC_T_VALID) && (a->valid & RPC_SET_SIZE)) {
            do_truncate(d, op);
            return;
        }
        break;
    case RPC_OP_MAKE_FILE:
        do_make(d, op);
        return;
    case RPC_OP_FALLOCATE:
        do_fallocate(d, op);
        return;
    case RPC_OP_LSEEK: {
        struct dop *o = dop_new(d, op, D_LSEEK);
        if (!o)
            return;
        o->off = a->offset;
        dop_start(o, a->fh);
        return;
    }
    case RPC_OP_STATFS:
        do_statfs(d, op);
        return;
    case RPC_OP_CHECKSUM:
        cl_op_complete(op, -EOPNOTSUPP, NULL); /* a fragment's sums are not the file's */
        return;
    default:
        break;
    }
    cl_submit(d->set, op);
}

static void disp_reconfigure(struct cl_layer *self, const struct opt_set *opts)
{
    struct disp *d = self->priv;
    if (d->set->reconfigure)
        d->set->reconfigure(d->set, opts);
}

static void disp_destroy(struct cl_layer *self)
{
    struct disp *d = self->priv;
    while (d->files) {
        struct dfile *f = d->files;
        d->files = f->next;
        free(f);
    }
    cl_ec_free(d->ec);
    free(d->volume);
    free(self->children);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

struct cl_layer *cl_disp_new(struct cl_layer **children, int k, int m, const char *volume)
{
    struct disp *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->ec = cl_ec_new(k, m);
    d->volume = strdup(volume ? volume : "");
    d->layer.children = calloc(1, sizeof(*d->layer.children));
    if (d->ec && d->volume && d->layer.children)
        d->set = cl_repl_new(children, k + m, 0, volume, 0);
    if (!d->set) {
        cl_ec_free(d->ec);
        free(d->volume);
        free(d->layer.children);
        free(d);
        return NULL;
    }
    cl_repl_pin_quorum(d->set, k);
    d->k = k;
    d->m = m;
    d->n = k + m;
    d->chunk = CL_DISP_CHUNK;
    pthread_mutex_init(&d->lock, NULL);
    d->layer.children[0] = d->set;
    d->layer.n_children = 1;
    d->layer.name = "disperse";
    d->layer.submit = disp_submit;
    d->layer.reconfigure = disp_reconfigure;
    d->layer.destroy = disp_destroy;
    d->layer.priv = d;
    return &d->layer;
}
