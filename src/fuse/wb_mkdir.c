/* Write-back of mkdir and symlink (docs/consistency.md, "Write-back").
 *
 * In a directory this mount made and holds an exclusive lease on, a new
 * directory is answered here: its id is made here, the mount knows it
 * complete (empty) and its own, and files created in it are written back
 * at once. One worker thread sends the MKDIRs in order, each asking for the
 * exclusive lease on the new directory. Nobody else can reach the name
 * before the worker sends it: any other client's request about the parent
 * recalls the parent's lease, and the recall sends the pending MKDIRs made
 * in it first. A symlink made there goes the same way, in the same queue
 * (its SYMLINK asks for no lease): anything naming it (readlink, a link,
 * a removal or rename, a request by its path) sends it first. Its owner
 * and times set before the SYMLINK is answered (tar sets them right after
 * making it) are answered here too and sent right after it: waiting for
 * the SYMLINK would wait for every file queued before it.
 *
 * Order. Whatever goes to the bricks inside a directory whose MKDIR is
 * pending waits for its answer: a written-back file, directory attributes
 * or removal in it, a nested MKDIR (the worker sends in order), and any
 * request of this mount by a path through it (fop_path). A listing or
 * recall of the parent sends the pending MKDIRs in it first.
 *
 * Errors. A refused MKDIR is logged, the parent's cached state is dropped
 * (the name disappears from the kernel's view, and what was written back
 * into the directory fails and is reported in turn), and the error is
 * returned by the next create or fsync of a directory in the parent. When
 * the bricks grant no exclusive lease on the new directory (one was
 * recalled meanwhile), what was written back into it is sent at once and
 * the directory is written back no more. At most WBM_MAX are pending;
 * beyond, mkdir waits for the bricks as without write-back. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "bridge.h"
#include "wbq.h"

#define WBM_MAX 4096
/* Directories whose MKDIR failed lately: what was made in them fails too,
 * unsent (their paths may name somebody else's directory now). */
#define FAILED_KEPT 64

struct pmk {
    struct wbq_item it; /* first: the queue's item */
    char *target;       /* a symlink's; NULL: a directory */
    char name[NAME_MAX + 1];
    gfid_t gfid;
    mode_t mode, umask;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    int excl; /* the bricks granted the exclusive lease on it */
    /* A symlink's SETATTRs answered while its SYMLINK was pending, sent
     * after it (cf_wbm_setattr); sealed once none may join. Under q.lock. */
    struct stat attr;
    int to_set, sealed;
};

struct cf_wbm {
    struct wbq q;                 /* first, so the queue leads to this; q.ctx: the mount */
    uint64_t failed[FAILED_KEPT]; /* under q.lock */
    int failed_err[FAILED_KEPT];
    unsigned n_failed;
};

/* The error of node's MKDIR if it failed lately, else 0; under q.lock. */
static int failed_locked(const struct cf_wbm *w, uint64_t node)
{
    for (unsigned i = 0; i < FAILED_KEPT && i < w->n_failed; i++)
        if (w->failed[i] == node)
            return w->failed_err[i];
    return 0;
}

/* Sends d's MKDIR (or SYMLINK). */
static int make_one(struct cf *cf, struct pmk *d)
{
    char path[PATH_MAX];
    int rc = cl_itable_path(cf->it, d->it.parent, d->name, path, sizeof(path));
    if (rc < 0)
        return rc;
    struct cl_op o;
    cl_op_init(&o, d->target ? RPC_OP_SYMLINK : RPC_OP_MKDIR, NULL, NULL);
    struct rpc_msg *a = &o.args;
    rpc_set_str(a, RPC_T_PATH, &a->path, path);
    a->gfid = d->gfid;
    a->present |= 1ull << RPC_T_GFID;
    if (d->target) {
        rpc_set_bytes(a, RPC_T_NAME, &a->name, d->target, strlen(d->target));
    } else {
        RPC_SET(a, mode, RPC_T_MODE, (uint64_t)(d->mode | S_IFDIR));
        RPC_SET(a, umask, RPC_T_UMASK, d->umask);
    }
    RPC_SET(a, uid, RPC_T_UID, d->uid);
    RPC_SET(a, gid, RPC_T_GID, d->gid);
    RPC_SET(a, pid, RPC_T_PID, (uint64_t)d->pid);
    uint64_t mark = d->target ? 0 : cf_lease_mark(cf);
    if (mark)
        RPC_SET(a, lease, RPC_T_LEASE, RPC_LEASE_READ | RPC_LEASE_EXCL);
    rc = cl_op_run(cf->stack, &o);
    cl_opstats_note(&cf->stats, a->op, o.rounds, rc);
    if (rc == 0) {
        const struct rpc_msg *m = &o.reply->msg;
        if (!rpc_has(m, RPC_T_ATTR))
            rc = -EPROTO;
        else if (!gfid_equal(&m->attr.gfid, &d->gfid))
            rc = -EEXIST; /* not the directory this mount made */
        else
            d->excl = mark && rpc_lease_whole(m) && (m->lease & RPC_LEASE_EXCL) &&
                      cf_lease_kept(cf, mark, path);
    }
    if (rc < 0)
        log_error("write-back of %s %s failed: %s; it did not reach the bricks",
                  d->target ? "symlink" : "directory", path, strerror(-rc));
    cl_op_release(&o);
    return rc;
}

