/* Write-behind of file data (docs/consistency.md, "Data: write-behind").
 *
 * A write to a file this mount holds exclusively, by its directory's lease
 * (a directory it made, cf_known_excl) or by its own (granted with the open,
 * cf_known_is_file_excl), is answered at once, and its data reaches the
 * bricks in the background: no other client can reach the file before a
 * brick recalls that lease. Writes that continue one another are aggregated into
 * one extent of up to performance.aggregate-size bytes. While nothing of
 * the file is in flight, the extents are sent at once, except that the last
 * one waits for more when performance.write-behind-trickling-writes is off.
 * While some is in flight, they wait for it to come back, unless they add
 * up to performance.aggregate-size; the extents that go out together (up to
 * RPC_EXTENTS_MAX, WBH_SEND_MAX bytes) travel as one WRITE with EXTENTS, so
 * scattered small writes cost the bricks one request per round trip rather
 * than one each (docs/notes/performance-notes.md, round eight).
 *
 * Bounded per file by performance.write-behind-window-size: a write that
 * takes the file's pending and in-flight bytes past it is queued as well,
 * but answered only once the file is back under the window; and by
 * client.write-back-size bytes over all files, beyond which writes wait for
 * the bricks.
 *
 * Whatever could observe a file without its pending writes waits for them
 * first (cf_wbh_sync): the recall of the directory's lease (another client
 * touches it, lease.c), and this mount's read, attribute call, fallocate,
 * lseek, lock, link, rename or removal of the file, a listing of its
 * directory (fop.c), a write of it that is not written behind, fsync,
 * close, fsyncdir and unmount.
 *
 * A file written through because it is not held so (its lease was refused
 * at the open, or recalled since: another client listed its directory or
 * looked at it) asks for it again while it is written: at a write once
 * WBH_ASK_MS passed since that was first seen or since the last refusal,
 * one request at a time per file, by an OPEN whose handle is closed at
 * once (wbh_ask). So write-behind comes back in a directory another client
 * lists every second (docs/consistency.md, "Write-behind in a shared
 * directory").
 *
 * An error of a background write is logged and returned by the next fsync
 * or close of the file (once); until then its writes wait for the bricks.
 * O_SYNC, O_DSYNC and O_APPEND handles are never written behind, O_DIRECT
 * ones only with performance.strict-o-direct off. performance.write-behind
 * off or client.write-back off turn it off. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/options.h"
#include "bridge.h"

#define WBH_BUCKETS 256
#define WBH_LINKED_MAX (1u << 20)
#define WBH_SEND_MAX (1u << 20)
/* Files written through that may ask for their lease again, by a hash of
 * their node (a collision waits for the slot). */
#define WBH_ASK_SLOTS 64
/* How long a file is written through before it asks again: past the
 * bricks' cool-down after another client's look (LEASE_LOOK_COOLDOWN_MS in
 * src/brick/lease.c), or the ask is refused. */
#define WBH_ASK_MS 250

/* One extent: pending (on the file's pend list) or in flight (fly). The
 * first extent of a WRITE carries its op; the others of that WRITE follow
 * it on out. */
struct wbh_ext {
    struct cl_op op;
    struct cf *cf;
    struct wbh_file *wf;
    struct wbh_ext *next, *prev; /* pend: singly; fly: doubly linked */
    struct wbh_ext *out;         /* to submit once the lock is dropped; then the WRITE's others */
    uint64_t off, fh;
    size_t len, cap;
    char *data;
    void *joined; /* a WRITE of several extents: its DATA and EXTENTS */
};

/* A write answered once its file is back under the window. */
struct wbh_reply {
    struct wbh_reply *next;
    fuse_req_t req;
    size_t size;
};

struct wbh_file {
    struct wbh_file *next;
    uint64_t node, parent;
    struct wbh_ext *pend, *pend_last;
    struct wbh_ext *fly;
    struct wbh_reply *held, **held_tail;
    size_t bytes;      /* pending and in flight */
    size_t pend_bytes; /* pending */
    int n_fly, waiters, err;
};

