/* Namespace handlers: lookup, attributes, creation and removal of names. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "bridge.h"

/* A child of a directory this mount holds exclusively whose attributes it
 * knows (a directory it made, or one whose own lease keeps them): answered
 * here. The kernel asks again for a directory whose entry it dropped (a
 * recall of a directory above it prunes the dentries below). */
static int known_entry(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct cf *cf = fuse_req_userdata(req);
    uint64_t node = cf_known_excl(cf, parent) ? cl_itable_child(cf->it, parent, name) : 0;
    struct fuse_entry_param e;
    memset(&e, 0, sizeof(e));
    gfid_t g;
    if (!node || cl_itable_gfid(cf->it, node, &g) < 0)
        return 0;
    cf_reply_begin(cf); /* a recall's invalidations come after this reply */
    int err;
    uint64_t got = cf_known_excl(cf, parent) && cf_known_attr(cf, node, &e.attr)
                       ? cl_itable_link(cf->it, parent, name, &g, e.attr.st_mode & S_IFMT, &err)
                       : 0;
    if (got && got != node)
        cl_itable_forget(cf->it, got, 1);
    int ok = got && got == node;
    if (ok) {
        e.ino = node;
        e.attr_timeout = e.entry_timeout = cf_lease_cache_timeout(cf);
        if (fuse_reply_entry(req, &e) != 0)
            cl_itable_forget(cf->it, node, 1);
    }
    cf_reply_end(cf);
    return ok;
}

void cf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    /* A directory this mount made and still holds a lease on lists every
     * name it has (known.c); the answer needs nothing from the bricks, so
     * nothing written back waits for them first. */
    if (strlen(name) <= NAME_MAX && cf_known_absent(fuse_req_userdata(req), parent, name)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (strlen(name) <= NAME_MAX && known_entry(req, parent, name))
        return;
    struct fop *f = fop_new(req, RPC_OP_LOOKUP, fop_done_entry_cb);
    if (!f)
        return;
    f->parent = parent;
    int rc = fop_path(f, parent, name);
    if (rc < 0)
        FOP_FAIL(f, rc);
    cf_lease_ask(f);
    fop_submit(f);
}

/* The kernel dropped n lookups of ino; when none is left, what the mount
 * kept about it goes too. */
static void forget_one(struct cf *cf, fuse_ino_t ino, uint64_t n)
{
    if (cl_itable_forget(cf->it, ino, n)) {
        cf_ps_forget(cf, ino);
        cf_known_gone(cf, ino);
    }
}

void cf_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    forget_one(fuse_req_userdata(req), ino, nlookup);
    fuse_reply_none(req);
}

void cf_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct cf *cf = fuse_req_userdata(req);
    for (size_t i = 0; i < count; i++)
        forget_one(cf, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

/* By handle when the kernel gives one, else by path; an unlinked file has
 * no path, but while it is open one of its handles reaches it. Either way
 * the file's writes behind reach the bricks first (fop_path does it for
 * a path). */
static int target(struct fop *f, fuse_ino_t ino, struct fuse_file_info *fi)
{
    uint64_t fh;
    if (fi) {
        cf_wbh_sync(f->cf, ino);
        RPC_SET(&f->op.args, fh, RPC_T_FH, fi->fh);
        return 0;
    }
    int rc = fop_path(f, ino, NULL);
    if (rc == -ENOENT && cl_itable_any_fh(f->cf->it, ino, &fh) == 0) {
        RPC_SET(&f->op.args, fh, RPC_T_FH, fh);
        rc = 0;
    }
    return rc;
}

void cf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (cf_wb_getattr(req, ino))
        return;
    struct fop *f = fop_new(req, RPC_OP_GETATTR, fop_done_attr_cb);
    if (!f)
        return;
    f->parent = ino; /* the node whose attributes known.c may keep */
    /* Attributes a change of the directory's entries returned (known.c). */
    struct stat st;
    if (cf_known_attr(f->cf, ino, &st)) {
        fuse_reply_attr(req, &st, cf_lease_cache_timeout(f->cf));
        fop_free(f);
        return;
    }
    int rc = target(f, ino, fi);
    if (rc < 0)
        FOP_FAIL(f, rc);
    fop_lease_key(f, ino);
    cf_lease_ask(f);
    fop_submit(f);
}