/* The SETATTRs answered for symlink d while its SYMLINK was pending, once
 * it is made. A refused one is logged and returned by the next fsync or
 * create in the parent, as for directories' (wb_dir.c). */
static void symlink_attrs(struct cf *cf, struct wbq *q, struct pmk *d)
{
    for (;;) {
        pthread_mutex_lock(&q->lock);
        int to_set = d->to_set;
        struct stat attr = d->attr;
        d->to_set = 0;
        d->sealed = !to_set;
        pthread_mutex_unlock(&q->lock);
        if (!to_set)
            return;
        int rc = cf_wbd_send_attr(cf, d->it.node, &attr, to_set);
        if (rc < 0)
            cf_wb_note_error(cf, d->it.parent, rc);
    }
}

static int send_one(struct wbq *q, struct wbq_item *it)
{
    struct cf_wbm *w = (struct cf_wbm *)q; /* q is w's first member */
    struct pmk *d = (struct pmk *)it;
    pthread_mutex_lock(&q->lock);
    int rc = failed_locked(w, it->parent);
    pthread_mutex_unlock(&q->lock);
    if (rc)
        log_error("write-back of %s %s not sent: its parent's failed",
                  d->target ? "symlink" : "directory", d->name);
    else if ((rc = make_one(q->ctx, d)) == 0 && d->target)
        symlink_attrs(q->ctx, q, d);
    if (rc < 0) {
        /* Recorded before the waiters wake: what they would send into it
         * checks this first (cf_wbm_gone), and fsync of a directory finds
         * the error. */
        cf_wb_note_error(q->ctx, it->parent, rc);
        pthread_mutex_lock(&q->lock);
        unsigned i = __atomic_fetch_add(&w->n_failed, 1, __ATOMIC_RELAXED) % FAILED_KEPT;
        w->failed[i] = it->node;
        w->failed_err[i] = rc;
        pthread_mutex_unlock(&q->lock);
    }
    return rc;
}

/* After d's answer, once its waiters are woken. */
static void sent(struct wbq *q, struct wbq_item *it, int rc)
{
    struct cf *cf = q->ctx;
    struct pmk *d = (struct pmk *)it;
    if (rc < 0) {
        /* This mount showed a directory the bricks do not have, and
         * what it holds is not sent. */
        size_t lost = d->target ? 0 : cf_wb_drop_dir(cf, it->node);
        if (lost)
            log_error("%zu files written back into directory %s were not sent", lost, d->name);
        cf_known_forget(cf, it->node);
        cf_known_forget(cf, it->parent);
        cf_lease_drop_node(cf, it->parent);
    } else if (d->target) {
        /* a symlink holds nothing and takes no lease */
    } else if (!d->excl) {
        /* Shared after all: no more write-back in it, and what was written
         * back goes now. */
        cf_known_forget(cf, it->node);
        (void)cf_wb_settle_dir(cf, it->node);
        cf_lease_drop_node(cf, it->node);
    }
    cl_itable_forget(cf->it, it->node, 1);
    free(d->target);
    free(d);
}

int cf_wbm_init(struct cf *cf)
{
    struct cf_wbm *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    wbq_init(&w->q, WBM_MAX, send_one, sent, cf);
    cf->wbm = w;
    return 0;
}

void cf_wbm_free(struct cf *cf)
{
    if (!cf->wbm)
        return;
    wbq_destroy(&cf->wbm->q);
    free(cf->wbm);
    cf->wbm = NULL;
}