struct cf_wbh {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct wbh_file *b[WBH_BUCKETS];
    size_t n_files, bytes;
    int on, trickle, strict_direct;
    size_t window, aggregate, max_bytes;
    /* Files this mount gave a second name: their other name may sit in a
     * directory nobody holds, so they are never written behind. */
    uint64_t *linked;
    size_t n_linked, cap_linked;
    /* Files written through, to ask for their lease again (wbh_ask). */
    struct {
        uint64_t node, since_ms;
        int busy; /* an ask in flight */
    } ask[WBH_ASK_SLOTS];
    uint64_t answered, held, extents, writes, bytes_sent, waits, failed, asked, granted;
};

static size_t bucket(uint64_t node)
{
    return (size_t)((node * 0x9e3779b97f4a7c15ull) >> 56) % WBH_BUCKETS;
}

static struct wbh_file *find(struct cf_wbh *W, uint64_t node)
{
    for (struct wbh_file *f = W->b[bucket(node)]; f; f = f->next)
        if (f->node == node)
            return f;
    return NULL;
}

static struct wbh_file *get(struct cf_wbh *W, uint64_t node)
{
    struct wbh_file *f = find(W, node);
    if (f)
        return f;
    f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->node = node;
    f->held_tail = &f->held;
    size_t h = bucket(node);
    f->next = W->b[h];
    W->b[h] = f;
    __atomic_add_fetch(&W->n_files, 1, __ATOMIC_RELAXED);
    return f;
}

/* Frees f when nothing of it is left. Under W->lock. */
static void maybe_free(struct cf_wbh *W, struct wbh_file *f)
{
    if (f->pend || f->fly || f->held || f->waiters || f->err)
        return;
    struct wbh_file **pp = &W->b[bucket(f->node)];
    while (*pp != f)
        pp = &(*pp)->next;
    *pp = f->next;
    free(f);
    __atomic_sub_fetch(&W->n_files, 1, __ATOMIC_RELAXED);
}

static int is_linked(const struct cf_wbh *W, uint64_t node)
{
    if (!W->cap_linked)
        return 0;
    for (size_t i = node % W->cap_linked;; i = (i + 1) % W->cap_linked) {
        if (W->linked[i] == node)
            return 1;
        if (W->linked[i] == 0)
            return 0;
    }
}

static int add_linked(struct cf_wbh *W, uint64_t node)
{
    if (is_linked(W, node))
        return 0;
    if (2 * (W->n_linked + 1) > W->cap_linked) {
        size_t cap = W->cap_linked ? 2 * W->cap_linked : 64;
        if (cap > 2 * WBH_LINKED_MAX)
            return -ENOSPC;
        uint64_t *v = calloc(cap, sizeof(*v));
        if (!v)
            return -ENOMEM;
        for (size_t i = 0; i < W->cap_linked; i++) {
            uint64_t n = W->linked[i];
            if (!n)
                continue;
            size_t j = n % cap;
            while (v[j])
                j = (j + 1) % cap;
            v[j] = n;
        }
        free(W->linked);
        W->linked = v;
        W->cap_linked = cap;
    }
    size_t j = node % W->cap_linked;
    while (W->linked[j])
        j = (j + 1) % W->cap_linked;
    W->linked[j] = node;
    W->n_linked++;
    return 0;
}

static int overlaps(const struct wbh_ext *e, uint64_t off, size_t len)
{
    for (; e; e = e->next)
        if (off < e->off + e->len && e->off < off + len)
            return 1;
    return 0;
}

/* Moves what is due from pend to fly and chains it, in order, on *out
 * (empty; force: all of it). Under W->lock. */
static void kick(struct cf_wbh *W, struct wbh_file *f, int force, struct wbh_ext **out)
{
    int idle = f->n_fly == 0;
    if (!force && !idle && f->pend_bytes < W->aggregate)
        return; /* to go out with what comes meanwhile, once the bricks answer */
    while (f->pend) {
        struct wbh_ext *e = f->pend;
        if (!e->next && !force && e->len < W->aggregate && !(W->trickle && idle))
            break;
        f->pend = e->next;
        if (!f->pend)
            f->pend_last = NULL;
        f->pend_bytes -= e->len;
        e->prev = NULL;
        e->next = f->fly;
        if (f->fly)
            f->fly->prev = e;
        f->fly = e;
        f->n_fly++;
        e->out = NULL;
        *out = e;
        out = &e->out;
        W->extents++;
    }
}

