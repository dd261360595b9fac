/* Shared plumbing of the FUSE handlers: request state, paths, replies. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "../rpc/opinfo.h"
#include "bridge.h"

struct fop *fop_new(fuse_req_t req, uint16_t opcode, cl_done_cb done)
{
    struct fop *f = malloc(sizeof(*f));
    if (!f) {
        fuse_reply_err(req, ENOMEM);
        return NULL;
    }
    cl_op_init(&f->op, opcode, done, f);
    f->req = req;
    f->cf = fuse_req_userdata(req);
    f->parent = f->parent2 = 0;
    f->flags = 0;
    f->size = f->pos = 0;
    f->off = 0;
    memset(&f->fi, 0, sizeof(f->fi));
    f->data = NULL;
    f->lease_seq = 0;
    f->path_node = 0;
    f->retried = 0;
    f->name[0] = f->name2[0] = 0;
    return f;
}

void fop_free(struct fop *f)
{
    if (f->op.status == -ENOSPC || f->op.status == -EDQUOT)
        cf_wb_nospace(f->cf);
    cl_op_release(&f->op);
    free(f->data);
    free(f);
}

static int copy_name(char *dst, const char *name)
{
    size_t l = strlen(name);
    if (l > NAME_MAX)
        return -ENAMETOOLONG;
    memcpy(dst, name, l + 1);
    return 0;
}

/* Whatever this request names must be on the bricks first (wb.c). A
 * directory or its attributes failing meanwhile is reported by fsync and
 * create in its parent, not to this request, which the bricks answer. */
static int settle(struct cf *cf, fuse_ino_t ino, const char *name)
{
    int rc;
    if (name) {
        int wbh = cf_wbh_busy(cf);
        uint64_t child =
            wbh || cf_wbm_busy(cf) || cf_wbd_busy(cf) ? cl_itable_child(cf->it, ino, name) : 0;
        /* The directories on the way, the named one included, exist, and
         * their attributes are on the bricks. */
        (void)cf_wbm_settle_up(cf, child ? child : ino);
        if (child && wbh)
            cf_wbh_sync(cf, child);
        (void)cf_wbd_settle(cf, ino);
        if (child)
            (void)cf_wbd_settle(cf, child);
        return cf_wb_settle_name(cf, ino, name);
    }
    if (cf_wbh_busy(cf)) {
        cf_wbh_sync(cf, ino);
        cf_wbh_settle_dir(cf, ino);
    }
    /* The directories on the way exist, and so do the ones made in it. */
    (void)cf_wbm_settle_up(cf, ino);
    (void)cf_wbm_settle_in(cf, ino);
    if ((rc = cf_wb_settle(cf, ino)) < 0 || (rc = cf_wb_settle_dir(cf, ino)) < 0)
        return rc;
    /* its own attributes, and those of directories it lists */
    (void)cf_wbd_settle_in(cf, ino);
    return 0;
}

int cf_name_fits(struct cf *cf, fuse_ino_t parent, const char *name)
{
    if (strlen(name) > NAME_MAX || cl_itable_path_len(cf->it, parent, name) >= RPC_PATH_MAX)
        return -ENAMETOOLONG;
    return 0;
}

int fop_path(struct fop *f, fuse_ino_t ino, const char *name)
{
    int rc;
    if (name && (rc = copy_name(f->name, name)) < 0)
        return rc;
    if ((rc = settle(f->cf, ino, name ? f->name : NULL)) < 0)
        return rc;
    rc = cl_itable_path(f->cf->it, ino, name ? f->name : NULL, f->path, sizeof(f->path));
    if (rc < 0)
        return rc;
    /* Removals written back that concern the path reach the bricks first. */
    cf_wbrm_settle_path(f->cf, f->path);
    rpc_set_str(&f->op.args, RPC_T_PATH, &f->op.args.path, f->path);
    f->path_node = name ? 0 : ino;
    return 0;
}

int fop_path2(struct fop *f, fuse_ino_t ino, const char *name)
{
    int rc = copy_name(f->name2, name);
    if (rc < 0 || (rc = settle(f->cf, ino, f->name2)) < 0)
        return rc;
    rc = cl_itable_path(f->cf->it, ino, f->name2, f->path2, sizeof(f->path2));
    if (rc < 0)
        return rc;
    cf_wbrm_settle_path(f->cf, f->path2);
    rpc_set_str(&f->op.args, RPC_T_PATH2, &f->op.args.path2, f->path2);
    return 0;
}