int cf_wbm_busy(struct cf *cf)
{
    return cf->wbm && wbq_busy(&cf->wbm->q);
}

int cf_wbm_settle(struct cf *cf, uint64_t node)
{
    return cf->wbm ? wbq_wait(&cf->wbm->q, node, WBQ_NODE) : 0;
}

int cf_wbm_settle_in(struct cf *cf, uint64_t dir)
{
    return cf->wbm ? wbq_wait(&cf->wbm->q, dir, WBQ_PARENT) : 0;
}

int cf_wbm_settle_all(struct cf *cf)
{
    return cf->wbm ? wbq_wait(&cf->wbm->q, 0, WBQ_ANY) : 0;
}

int cf_wbm_settle_up(struct cf *cf, uint64_t node)
{
    if (!cf_wbm_busy(cf))
        return 0;
    /* The queue is in order: waiting for the deepest pending directory on
     * the way up waits for those above it too. */
    for (uint64_t n = node; n; n = cl_itable_parent(cf->it, n))
        if (wbq_has(&cf->wbm->q, n))
            return cf_wbm_settle(cf, n);
    return 0;
}

int cf_wbm_gone(struct cf *cf, uint64_t node)
{
    struct cf_wbm *w = cf->wbm;
    (void)cf_wbm_settle_up(cf, node);
    if (!w || !__atomic_load_n(&w->n_failed, __ATOMIC_RELAXED))
        return 0;
    int rc = 0;
    pthread_mutex_lock(&w->q.lock);
    for (uint64_t n = node; n && !rc; n = cl_itable_parent(cf->it, n))
        rc = failed_locked(w, n);
    pthread_mutex_unlock(&w->q.lock);
    return rc;
}

/* A pending entry for name in parent, linked in the table with its id and
 * one lookup held for the queue (its path), or NULL. */
static struct pmk *new_entry(struct cf *cf, fuse_req_t req, fuse_ino_t parent, const char *name,
                             mode_t type)
{
    struct cf_wbm *w = cf->wbm;
    struct pmk *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    pthread_mutex_lock(&w->q.lock);
    int room = wbq_room_locked(&w->q);
    pthread_mutex_unlock(&w->q.lock);
    int err;
    gfid_generate(&d->gfid);
    if (!room || !(d->it.node = cl_itable_link(cf->it, parent, name, &d->gfid, type, &err))) {
        free(d);
        return NULL;
    }
    cl_itable_set_nlink(cf->it, d->it.node, type == S_IFDIR ? 2 : 1);
    /* One lookup for the kernel's entry, one for the queue. */
    if (cl_itable_hold(cf->it, d->it.node) < 0) {
        cl_itable_forget(cf->it, d->it.node, 1);
        free(d);
        return NULL;
    }
    const struct fuse_ctx *c = fuse_req_ctx(req);
    d->it.parent = parent;
    snprintf(d->name, sizeof(d->name), "%s", name);
    d->umask = c->umask;
    cf_squash_ids(req, &d->uid, &d->gid); /* the owner the bricks give it */
    d->pid = c->pid;
    return d;
}

int cf_wbm_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wbm *w = cf->wbm;
    struct stat st;
    /* A chown asks to drop set-id bits, which a symlink never has. */
    to_set &= ~FUSE_SET_ATTR_KILL_SUID;
    if (!w || !cf_wb_enabled(cf) || !to_set || (to_set & ~CF_ATTR_DEFERRABLE) || !cf_wbm_busy(cf) ||
        !cf_known_attr(cf, ino, &st) || !S_ISLNK(st.st_mode))
        return 0;
    /* Nobody else sees the symlink before its SYMLINK and these SETATTRs
     * are sent: another client's lookup recalls the parent, and the recall
     * waits for the queue. */
    pthread_mutex_lock(&w->q.lock);
    struct pmk *d = (struct pmk *)wbq_find_locked(&w->q, ino);
    int queued = d && d->target && !d->sealed;
    if (queued) {
        cf_attr_apply(&d->attr, attr, to_set);
        d->to_set |= to_set;
    }
    pthread_mutex_unlock(&w->q.lock);
    if (!queued)
        return 0;
    cf_attr_answered(cf, ino, &st, attr, to_set);
    fuse_reply_attr(req, &st, cf_lease_cache_timeout(cf));
    return 1;
}