static void send_done_cb(struct cl_op *op);

/* Cuts from the chain at e the extents that go in e's WRITE (same handle,
 * within the limits), joins their data when there are several, and returns
 * the rest of the chain; *n_out and *len_out: their count and bytes.
 * Without memory for joining, e goes alone. */
static struct wbh_ext *take_write(struct wbh_ext *e, uint32_t *n_out, size_t *len_out)
{
    uint32_t n = 1;
    size_t len = e->len;
    struct wbh_ext *last = e;
    while (last->out && last->out->fh == e->fh && n < RPC_EXTENTS_MAX &&
           len + last->out->len <= WBH_SEND_MAX) {
        last = last->out;
        len += last->len;
        n++;
    }
    uint8_t *j = n > 1 ? malloc(len + (size_t)n * RPC_EXTENT_LEN) : NULL;
    if (!j) {
        n = 1;
        len = e->len;
        last = e;
    }
    struct wbh_ext *rest = last->out;
    last->out = NULL;
    e->joined = j;
    if (j) {
        uint8_t *p = j + (size_t)n * RPC_EXTENT_LEN;
        uint32_t i = 0;
        for (struct wbh_ext *x = e; x; x = x->out, i++) {
            rpc_extent_put(j, i, x->off, (uint32_t)x->len);
            memcpy(p, x->data, x->len);
            p += x->len;
        }
    }
    *n_out = n;
    *len_out = len;
    return rest;
}

static void submit(struct wbh_ext *e)
{
    while (e) {
        uint32_t n;
        size_t len;
        struct wbh_ext *next = take_write(e, &n, &len);
        cl_op_init(&e->op, RPC_OP_WRITE, send_done_cb, e);
        struct rpc_msg *a = &e->op.args;
        RPC_SET(a, fh, RPC_T_FH, e->fh);
        if (n == 1) {
            RPC_SET(a, offset, RPC_T_OFFSET, e->off);
            rpc_set_bytes(a, RPC_T_DATA, &a->data, e->data, e->len);
        } else {
            size_t head = (size_t)n * RPC_EXTENT_LEN;
            rpc_set_bytes(a, RPC_T_EXTENTS, &a->extents, e->joined, head);
            rpc_set_bytes(a, RPC_T_DATA, &a->data, (const uint8_t *)e->joined + head, len);
        }
        cl_submit(e->cf->stack, &e->op);
        e = next;
    }
}

static void reply_all(struct wbh_reply *r)
{
    while (r) {
        struct wbh_reply *next = r->next;
        fuse_reply_write(r->req, r->size);
        free(r);
        r = next;
    }
}

static void send_done_cb(struct cl_op *op)
{
    struct wbh_ext *first = op->ctx;
    struct cf *cf = first->cf;
    struct cf_wbh *W = cf->wbh;
    struct wbh_file *f = first->wf;
    size_t len = op->args.data.len; /* every extent of the WRITE */
    int err = fop_errno(op->status);
    if (!err && (!rpc_has(&op->reply->msg, RPC_T_SIZE) || op->reply->msg.size != len))
        err = ENOSPC; /* a short write: the brick is full */
    cl_opstats_note(&cf->stats, RPC_OP_WRITE, op->rounds, op->status);
    struct wbh_ext *out = NULL;
    struct wbh_reply *replies = NULL;
    pthread_mutex_lock(&W->lock);
    for (struct wbh_ext *e = first; e; e = e->out) {
        if (e->prev)
            e->prev->next = e->next;
        else
            f->fly = e->next;
        if (e->next)
            e->next->prev = e->prev;
        f->n_fly--;
    }
    f->bytes -= len;
    W->bytes -= len;
    W->bytes_sent += len;
    W->writes++;
    if (err) {
        W->failed++;
        if (!f->err)
            f->err = err;
    }
    if (f->held && f->bytes <= W->window) {
        replies = f->held;
        f->held = NULL;
        f->held_tail = &f->held;
    }
    kick(W, f, 0, &out);
    uint64_t node = f->node;
    pthread_cond_broadcast(&W->cond);
    maybe_free(W, f);
    pthread_mutex_unlock(&W->lock);
    if (err)
        log_error("background write of %zu bytes at %llu to node %llu: %s (returned by the "
                  "next fsync or close)",
                  len, (unsigned long long)first->off, (unsigned long long)node, strerror(err));
    if (err == ENOSPC || err == EDQUOT)
        cf_wb_nospace(cf);
    submit(out);
    reply_all(replies);
    cl_op_release(op);
    free(first->joined);
    for (struct wbh_ext *e = first, *next; e; e = next) {
        next = e->out;
        free(e->data);
        free(e);
    }
}

