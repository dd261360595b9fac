/* Data calls through a handle: reads and writes (split into requests of at
 * most CAIRN__IO_MAX, sent together), fsync, truncate, fallocate, SEEK_DATA/SEEK_HOLE, fstat. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* One call's requests: the result is handed on when the last completes.
 * part[i] is what request i moved (or its error). */
struct io {
    cairn_cb cb;
    void *arg;
    int write;
    int n, left;
    pthread_mutex_t lock;
    struct {
        size_t len;
        ssize_t got;
    } part[];
};

static ssize_t read_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    size_t len = rpc_has(m, RPC_T_DATA) ? m->data.len : 0;
    if (len > r->outlen)
        return -EPROTO;
    if (len)
        memcpy(r->out, m->data.p, len);
    return (ssize_t)len;
}

static ssize_t write_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_SIZE) || m->size > r->outlen)
        return -EPROTO;
    return (ssize_t)m->size;
}

/* The call's result: the first error, else the bytes moved up to the first
 * part that came short (the end of the file, for a read). */
static ssize_t io_result(const struct io *io)
{
    ssize_t total = 0;
    for (int i = 0; i < io->n; i++)
        if (io->part[i].got < 0)
            return io->part[i].got;
    for (int i = 0; i < io->n; i++) {
        total += io->part[i].got;
        if ((size_t)io->part[i].got < io->part[i].len)
            break;
    }
    return total;
}

static void part_done_cb(ssize_t result, void *arg);

struct part_arg {
    struct io *io;
    int i;
};

static void part_done_cb(ssize_t result, void *arg)
{
    struct part_arg *pa = arg;
    struct io *io = pa->io;
    pthread_mutex_lock(&io->lock);
    io->part[pa->i].got = result;
    int last = --io->left == 0;
    pthread_mutex_unlock(&io->lock);
    free(pa);
    if (!last)
        return;
    ssize_t res = io_result(io);
    cairn_cb cb = io->cb;
    void *cbarg = io->arg;
    pthread_mutex_destroy(&io->lock);
    free(io);
    cb(res, cbarg);
}

/* One request of count bytes at offset; completion cb(arg). */
static int io_one(struct cairn_fd *fd, int write, char *buf, size_t count, uint64_t off,
                  cairn_cb cb, void *arg)
{
    int err;
    struct cairn__req *r = cairn__req_fd(fd, write ? RPC_OP_WRITE : RPC_OP_READ, write, &err);
    if (!r)
        return err;
    struct rpc_msg *a = &r->op.args;
    RPC_SET(a, offset, RPC_T_OFFSET, off);
    if (write) {
        rpc_set_bytes(a, RPC_T_DATA, &a->data, buf, count);
        /* set-id bits go at a write by anyone but root, as the kernel does */
        if (geteuid() != 0)
            RPC_SET(a, flags, RPC_T_FLAGS, RPC_WRITE_KILL_SUIDGID);
        r->finish = write_finish;
    } else {
        RPC_SET(a, size, RPC_T_SIZE, count);
        r->finish = read_finish;
    }
    r->out = buf;
    r->outlen = count;
    r->cb = cb;
    r->arg = arg;
    return cairn__submit(r);
}

static int io_start(struct cairn_fd *fd, int write, char *buf, size_t count, off_t offset,
                    cairn_cb cb, void *arg)
{
    if (!fd)
        return -EBADF;
    if (!cb || offset < 0 || (count && !buf) || count > (size_t)SSIZE_MAX)
        return -EINVAL;
    int acc = fd->flags & O_ACCMODE;
    if (write ? acc == O_RDONLY : acc == O_WRONLY)
        return -EBADF;
    if ((uint64_t)offset + count > (uint64_t)INT64_MAX)
        return write ? -EFBIG : -EINVAL;
    if (count <= CAIRN__IO_MAX)
        return io_one(fd, write, buf, count, (uint64_t)offset, cb, arg);
    int n = (int)((count + CAIRN__IO_MAX - 1) / CAIRN__IO_MAX);
    struct io *io = calloc(1, sizeof(*io) + (size_t)n * sizeof(io->part[0]));
    struct part_arg **pas = calloc((size_t)n, sizeof(*pas));
    int ok = io && pas;
    for (int i = 0; ok && i < n; i++)
        ok = (pas[i] = malloc(sizeof(*pas[i]))) != NULL;
    if (!ok) {
        for (int i = 0; pas && i < n; i++)
            free(pas[i]);
        free(pas);
        free(io);
        return -ENOMEM;
    }
    io->cb = cb;
    io->arg = arg;
    io->write = write;
    io->n = io->left = n;
    pthread_mutex_init(&io->lock, NULL);
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)i * CAIRN__IO_MAX;
        io->part[i].len = count - at < CAIRN__IO_MAX ? count - at : CAIRN__IO_MAX;
        pas[i]->io = io;
        pas[i]->i = i;
    }
    /* Every part is issued; one that cannot be completes as failed. */
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)i * CAIRN__IO_MAX;
        int rc = io_one(fd, write, buf + at, io->part[i].len, (uint64_t)offset + at, part_done_cb,
                        pas[i]);
        if (rc < 0)
            part_done_cb(rc, pas[i]);
    }
    free(pas);
    return 0;
}

