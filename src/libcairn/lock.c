/* Locks through a handle: POSIX record locks owned by the handle (as
 * open file description locks are) and flock. The brick keeps them per
 * (connection, owner, file); closing the handle FLUSHes its owner, which
 * drops them (fd.c). */
#include <errno.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "internal.h"

static ssize_t getlk_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_LOCK) || m->lock.type > 2)
        return -EPROTO;
    static const short types[] = {F_RDLCK, F_WRLCK, F_UNLCK};
    struct flock *l = r->out;
    l->l_type = types[m->lock.type];
    l->l_whence = SEEK_SET;
    if (m->lock.type != 2) {
        l->l_start = (off_t)m->lock.start;
        l->l_len = (off_t)m->lock.len;
        l->l_pid = (pid_t)m->lock.pid;
    }
    return 0;
}

int cairn_lock(cairn_fd_t *fd, int cmd, struct flock *lock)
{
    if (!fd)
        return -EBADF;
    if (!lock || lock->l_whence != SEEK_SET || lock->l_start < 0 || lock->l_len < 0)
        return -EINVAL;
    uint64_t type;
    switch (lock->l_type) {
    case F_RDLCK:
        type = 0;
        break;
    case F_WRLCK:
        type = 1;
        break;
    case F_UNLCK:
        type = 2;
        break;
    default:
        return -EINVAL;
    }
    int acc = fd->flags & O_ACCMODE;
    if (cmd != F_GETLK && ((type == 0 && acc == O_WRONLY) || (type == 1 && acc == O_RDONLY)))
        return -EBADF;
    uint16_t op;
    if (cmd == F_GETLK)
        op = RPC_OP_GETLK;
    else if (cmd == F_SETLK || cmd == F_SETLKW)
        op = RPC_OP_SETLK;
    else
        return -EINVAL;
    int err;
    struct cairn__req *r = cairn__req_fd(fd, op, 0, &err);
    if (!r)
        return err;
    struct rpc_msg *a = &r->op.args;
    RPC_SET(a, owner, RPC_T_OWNER, fd->owner);
    a->lock.type = type;
    a->lock.start = (uint64_t)lock->l_start;
    a->lock.len = (uint64_t)lock->l_len;
    a->lock.pid = (uint64_t)getpid();
    a->present |= 1ull << RPC_T_LOCK;
    if (cmd == F_SETLKW)
        RPC_SET(a, flags, RPC_T_FLAGS, RPC_LK_WAIT);
    if (cmd == F_GETLK) {
        r->finish = getlk_finish;
        r->out = lock;
    } else {
        __atomic_store_n(&fd->locked, 1, __ATOMIC_RELAXED);
    }
    return (int)cairn__run(r);
}

int cairn_flock(cairn_fd_t *fd, int operation)
{
    if (!fd)
        return -EBADF;
    int kind = operation & ~LOCK_NB;
    if (kind != LOCK_SH && kind != LOCK_EX && kind != LOCK_UN)
        return -EINVAL;
    int err;
    struct cairn__req *r = cairn__req_fd(fd, RPC_OP_FLOCK, 0, &err);
    if (!r)
        return err;
    RPC_SET(&r->op.args, owner, RPC_T_OWNER, fd->owner);
    RPC_SET(&r->op.args, flags, RPC_T_FLAGS, (uint64_t)(unsigned)operation);
    return (int)cairn__run(r);
}