void cf_setattr_args(struct rpc_msg *a, const struct stat *attr, int to_set)
{
    static const struct {
        int fuse;
        uint64_t rpc;
    } bits[] = {
        {FUSE_SET_ATTR_MODE, RPC_SET_MODE},
        {FUSE_SET_ATTR_UID, RPC_SET_UID},
        {FUSE_SET_ATTR_GID, RPC_SET_GID},
        {FUSE_SET_ATTR_SIZE, RPC_SET_SIZE},
        {FUSE_SET_ATTR_ATIME, RPC_SET_ATIME},
        {FUSE_SET_ATTR_MTIME, RPC_SET_MTIME},
        {FUSE_SET_ATTR_ATIME_NOW, RPC_SET_ATIME_NOW},
        {FUSE_SET_ATTR_MTIME_NOW, RPC_SET_MTIME_NOW},
        {FUSE_SET_ATTR_CTIME, RPC_SET_CTIME},
    };
    uint64_t valid = 0;
    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
        if (to_set & bits[i].fuse)
            valid |= bits[i].rpc;
    /* a time set to now is only that */
    if (valid & RPC_SET_ATIME_NOW)
        valid &= ~(uint64_t)RPC_SET_ATIME;
    if (valid & RPC_SET_MTIME_NOW)
        valid &= ~(uint64_t)RPC_SET_MTIME;
    if ((valid & RPC_SET_SIZE) && cf_killpriv_asked())
        valid |= RPC_SET_KILL_SUIDGID; /* killpriv.c; the reply carries the mode */
    rpc_set_setattr(a, attr, valid);
}

void cf_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (to_set & FUSE_SET_ATTR_SIZE)
        cf_rc_changed(fuse_req_userdata(req), ino);
    if ((to_set & FUSE_SET_ATTR_MODE) && cf_killpriv_bits(attr->st_mode))
        cf_known_nosetid(fuse_req_userdata(req), ino, 0);
    if (cf_wb_setattr(req, ino, attr, to_set) || cf_wbd_setattr(req, ino, attr, to_set) ||
        cf_wbm_setattr(req, ino, attr, to_set))
        return;
    struct fop *f = fop_new(req, RPC_OP_SETATTR, fop_done_attr_cb);
    if (!f)
        return;
    f->parent = ino;
    cf_known_forget_attr(f->cf, ino);
    int rc = target(f, ino, fi);
    if (rc < 0)
        FOP_FAIL(f, rc);
    cf_setattr_args(&f->op.args, attr, to_set);
    fop_lease_key(f, ino);
    cf_lease_ask(f);
    fop_submit(f);
}

static void readlink_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_msg *m = &op->reply->msg;
    if (!rpc_has(m, RPC_T_DATA) || m->data.len >= sizeof(f->path))
        FOP_FAIL(f, -EPROTO);
    memcpy(f->path2, m->data.p, m->data.len);
    f->path2[m->data.len] = 0;
    fuse_reply_readlink(f->req, f->path2);
    fop_free(f);
}

void cf_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct fop *f = fop_new(req, RPC_OP_READLINK, readlink_cb);
    if (!f)
        return;
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    fop_submit(f);
}

/* Refuses a name no brick would take (cf_name_fits): 1 when it replied. */
static int refused(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    int rc = cf_name_fits(fuse_req_userdata(req), parent, name);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    return rc < 0;
}