/* Sends everything pending of f and waits until none of it is in flight.
 * Under W->lock (dropped while waiting); f stays valid. */
static void drain(struct cf_wbh *W, struct wbh_file *f)
{
    f->waiters++;
    W->waits++;
    while (f->pend || f->fly) {
        if (f->pend) {
            struct wbh_ext *out = NULL;
            kick(W, f, 1, &out);
            pthread_mutex_unlock(&W->lock);
            submit(out);
            pthread_mutex_lock(&W->lock);
            continue;
        }
        pthread_cond_wait(&W->cond, &W->lock);
    }
    f->waiters--;
}

static int wait_node(struct cf *cf, uint64_t node, int consume)
{
    struct cf_wbh *W = cf->wbh;
    if (!W || !__atomic_load_n(&W->n_files, __ATOMIC_RELAXED))
        return 0;
    pthread_mutex_lock(&W->lock);
    struct wbh_file *f = find(W, node);
    int err = 0;
    if (f) {
        drain(W, f);
        err = f->err;
        if (consume)
            f->err = 0;
        maybe_free(W, f);
    }
    pthread_mutex_unlock(&W->lock);
    return -err;
}

void cf_wbh_sync(struct cf *cf, uint64_t node)
{
    (void)wait_node(cf, node, 0);
}

int cf_wbh_flush(struct cf *cf, uint64_t node)
{
    return wait_node(cf, node, 1);
}

