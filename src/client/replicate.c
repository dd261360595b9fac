/* The replicate layer (replicate.h, docs/replication.md): fan-out with
 * quorum for changes, one child for reads, per-open vectors of child
 * handles, and a background heal thread. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../rpc/opinfo.h"
#include "client.h"
#include "replicate.h"

#define NOFH UINT64_MAX

struct rfh {
    uint64_t fh[CL_REPL_MAX]; /* child handles; NOFH where the open failed */
    int read_child, lock_child, is_dir;
    int inuse;
    char *path; /* as opened, for log lines and the object's own marks */
    gfid_t gfid;
    int has_gfid;
};

struct repl {
    struct cl_layer layer;
    int n, arbiter;
    /* cl_repl_quorum_met's need (cluster.quorum-type, -count): set by
     * reconfigure while operations run, so read and written atomically */
    int need;
    int pinned; /* > 0: need is this, whatever the options (cl_repl_pin_quorum) */
    char *volume;
    /* suspect: the child was seen down since the last clean heal pass, so
     * its copies may be stale: reads avoid it. Atomic bits. */
    uint32_t suspect;
    /* gone: members removed (cl_repl_remove_child) whose slot is still
     * counted by operations begun before; never asked, never read from.
     * Atomic bits. retired: their layers, shut down, destroyed with the
     * layer (an operation begun before may still name them). */
    uint32_t gone;
    struct cl_layer *retired[CL_REPL_MAX];
    int n_retired;
    /* held by a heal pass of the heal thread and by a change of the set's
     * members, so that a pass sees one shape of the set */
    pthread_mutex_t shape_lock;
    /* failures of children logged, per child: when the last line was
     * written and how many were left out since (rate limit) */
    uint64_t failed_logged_ms[CL_REPL_MAX];
    unsigned failed_quiet[CL_REPL_MAX];
    pthread_mutex_t lock; /* the handle table */
    struct rfh **fhs;
    size_t n_fhs;
    /* heal thread */
    pthread_t thread;
    int thread_started, stopping, interval_ms;
    pthread_cond_t cond;
    pthread_mutex_t heal_lock;
};

/* ---- pure helpers ---- */

int cl_repl_quorum_met(int n, int arbiter, int need, int data_op, uint32_t ok)
{
    int c = __builtin_popcount(ok);
    if (arbiter && data_op && !(ok & ((1u << (n - 1)) - 1)))
        return 0;
    if (need > 0)
        return c >= need;
    return 2 * c > n || (2 * c == n && (ok & 1));
}

int cl_repl_quorum_need(const char *type, int64_t count, int n)
{
    if (type && strcmp(type, "none") == 0)
        return 1;
    if (type && strcmp(type, "fixed") == 0 && count > 0)
        return count > n ? n : (int)count;
    return 0;
}

static int transient(int e)
{
    return e == -ENOTCONN || e == -ETIMEDOUT;
}

int cl_repl_merge_error(int n, uint32_t asked, const int *errs)
{
    int best = 0, best_count = 0;
    for (int i = 0; i < n; i++) {
        if (!(asked >> i & 1) || errs[i] >= 0 || transient(errs[i]))
            continue;
        int c = 0;
        for (int j = 0; j < n; j++)
            if ((asked >> j & 1) && errs[j] == errs[i])
                c++;
        if (c > best_count) {
            best = errs[i];
            best_count = c;
        }
    }
    return best ? best : -ENOTCONN;
}

int cl_repl_pick(int n, uint64_t hash, uint32_t prefer, uint32_t usable)
{
    for (int pass = 0; pass < 2; pass++) {
        uint32_t set = pass == 0 ? usable & prefer : usable;
        for (int k = 0; k < n; k++) {
            int i = (int)((hash + (uint64_t)k) % (uint64_t)n);
            if (set >> i & 1)
                return i;
        }
    }
    return -1;
}

static uint64_t hash_bytes(const struct rpc_bytes *b)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < b->len; i++)
        h = (h ^ b->p[i]) * 1099511628211ull;
    return h;
}

/* ---- child state ---- */

