/* Lock handlers: POSIX record locks (fcntl) and BSD flock, kept by the brick
 * per handle and owner. A blocking SETLK waits on the brick while the FUSE
 * worker is free: the reply comes from the op's completion. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
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
    cf_wbh_sync(fuse_req_userdata(req), ino);
    struct fop *f = fop_new(req, RPC_OP_GETLK, getlk_cb);
    if (!f)
        return;
    int rc = set_lock(f, fi, lock);
    if (rc < 0)
        FOP_FAIL(f, rc);
    fop_submit(f);
}

/* A blocking wait runs on the brick; when the application's call is
 * interrupted (a signal, or the process being killed, which otherwise
 * hangs until the reply) the kernel sends INTERRUPT and we ask the brick
 * to end the wait, which then answers the original request with EINTR. */
static void cancel_done_cb(struct cl_op *op)
{
    cl_op_release(op);
    free(op);
}

static void wait_interrupt_cb(fuse_req_t req, void *data)
{
    struct fop *f = data;
    struct cl_op *c = malloc(sizeof(*c));
    if (!c)
        return; /* the wait goes on until granted or the file is closed */
    cl_op_init(c, (uint16_t)f->op.args.op, cancel_done_cb, NULL);
    c->args.fh = f->op.args.fh;
    c->args.owner = f->op.args.owner;
    c->args.lock = f->op.args.lock;
    c->args.present =
        f->op.args.present & ((1ull << RPC_T_FH) | (1ull << RPC_T_OWNER) | (1ull << RPC_T_LOCK));
    RPC_SET(&c->args, flags, RPC_T_FLAGS,
            f->op.args.op == RPC_OP_SETLK ? RPC_LK_CANCEL : (f->op.args.flags | RPC_FLOCK_CANCEL));
    cl_submit(f->cf->stack, c);
}

static void wait_done_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    /* After this returns the interrupt callback has run or never will. */
    fuse_req_interrupt_func(f->req, NULL, NULL);
    fop_done_err_cb(op);
}

static void submit_maybe_waiting(struct fop *f, int waits)
{
    if (waits) {
        f->op.done = wait_done_cb;
        fuse_req_interrupt_func(f->req, wait_interrupt_cb, f);
    }
    fop_submit(f);
}

void cf_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
              int sleep)
{
    cf_wbh_sync(fuse_req_userdata(req), ino);
    struct fop *f = fop_new(req, RPC_OP_SETLK, fop_done_err_cb);
    if (!f)
        return;
    int rc = set_lock(f, fi, lock);
    if (rc < 0)
        FOP_FAIL(f, rc);
    RPC_SET(&f->op.args, flags, RPC_T_FLAGS, sleep ? RPC_LK_WAIT : 0);
    /* Before it is sent: from now on closes of this file go to the brick
     * (cf_flush). */
    cl_itable_mark_locked(f->cf->it, ino);
    submit_maybe_waiting(f, sleep && lock->l_type != F_UNLCK);
}

void cf_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
    cf_wbh_sync(fuse_req_userdata(req), ino);
    struct fop *f = fop_new(req, RPC_OP_FLOCK, fop_done_err_cb);
    if (!f)
        return;
    RPC_SET(&f->op.args, fh, RPC_T_FH, fi->fh);
    RPC_SET(&f->op.args, owner, RPC_T_OWNER, fi->lock_owner);
    RPC_SET(&f->op.args, flags, RPC_T_FLAGS, (uint64_t)(unsigned)op);
    submit_maybe_waiting(f, !(op & LOCK_NB) && !(op & LOCK_UN));
}