/* Drains every file of dir (all files with dir 0). */
static void drain_where(struct cf *cf, uint64_t dir)
{
    struct cf_wbh *W = cf->wbh;
    if (!W || !__atomic_load_n(&W->n_files, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&W->lock);
    for (;;) {
        struct wbh_file *busy = NULL;
        for (size_t i = 0; i < WBH_BUCKETS && !busy; i++)
            for (struct wbh_file *f = W->b[i]; f && !busy; f = f->next)
                if ((!dir || f->parent == dir) && (f->pend || f->fly))
                    busy = f;
        if (!busy)
            break;
        drain(W, busy);
        maybe_free(W, busy);
    }
    pthread_mutex_unlock(&W->lock);
}

void cf_wbh_settle_dir(struct cf *cf, uint64_t dir)
{
    drain_where(cf, dir);
}

void cf_wbh_settle_all(struct cf *cf)
{
    drain_where(cf, 0);
}

int cf_wbh_busy(struct cf *cf)
{
    return cf->wbh && __atomic_load_n(&cf->wbh->n_files, __ATOMIC_RELAXED) != 0;
}

void cf_wbh_linked(struct cf *cf, uint64_t node)
{
    struct cf_wbh *W = cf->wbh;
    if (!W)
        return;
    cf_wbh_sync(cf, node);
    pthread_mutex_lock(&W->lock);
    if (add_linked(W, node) < 0) {
        W->on = 0;
        log_warn("too many hard links made through this mount: write-behind is off");
    }
    pthread_mutex_unlock(&W->lock);
}

static int handle_ok(const struct cf_wbh *W, int flags)
{
    if (flags & (O_SYNC | O_DSYNC | O_APPEND))
        return 0;
    return !(flags & O_DIRECT) || !W->strict_direct;
}

int cf_wbh_wanted(struct cf *cf, int flags)
{
    struct cf_wbh *W = cf->wbh;
    return W && (flags & O_ACCMODE) != O_RDONLY && __atomic_load_n(&W->on, __ATOMIC_RELAXED) &&
           handle_ok(W, flags) && cf_wb_enabled(cf);
}

/* No other client can reach the file before a brick recalls a lease this
 * mount holds exclusively: on its directory (made here) or on the file.
 * A file with another name (moved into that directory from elsewhere) can
 * be reached through it without a recall. */
static int held(struct cf *cf, uint64_t parent, uint64_t ino)
{
    return (cf_known_excl(cf, parent) && cl_itable_nlink(cf->it, ino) <= 1) ||
           cf_known_is_file_excl(cf, ino);
}

/* ---- asking again for a file's lease ---- */

static size_t ask_slot(uint64_t node)
{
    return bucket(node) % WBH_ASK_SLOTS;
}

/* ino is written through although its handle could be written behind:
 * whether it asks for its lease now (WBH_ASK_MS after this was first seen,
 * or after its last refusal). Under W->lock. */
static int ask_due(struct cf_wbh *W, uint64_t ino)
{
    size_t i = ask_slot(ino);
    uint64_t now = net_now_ms();
    if (W->ask[i].node != ino) {
        if (!W->ask[i].busy) {
            W->ask[i].node = ino;
            W->ask[i].since_ms = now;
        }
        return 0;
    }
    if (W->ask[i].busy || now - W->ask[i].since_ms < WBH_ASK_MS)
        return 0;
    W->ask[i].busy = 1;
    return 1;
}

/* The ask of ino is over (sent: the bricks answered it; got: granted). */
static void ask_done(struct cf_wbh *W, uint64_t ino, int sent, int got)
{
    pthread_mutex_lock(&W->lock);
    size_t i = ask_slot(ino);
    if (W->ask[i].node == ino) {
        W->ask[i].busy = 0;
        W->ask[i].since_ms = net_now_ms();
    }
    W->asked += (uint64_t)sent;
    W->granted += (uint64_t)got;
    pthread_mutex_unlock(&W->lock);
}

void cf_wbh_refused(struct cf *cf, uint64_t node)
{
    struct cf_wbh *W = cf->wbh;
    if (!W)
        return;
    pthread_mutex_lock(&W->lock);
    size_t i = ask_slot(node);
    if (!W->ask[i].busy) {
        W->ask[i].node = node;
        W->ask[i].since_ms = net_now_ms();
    }
    pthread_mutex_unlock(&W->lock);
}

struct wbh_asking {
    struct cl_op op;
    struct cf *cf;
    uint64_t node, mark; /* mark: cf_lease_mark when it went */
    gfid_t gfid;
    char path[PATH_MAX];
};

static void ask_cb(struct cl_op *op)
{
    struct wbh_asking *a = op->ctx;
    struct cf *cf = a->cf;
    const struct rpc_msg *m = op->status < 0 || !op->reply ? NULL : &op->reply->msg;
    int opened = m && rpc_has(m, RPC_T_FH);
    int got = 0;
    cl_opstats_note(&cf->stats, RPC_OP_OPEN, op->rounds, op->status);
    /* Granted by every brick, for the file this handle writes (its path
     * may name another one by now), and not recalled since it went. */
    cf_reply_begin(cf);
    if (opened && rpc_has(m, RPC_T_LEASE) && (m->lease & RPC_LEASE_EXCL) &&
        (m->lease & RPC_LEASE_READ) && rpc_has(m, RPC_T_ATTR) &&
        !memcmp(&m->attr.gfid, &a->gfid, sizeof(a->gfid)) && cf_lease_kept(cf, a->mark, a->path)) {
        cf_known_file_excl(cf, a->node);
        got = 1;
    }
    cf_reply_end(cf);
    /* Its last handle here may have closed meanwhile: cf_release clears
     * the mark after closing the handle, this looks after setting it, so
     * one of the two clears it. The bricks share the lease again at the
     * close of this ask's handle then. */
    uint64_t other;
    if (got && cl_itable_any_fh(cf->it, a->node, &other) < 0) {
        cf_known_file_shared(cf, a->node);
        got = 0;
    }
    if (opened)
        fop_release_orphan(cf, RPC_OP_RELEASE, m->fh);
    ask_done(cf->wbh, a->node, 1, got);
    cl_op_release(op);
    free(a);
}

/* Asks the bricks for ino's exclusive lease: an OPEN (read-only: it opens
 * nothing for writing) asking for it, whose handle is closed at once. The
 * brick grants it as to any OPEN (grant_file in src/brick/lease.c): this
 * mount's handles of the file do not count against it. */
static void ask(struct cf *cf, uint64_t ino)
{
    struct wbh_asking *a = malloc(sizeof(*a));
    uint64_t mark = cf_lease_mark(cf);
    if (!a || !mark || cl_itable_gfid(cf->it, ino, &a->gfid) < 0 ||
        cl_itable_path(cf->it, ino, NULL, a->path, sizeof(a->path)) < 0) {
        free(a);
        ask_done(cf->wbh, ino, 0, 0);
        return;
    }
    a->cf = cf;
    a->node = ino;
    a->mark = mark;
    cl_op_init(&a->op, RPC_OP_OPEN, ask_cb, a);
    struct rpc_msg *args = &a->op.args;
    rpc_set_str(args, RPC_T_PATH, &args->path, a->path);
    RPC_SET(args, flags, RPC_T_FLAGS, (uint64_t)O_RDONLY);
    RPC_SET(args, lease, RPC_T_LEASE, RPC_LEASE_READ | RPC_LEASE_EXCL);
    cl_submit(cf->stack, &a->op);
}

/* Adds the write to f (under W->lock): to the last pending extent when it
 * continues it, else as a new one. */
static int add(struct cf *cf, struct wbh_file *f, uint64_t fh, const char *buf, size_t size,
               uint64_t off)
{
    struct cf_wbh *W = cf->wbh;
    struct wbh_ext *t = f->pend_last;
    if (t && t->fh == fh && t->off + t->len == off && t->len + size <= W->aggregate) {
        if (t->len + size > t->cap) {
            size_t cap = t->cap * 2 > t->len + size ? t->cap * 2 : t->len + size;
            if (cap > W->aggregate)
                cap = W->aggregate;
            char *d = realloc(t->data, cap);
            if (!d)
                return -ENOMEM;
            t->data = d;
            t->cap = cap;
        }
        memcpy(t->data + t->len, buf, size);
        t->len += size;
    } else {
        struct wbh_ext *e = calloc(1, sizeof(*e));
        if (!e || !(e->data = malloc(size ? size : 1))) {
            free(e);
            return -ENOMEM;
        }
        memcpy(e->data, buf, size);
        e->cf = cf;
        e->wf = f;
        e->off = off;
        e->fh = fh;
        e->len = size;
        e->cap = size;
        if (f->pend_last)
            f->pend_last->next = e;
        else
            f->pend = e;
        f->pend_last = e;
    }
    f->bytes += size;
    f->pend_bytes += size;
    W->bytes += size;
    return 0;
}

int cf_wbh_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wbh *W = cf->wbh;
    uint64_t parent = 0, fh = fi->fh;
    if (!W || size == 0 || !__atomic_load_n(&W->on, __ATOMIC_RELAXED) || !handle_ok(W, fi->flags) ||
        !cf_wb_enabled(cf) || !(parent = cl_itable_parent(cf->it, ino)) ||
        fop_real_fh(cf, &fh) < 0) {
        cf_wbh_sync(cf, ino); /* it must not overtake what is written behind */
        return 0;
    }
    struct wbh_ext *out = NULL;
    pthread_mutex_lock(&W->lock);
    /* Checked under the lock: a recall clears the lease before it drains
     * (lease.c), so a write added here is drained by it. */
    struct wbh_file *f = NULL;
    int asking = 0;
    if (W->on && size <= W->window && W->bytes + size <= W->max_bytes && !is_linked(W, ino)) {
        if (held(cf, parent, ino))
            f = get(W, ino);
        else
            asking = ask_due(W, ino);
    }
    int ok = f && !f->err;
    if (ok && (overlaps(f->pend, (uint64_t)off, size) || overlaps(f->fly, (uint64_t)off, size))) {
        drain(W, f);                                    /* in order: the older data goes first */
        ok = !f->err && W->on && held(cf, parent, ino); /* the lock was dropped */
    }
    int queued = ok && add(cf, f, fh, buf, size, (uint64_t)off) == 0;
    struct wbh_reply *r = NULL;
    if (queued) {
        f->parent = parent;
        W->answered++;
        kick(W, f, 0, &out);
        if (f->bytes > W->window && (r = malloc(sizeof(*r))) != NULL) {
            r->req = req;
            r->size = size;
            r->next = NULL;
            *f->held_tail = r;
            f->held_tail = &r->next;
            W->held++;
        }
    }
    if (f && !queued) {
        drain(W, f);
        maybe_free(W, f);
    }
    pthread_mutex_unlock(&W->lock);
    if (asking)
        ask(cf, ino); /* this write goes through; later ones may not */
    if (!queued)
        return 0;
    if (!r)
        fuse_reply_write(req, size); /* the application goes on meanwhile */
    submit(out);
    return 1;
}

