/* Write-back of removals and renames (docs/consistency.md, "Write-back").
 *
 * In a directory this mount made and holds an exclusive lease on, unlink
 * and rmdir are answered here: the name leaves this mount's tables at
 * once, and the UNLINK or RMDIR goes to the bricks from a queue. A file
 * that was written back and never sent is simply dropped: it never reaches
 * the bricks at all. rmdir is only answered here for a directory this
 * mount knows to be empty (complete, under its own exclusive lease).
 *
 * Order. One worker thread sends the queue in order, many requests in
 * flight at once. An UNLINK waits for its file's MAKE_FILE still in
 * flight; an RMDIR waits until everything sent before it is answered (the
 * directory's entries are gone first). A request of this mount that goes
 * to the bricks by a path a queued removal concerns (the removed name
 * itself or a directory above it: fop_path), a create of a name with a
 * removal queued, a recall, fsync of a directory and unmount first wait
 * until the queue is empty, so the bricks never see this mount's
 * operations on one object out of order and nobody else ever sees the
 * removals half done.
 *
 * A rename of a file (not a directory) already on the bricks, between
 * directories this mount holds so, to a name free here, is answered the
 * same way and queued as a RENAME. It is a fence: it goes out once
 * everything before it is answered, and nothing after it goes out before
 * its answer. Requests by either path, and a create of the old name, wait
 * for the queue as for a removal.
 *
 * Whole trees. An RMDIR queued while removals of the directory's entries
 * still wait in the queue takes them along: its DATA lists them (and what
 * the RMDIRs it took listed), and the brick checks that nothing else is
 * there and moves the directory into its trash in one request (trash.c).
 * So that `rm -rf` finds its removals still queued, a removal waits
 * RM_LINGER_MS before it is sent, unless somebody waits for the queue or
 * it is half full. Not past a rename queued or in flight.
 *
 * Errors are logged, make the mount forget what it cached about the
 * directory, and are returned by the next create or fsync of a directory
 * in that directory (as for written-back files). Bounded by
 * client.write-back-files removals queued; past it, removals wait for the
 * bricks as without write-back. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "bridge.h"

#define RM_WINDOW 64             /* requests in flight */
#define RM_LINGER_MS 50          /* a removal's wait for its directory's RMDIR */
#define RM_TREE_BYTES (1u << 20) /* an RMDIR's list of entries, at most */

struct rm {
    struct cl_op op;
    struct rm *next;
    struct cf_wbrm *q;
    uint64_t parent, node;
    char name[NAME_MAX + 1];
    char path[PATH_MAX];
    /* RENAME: the new place */
    uint64_t parent2;
    char name2[NAME_MAX + 1];
    char path2[PATH_MAX];
    /* RMDIR: the entries taken along (rpc_tree_check's format), their
     * depth and longest entry, and the files among them to settle first */
    char *tree;
    size_t tree_len, tree_longest;
    uint32_t tree_n, tree_depth;
    uint64_t *files;
    size_t n_files;
    uint64_t queued_ms;
};

static void rm_free(struct rm *r)
{
    free(r->tree);
    free(r->files);
    free(r);
}

static int is_rename(const struct rm *r)
{
    return r->op.args.op == RPC_OP_RENAME;
}

struct cf_wbrm {
    struct cf *cf;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* the worker: work, or room in the window */
    pthread_cond_t idle; /* waiters: pending reached 0 */
    struct rm *head, **tail;
    struct rm *flying; /* sent, not yet answered (for name checks) */
    size_t pending;    /* queued + in flight */
    size_t inflight;
    int waiters; /* in cf_wbrm_settle: send without lingering */
    pthread_t worker;
    int started, stop;
};

int cf_wbrm_init(struct cf *cf)
{
    struct cf_wbrm *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->cf = cf;
    q->tail = &q->head;
    pthread_mutex_init(&q->lock, NULL);
    net_cond_init_mono(&q->cond);
    pthread_cond_init(&q->idle, NULL);
    cf->wbrm = q;
    return 0;
}