void fop_lease_key(struct fop *f, fuse_ino_t ino)
{
    /* An unlinked file has no path: nobody else can hold a lease on it. */
    if (rpc_has(&f->op.args, RPC_T_FH) && !rpc_has(&f->op.args, RPC_T_PATH))
        (void)fop_path(f, ino, NULL);
}

/* Whether an operation may change what a listing shows (lsahead.c). Not
 * RPC_OPF_CHANGE, which agrees on every file operation: here anything not
 * known to leave the file alone counts as a change. */
static int changes(const struct rpc_msg *a)
{
    if (a->op == RPC_OP_OPEN)
        return (a->flags & O_TRUNC) != 0;
    return !rpc_op_is(a->op, RPC_OPF_READONLY);
}

/* A request by the path of a hard-linked file's node that the bricks
 * answered ENOENT went by a name another client removed (this mount may
 * not have heard: no lease on it): it goes again by the file's next name.
 * Once, and only when the path was still the node's. */
static int again_by_another_name(struct fop *f)
{
    struct cl_op *op = &f->op;
    if (op->status != -ENOENT || !f->path_node || f->retried || rpc_has(&op->args, RPC_T_FH) ||
        !cl_itable_demote_path(f->cf->it, f->path_node, f->path) ||
        cl_itable_path(f->cf->it, f->path_node, NULL, f->path, sizeof(f->path)) < 0)
        return 0;
    f->retried = 1;
    cl_op_release(op);
    op->status = 0;
    op->rounds = 0;
    rpc_set_str(&op->args, RPC_T_PATH, &op->args.path, f->path);
    cl_submit(f->cf->stack, op);
    return 1;
}

/* Counts the operation (cf->stats), then runs the handler's completion. */
static void counted_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    cl_opstats_note(&f->cf->stats, (unsigned)op->args.op, op->rounds, op->status);
    if (again_by_another_name(f))
        return;
    /* Done on the bricks: a listing fetched while it was under way may
     * lack it (its handler counted its start). */
    if (changes(&op->args))
        cf_lsa_changed(f->cf);
    op->done = f->user_done;
    op->done(op);
}

/* The brick handle behind a handle the kernel holds: a write-back file's
 * goes to the bricks now (wb.c), a directory opened without the brick is
 * opened there now (ops_dir.c). */
int fop_real_fh(struct cf *cf, uint64_t *fh)
{
    if (cf_wb_is_fh(*fh))
        return cf_wb_real_fh(cf, *fh, fh);
    if (cf_dir_is_lazy(*fh))
        return cf_dir_real_fh(cf, *fh, fh);
    return 0;
}

void fop_submit(struct fop *f)
{
    struct rpc_msg *a = &f->op.args;
    int rc;
    if (rpc_has(a, RPC_T_FH) && (rc = fop_real_fh(f->cf, &a->fh)) < 0) {
        fop_fail(f, rc);
        return;
    }
    f->user_done = f->op.done;
    f->op.done = counted_cb;
    f->op.rounds = 0;
    cl_submit(f->cf->stack, &f->op);
}

int fop_errno(int status)
{
    return -cl_status_errno(status);
}

void fop_fail(struct fop *f, int status)
{
    fuse_reply_err(f->req, fop_errno(status));
    fop_free(f);
}

void fop_set_creator(struct fop *f, int with_umask)
{
    const struct fuse_ctx *c = fuse_req_ctx(f->req);
    uid_t uid;
    gid_t gid;
    cf_squash_ids(f->req, &uid, &gid); /* the owner the bricks give it */
    RPC_SET(&f->op.args, uid, RPC_T_UID, uid);
    RPC_SET(&f->op.args, gid, RPC_T_GID, gid);
    RPC_SET(&f->op.args, pid, RPC_T_PID, (uint64_t)c->pid);
    if (with_umask)
        RPC_SET(&f->op.args, umask, RPC_T_UMASK, c->umask);
}

int fop_entry(struct fop *f, struct fuse_entry_param *e)
{
    const struct rpc_msg *m = &f->op.reply->msg;
    if (!rpc_has(m, RPC_T_ATTR))
        return -EPROTO;
    memset(e, 0, sizeof(*e));
    int err;
    e->ino =
        cl_itable_link(f->cf->it, f->parent, f->name, &m->attr.gfid, m->attr.mode & S_IFMT, &err);
    if (!e->ino)
        return err;
    cl_itable_set_nlink(f->cf->it, e->ino, m->attr.nlink);
    rpc_attr_to_stat(&m->attr, &e->attr);
    e->attr_timeout = cf_lease_attr_timeout(f, &m->attr);
    e->entry_timeout = cf_lease_entry_timeout(f);
    int held = cf_lease_object_held(f);
    cf_known_leased_as(f->cf, e->ino, &e->attr, held);
    if (held && rpc_has(m, RPC_T_NOXATTRS))
        cf_known_noxattrs(f->cf, e->ino);
    return 0;
}