/* A new object named name in parent, with a gfid made here. */
static struct fop *new_entry_op(fuse_req_t req, uint16_t opcode, fuse_ino_t parent,
                                const char *name, int with_umask)
{
    struct fop *f = fop_new(req, opcode, fop_done_entry_cb);
    if (!f)
        return NULL;
    f->parent = parent;
    int rc = fop_path(f, parent, name);
    if (rc < 0) {
        fop_fail(f, rc);
        return NULL;
    }
    gfid_generate(&f->op.args.gfid);
    f->op.args.present |= 1ull << RPC_T_GFID;
    fop_set_creator(f, with_umask);
    cf_lease_ask(f);
    /* A new directory may be this mount's alone: files made in it are
     * written back (wb.c). */
    if (opcode == RPC_OP_MKDIR && rpc_has(&f->op.args, RPC_T_LEASE) && cf_wb_enabled(f->cf))
        f->op.args.lease |= RPC_LEASE_EXCL;
    return f;
}

void cf_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (refused(req, parent, name))
        return;
    struct fop *f = new_entry_op(req, RPC_OP_MKNOD, parent, name, 1);
    if (!f)
        return;
    RPC_SET(&f->op.args, mode, RPC_T_MODE, mode);
    RPC_SET(&f->op.args, rdev, RPC_T_RDEV, rdev);
    fop_submit(f);
}

void cf_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (refused(req, parent, name) || cf_wbm_mkdir(req, parent, name, mode))
        return;
    struct fop *f = new_entry_op(req, RPC_OP_MKDIR, parent, name, 1);
    if (!f)
        return;
    RPC_SET(&f->op.args, mode, RPC_T_MODE, mode | S_IFDIR);
    fop_submit(f);
}

void cf_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (refused(req, parent, name) || cf_wbm_symlink(req, link, parent, name))
        return;
    struct fop *f = new_entry_op(req, RPC_OP_SYMLINK, parent, name, 0);
    if (!f)
        return;
    size_t l = strlen(link);
    if (l >= sizeof(f->path2))
        FOP_FAIL(f, -ENAMETOOLONG);
    memcpy(f->path2, link, l + 1);
    rpc_set_bytes(&f->op.args, RPC_T_NAME, &f->op.args.name, f->path2, l);
    fop_submit(f);
}

static void unlink_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status == 0) {
        cf_reply_begin(f->cf);
        uint64_t node = cl_itable_child(f->cf->it, f->parent, f->name);
        if (op->args.op == RPC_OP_RMDIR)
            cf_known_forget(f->cf, node);
        else if (node)
            cf_known_forget_attr(f->cf, node); /* its other names: a link fewer */
        cl_itable_unlink(f->cf->it, f->parent, f->name);
        cf_known_remove(f->cf, f->parent, f->name);
        fop_parent_attr(f, f->parent);
        cf_reply_end(f->cf);
    }
    fop_done_err_cb(op);
}

static void remove_name(fuse_req_t req, uint16_t opcode, fuse_ino_t parent, const char *name)
{
    if (refused(req, parent, name) || cf_wbrm_remove(req, parent, name, opcode == RPC_OP_RMDIR))
        return;
    struct fop *f = fop_new(req, opcode, unlink_cb);
    if (!f)
        return;
    f->parent = parent;
    /* The bricks decide whether a directory is empty: files written back
     * into it must be there first. */
    int rc = opcode == RPC_OP_RMDIR ? cf_wb_settle_all(f->cf) : 0;
    if (rc == 0)
        rc = fop_path(f, parent, name);
    if (rc < 0)
        FOP_FAIL(f, rc);
    cf_lease_ask(f);
    fop_submit(f);
}

void cf_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    remove_name(req, RPC_OP_UNLINK, parent, name);
}

void cf_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    remove_name(req, RPC_OP_RMDIR, parent, name);
}