int cf_wbh_init(struct cf *cf)
{
    struct cf_wbh *W = calloc(1, sizeof(*W));
    if (!W)
        return -ENOMEM;
    pthread_mutex_init(&W->lock, NULL);
    pthread_cond_init(&W->cond, NULL);
    W->window = 1u << 20;
    W->aggregate = 128u << 10;
    W->max_bytes = 64u << 20;
    W->trickle = 1;
    W->strict_direct = 1;
    cf->wbh = W;
    return 0;
}

void cf_wbh_configure(struct cf *cf, const struct opt_set *opts)
{
    struct cf_wbh *W = cf->wbh;
    if (!W)
        return;
    size_t window = (size_t)opt_int(opts, "performance.write-behind-window-size");
    size_t aggregate = (size_t)opt_int(opts, "performance.aggregate-size");
    pthread_mutex_lock(&W->lock);
    __atomic_store_n(&W->on, opt_bool(opts, "performance.write-behind"), __ATOMIC_RELAXED);
    W->window = window;
    W->aggregate = aggregate < window ? aggregate : window;
    W->max_bytes = (size_t)opt_int(opts, "client.write-back-size");
    W->trickle = opt_bool(opts, "performance.write-behind-trickling-writes");
    W->strict_direct = opt_bool(opts, "performance.strict-o-direct");
    pthread_mutex_unlock(&W->lock);
}