/* Records st, the attributes the bricks will give the new entry, and pst,
 * its parent's after it, queues d and answers the kernel. */
static void queue_and_reply(struct cf *cf, fuse_req_t req, struct pmk *d, const struct stat *st,
                            const char *name, struct stat *pst)
{
    struct cf_wbm *w = cf->wbm;
    cf_known_noxattrs(cf, d->it.node); /* no default ACL: nothing is inherited */
    cf_known_set_attr(cf, d->it.node, st);
    cf_known_add(cf, d->it.parent, name, st);
    pst->st_mtim = pst->st_ctim = st->st_mtim;
    cf_known_set_attr(cf, d->it.parent, pst);

    uint64_t node = d->it.node; /* d is the worker's once queued */
    pthread_mutex_lock(&w->q.lock);
    wbq_push_locked(&w->q, &d->it);
    pthread_mutex_unlock(&w->q.lock);

    struct fuse_entry_param e;
    memset(&e, 0, sizeof(e));
    e.ino = node;
    e.attr = *st;
    e.attr_timeout = e.entry_timeout = cf_lease_cache_timeout(cf);
    if (fuse_reply_entry(req, &e) != 0)
        cl_itable_forget(cf->it, e.ino, 1); /* interrupted: still made, like any other */
}

int cf_wbm_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct cf *cf = fuse_req_userdata(req);
    struct stat pst;
    if (!cf->wbm || !cf_wb_enabled(cf) || strlen(name) > NAME_MAX || !cf_known_excl(cf, parent) ||
        cf_known_dir_acl(cf, parent) != 1 || !cf_known_attr(cf, parent, &pst) ||
        !cf_known_absent(cf, parent, name))
        return 0;
    cf_wb_order_new(cf, parent, name);
    struct pmk *d = new_entry(cf, req, parent, name, S_IFDIR);
    if (!d)
        return 0;
    d->mode = mode & 07777;

    /* What the bricks will make of it: mkdir keeps the sticky bit, and a
     * setgid directory passes its group and its setgid bit on. */
    struct stat st;
    memset(&st, 0, sizeof(st));
    st.st_mode = S_IFDIR | (mode & 01777 & ~d->umask);
    st.st_uid = d->uid;
    st.st_gid = d->gid;
    if (pst.st_mode & S_ISGID) {
        st.st_gid = pst.st_gid;
        st.st_mode |= S_ISGID;
    }
    st.st_nlink = 2;
    st.st_size = 4096;
    st.st_blocks = 8;
    st.st_blksize = 4096;
    st.st_ino = gfid_ino(&d->gfid);
    clock_gettime(CLOCK_REALTIME, &st.st_mtim);
    st.st_atim = st.st_ctim = st.st_mtim;
    cf_known_dir_made(cf, d->it.node, 1);
    cf_known_set_dir_acl(cf, d->it.node, 1); /* the parent has no default ACL */
    cf_known_leased(cf, d->it.node);
    pst.st_nlink++;
    queue_and_reply(cf, req, d, &st, name, &pst);
    return 1;
}

int cf_wbm_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    struct cf *cf = fuse_req_userdata(req);
    struct stat pst;
    size_t tl = strlen(link);
    if (!cf->wbm || !cf_wb_enabled(cf) || strlen(name) > NAME_MAX || !tl || tl >= PATH_MAX ||
        !cf_known_excl(cf, parent) || !cf_known_attr(cf, parent, &pst) ||
        !cf_known_absent(cf, parent, name))
        return 0;
    cf_wb_order_new(cf, parent, name);
    char *target = strdup(link);
    struct pmk *d = target ? new_entry(cf, req, parent, name, S_IFLNK) : NULL;
    if (!d) {
        free(target);
        return 0;
    }
    d->target = target;

    /* What the bricks will make of it: a setgid directory gives its group. */
    struct stat st;
    memset(&st, 0, sizeof(st));
    st.st_mode = S_IFLNK | 0777;
    st.st_uid = d->uid;
    st.st_gid = (pst.st_mode & S_ISGID) ? pst.st_gid : d->gid;
    st.st_nlink = 1;
    st.st_size = (off_t)tl;
    st.st_blksize = 4096;
    st.st_ino = gfid_ino(&d->gfid);
    clock_gettime(CLOCK_REALTIME, &st.st_mtim);
    st.st_atim = st.st_ctim = st.st_mtim;
    queue_and_reply(cf, req, d, &st, name, &pst);
    return 1;
}