static uint32_t up_mask(struct repl *r)
{
    uint32_t m = 0, gone = __atomic_load_n(&r->gone, __ATOMIC_ACQUIRE);
    int n = __atomic_load_n(&r->n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (gone >> i & 1)
            continue;
        else if (cl_proto_connected(r->layer.children[i]))
            m |= 1u << i;
        else
            __atomic_or_fetch(&r->suspect, 1u << i, __ATOMIC_RELAXED);
    return m;
}

static uint32_t data_mask(struct repl *r)
{
    uint32_t all = (1u << r->n) - 1;
    return r->arbiter ? all & ~(1u << (r->n - 1)) : all;
}

/* Children some child holds marks against (docs/replication.md, "Reads
 * come from a good copy"): their copies may miss changes, so nothing is
 * read from them. */
static uint32_t accused_mask(struct repl *r)
{
    uint32_t m = 0;
    for (int i = 0; i < r->n; i++)
        m |= cl_proto_accused(r->layer.children[i]);
    return m & ((1u << r->n) - 1);
}

static int quorum_met(struct repl *r, int data_op, uint32_t ok)
{
    return cl_repl_quorum_met(r->n, r->arbiter, __atomic_load_n(&r->need, __ATOMIC_RELAXED),
                              data_op, ok);
}

static void child_failed(struct repl *r, int i, int status)
{
    if (transient(status) || status == -EIO)
        __atomic_or_fetch(&r->suspect, 1u << i, __ATOMIC_RELAXED);
}

/* ---- handles ---- */

static struct rfh *fh_get(struct repl *r, uint64_t id)
{
    struct rfh *h = NULL;
    pthread_mutex_lock(&r->lock);
    if (id >= 1 && id <= r->n_fhs && r->fhs[id - 1] && r->fhs[id - 1]->inuse)
        h = r->fhs[id - 1];
    pthread_mutex_unlock(&r->lock);
    return h;
}

static int fh_add(struct repl *r, struct rfh *h, uint64_t *id)
{
    pthread_mutex_lock(&r->lock);
    size_t i;
    for (i = 0; i < r->n_fhs && r->fhs[i]; i++)
        ;
    if (i == r->n_fhs) {
        size_t cap = r->n_fhs ? r->n_fhs * 2 : 64;
        struct rfh **n = realloc(r->fhs, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&r->lock);
            return -ENOMEM;
        }
        memset(n + r->n_fhs, 0, (cap - r->n_fhs) * sizeof(*n));
        r->fhs = n;
        r->n_fhs = cap;
    }
    h->inuse = 1;
    r->fhs[i] = h;
    *id = i + 1;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

static void fh_remove(struct repl *r, uint64_t id)
{
    pthread_mutex_lock(&r->lock);
    if (id >= 1 && id <= r->n_fhs && r->fhs[id - 1]) {
        free(r->fhs[id - 1]->path);
        free(r->fhs[id - 1]);
        r->fhs[id - 1] = NULL;
    }
    pthread_mutex_unlock(&r->lock);
}

/* ---- fan-out ---- */

enum fan_kind { FAN_CHANGE, FAN_OPEN, FAN_CLOSE, FAN_SYNC, FAN_MARK };

struct fan {
    struct repl *r;
    struct cl_op *parent;
    enum fan_kind kind;
    int data_op;
    int n; /* the set's members when it began (bits of asked, sub[]) */
    uint32_t asked, missed;
    int remaining;
    struct rfh *h;      /* FH ops and opens */
    uint64_t parent_fh; /* FAN_CLOSE: the id to free */
    int errs[CL_REPL_MAX];
    struct cl_op sub[CL_REPL_MAX];
    /* FAN_MARK: the fan whose result waits for the marks */
    struct fan *after;
    int result;
    struct rpc_frame *reply;
    uint32_t rounds; /* round trips of the phase before the marks */
    /* cl_repl_change_each: rewrites each child's arguments (a fragment's
     * data for the disperse layer above) */
    cl_repl_each_cb each;
    void *each_ctx;
};

static void fan_finish(struct fan *f);

static void sub_done_cb(struct cl_op *sub)
{
    struct fan *f = sub->ctx;
    if (__atomic_sub_fetch(&f->remaining, 1, __ATOMIC_ACQ_REL) == 0)
        fan_finish(f);
}

/* Submits the prepared sub-operations of f->asked. Touches nothing of f
 * after the last submit (its completion may free f). */
static void fan_go(struct fan *f)
{
    struct cl_layer **ch = f->r->layer.children;
    int idx[CL_REPL_MAX], k = 0;
    for (int i = 0; i < f->n; i++)
        if (f->asked >> i & 1)
            idx[k++] = i;
    f->remaining = k;
    for (int j = 0; j < k; j++)
        cl_submit(ch[idx[j]], &f->sub[idx[j]]);
}

static void complete_and_free(struct fan *f, int status, struct rpc_frame *reply)
{
    struct cl_op *parent = f->parent;
    free(f);
    cl_op_complete(parent, status, reply);
}

/* Sends MARK to the children in ok for the change of f the children in
 * failed missed; f completes when the marks are written. */
static int send_marks(struct fan *f, uint32_t ok, uint32_t failed)
{
    struct fan *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->r = f->r;
    m->n = f->n;
    m->kind = FAN_MARK;
    m->after = f;
    m->asked = ok;
    const struct rpc_msg *a = &f->parent->args;
    for (int i = 0; i < f->n; i++) {
        if (!(ok >> i & 1))
            continue;
        struct cl_op *s = &m->sub[i];
        cl_op_init(s, RPC_OP_MARK, sub_done_cb, m);
        RPC_SET(&s->args, flags, RPC_T_FLAGS, a->op);
        RPC_SET(&s->args, pending, RPC_T_PENDING, failed);
        if (rpc_has(a, RPC_T_PATH))
            rpc_set_bytes(&s->args, RPC_T_PATH, &s->args.path, a->path.p, a->path.len);
        if (rpc_has(a, RPC_T_PATH2))
            rpc_set_bytes(&s->args, RPC_T_PATH2, &s->args.path2, a->path2.p, a->path2.len);
        if (f->h && f->h->fh[i] != NOFH)
            RPC_SET(&s->args, fh, RPC_T_FH, f->h->fh[i]);
    }
    fan_go(m);
    return 0;
}

static void free_op_cb(struct cl_op *op)
{
    cl_op_release(op);
    free(op);
}

static void release_child_fhs(struct repl *r, struct rfh *h, unsigned op)
{
    /* Fire and forget: the handles of a failed open. */
    for (int i = 0; i < r->n; i++) {
        if (h->fh[i] == NOFH)
            continue;
        struct cl_op *s = calloc(1, sizeof(*s));
        if (!s)
            continue;
        cl_op_init(s, h->is_dir ? RPC_OP_RELEASEDIR : RPC_OP_RELEASE, NULL, NULL);
        s->done = free_op_cb;
        RPC_SET(&s->args, fh, RPC_T_FH, h->fh[i]);
        cl_submit(r->layer.children[i], s);
    }
    (void)op;
}

/* A WRITE a data child stored only in part (its disk filled up during it)
 * failed there: the child gets ENOSPC and is marked like any child that
 * failed, unless every child that took the write stored the same part
 * (then that is the write's short result, as write(2) has it). */
static void short_writes(struct fan *f)
{
    struct repl *r = f->r;
    uint64_t most = 0;
    for (int i = 0; i < f->n; i++) {
        const struct rpc_frame *rep = f->sub[i].reply;
        if ((f->asked >> i & 1) && f->sub[i].status == 0 && rep && rpc_has(&rep->msg, RPC_T_SIZE) &&
            rep->msg.size > most)
            most = rep->msg.size;
    }
    for (int i = 0; i < f->n; i++) {
        const struct rpc_frame *rep = f->sub[i].reply;
        if ((f->asked >> i & 1) && f->sub[i].status == 0 && rep && rpc_has(&rep->msg, RPC_T_SIZE) &&
            rep->msg.size < most) {
            log_warn("volume %s: replica %d stored %llu of %llu bytes of a write (no space?): "
                     "marked for heal",
                     r->volume, i, (unsigned long long)rep->msg.size, (unsigned long long)most);
            f->sub[i].status = -ENOSPC;
            rpc_frame_free(f->sub[i].reply);
            f->sub[i].reply = NULL;
        }
    }
}

/* Logs that child i failed f's change the others took (at most one line a
 * second per child, with a count of those left out): which brick, which
 * object, why, and what became of the change. */
static void note_failure(struct repl *r, struct fan *f, int i, int status)
{
    uint64_t now = net_now_ms();
    unsigned quiet = 0;
    pthread_mutex_lock(&r->lock);
    if (now - r->failed_logged_ms[i] < 1000) {
        r->failed_quiet[i]++;
        pthread_mutex_unlock(&r->lock);
        return;
    }
    r->failed_logged_ms[i] = now;
    quiet = r->failed_quiet[i];
    r->failed_quiet[i] = 0;
    pthread_mutex_unlock(&r->lock);
    const struct rpc_msg *a = &f->parent->args;
    char brick[512], path[PATH_MAX] = "";
    cl_proto_describe(r->layer.children[i], brick, sizeof(brick));
    if (rpc_has(a, RPC_T_PATH))
        rpc_bytes_str(&a->path, path, sizeof(path));
    else if (f->h && f->h->path)
        snprintf(path, sizeof(path), "%s", f->h->path);
    log_warn("volume %s: brick %s failed %s of %s: %s; %s (%u more failures not logged)", r->volume,
             brick, rpc_op_name((unsigned)a->op), *path ? path : "an open file",
             strerror(-f->errs[i]),
             status == 0 ? "the others took it and mark it for heal" : "the change failed", quiet);
}

static void fan_finish(struct fan *f)
{
    struct repl *r = f->r;
    uint32_t ok = 0, rounds = 0;
    int first_ok = -1, first_data_ok = -1;
    if (f->kind == FAN_CHANGE && f->parent->args.op == RPC_OP_WRITE && !f->each)
        short_writes(f); /* fragments differ in length: each is checked by its owner */
    /* The reply passed up comes from a copy nobody accuses when one took
     * the change: its attributes are those of a complete copy. */
    uint32_t acc = f->kind == FAN_MARK ? 0 : accused_mask(r);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < f->n; i++) {
            if (!(f->asked >> i & 1) || f->sub[i].status != 0)
                continue;
            if (first_ok < 0 && (pass || !(acc >> i & 1)))
                first_ok = i;
            if (first_data_ok < 0 && (data_mask(r) >> i & 1) && (pass || !(acc >> i & 1)))
                first_data_ok = i;
        }
    /* A member removed meanwhile (cl_repl_remove_child) counts for
     * nothing: neither in the quorum nor as one to mark. */
    uint32_t live = ((1u << __atomic_load_n(&r->n, __ATOMIC_ACQUIRE)) - 1) &
                    ~__atomic_load_n(&r->gone, __ATOMIC_ACQUIRE);
    for (int i = 0; i < f->n; i++) {
        if (!(f->asked >> i & 1))
            continue;
        if (f->sub[i].rounds > rounds)
            rounds = f->sub[i].rounds; /* the children were asked in parallel */
        f->errs[i] = f->sub[i].status;
        if (!(live >> i & 1))
            f->errs[i] = 0;
        else if (f->sub[i].status == 0)
            ok |= 1u << i;
        else
            child_failed(r, i, f->sub[i].status);
    }
    if (f->kind == FAN_MARK) {
        struct fan *after = f->after;
        for (int i = 0; i < f->n; i++)
            if (f->asked >> i & 1)
                cl_op_release(&f->sub[i]);
        if (!ok && after->result == 0) {
            /* The copies differ and no brick could record it: the caller
             * must not be told all is well (a create keeps its handle;
             * its data written later is marked like any). */
            log_error("volume %s: %s reached only some replicas and no brick could record "
                      "which%s",
                      r->volume, rpc_op_name((unsigned)after->parent->args.op),
                      after->kind == FAN_CHANGE ? ": reporting EIO" : "");
            if (after->kind == FAN_CHANGE) {
                after->result = -EIO;
                rpc_frame_free(after->reply);
                after->reply = NULL;
            }
        }
        free(f);
        after->parent->rounds = after->rounds + rounds;
        complete_and_free(after, after->result, after->reply);
        return;
    }
    int chosen = first_data_ok >= 0 ? first_data_ok : first_ok;
    int sync_op = f->kind == FAN_SYNC && f->parent->args.op == RPC_OP_FSYNC;
    int status;
    if (f->kind == FAN_CLOSE)
        status = 0;
    else if (sync_op)
        /* Durable where a quorum says so; the children that failed it
         * may have lost what they had taken (a write-back error of the
         * brick's disk, a server gone before it wrote out): they are
         * marked below like children that missed a change. */
        status = quorum_met(r, 1, ok) ? 0 : cl_repl_merge_error(f->n, f->asked, f->errs);
    else if (f->kind == FAN_SYNC)
        status = ok ? 0 : cl_repl_merge_error(f->n, f->asked, f->errs);
    else if (f->kind == FAN_OPEN && f->parent->args.op != RPC_OP_CREATE)
        /* Opening changes nothing: one data child that has the object will do. */
        status = first_data_ok >= 0 ? 0 : cl_repl_merge_error(f->n, f->asked, f->errs);
    else if (quorum_met(r, f->data_op, ok) && (f->kind != FAN_OPEN || first_data_ok >= 0))
        status = 0;
    else
        status = cl_repl_merge_error(f->n, f->asked, f->errs);
    if (f->kind == FAN_OPEN && !ok && status == 0)
        status = -EIO;
    f->parent->rounds = rounds;
    struct rpc_frame *reply = NULL;
    if (status == 0 && chosen >= 0) {
        reply = f->sub[chosen].reply;
        f->sub[chosen].reply = NULL;
        /* A lease holds only as far as every child that did it granted it. */
        for (int i = 0; i < f->n && rpc_has(&reply->msg, RPC_T_LEASE); i++) {
            if (!(ok >> i & 1) || i == chosen)
                continue;
            const struct rpc_frame *o = f->sub[i].reply;
            if (!o || !rpc_has(&o->msg, RPC_T_LEASE))
                reply->msg.present &= ~(1ull << RPC_T_LEASE);
            else
                reply->msg.lease &= o->msg.lease;
            /* No extended attributes only if no copy has any. */
            if (!o || !rpc_has(&o->msg, RPC_T_NOXATTRS))
                reply->msg.present &= ~(1ull << RPC_T_NOXATTRS);
        }
    }
    for (int i = 0; i < f->n; i++)
        if (f->asked >> i & 1) {
            if (f->kind == FAN_OPEN && f->sub[i].status == 0 && f->sub[i].reply)
                f->h->fh[i] = f->sub[i].reply->msg.fh;
            else if (f->kind == FAN_OPEN && f->sub[i].status == 0 && i == chosen && reply)
                f->h->fh[i] = reply->msg.fh;
            cl_op_release(&f->sub[i]);
        }
    if (f->kind == FAN_CLOSE) {
        fh_remove(r, f->parent_fh);
        rpc_frame_free(reply); /* a release answers nothing */
        complete_and_free(f, 0, NULL);
        return;
    }
    if (f->kind == FAN_OPEN) {
        struct rfh *h = f->h;
        if (status == 0) {
            uint64_t id;
            status = fh_add(r, h, &id);
            if (status == 0) {
                uint32_t cand = 0;
                for (int i = 0; i < f->n; i++)
                    if (h->fh[i] != NOFH && (data_mask(r) >> i & 1))
                        cand |= 1u << i;
                uint32_t acc = accused_mask(r);
                uint32_t clean = ~(__atomic_load_n(&r->suspect, __ATOMIC_RELAXED) | acc);
                h->read_child = cl_repl_pick(r->n, id, clean, cand & ~acc);
                if (h->read_child < 0)
                    h->read_child = cl_repl_pick(r->n, id, clean, cand);
                if (rpc_has(&reply->msg, RPC_T_ATTR)) {
                    h->gfid = reply->msg.attr.gfid;
                    h->has_gfid = 1;
                }
                reply->msg.fh = id;
            }
        }
        if (status < 0) {
            release_child_fhs(r, h, f->parent->args.op);
            free(h->path);
            free(h);
            rpc_frame_free(reply);
            reply = NULL;
        }
        f->h = NULL;
        /* A create is a change too: the children that failed get marks. */
    }
    uint32_t failed = f->asked & ~ok & live;
    /* A change a quorum took stands, whatever the others said (a full
     * disk, a failing one, a read-only one): they are marked below, read
     * from by nobody until healed, and named in the log. One that a
     * quorum refused fails with the error most children gave. */
    int change = f->kind == FAN_CHANGE || sync_op ||
                 (f->kind == FAN_OPEN && f->parent->args.op == RPC_OP_CREATE);
    for (int i = 0; i < f->n && failed && ok && change; i++)
        if ((failed >> i & 1) && !transient(f->errs[i]))
            note_failure(r, f, i, status);
    /* The replicas must not differ without a record, whether the change
     * stood or not. When it stood, the children that failed it missed it:
     * the others record that. When a quorum refused it with a definite
     * answer (EEXIST: another client made the name first; ENOSPC; EIO),
     * those children hold what the application was told is there, and
     * the few that took the change are the odd ones: the refusing
     * children record it against them, so that heal undoes it (two
     * clients making one name at once then agree on the winner's copy
     * instead of each blaming the other). Children that failed only by
     * being unreachable cannot record anything: then the ones that took
     * it record against them, as when it stood; except for fragments
     * (quorum pinned by disperse.c): a fragment of a version fewer than k
     * bricks hold decodes to nothing, while the unreachable ones may
     * still hold the old version whole, so the ones that took it record
     * against THEMSELVES, and heal rebuilds their fragments from the
     * others (docs/disperse.md, "Quorum and a brick down"). */
    if (failed && ok && change) {
        uint32_t definite = 0;
        for (int i = 0; i < f->n; i++)
            if ((failed >> i & 1) && !transient(f->errs[i]))
                definite |= 1u << i;
        uint32_t on = ok, against = failed;
        if (status < 0 && definite && !sync_op) {
            on = definite;
            against = ok;
        } else if (status < 0 && !definite && r->pinned) {
            against = ok;
        }
        f->result = status;
        f->reply = reply;
        f->rounds = rounds;
        if (f->kind == FAN_OPEN && status == 0)
            f->h = fh_get(r, reply->msg.fh);
        /* MARK by handle needs the child's handle: map back. */
        if (send_marks(f, on, against) == 0)
            return;
    }
    complete_and_free(f, status, reply);
}