void cf_wbh_free(struct cf *cf)
{
    struct cf_wbh *W = cf->wbh;
    if (!W)
        return;
    for (size_t i = 0; i < WBH_BUCKETS; i++)
        while (W->b[i]) {
            struct wbh_file *f = W->b[i];
            W->b[i] = f->next;
            free(f);
        }
    free(W->linked);
    pthread_cond_destroy(&W->cond);
    pthread_mutex_destroy(&W->lock);
    free(W);
    cf->wbh = NULL;
}

size_t cf_wbh_format(struct cf *cf, char *buf, size_t n)
{
    struct cf_wbh *W = cf->wbh;
    int len = 0;
    if (W) {
        pthread_mutex_lock(&W->lock);
        len = snprintf(buf, n,
                       "FUSE write-behind: %llu writes answered early (%llu held for the "
                       "window), %llu bytes sent in %llu extents by %llu writes, %llu waits, "
                       "%llu failed, %zu bytes pending, %llu leases asked again (%llu "
                       "granted)\n",
                       (unsigned long long)W->answered, (unsigned long long)W->held,
                       (unsigned long long)W->bytes_sent, (unsigned long long)W->extents,
                       (unsigned long long)W->writes, (unsigned long long)W->waits,
                       (unsigned long long)W->failed, W->bytes, (unsigned long long)W->asked,
                       (unsigned long long)W->granted);
        pthread_mutex_unlock(&W->lock);
    }
    return cf_fmt_len(len, n);
}