void fop_parent_attr(struct fop *f, uint64_t dir)
{
    const struct rpc_msg *m = f->op.reply ? &f->op.reply->msg : NULL;
    gfid_t g;
    if (!m || !rpc_has(m, RPC_T_PATTR) || !cf_lease_held(f) ||
        cl_itable_gfid(f->cf->it, dir, &g) < 0) {
        cf_known_forget_attr(f->cf, dir);
        return;
    }
    struct rpc_attr a = m->pattr;
    a.gfid = g;
    struct stat st;
    rpc_attr_to_stat(&a, &st);
    cf_known_set_attr(f->cf, dir, &st);
}

void fop_done_err_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    fuse_reply_err(f->req, fop_errno(op->status));
    fop_free(f);
}

void fop_done_attr_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0) {
        fop_fail(f, op->status);
        return;
    }
    if (!rpc_has(&op->reply->msg, RPC_T_ATTR)) {
        fop_fail(f, -EPROTO);
        return;
    }
    struct stat st;
    rpc_attr_to_stat(&op->reply->msg.attr, &st);
    if (f->parent)
        cl_itable_set_nlink(f->cf->it, f->parent, st.st_nlink);
    cf_reply_begin(f->cf);
    /* A directory's attributes under its lease: the kernel drops them at
     * each change of its entries, and asks again at the next permission
     * check (known.c answers; this mount's changes keep them current). */
    if (f->parent && S_ISDIR(st.st_mode) && cf_lease_held(f))
        cf_known_set_attr(f->cf, f->parent, &st);
    fuse_reply_attr(f->req, &st, cf_lease_attr_timeout(f, &op->reply->msg.attr));
    cf_reply_end(f->cf);
    fop_free(f);
}

void fop_done_entry_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    /* A name of a hard-linked file the bricks do not have any more (another
     * client removed it): its paths go through its other names. */
    if (op->status == -ENOENT && op->args.op == RPC_OP_LOOKUP)
        cl_itable_forget_alias(f->cf->it, f->parent, f->name);
    if (op->status < 0) {
        fop_fail(f, op->status);
        return;
    }
    struct fuse_entry_param e;
    cf_reply_begin(f->cf);
    int rc = fop_entry(f, &e);
    if (rc < 0) {
        cf_reply_end(f->cf);
        fop_fail(f, rc);
        return;
    }
    unsigned code = (unsigned)op->args.op;
    if (code != RPC_OP_LOOKUP) {
        cf_known_add(f->cf, f->parent, f->name, &e.attr);
        fop_parent_attr(f, f->parent);
    }
    /* The new directory's own lease: its parent's, refused while it cools
     * down after another client's change or recalled meanwhile (this
     * mount's lease there dropped for sharing it), does not matter: the
     * directory's entries are under its own. */
    if (code == RPC_OP_MKDIR && cf_lease_held_path(f, f->path)) {
        cf_known_dir_made(f->cf, e.ino, (op->reply->msg.lease & RPC_LEASE_EXCL) != 0);
        cf_known_set_attr(f->cf, e.ino, &e.attr);
    }
    /* An interrupted request never reaches the kernel: undo its lookup. */
    if (fuse_reply_entry(f->req, &e) != 0)
        cl_itable_forget(f->cf->it, e.ino, 1);
    cf_reply_end(f->cf);
    fop_free(f);
}

static void orphan_done_cb(struct cl_op *op)
{
    cl_op_release(op);
    free(op);
}

/* Closes a handle the kernel never learned about (interrupted open). Runs on
 * completion threads, so it must not wait. */
void fop_release_orphan(struct cf *cf, uint16_t opcode, uint64_t fh)
{
    struct cl_op *op = malloc(sizeof(*op));
    if (!op)
        return;
    cl_op_init(op, opcode, orphan_done_cb, NULL);
    RPC_SET(&op->args, fh, RPC_T_FH, fh);
    cl_submit(cf->stack, op);
}

void fop_done_release_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0 && op->status != -ENOTCONN && op->status != -ETIMEDOUT)
        log_warn("releasing handle %llu: %s", (unsigned long long)f->op.args.fh,
                 strerror(-op->status));
    /* The kernel has forgotten the handle either way. */
    fuse_reply_err(f->req, 0);
    fop_free(f);
}