/* Prepares a fan-out of parent to the children in ask; missed are the
 * children that will not get it. */
static struct fan *fan_new(struct repl *r, struct cl_op *parent, enum fan_kind kind, struct rfh *h,
                           uint32_t ask, uint32_t missed, cl_repl_each_cb each, void *each_ctx)
{
    struct fan *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->r = r;
    f->n = __atomic_load_n(&r->n, __ATOMIC_ACQUIRE);
    f->parent = parent;
    f->kind = kind;
    f->h = h;
    f->asked = ask;
    f->missed = missed;
    f->data_op = rpc_op_is((unsigned)parent->args.op, RPC_OPF_DATA);
    for (int i = 0; i < f->n; i++) {
        if (!(ask >> i & 1))
            continue;
        struct cl_op *s = &f->sub[i];
        cl_op_init(s, (uint16_t)parent->args.op, sub_done_cb, f);
        s->args = parent->args;
        if (h && rpc_has(&s->args, RPC_T_FH))
            s->args.fh = h->fh[i];
        if (missed && kind == FAN_CHANGE)
            RPC_SET(&s->args, pending, RPC_T_PENDING, missed);
        else if (missed && kind == FAN_OPEN && parent->args.op == RPC_OP_CREATE)
            RPC_SET(&s->args, pending, RPC_T_PENDING, missed);
        int arb = r->arbiter && i == f->n - 1;
        if (arb && f->data_op) {
            /* The arbiter keeps no data: it records the change's marks. */
            struct rpc_msg a;
            memset(&a, 0, sizeof(a));
            a.op = RPC_OP_MARK;
            RPC_SET(&a, flags, RPC_T_FLAGS, parent->args.op);
            RPC_SET(&a, pending, RPC_T_PENDING, missed);
            RPC_SET(&a, fh, RPC_T_FH, h ? h->fh[i] : 0);
            if (parent->args.op == RPC_OP_WRITE && rpc_has(&parent->args, RPC_T_FLAGS) &&
                (parent->args.flags & RPC_WRITE_KILL_SUIDGID))
                RPC_SET(&a, valid, RPC_T_VALID, RPC_SET_KILL_SUIDGID);
            s->args = a;
        } else if (arb && parent->args.op == RPC_OP_SETATTR) {
            s->args.valid &= ~(uint64_t)RPC_SET_SIZE;
        } else if (arb && parent->args.op == RPC_OP_MAKE_FILE) {
            s->args.present &= ~((1ull << RPC_T_DATA) | (1ull << RPC_T_SIZE));
        }
        if (each)
            each(each_ctx, i, &s->args);
    }
    f->each = each;
    f->each_ctx = each_ctx;
    return f;
}

