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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "aclmode.h"
#include "bridge.h"
#include "wbq.h"

#define WBD_MAX 4096

#define DEFERRABLE (FUSE_SET_ATTR_MODE | CF_ATTR_DEFERRABLE)

struct dset {
    struct wbq_item it; /* first: the queue's item */
    struct stat attr;   /* the values to send, per bit of to_set */
    int to_set;
};

struct cf_wbd {
    struct wbq q; /* q.ctx: the mount */
};

void cf_attr_apply(struct stat *st, const struct stat *attr, int to_set)
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

void cf_attr_answered(struct cf *cf, uint64_t node, struct stat *st, const struct stat *attr,
                      int to_set)
{
    cf_attr_apply(st, attr, to_set);
    clock_gettime(CLOCK_REALTIME, &st->st_ctim);
    cf_known_set_attr(cf, node, st);
}

static int send_one(struct wbq *q, struct wbq_item *it)
{
    struct cf *cf = q->ctx;
    const struct dset *d = (const struct dset *)it;
    /* The files written back into it, and the removals queued after them
     * (cf_wb_settle_dir settles those too), land first: their arrival
     * moves the directory's times, which this SETATTR may set. */
    int rc = cf_wb_settle_dir(cf, it->node);
    if (rc < 0)
        log_debug("files of node %llu before its attributes: %s", (unsigned long long)it->node,
                  strerror(-rc));
    if ((rc = cf_wbm_gone(cf, it->node)) == 0)
        rc = cf_wbd_send_attr(cf, it->node, &d->attr, d->to_set);
    /* Recorded while the item is still queued: a waiter woken by its
     * answer (fsync of a directory) then finds the error. */
    if (rc < 0)
        cf_wb_note_error(cf, it->parent, rc);
    return rc;
}

int cf_wbd_send_attr(struct cf *cf, uint64_t node, const struct stat *attr, int to_set)
{
    char path[PATH_MAX];
    int rc = cl_itable_path(cf->it, node, NULL, path, sizeof(path));
    if (rc < 0)
        return rc;
    struct cl_op o;
    cl_op_init(&o, RPC_OP_SETATTR, NULL, NULL);
    rpc_set_str(&o.args, RPC_T_PATH, &o.args.path, path);
    cf_setattr_args(&o.args, attr, to_set);
    rc = cl_op_run(cf->stack, &o);
    cl_opstats_note(&cf->stats, RPC_OP_SETATTR, o.rounds, rc);
    cl_op_release(&o);
    if (rc < 0) {
        log_warn("attributes of %s written back: %s", path, strerror(-rc));
        cf_known_forget_attr(cf, node);
        cf_lease_inval_attr(cf, node);
    }
    return rc;
}

static void sent(struct wbq *q, struct wbq_item *it, int rc)
{
    struct cf *cf = q->ctx;
    (void)rc; /* its error was noted by send_one */
    cl_itable_forget(cf->it, it->node, 1);
    free(it);
}

int cf_wbd_init(struct cf *cf)
{
    struct cf_wbd *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    wbq_init(&w->q, WBD_MAX, send_one, sent, cf);
    cf->wbd = w;
    return 0;
}

void cf_wbd_free(struct cf *cf)
{
    if (!cf->wbd)
        return;
    wbq_destroy(&cf->wbd->q);
    free(cf->wbd);
    cf->wbd = NULL;
}

int cf_wbd_settle(struct cf *cf, uint64_t node)
{
    return cf->wbd ? wbq_wait(&cf->wbd->q, node, WBQ_NODE) : 0;
}

int cf_wbd_settle_in(struct cf *cf, uint64_t dir)
{
    if (!cf->wbd)
        return 0;
    int rc = wbq_wait(&cf->wbd->q, dir, WBQ_NODE);
    int r2 = wbq_wait(&cf->wbd->q, dir, WBQ_PARENT);
    return rc ? rc : r2;
}

int cf_wbd_busy(struct cf *cf)
{
    return cf->wbd && wbq_busy(&cf->wbd->q);
}

int cf_wbd_settle_all(struct cf *cf)
{
    return cf->wbd ? wbq_wait(&cf->wbd->q, 0, WBQ_ANY) : 0;
}

/* Queues the change, or returns 0 (then it goes to the bricks as usual);
 * *out gets the attributes the bricks will make of it. */
static int defer(struct cf *cf, fuse_ino_t ino, const struct stat *attr, int to_set,
                 struct stat *out)
{
    struct cf_wbd *w = cf->wbd;
    struct stat st;
    if (!w || !cf_wb_enabled(cf) || !to_set || (to_set & ~DEFERRABLE) ||
        !cf_known_attr(cf, ino, &st) || !S_ISDIR(st.st_mode) || !cf_known_excl(cf, ino))
        return 0;
    uint64_t parent = cl_itable_parent(cf->it, ino);
    if (!parent || !cf_known_excl(cf, parent))
        return 0;
    /* The worker names it by path when it sends. */
    if (cl_itable_hold(cf->it, ino) < 0)
        return 0;
    pthread_mutex_lock(&w->q.lock);
    struct dset *d = (struct dset *)wbq_untaken_locked(&w->q, ino);
    int held = 1;
    if (d) {
        held = 0; /* the entry holds the node already */
    } else if (wbq_room_locked(&w->q) && (d = calloc(1, sizeof(*d)))) {
        d->it.node = ino;
        d->it.parent = parent;
        d->attr = st;
        wbq_push_locked(&w->q, &d->it);
    }
    if (d) {
        cf_attr_apply(&d->attr, attr, to_set);
        d->to_set |= to_set;
    }
    pthread_mutex_unlock(&w->q.lock);
    if (!d || !held)
        cl_itable_forget(cf->it, ino, 1);
    if (!d)
        return 0;

    cf_attr_answered(cf, ino, &st, attr, to_set);
    *out = st;
    return 1;
}

int cf_wbd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set)
{
    struct cf *cf = fuse_req_userdata(req);
    struct stat st;
    if (!defer(cf, ino, attr, to_set, &st))
        return 0;
    fuse_reply_attr(req, &st, cf_lease_cache_timeout(cf));
    return 1;
}

int cf_wbd_acl(fuse_req_t req, fuse_ino_t ino, const char *name, const void *value, size_t size,
               int flags)
{
    struct cf *cf = fuse_req_userdata(req);
    if (!value) {
        /* removing a default ACL a directory held so does not have (the
         * state is known for directories only) */
        if (strcmp(name, "system.posix_acl_default") || !cf->wbd || !cf_wb_enabled(cf) ||
            !cf_known_excl(cf, ino) || cf_known_dir_acl(cf, ino) != 1)
            return 0;
        fuse_reply_err(req, ENODATA);
        return 1;
    }
    /* An access ACL of owner, group and other entries only is what the
     * mode says: a file system keeps no ACL for it, just the mode (and
     * drops an ACL it had: so only for a directory known to have no
     * extended attributes). defer() checks the rest. */
    struct stat st;
    int mode = strcmp(name, "system.posix_acl_access") || flags || !cf_acl_minimal(value, size) ||
                       !cf_known_xattr_free(cf, ino) || !cf_known_attr(cf, ino, &st)
                   ? -1
                   : cf_acl_mode(value, size);
    if (mode < 0)
        return 0;
    struct stat attr = {.st_mode = (st.st_mode & ~(mode_t)0777) | (mode_t)mode};
    if (!defer(cf, ino, &attr, FUSE_SET_ATTR_MODE, &st))
        return 0;
    fuse_reply_err(req, 0);
    return 1;
}