static void unlink_flying(struct cf_wbrm *q, struct rm *r)
{
    for (struct rm **pp = &q->flying; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

/* This mount showed the change done: forget what it cached about dir. */
static void forget_dir(struct cf *cf, uint64_t dir, int st)
{
    cf_wb_note_error(cf, dir, st);
    cf_known_forget(cf, dir);
    cf_lease_drop_node(cf, dir);
}

static void done_cb(struct cl_op *op)
{
    struct rm *r = op->ctx;
    struct cf_wbrm *q = r->q;
    struct cf *cf = q->cf;
    int st = op->status;
    if (st < 0 && is_rename(r)) {
        log_error("write-back of the rename of %s to %s failed: %s; the bricks keep the old name",
                  r->path, r->path2, strerror(-st));
        forget_dir(cf, r->parent, st);
        forget_dir(cf, r->parent2, st);
    } else if (st < 0) {
        log_error("write-back of the removal of %s failed: %s; it is still on the bricks", r->path,
                  strerror(-st));
        forget_dir(cf, r->parent, st);
    } else if (is_rename(r)) {
        cf_lease_drop_node(cf, r->node); /* the brick dropped the file's lease */
    }
    cl_op_release(op);
    pthread_mutex_lock(&q->lock);
    unlink_flying(q, r);
    /* The worker waits for an answer only with the window full, behind a
     * barrier (an RMDIR or RENAME waits for all in flight) or behind a
     * RENAME in flight; otherwise it sleeps until the head is ripe. */
    int wake = q->inflight-- == RM_WINDOW || q->inflight == 0 || is_rename(r);
    if (--q->pending == 0)
        pthread_cond_broadcast(&q->idle);
    if (wake)
        pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
    rm_free(r);
}

/* Whether r may go now rather than wait for its directory's RMDIR. */
static int ripe(const struct cf_wbrm *q, const struct rm *r, uint64_t now)
{
    return q->waiters || q->stop || r->queued_ms + RM_LINGER_MS <= now ||
           q->pending * 2 >= cf_wb_max_files(q->cf);
}

static void *worker_main(void *arg)
{
    struct cf_wbrm *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        struct rm *r = q->head;
        /* An RMDIR or RENAME waits for everything before it; while a
         * RENAME is in flight (then alone), nothing else goes. */
        int barrier = r && (r->op.args.op == RPC_OP_RMDIR || is_rename(r)) && q->inflight > 0;
        int fenced = q->flying && is_rename(q->flying);
        if (!r || q->inflight >= RM_WINDOW || barrier || fenced) {
            if (q->stop && !r)
                break;
            pthread_cond_wait(&q->cond, &q->lock);
            continue;
        }
        if (!ripe(q, r, net_now_ms())) {
            cf_wait_until_ms(&q->cond, &q->lock, r->queued_ms + RM_LINGER_MS);
            continue;
        }
        if (!(q->head = r->next))
            q->tail = &q->head;
        r->next = q->flying;
        q->flying = r;
        q->inflight++;
        pthread_mutex_unlock(&q->lock);
        /* The directory's MKDIR and the file's MAKE_FILE, if still in
         * flight, go first; not at all into a directory whose MKDIR failed
         * (the path may name somebody else's). */
        int gone = cf_wbm_gone(q->cf, r->parent);
        if (!gone && is_rename(r))
            gone = cf_wbm_gone(q->cf, r->parent2);
        if (!gone && r->op.args.op != RPC_OP_RMDIR)
            (void)cf_wb_settle(q->cf, r->node);
        for (size_t i = 0; !gone && i < r->n_files; i++)
            (void)cf_wb_settle(q->cf, r->files[i]);
        if (gone)
            cl_op_complete(&r->op, gone, NULL);
        else
            cl_submit(q->cf->stack, &r->op);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

void cf_wbrm_free(struct cf *cf)
{
    struct cf_wbrm *q = cf->wbrm;
    if (!q)
        return;
    cf_wbrm_settle(cf);
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    if (q->started)
        pthread_join(q->worker, NULL);
    pthread_cond_destroy(&q->cond);
    pthread_cond_destroy(&q->idle);
    pthread_mutex_destroy(&q->lock);
    free(q);
    cf->wbrm = NULL;
}

int cf_wbrm_settle(struct cf *cf)
{
    struct cf_wbrm *q = cf->wbrm;
    if (!q || !__atomic_load_n(&q->pending, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&q->lock);
    q->waiters++;
    pthread_cond_signal(&q->cond);
    while (q->pending > 0)
        pthread_cond_wait(&q->idle, &q->lock);
    q->waiters--;
    pthread_mutex_unlock(&q->lock);
    return 0;
}

/* Whether a removal of removed concerns a request on path: the same
 * object, or one below it (the request lists or changes an ancestor). */
static int concerns(const char *removed, const char *path)
{
    size_t n = strlen(path);
    if (n == 1 && path[0] == '/')
        return 1;
    return !strncmp(removed, path, n) && (removed[n] == 0 || removed[n] == '/');
}

/* Whether a removal queued or in flight matches (path, or parent and
 * name, or with name NULL any entry of parent). */
static int any_queued(struct cf_wbrm *q, const char *path, uint64_t parent, const char *name)
{
    if (!q || !__atomic_load_n(&q->pending, __ATOMIC_ACQUIRE))
        return 0;
    int found = 0;
    pthread_mutex_lock(&q->lock);
    for (int pass = 0; pass < 2 && !found; pass++)
        for (struct rm *r = pass ? q->flying : q->head; r && !found; r = r->next)
            found = path ? concerns(r->path, path) || (is_rename(r) && concerns(r->path2, path))
                         : (r->parent == parent && (!name || !strcmp(r->name, name))) ||
                               (is_rename(r) && r->parent2 == parent &&
                                (!name || !strcmp(r->name2, name)));
    pthread_mutex_unlock(&q->lock);
    return found;
}

int cf_wbrm_settle_path(struct cf *cf, const char *path)
{
    return any_queued(cf->wbrm, path, 0, NULL) ? cf_wbrm_settle(cf) : 0;
}

int cf_wbrm_queued(struct cf *cf, uint64_t parent, const char *name)
{
    return any_queued(cf->wbrm, NULL, parent, name);
}

int cf_wbrm_settle_dir(struct cf *cf, uint64_t dir)
{
    return !dir || any_queued(cf->wbrm, NULL, dir, NULL) ? cf_wbrm_settle(cf) : 0;
}

/* A new queue entry, when the queue has room (starting the worker). */
static struct rm *rm_new(struct cf_wbrm *q)
{
    pthread_mutex_lock(&q->lock);
    if (!q->started && pthread_create(&q->worker, NULL, worker_main, q) == 0)
        q->started = 1;
    int room = q->started && q->pending < cf_wb_max_files(q->cf);
    pthread_mutex_unlock(&q->lock);
    struct rm *r = room ? calloc(1, sizeof(*r)) : NULL;
    if (r)
        r->q = q;
    return r;
}

/* Adds c's entry, and the entries c took along, to r's tree; 0 when
 * they do not fit. */
static int take(struct rm *r, const struct rm *c)
{
    size_t nl = strlen(c->name);
    size_t need = nl + 1 + c->tree_len + c->tree_n * (nl + 1);
    if (r->tree_len + need > RM_TREE_BYTES || r->tree_n + 1 + c->tree_n > RPC_TREE_MAX ||
        c->tree_depth + 1 > RPC_TREE_DEPTH || nl + 1 + c->tree_longest >= RPC_TREE_ENTRY_MAX)
        return 0;
    char *t = realloc(r->tree, r->tree_len + need);
    uint64_t *f = realloc(r->files, (r->n_files + c->n_files + 1) * sizeof(*f));
    if (t)
        r->tree = t;
    if (f)
        r->files = f;
    if (!t || !f)
        return 0;
    memcpy(t + r->tree_len, c->name, nl + 1);
    r->tree_len += nl + 1;
    for (size_t o = 0; o < c->tree_len;) {
        const char *e = c->tree + o;
        size_t el = strlen(e);
        char *d = t + r->tree_len;
        memcpy(d, c->name, nl);
        d[nl] = '/';
        memcpy(d + nl + 1, e, el + 1);
        r->tree_len += nl + 1 + el + 1;
        o += el + 1;
    }
    r->tree_n += 1 + c->tree_n;
    if (c->tree_depth + 1 > r->tree_depth)
        r->tree_depth = c->tree_depth + 1;
    size_t longest = c->tree_n ? nl + 1 + c->tree_longest : nl;
    if (longest > r->tree_longest)
        r->tree_longest = longest;
    if (c->op.args.op == RPC_OP_UNLINK)
        r->files[r->n_files++] = c->node;
    if (c->n_files)
        memcpy(r->files + r->n_files, c->files, c->n_files * sizeof(*f));
    r->n_files += c->n_files;
    return 1;
}

/* Takes the removals of dir's entries still queued into r, dir's RMDIR.
 * Called with q->lock held. */
static void absorb(struct cf_wbrm *q, struct rm *r, uint64_t dir)
{
    for (int pass = 0; pass < 2; pass++)
        for (struct rm *x = pass ? q->flying : q->head; x; x = x->next)
            if (is_rename(x))
                return;
    struct rm **pp = &q->head;
    while (*pp) {
        struct rm *c = *pp;
        if (c->parent != dir || !take(r, c)) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        q->pending--;
        rm_free(c);
    }
    q->tail = pp;
    if (r->tree_len)
        rpc_set_bytes(&r->op.args, RPC_T_DATA, &r->op.args.data, r->tree, r->tree_len);
}

/* Queues r, on behalf of the caller of req, and answers req. */
static void rm_push(struct cf_wbrm *q, struct rm *r, fuse_req_t req)
{
    uid_t uid;
    gid_t gid;
    cf_squash_ids(req, &uid, &gid);
    RPC_SET(&r->op.args, uid, RPC_T_UID, uid);
    RPC_SET(&r->op.args, gid, RPC_T_GID, gid);
    r->queued_ms = net_now_ms();
    pthread_mutex_lock(&q->lock);
    if (r->op.args.op == RPC_OP_RMDIR)
        absorb(q, r, r->node);
    /* The worker sleeps until the head is ripe: only a new head, or one
     * that makes the queue half full, needs it now (a wake-up per removal
     * would cost a context switch on the requester's CPU). */
    int wake = !q->head;
    *q->tail = r;
    q->tail = &r->next;
    q->pending++;
    if (wake || ripe(q, q->head, r->queued_ms))
        pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
    fuse_reply_err(req, 0);
}

/* Whether a removal or rename of the file node may be answered here: it
 * has one name, as far as this mount knows, and no handle open. Another
 * name of it (a hard link) would show its link count and ctime as the
 * bricks have them, before the queue reaches them; so would an open
 * handle (fstat). */
static int alone(struct cf *cf, uint64_t node)
{
    uint64_t fh;
    return cl_itable_nlink(cf->it, node) == 1 && cl_itable_any_fh(cf->it, node, &fh) < 0;
}

int cf_wbrm_remove(fuse_req_t req, fuse_ino_t parent, const char *name, int is_dir)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wbrm *q = cf->wbrm;
    size_t nl = strlen(name);
    if (!q || !cf_wb_enabled(cf) || nl > NAME_MAX || !cf_known_excl(cf, parent) ||
        cf_known_absent(cf, parent, name))
        return 0;
    uint64_t node = cl_itable_child(cf->it, parent, name);
    if (!node || (!is_dir && !alone(cf, node)))
        return 0;
    /* Attributes of the directory, or of the one removed, written back
     * first. */
    if (cf_wbd_settle(cf, parent) < 0 || cf_wbd_settle(cf, node) < 0 ||
        cf_wbm_settle(cf, node) < 0) /* its MKDIR or SYMLINK too */
        return 0;
    /* Only an empty directory this mount made and still holds alone. */
    if (is_dir && !(cf_known_excl(cf, node) && cf_known_dir_empty(cf, node)))
        return 0;
    struct rm *r = rm_new(q);
    if (!r)
        return 0;
    if (cl_itable_path(cf->it, parent, name, r->path, sizeof(r->path)) < 0) {
        free(r);
        return 0;
    }
    int unsent = 0;
    if (!is_dir) {
        /* A written-back file still here: never sent, nothing to remove;
         * still open in the kernel: left to the bricks. */
        unsent = cf_wb_drop_unsent(cf, node);
        if (unsent < 0) {
            free(r);
            return 0;
        }
    }
    if (is_dir)
        cf_known_forget(cf, node);
    cl_itable_unlink(cf->it, parent, name);
    cf_known_remove(cf, parent, name);
    cf_known_touch_dir(cf, parent, is_dir);
    if (unsent) {
        free(r);
        fuse_reply_err(req, 0);
        return 1;
    }
    r->parent = parent;
    r->node = node;
    memcpy(r->name, name, nl + 1);
    cl_op_init(&r->op, is_dir ? RPC_OP_RMDIR : RPC_OP_UNLINK, done_cb, r);
    rpc_set_str(&r->op.args, RPC_T_PATH, &r->op.args.path, r->path);
    rm_push(q, r, req);
    return 1;
}

int cf_wbrm_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                   const char *newname, unsigned int flags)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wbrm *q = cf->wbrm;
    size_t nl = strlen(name), nl2 = strlen(newname);
    if (!q || !cf_wb_enabled(cf) || (flags & ~(unsigned)RENAME_NOREPLACE) || nl > NAME_MAX ||
        nl2 > NAME_MAX || (parent == newparent && !strcmp(name, newname)) ||
        !cf_known_excl(cf, parent) || !cf_known_excl(cf, newparent) ||
        cf_known_absent(cf, parent, name) || !cf_known_absent(cf, newparent, newname))
        return 0;
    uint64_t node = cl_itable_child(cf->it, parent, name);
    /* A directory takes what is pending below it along: left to the
     * bricks (cf_rename settles everything first). */
    if (!node || cl_itable_is_dir(cf->it, node) != 0 || !alone(cf, node))
        return 0;
    /* The directories' attributes written back first: the rename moves
     * their times. A symlink still pending goes first, by its old name. */
    if (cf_wbd_settle(cf, parent) < 0 || cf_wbd_settle(cf, newparent) < 0 ||
        cf_wbm_settle(cf, node) < 0)
        return 0;
    struct rm *r = rm_new(q);
    if (!r)
        return 0;
    if (cl_itable_path(cf->it, parent, name, r->path, sizeof(r->path)) < 0 ||
        cl_itable_path(cf->it, newparent, newname, r->path2, sizeof(r->path2)) < 0) {
        free(r);
        return 0;
    }
    cf_wb_moved(cf, parent, name, newparent, newname);
    r->parent = parent;
    r->node = node;
    memcpy(r->name, name, nl + 1);
    r->parent2 = newparent;
    memcpy(r->name2, newname, nl2 + 1);
    cl_op_init(&r->op, RPC_OP_RENAME, done_cb, r);
    struct rpc_msg *a = &r->op.args;
    rpc_set_str(a, RPC_T_PATH, &a->path, r->path);
    rpc_set_str(a, RPC_T_PATH2, &a->path2, r->path2);
    if (flags)
        RPC_SET(a, flags, RPC_T_FLAGS, flags);
    rm_push(q, r, req);
    return 1;
}