static void fan_change(struct repl *r, struct cl_op *op, cl_repl_each_cb each, void *each_ctx)
{
    uint32_t up = up_mask(r), ask = up, all = (1u << r->n) - 1;
    struct rfh *h = NULL;
    if (rpc_has(&op->args, RPC_T_FH)) {
        h = fh_get(r, op->args.fh);
        if (!h) {
            cl_op_complete(op, -EBADF, NULL);
            return;
        }
        for (int i = 0; i < r->n; i++)
            if (h->fh[i] == NOFH)
                ask &= ~(1u << i);
    }
    int data_op = rpc_op_is((unsigned)op->args.op, RPC_OPF_DATA);
    /* Not enough children to make a quorum: nothing is sent, so nothing is
     * half done. */
    if (!quorum_met(r, data_op, ask)) {
        log_debug("%s refused: quorum not met (up 0x%x of %d)", rpc_op_name((unsigned)op->args.op),
                  ask, r->n);
        cl_op_complete(op, -ENOTCONN, NULL);
        return;
    }
    struct fan *f = fan_new(r, op, FAN_CHANGE, h, ask, all & ~ask, each, each_ctx);
    if (!f) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    fan_go(f);
}

static void fan_open(struct repl *r, struct cl_op *op)
{
    uint32_t up = up_mask(r), all = (1u << r->n) - 1;
    unsigned code = (unsigned)op->args.op;
    if ((code == RPC_OP_CREATE && !quorum_met(r, 0, up)) || !(up & data_mask(r))) {
        cl_op_complete(op, -ENOTCONN, NULL);
        return;
    }
    struct rfh *h = calloc(1, sizeof(*h));
    if (!h) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    for (int i = 0; i < CL_REPL_MAX; i++)
        h->fh[i] = NOFH;
    h->is_dir = code == RPC_OP_OPENDIR;
    h->lock_child = -1;
    if (rpc_has(&op->args, RPC_T_PATH) && op->args.path.len < PATH_MAX &&
        (h->path = malloc(op->args.path.len + 1)))
        rpc_bytes_str(&op->args.path, h->path, op->args.path.len + 1);
    uint32_t ask = up;
    if (h->is_dir)
        ask &= data_mask(r) | (r->arbiter ? 0 : all); /* listings come from data children */
    struct fan *f = fan_new(r, op, FAN_OPEN, NULL, ask, all & ~ask, NULL, NULL);
    if (!f) {
        free(h->path);
        free(h);
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    f->h = h;
    fan_go(f);
}

static void fan_handles(struct repl *r, struct cl_op *op, enum fan_kind kind)
{
    struct rfh *h = fh_get(r, op->args.fh);
    if (!h) {
        cl_op_complete(op, kind == FAN_CLOSE ? 0 : -EBADF, NULL);
        return;
    }
    uint32_t ask = 0;
    for (int i = 0; i < r->n; i++)
        if (h->fh[i] != NOFH)
            ask |= 1u << i;
    ask &= up_mask(r); /* a down child's handles died with its connection */
    if (!ask) {
        if (kind == FAN_CLOSE)
            fh_remove(r, op->args.fh);
        cl_op_complete(op, kind == FAN_CLOSE ? 0 : -ENOTCONN, NULL);
        return;
    }
    struct fan *f = fan_new(r, op, kind, h, ask, 0, NULL, NULL);
    if (!f) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    f->parent_fh = op->args.fh;
    fan_go(f);
}

/* ---- reads: one child, failing over ---- */

struct single {
    struct repl *r;
    struct cl_op *parent;
    struct rfh *h;
    uint32_t tried;
    uint64_t hash;
    int fixed;       /* >= 0: this child only (readdir past its start, locks) */
    int child;       /* the child asked last */
    uint32_t rounds; /* of the tries so far (sequential) */
    /* every reachable copy was accused: the object's own marks were
     * read, and allowed says which copies they leave */
    int verified;
    uint32_t allowed;
    struct cl_op sub;
};

static void single_try(struct single *s);

static void single_done_cb(struct cl_op *sub)
{
    struct single *s = sub->ctx;
    int st = sub->status;
    s->rounds += sub->rounds;
    if (st < 0)
        child_failed(s->r, s->child, st);
    if (st < 0 && (transient(st) || st == -EIO) && s->fixed < 0) {
        cl_op_release(sub);
        single_try(s);
        return;
    }
    struct cl_op *parent = s->parent;
    struct rpc_frame *reply = sub->reply;
    sub->reply = NULL;
    parent->rounds = s->rounds;
    free(s);
    cl_op_complete(parent, st, reply);
}

/* ---- every reachable copy accused: this object's own marks decide ----
 * A brick's accusation covers every object it holds marks on, so with
 * marks against every member somewhere (two outages in a row, a split
 * brain of one file) no copy would be read at all. Then the object's own
 * marks and its parent's are read from every reachable child (LOOKUP with
 * PENDING, at once): a copy none of them accuses, holding the same object
 * as the other unaccused copies, is good for this object. */

struct verify {
    struct single *s;
    int remaining;
    uint32_t asked;
    struct cl_op obj[CL_REPL_MAX], par[CL_REPL_MAX];
    char path[PATH_MAX], parent[PATH_MAX]; /* what the LOOKUPs name */
};

static void verify_done_cb(struct cl_op *op);

static const char *single_path(const struct single *s, char *buf, size_t len)
{
    const struct rpc_msg *a = &s->parent->args;
    if (rpc_has(a, RPC_T_PATH))
        return rpc_bytes_str(&a->path, buf, len) < 0 ? NULL : buf;
    if (s->h && s->h->path && s->h->has_gfid) {
        snprintf(buf, len, "%s", s->h->path);
        return buf;
    }
    return NULL;
}

static void lookup_marks(struct cl_op *op, const char *path, void *ctx)
{
    cl_op_init(op, RPC_OP_LOOKUP, verify_done_cb, ctx);
    rpc_set_str(&op->args, RPC_T_PATH, &op->args.path, path);
    RPC_SET(&op->args, pending, RPC_T_PENDING, 0);
}

/* 0 when the reads of s wait for the object's marks; -1 when they cannot
 * be read (no path, no memory). */
static int verify_start(struct single *s)
{
    struct repl *r = s->r;
    struct verify *v = calloc(1, sizeof(*v));
    if (!v)
        return -1;
    char *path = v->path, *parent = v->parent;
    if (!single_path(s, path, sizeof(v->path))) {
        free(v);
        return -1;
    }
    snprintf(parent, sizeof(v->parent), "%s", path);
    char *slash = strrchr(parent, '/');
    int has_parent = strcmp(path, "/") != 0;
    if (slash == parent)
        slash[1] = 0;
    else if (slash)
        *slash = 0;
    v->s = s;
    v->asked = up_mask(r);
    int n = 0;
    for (int i = 0; i < r->n; i++)
        if (v->asked >> i & 1) {
            lookup_marks(&v->obj[i], path, v);
            n++;
            if (has_parent) {
                lookup_marks(&v->par[i], parent, v);
                n++;
            }
        }
    if (!n) {
        free(v);
        return -1;
    }
    v->remaining = n;
    for (int i = 0; i < r->n; i++)
        if (v->asked >> i & 1) {
            cl_submit(r->layer.children[i], &v->obj[i]);
            if (has_parent)
                cl_submit(r->layer.children[i], &v->par[i]);
        }
    return 0;
}

static uint32_t marks_of(const struct cl_op *op)
{
    if (op->status < 0 || !op->reply || !rpc_has(&op->reply->msg, RPC_T_PENDING))
        return 0;
    return (uint32_t)op->reply->msg.pending & ~RPC_PENDING_DIRTY;
}

static void verify_done_cb(struct cl_op *op)
{
    struct verify *v = op->ctx;
    if (__atomic_sub_fetch(&v->remaining, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    struct single *s = v->s;
    struct repl *r = s->r;
    uint32_t answered = 0, accused = 0, have = 0;
    gfid_t g = {{0}};
    int has_g = 0, differ = 0;
    for (int i = 0; i < r->n; i++) {
        if (!(v->asked >> i & 1))
            continue;
        struct cl_op *o = &v->obj[i], *p = &v->par[i];
        int parent_ok = p->args.op == 0 || p->status == 0; /* 0: the root, no parent asked */
        if ((o->status == 0 || o->status == -ENOENT) && parent_ok)
            answered |= 1u << i;
        accused |= marks_of(o) | marks_of(p);
    }
    uint32_t allowed = answered & ~accused & data_mask(r);
    for (int i = 0; i < r->n; i++) {
        if (!(allowed >> i & 1))
            continue;
        const struct cl_op *o = &v->obj[i];
        if (o->status == 0 && o->reply && rpc_has(&o->reply->msg, RPC_T_ATTR)) {
            have |= 1u << i;
            if (has_g && !gfid_equal(&g, &o->reply->msg.attr.gfid))
                differ = 1;
            g = o->reply->msg.attr.gfid;
            has_g = 1;
        }
    }
    /* The unaccused copies must agree on the object (and, read through a
     * handle, be the one it opened). */
    if (differ || (have && have != allowed) ||
        (s->h && s->h->has_gfid && !rpc_has(&s->parent->args, RPC_T_PATH) &&
         (!has_g || !gfid_equal(&g, &s->h->gfid))))
        allowed = 0;
    for (int i = 0; i < r->n; i++)
        if (v->asked >> i & 1) {
            cl_op_release(&v->obj[i]);
            cl_op_release(&v->par[i]);
        }
    free(v);
    s->verified = 1;
    s->allowed = allowed;
    single_try(s);
}

/* For a read ahead: one of the clean copies other than the handle's read
 * child, in turn by the window's offset (128 KiB steps); -1 when there is
 * none, and the read goes where the handle's reads go. */
static int spread_pick(struct repl *r, const struct single *s, uint32_t ok)
{
    int rc = s->h->read_child, n = 0, pick[32];
    for (int k = 1; k < r->n; k++) {
        int i = (rc + k) % r->n;
        if (ok >> i & 1)
            pick[n++] = i;
    }
    if (!n)
        return -1;
    return pick[(s->parent->args.offset >> 17) % (uint64_t)n];
}

static void single_try(struct single *s)
{
    struct repl *r = s->r;
    uint32_t usable = up_mask(r) & data_mask(r) & ~s->tried;
    if (s->h) {
        uint32_t have = 0;
        for (int i = 0; i < r->n; i++)
            if (s->h->fh[i] != NOFH)
                have |= 1u << i;
        usable &= have;
    }
    uint32_t acc = s->verified ? ~s->allowed : accused_mask(r);
    uint32_t clean = ~(__atomic_load_n(&r->suspect, __ATOMIC_RELAXED) | acc);
    if (s->fixed < 0 && usable && !(usable & ~acc)) {
        if (!s->verified && verify_start(s) == 0)
            return; /* verify_done_cb tries again */
        /* Every copy within reach may miss changes the others have: no
         * answer rather than a stale one. */
        char path[PATH_MAX];
        log_warn("volume %s: %s of %s refused: no reachable copy is known to hold every change "
                 "(reachable 0x%x)",
                 r->volume, rpc_op_name((unsigned)s->parent->args.op),
                 single_path(s, path, sizeof(path)) ? path : "an open file", usable);
        struct cl_op *parent = s->parent;
        parent->rounds = s->rounds;
        free(s);
        cl_op_complete(parent, -EIO, NULL);
        return;
    }
    if (s->fixed < 0)
        usable &= ~acc;
    int i = -1;
    if (s->fixed >= 0)
        i = s->tried || (s->h && s->h->fh[s->fixed] == NOFH) ? -1 : s->fixed;
    else if (s->parent->spread && !s->tried && s->h && s->h->read_child >= 0)
        i = spread_pick(r, s, usable & clean);
    if (i < 0 && s->fixed < 0)
        i = cl_repl_pick(r->n, s->hash, clean, usable);
    if (i < 0) {
        struct cl_op *parent = s->parent;
        parent->rounds = s->rounds;
        free(s);
        cl_op_complete(parent, -ENOTCONN, NULL);
        return;
    }
    s->tried |= 1u << i;
    s->child = i;
    cl_op_init(&s->sub, (uint16_t)s->parent->args.op, single_done_cb, s);
    s->sub.args = s->parent->args;
    if (s->h)
        s->sub.args.fh = s->h->fh[i];
    if (s->h && s->fixed < 0 && !s->parent->spread)
        s->h->read_child = i;
    cl_submit(r->layer.children[i], &s->sub);
}

/* fixed: -1, or -2 for the handle's read child, or a child index. */
static void do_single(struct repl *r, struct cl_op *op, int by_fh, int fixed)
{
    struct single *s = calloc(1, sizeof(*s));
    if (!s) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    s->r = r;
    s->parent = op;
    s->fixed = -1;
    if (by_fh) {
        s->h = fh_get(r, op->args.fh);
        if (!s->h) {
            free(s);
            cl_op_complete(op, -EBADF, NULL);
            return;
        }
        s->hash = (uint64_t)(s->h->read_child < 0 ? 0 : s->h->read_child);
        s->fixed = fixed == -2 ? s->h->read_child : fixed;
        if (fixed == -2 && s->fixed < 0) {
            free(s);
            cl_op_complete(op, -ENOTCONN, NULL);
            return;
        }
    } else {
        s->hash = rpc_has(&op->args, RPC_T_PATH) ? hash_bytes(&op->args.path) : 0;
    }
    single_try(s);
}

/* Locks: the first up child holding a handle, fixed per handle. */
static void do_lock(struct repl *r, struct cl_op *op)
{
    struct rfh *h = fh_get(r, op->args.fh);
    if (!h) {
        cl_op_complete(op, -EBADF, NULL);
        return;
    }
    if (h->lock_child < 0) {
        uint32_t up = up_mask(r) & data_mask(r);
        for (int i = 0; i < r->n && h->lock_child < 0; i++)
            if ((up >> i & 1) && h->fh[i] != NOFH)
                h->lock_child = i;
    }
    if (h->lock_child < 0) {
        cl_op_complete(op, -ENOTCONN, NULL);
        return;
    }
    do_single(r, op, 1, h->lock_child);
}

static void repl_submit(struct cl_layer *self, struct cl_op *op)
{
    struct repl *r = self->priv;
    unsigned code = (unsigned)op->args.op;
    int by_fh = rpc_has(&op->args, RPC_T_FH);
    if (rpc_op_is(code, RPC_OPF_OPEN)) {
        fan_open(r, op);
    } else if (rpc_op_is(code, RPC_OPF_CHANGE)) {
        fan_change(r, op, NULL, NULL);
    } else if (rpc_op_is(code, RPC_OPF_RELEASE)) {
        fan_handles(r, op, FAN_CLOSE);
    } else if (code == RPC_OP_FLUSH || code == RPC_OP_FSYNC) {
        fan_handles(r, op, FAN_SYNC);
    } else if (rpc_op_is(code, RPC_OPF_LOCK)) {
        do_lock(r, op);
    } else if (code == RPC_OP_READDIR) {
        do_single(r, op, 1, op->args.offset != 0 ? -2 : -1);
    } else {
        do_single(r, op, by_fh, -1);
    }
}

/* ---- background heal ---- */

/* A pass that leaves work (a brick full, failing or still down for part
 * of the set) is tried again less and less often, up to this. */
#define HEAL_BACKOFF_MAX_MS 30000

static void *heal_thread(void *arg)
{
    struct repl *r = arg;
    int wait_ms = r->interval_ms;
    pthread_mutex_lock(&r->heal_lock);
    while (!r->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)wait_ms * 1000000ull;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&r->cond, &r->heal_lock, &ts);
        if (r->stopping)
            break;
        uint32_t sus = __atomic_load_n(&r->suspect, __ATOMIC_RELAXED);
        uint32_t up = up_mask(r);
        if (!sus || (sus & ~up)) {
            wait_ms = r->interval_ms;
            continue; /* nothing to do, or a child is still down */
        }
        pthread_mutex_unlock(&r->heal_lock);
        struct cl_heal_stats st = {0};
        pthread_mutex_lock(&r->shape_lock);
        int rc = cl_heal_set(r->layer.children, r->n, r->arbiter, 0, &st);
        pthread_mutex_unlock(&r->shape_lock);
        if (rc == 0 && st.pending == 0 && st.split == 0) {
            __atomic_and_fetch(&r->suspect, ~sus, __ATOMIC_RELAXED);
            log_info("volume %s: self-heal done (%u entries, %u healed)", r->volume, st.entries,
                     st.healed);
            wait_ms = r->interval_ms;
        } else if (wait_ms < HEAL_BACKOFF_MAX_MS) {
            wait_ms = wait_ms * 2 < HEAL_BACKOFF_MAX_MS ? wait_ms * 2 : HEAL_BACKOFF_MAX_MS;
        }
        pthread_mutex_lock(&r->heal_lock);
    }
    pthread_mutex_unlock(&r->heal_lock);
    return NULL;
}

static void repl_stop(struct cl_layer *l)
{
    struct repl *r = l->priv;
    if (!r->thread_started)
        return;
    pthread_mutex_lock(&r->heal_lock);
    r->stopping = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->heal_lock);
    pthread_join(r->thread, NULL);
    r->thread_started = 0;
}