static void rename_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status == 0) {
        struct cf *cf = f->cf;
        uint64_t src = cl_itable_child(cf->it, f->parent, f->name);
        uint64_t dst = cl_itable_child(cf->it, f->parent2, f->name2);
        cl_itable_rename(cf->it, f->parent, f->name, f->parent2, f->name2,
                         (f->flags & RENAME_EXCHANGE) != 0);
        if (!(f->flags & RENAME_EXCHANGE))
            cf_known_remove(cf, f->parent, f->name);
        cf_known_forget_attr(cf, f->parent);
        cf_known_forget_attr(cf, f->parent2);
        cf_known_add_node(cf, f->parent2, f->name2, src);
        if (f->flags & RENAME_EXCHANGE)
            cf_known_add_node(cf, f->parent, f->name, dst);
        /* The brick dropped this mount's leases on and below both paths. */
        if (src)
            cf_lease_drop_node(cf, src);
        if (dst)
            cf_lease_drop_node(cf, dst);
    }
    fop_done_err_cb(op);
}

void cf_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (refused(req, parent, name) || refused(req, newparent, newname) ||
        cf_wb_rename(req, parent, name, newparent, newname, flags))
        return;
    /* A directory moved takes the leases below it along (the brick drops
     * them): whatever was written behind under it goes first. */
    if (cf_wbh_busy(fuse_req_userdata(req)))
        cf_wbh_settle_all(fuse_req_userdata(req));
    if (cf_wbrm_rename(req, parent, name, newparent, newname, flags))
        return;
    struct fop *f = fop_new(req, RPC_OP_RENAME, rename_cb);
    if (!f)
        return;
    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
        FOP_FAIL(f, -EINVAL);
    f->parent = parent;
    f->parent2 = newparent;
    f->flags = flags;
    /* A directory moved or replaced takes whatever is written back inside
     * it: everything pending reaches the bricks first (renames are rare). */
    int rc = cf_wb_settle_all(f->cf);
    if (rc == 0)
        rc = fop_path(f, parent, name);
    if (rc == 0)
        rc = fop_path2(f, newparent, newname);
    if (rc < 0)
        FOP_FAIL(f, rc);
    if (flags)
        RPC_SET(&f->op.args, flags, RPC_T_FLAGS, flags);
    fop_submit(f);
}

void cf_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (refused(req, newparent, newname))
        return;
    cf_wbh_linked(fuse_req_userdata(req), ino);
    /* Attributes known here (a symlink made here) gain a link. */
    cf_known_forget_attr(fuse_req_userdata(req), ino);
    struct fop *f = fop_new(req, RPC_OP_LINK, fop_done_entry_cb);
    if (!f)
        return;
    int rc = fop_path(f, ino, NULL);
    if (rc == 0)
        rc = fop_path2(f, newparent, newname);
    if (rc < 0)
        FOP_FAIL(f, rc);
    /* The entry reply names the new link. */
    f->parent = newparent;
    memcpy(f->name, f->name2, sizeof(f->name));
    cf_lease_ask(f);
    fop_submit(f);
}

static void statfs_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_msg *m = &op->reply->msg;
    if (!rpc_has(m, RPC_T_STATFS))
        FOP_FAIL(f, -EPROTO);
    struct statvfs sv = {
        .f_bsize = m->statfs.bsize,
        .f_frsize = m->statfs.frsize,
        .f_blocks = m->statfs.blocks,
        .f_bfree = m->statfs.bfree,
        .f_bavail = m->statfs.bavail,
        .f_files = m->statfs.files,
        .f_ffree = m->statfs.ffree,
        .f_favail = m->statfs.ffree,
        .f_namemax = m->statfs.namemax,
    };
    fuse_reply_statfs(f->req, &sv);
    fop_free(f);
}

void cf_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct fop *f = fop_new(req, RPC_OP_STATFS, statfs_cb);
    if (!f)
        return;
    /* ino's own path, for a quota limit covering it (df of a directory,
     * docs/quota.md); the root's when it has gone (the root always has
     * one). */
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        rc = fop_path(f, CL_ROOT_ID, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    fop_submit(f);
}
