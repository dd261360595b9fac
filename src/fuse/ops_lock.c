/* Lock handlers: POSIX record locks (fcntl) and BSD flock, kept by the brick
 * per handle and owner. A blocking SETLK waits on the brick while the FUSE
 * worker is free: the reply comes from the op's completion. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>

#include "bridge.h"

static int to_wire_type(short t, uint64_t *out)
{
    switch (t) {
    case F_RDLCK:
        *out = 0;
        return 0;
    case F_WRLCK:
        *out = 1;
        return 0;
    case F_UNLCK:
        *out = 2;
        return 0;
    default:
        return -EINVAL;
    }
}

static int set_lock(struct fop *f, struct fuse_file_info *fi, const struct flock *l)
{
    struct rpc_msg *a = &f->op.args;
    uint64_t type;
    if (to_wire_type(l->l_type, &type) < 0 || l->l_start < 0 || l->l_len < 0)
        return -EINVAL;
    RPC_SET(a, fh, RPC_T_FH, fi->fh);
    RPC_SET(a, owner, RPC_T_OWNER, fi->lock_owner);
    a->lock.type = type;
    a->lock.start = (uint64_t)l->l_start;
    a->lock.len = (uint64_t)l->l_len;
    a->lock.pid = (uint64_t)(l->l_pid > 0 ? l->l_pid : fuse_req_ctx(f->req)->pid);
    a->present |= 1ull << RPC_T_LOCK;
    return 0;
}

static void getlk_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_msg *m = &op->reply->msg;
    if (!rpc_has(m, RPC_T_LOCK) || m->lock.type > 2)
        FOP_FAIL(f, -EPROTO);
    static const short types[] = {F_RDLCK, F_WRLCK, F_UNLCK};
    struct flock l;
    memset(&l, 0, sizeof(l));
    l.l_type = types[m->lock.type];
    l.l_whence = SEEK_SET;
    l.l_start = (off_t)m->lock.start;
    l.l_len = (off_t)m->lock.len;
    l.l_pid = (pid_t)m->lock.pid;
    fuse_reply_lock(f->req, &l);
    fop_free(f);
}

void cf_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock)
{
    struct fop *f = fop_new(req, RPC_OP_GETLK, getlk_cb);
    if (!f)
        return;
    int rc = set_lock(f, fi, lock);
    if (rc < 0)
        FOP_FAIL(f, rc);
    fop_submit(f);
}

void cf_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
              int sleep)
{
    struct fop *f = fop_new(req, RPC_OP_SETLK, fop_done_err_cb);
    if (!f)
        return;
    int rc = set_lock(f, fi, lock);
    if (rc < 0)
        FOP_FAIL(f, rc);
    RPC_SET(&f->op.args, flags, RPC_T_FLAGS, sleep ? 1 : 0);
    fop_submit(f);
}

void cf_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
    struct fop *f = fop_new(req, RPC_OP_FLOCK, fop_done_err_cb);
    if (!f)
        return;
    RPC_SET(&f->op.args, fh, RPC_T_FH, fi->fh);
    RPC_SET(&f->op.args, owner, RPC_T_OWNER, fi->lock_owner);
    RPC_SET(&f->op.args, flags, RPC_T_FLAGS, (uint64_t)(unsigned)op);
    fop_submit(f);
}