static void repl_destroy(struct cl_layer *self)
{
    struct repl *r = self->priv;
    repl_stop(self);
    for (size_t i = 0; i < r->n_fhs; i++)
        if (r->fhs[i]) {
            free(r->fhs[i]->path);
            free(r->fhs[i]);
        }
    free(r->fhs);
    free(r->volume);
    free(self->children);
    for (int i = 0; i < r->n_retired; i++)
        cl_layer_destroy_tree(r->retired[i]);
    pthread_mutex_destroy(&r->shape_lock);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->heal_lock);
    pthread_cond_destroy(&r->cond);
    free(r);
}

/* cluster.quorum-type and cluster.quorum-count, live: operations already
 * past their quorum check finish under the old rule. */
static void repl_reconfigure(struct cl_layer *self, const struct opt_set *opts)
{
    struct repl *r = self->priv;
    const char *type = opt_value(opts, "cluster.quorum-type");
    int need = cl_repl_quorum_need(type, opt_int(opts, "cluster.quorum-count"), r->n);
    if (r->pinned)
        need = r->pinned;
    int old = __atomic_exchange_n(&r->need, need, __ATOMIC_RELAXED);
    if (old == need)
        return;
    if (need == 0)
        log_info("volume %s: quorum auto: a change needs more than half of a replica set up, or "
                 "half with its first brick",
                 r->volume);
    else
        log_info("volume %s: quorum %s: a change needs %d brick%s of a replica set up", r->volume,
                 type, need, need == 1 ? "" : "s");
}

