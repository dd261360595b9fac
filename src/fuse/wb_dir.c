/* Write-back of directory attributes (docs/consistency.md, "Write-back").
 *
 * tar and cp -a set a directory's owner, mode and times after filling it.
 * Sent at once, such a SETATTR must first wait for every file written back
 * into the directory to reach the bricks (or the files' arrival would move
 * the directory's mtime again), so each directory cost the whole pipeline
 * one drain. Here the SETATTR of a directory this mount holds exclusive
 * leases on (the directory and its parent, whose listing shows it) is
 * answered at once from the attributes this mount knows, and one worker
 * thread sends it later, in order: the directory's written-back files
 * first, then the SETATTR. Successive changes of one directory not yet
 * taken by the worker merge into one request.
 *
 * Order. Whatever goes to the bricks about the directory, its parent or a
 * name in it, a create or removal written back in it, a recall of either
 * lease, fsync of any directory and unmount first wait until the
 * directory's pending SETATTR is answered (cf_wbd_settle*), so nobody sees
 * the change half done or out of order. Only mode, owner and explicit
 * times are deferred; "now" times and anything on other objects go the
 * usual way.
 *
 * Errors are logged and returned by the next create or fsync of a
 * directory in the parent (as for written-back files), and to a waiter
 * of cf_wbd_settle*. At most WBD_MAX are pending; past that, SETATTR waits
 * for the bricks as without write-back. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "bridge.h"

#define WBD_MAX 4096

#define DEFERRABLE                                                                                 \
    (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_ATIME |            \
     FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME)

struct dset {
    struct dset *next;
    uint64_t node, parent;
    struct stat attr; /* the values to send, per bit of to_set */
    int to_set;
    int taken; /* the worker is sending it: no more merging */
};

struct cf_wbd {
    struct cf *cf;
    pthread_mutex_t lock;
    pthread_cond_t work; /* the worker: something queued, or stop */
    pthread_cond_t done; /* waiters: an entry was answered */
    struct dset *head, **tail;
    size_t n;
    unsigned long failures; /* sends that failed so far */
    int last_err;           /* the last one's error, for waiters */
    pthread_t worker;
    int started, stop;
};

/* The fields to_set of attr, applied to st. */
static void apply(struct stat *st, const struct stat *attr, int to_set)
{
    if (to_set & FUSE_SET_ATTR_MODE)
        st->st_mode = (st->st_mode & S_IFMT) | (attr->st_mode & 07777);
    if (to_set & FUSE_SET_ATTR_UID)
        st->st_uid = attr->st_uid;
    if (to_set & FUSE_SET_ATTR_GID)
        st->st_gid = attr->st_gid;
    if (to_set & FUSE_SET_ATTR_ATIME)
        st->st_atim = attr->st_atim;
    if (to_set & FUSE_SET_ATTR_MTIME)
        st->st_mtim = attr->st_mtim;
}

static int send_one(struct cf_wbd *q, const struct dset *d)
{
    struct cf *cf = q->cf;
    /* The files written back into it land first: their arrival moves the
     * directory's times, which this SETATTR may set. */
    int rc = cf_wb_settle_dir(cf, d->node);
    if (rc < 0)
        log_debug("files of node %llu before its attributes: %s", (unsigned long long)d->node,
                  strerror(-rc));
    cf_wbrm_settle(cf);
    char path[PATH_MAX];
    if ((rc = cl_itable_path(cf->it, d->node, NULL, path, sizeof(path))) < 0)
        return rc;
    struct cl_op o;
    cl_op_init(&o, RPC_OP_SETATTR, NULL, NULL);
    rpc_set_str(&o.args, RPC_T_PATH, &o.args.path, path);
    cf_setattr_args(&o.args, &d->attr, d->to_set);
    rc = cl_op_run(cf->stack, &o);
    cl_opstats_note(&cf->stats, RPC_OP_SETATTR, o.rounds, rc);
    cl_op_release(&o);
    if (rc < 0) {
        log_warn("attributes of %s written back: %s", path, strerror(-rc));
        cf_known_forget_attr(cf, d->node);
        cf_lease_inval_attr(cf, d->node);
    }
    return rc;
}