int cairn_pread_async(cairn_fd_t *fd, void *buf, size_t count, off_t offset, cairn_cb cb, void *arg)
{
    return io_start(fd, 0, buf, count, offset, cb, arg);
}

int cairn_pwrite_async(cairn_fd_t *fd, const void *buf, size_t count, off_t offset, cairn_cb cb,
                       void *arg)
{
    /* the buffer is only read: the request's DATA points at it */
    return io_start(fd, 1, (char *)(uintptr_t)buf, count, offset, cb, arg);
}

ssize_t cairn_pread(cairn_fd_t *fd, void *buf, size_t count, off_t offset)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    return cairn__wait_for(&w, cairn_pread_async(fd, buf, count, offset, cairn__wait_cb, &w));
}

ssize_t cairn_pwrite(cairn_fd_t *fd, const void *buf, size_t count, off_t offset)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    return cairn__wait_for(&w, cairn_pwrite_async(fd, buf, count, offset, cairn__wait_cb, &w));
}

int cairn_fsync_async(cairn_fd_t *fd, int datasync, cairn_cb cb, void *arg)
{
    int err;
    struct cairn__req *r = cairn__req_fd(fd, RPC_OP_FSYNC, 0, &err);
    if (!r)
        return err;
    RPC_SET(&r->op.args, flags, RPC_T_FLAGS, datasync ? 1 : 0);
    r->cb = cb;
    r->arg = arg;
    return cairn__submit(r);
}

int cairn_fsync(cairn_fd_t *fd, int datasync)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    return (int)cairn__wait_for(&w, cairn_fsync_async(fd, datasync, cairn__wait_cb, &w));
}

int cairn_ftruncate(cairn_fd_t *fd, off_t length)
{
    if (length < 0)
        return -EINVAL;
    if (fd && (fd->flags & O_ACCMODE) == O_RDONLY)
        return -EINVAL; /* as ftruncate(2) on a handle not open for writing */
    struct stat attr = {.st_size = length};
    return cairn_fsetattr(fd, &attr, CAIRN_SET_SIZE, NULL);
}

int cairn_fallocate(cairn_fd_t *fd, int mode, off_t offset, off_t length)
{
    if (offset < 0 || length <= 0)
        return -EINVAL;
    if (fd && (fd->flags & O_ACCMODE) == O_RDONLY)
        return -EBADF;
    int err;
    struct cairn__req *r = cairn__req_fd(fd, RPC_OP_FALLOCATE, 1, &err);
    if (!r)
        return err;
    struct rpc_msg *a = &r->op.args;
    RPC_SET(a, flags, RPC_T_FLAGS, (uint64_t)(unsigned)mode);
    RPC_SET(a, offset, RPC_T_OFFSET, (uint64_t)offset);
    RPC_SET(a, size, RPC_T_SIZE, (uint64_t)length);
    return (int)cairn__run(r);
}

int cairn_discard(cairn_fd_t *fd, off_t offset, off_t length)
{
    return cairn_fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
}

static ssize_t seek_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_OFFSET) || m->offset > (uint64_t)INT64_MAX)
        return -EPROTO;
    *(off_t *)r->out = (off_t)m->offset;
    return 0;
}

off_t cairn_lseek(cairn_fd_t *fd, off_t offset, int whence)
{
    if ((whence != SEEK_DATA && whence != SEEK_HOLE) || offset < 0)
        return -EINVAL;
    int err;
    struct cairn__req *r = cairn__req_fd(fd, RPC_OP_LSEEK, 0, &err);
    if (!r)
        return err;
    struct rpc_msg *a = &r->op.args;
    RPC_SET(a, offset, RPC_T_OFFSET, (uint64_t)offset);
    RPC_SET(a, whence, RPC_T_WHENCE, (uint64_t)whence);
    off_t out = 0;
    r->finish = seek_finish;
    r->out = &out;
    ssize_t rc = cairn__run(r);
    return rc < 0 ? (off_t)rc : out;
}

int cairn_fstat(cairn_fd_t *fd, struct stat *st)
{
    if (!st)
        return -EINVAL;
    int err;
    struct cairn__req *r = cairn__req_fd(fd, RPC_OP_GETATTR, 0, &err);
    if (!r)
        return err;
    r->finish = cairn__finish_attr;
    r->out = st;
    return (int)cairn__run(r);
}