struct cl_layer *cl_repl_new(struct cl_layer **children, int n, int arbiter, const char *volume,
                             int heal_interval_ms)
{
    if (n < 2 || n > CL_REPL_MAX)
        return NULL;
    struct repl *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    /* room for every member a set may gain live (cl_repl_add_child) */
    r->layer.children = calloc(CL_REPL_MAX, sizeof(*children));
    r->volume = strdup(volume ? volume : "");
    if (!r->layer.children || !r->volume) {
        free(r->layer.children);
        free(r->volume);
        free(r);
        return NULL;
    }
    memcpy(r->layer.children, children, (size_t)n * sizeof(*children));
    r->layer.n_children = n;
    r->layer.name = "replicate";
    r->layer.submit = repl_submit;
    r->layer.stop = repl_stop;
    r->layer.destroy = repl_destroy;
    r->layer.reconfigure = repl_reconfigure;
    r->layer.priv = r;
    r->n = n;
    r->arbiter = arbiter ? 1 : 0;
    r->interval_ms = heal_interval_ms;
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->heal_lock, NULL);
    pthread_mutex_init(&r->shape_lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    if (heal_interval_ms > 0 && pthread_create(&r->thread, NULL, heal_thread, r) == 0)
        r->thread_started = 1;
    return &r->layer;
}