static void *worker_main(void *arg)
{
    struct cf_wbd *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        struct dset *d = q->head;
        if (!d) {
            if (q->stop)
                break;
            pthread_cond_wait(&q->work, &q->lock);
            continue;
        }
        d->taken = 1;
        pthread_mutex_unlock(&q->lock);
        int rc = send_one(q, d);
        if (rc < 0)
            cf_wb_note_error(q->cf, d->parent, rc);
        cl_itable_forget(q->cf->it, d->node, 1);
        pthread_mutex_lock(&q->lock);
        if (rc < 0) {
            q->failures++;
            q->last_err = rc;
        }
        if (!(q->head = d->next))
            q->tail = &q->head;
        __atomic_sub_fetch(&q->n, 1, __ATOMIC_RELEASE);
        free(d);
        pthread_cond_broadcast(&q->done);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int cf_wbd_init(struct cf *cf)
{
    struct cf_wbd *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->cf = cf;
    q->tail = &q->head;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
    cf->wbd = q;
    return 0;
}

void cf_wbd_free(struct cf *cf)
{
    struct cf_wbd *q = cf->wbd;
    if (!q)
        return;
    cf_wbd_settle_all(cf);
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->lock);
    if (q->started)
        pthread_join(q->worker, NULL);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->done);
    pthread_mutex_destroy(&q->lock);
    free(q);
    cf->wbd = NULL;
}

/* Whether an entry matching (node, or with by_parent any whose parent is
 * node) is pending; under q->lock. */
static int pending_for(struct cf_wbd *q, uint64_t node, int by_parent)
{
    for (struct dset *d = q->head; d; d = d->next)
        if (d->node == node || (by_parent && d->parent == node))
            return 1;
    return 0;
}

static int wait_for(struct cf *cf, uint64_t node, int by_parent)
{
    struct cf_wbd *q = cf->wbd;
    if (!q || !__atomic_load_n(&q->n, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&q->lock);
    unsigned long before = q->failures;
    while (pending_for(q, node, by_parent))
        pthread_cond_wait(&q->done, &q->lock);
    int rc = q->failures != before ? q->last_err : 0;
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int cf_wbd_settle(struct cf *cf, uint64_t node)
{
    return wait_for(cf, node, 0);
}

int cf_wbd_settle_in(struct cf *cf, uint64_t dir)
{
    return wait_for(cf, dir, 1);
}

int cf_wbd_settle_name(struct cf *cf, uint64_t parent, const char *name)
{
    struct cf_wbd *q = cf->wbd;
    if (!q || !__atomic_load_n(&q->n, __ATOMIC_ACQUIRE))
        return 0;
    int rc = wait_for(cf, parent, 0);
    uint64_t child = name ? cl_itable_child(cf->it, parent, name) : 0;
    int r2 = child ? wait_for(cf, child, 0) : 0;
    return rc ? rc : r2;
}

int cf_wbd_settle_all(struct cf *cf)
{
    struct cf_wbd *q = cf->wbd;
    if (!q || !__atomic_load_n(&q->n, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&q->lock);
    unsigned long before = q->failures;
    while (q->head)
        pthread_cond_wait(&q->done, &q->lock);
    int rc = q->failures != before ? q->last_err : 0;
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int cf_wbd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wbd *q = cf->wbd;
    struct stat st;
    if (!q || !cf_wb_enabled(cf) || !to_set || (to_set & ~DEFERRABLE) ||
        !cf_known_attr(cf, ino, &st) || !S_ISDIR(st.st_mode) || !cf_known_excl(cf, ino))
        return 0;
    uint64_t parent = cl_itable_parent(cf->it, ino);
    if (!parent || !cf_known_excl(cf, parent))
        return 0;
    /* The worker names it by path when it sends. */
    if (cl_itable_hold(cf->it, ino) < 0)
        return 0;
    pthread_mutex_lock(&q->lock);
    struct dset *d = NULL;
    for (struct dset *e = q->head; e; e = e->next)
        if (e->node == ino && !e->taken)
            d = e;
    int held = 1;
    if (d) {
        held = 0; /* the entry holds the node already */
    } else if (q->n < WBD_MAX &&
               (q->started ||
                (q->started = pthread_create(&q->worker, NULL, worker_main, q) == 0))) {
        d = calloc(1, sizeof(*d));
        if (d) {
            d->node = ino;
            d->parent = parent;
            d->attr = st;
            *q->tail = d;
            q->tail = &d->next;
            __atomic_add_fetch(&q->n, 1, __ATOMIC_RELEASE);
        }
    }
    if (!d) {
        pthread_mutex_unlock(&q->lock);
        cl_itable_forget(cf->it, ino, 1);
        return 0;
    }
    apply(&d->attr, attr, to_set);
    d->to_set |= to_set;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    if (!held)
        cl_itable_forget(cf->it, ino, 1);

    /* What the bricks will make of it. */
    apply(&st, attr, to_set);
    clock_gettime(CLOCK_REALTIME, &st.st_ctim);
    cf_known_set_attr(cf, ino, &st);
    fuse_reply_attr(req, &st, cf_lease_cache_timeout(cf));
    return 1;
}