int cl_repl_add_child(struct cl_layer *l, struct cl_layer *child, int arbiter)
{
    struct repl *r = l->priv;
    int n = __atomic_load_n(&r->n, __ATOMIC_ACQUIRE);
    if (n >= CL_REPL_MAX || r->arbiter)
        return -ENOSPC;
    /* The slot first, then the count: an operation that sees the new count
     * finds the child. Handles opened before have no handle on it (NOFH),
     * so their changes mark it as missing them; the count before the
     * arbiter flag, so no moment counts a data child as the arbiter. */
    __atomic_store_n(&l->children[n], child, __ATOMIC_RELEASE);
    __atomic_and_fetch(&r->suspect, ~(1u << n), __ATOMIC_RELAXED);
    __atomic_and_fetch(&r->gone, ~(1u << n), __ATOMIC_RELEASE); /* a slot freed by a removal */
    __atomic_store_n(&l->n_children, n + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&r->n, n + 1, __ATOMIC_RELEASE);
    if (arbiter)
        __atomic_store_n(&r->arbiter, 1, __ATOMIC_RELEASE);
    char what[NET_HOST_MAX + PATH_MAX + 32];
    cl_proto_describe(child, what, sizeof(what));
    log_info("volume %s: replica set gains %s %s as member %d; not read from until healed",
             r->volume, arbiter ? "arbiter" : "copy", what, n);
    return 0;
}

int cl_repl_remove_child(struct cl_layer *l, int member)
{
    struct repl *r = l->priv;
    int n = __atomic_load_n(&r->n, __ATOMIC_ACQUIRE);
    if (member != n - 1 || n < 2 || r->n_retired >= CL_REPL_MAX)
        return -ENOTSUP;
    struct cl_layer *child = l->children[member];
    uint32_t bit = 1u << member;
    pthread_mutex_lock(&r->shape_lock);
    /* Gone first: from here no operation asks it or reads from it, and one
     * begun before counts its answer for nothing (fan_finish). */
    __atomic_or_fetch(&r->gone, bit, __ATOMIC_RELEASE);
    pthread_mutex_lock(&r->lock);
    for (size_t k = 0; k < r->n_fhs; k++) {
        struct rfh *h = r->fhs[k];
        if (!h)
            continue;
        h->fh[member] = NOFH; /* died with the brick */
        if (h->lock_child == member)
            h->lock_child = -1; /* its locks went with it, as with a brick down */
        if (h->read_child == member) {
            /* A listing's offsets are the removed brick's: going on
             * elsewhere would repeat or skip names, so it fails as when
             * a brick goes down, and the next one starts elsewhere. */
            h->read_child = -1;
            for (int i = 0; i < member && h->read_child < 0 && !h->is_dir; i++)
                if (h->fh[i] != NOFH && !(r->arbiter && i == n - 1))
                    h->read_child = i;
        }
    }
    pthread_mutex_unlock(&r->lock);
    /* The arbiter flag before the count: no moment counts a data member as
     * the arbiter. */
    if (r->arbiter)
        __atomic_store_n(&r->arbiter, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->n, n - 1, __ATOMIC_RELEASE);
    __atomic_store_n(&l->n_children, n - 1, __ATOMIC_RELEASE);
    __atomic_and_fetch(&r->suspect, ~bit, __ATOMIC_RELAXED);
    r->retired[r->n_retired++] = child;
    pthread_mutex_unlock(&r->shape_lock);
    char what[NET_HOST_MAX + PATH_MAX + 32];
    cl_proto_describe(child, what, sizeof(what));
    cl_proto_shutdown(child); /* what was in flight on it fails there only */
    log_info("volume %s: replica set loses member %d (%s); %d left", r->volume, member, what,
             n - 1);
    return 0;
}

/* ---- for the disperse layer ---- */

void cl_repl_change_each(struct cl_layer *l, struct cl_op *op, cl_repl_each_cb each, void *ctx)
{
    fan_change(l->priv, op, each, ctx);
}

void cl_repl_submit_to(struct cl_layer *l, struct cl_op *op, int child)
{
    struct repl *r = l->priv;
    if (child < 0 || child >= r->n) {
        cl_op_complete(op, -EINVAL, NULL);
        return;
    }
    do_single(r, op, rpc_has(&op->args, RPC_T_FH), child);
}

uint32_t cl_repl_fh_children(struct cl_layer *l, uint64_t fh, gfid_t *gfid, int *has_gfid)
{
    struct repl *r = l->priv;
    uint32_t m = 0;
    pthread_mutex_lock(&r->lock);
    if (fh >= 1 && fh <= r->n_fhs && r->fhs[fh - 1] && r->fhs[fh - 1]->inuse) {
        const struct rfh *h = r->fhs[fh - 1];
        for (int i = 0; i < r->n; i++)
            if (h->fh[i] != NOFH)
                m |= 1u << i;
        if (gfid)
            *gfid = h->gfid;
        if (has_gfid)
            *has_gfid = h->has_gfid;
    }
    pthread_mutex_unlock(&r->lock);
    return m;
}

uint32_t cl_repl_readable(struct cl_layer *l)
{
    struct repl *r = l->priv;
    return up_mask(r) & ~accused_mask(r);
}

void cl_repl_pin_quorum(struct cl_layer *l, int need)
{
    struct repl *r = l->priv;
    r->pinned = need;
    __atomic_store_n(&r->need, need, __ATOMIC_RELAXED);
}
