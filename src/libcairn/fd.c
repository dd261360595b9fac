/* File handles: open and create, close, and the list of a volume's open
 * handles (so that closing the volume closes what the program left open). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "internal.h"

/* Flags a brick takes (it ignores the rest of them, as open(2) does not
 * quite: O_CREAT and O_EXCL choose the opcode here). */
#define OPEN_FLAGS                                                                                 \
    (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME | O_EXCL | O_DIRECTORY |        \
     O_NOFOLLOW | O_CREAT | O_CLOEXEC | O_LARGEFILE | O_NONBLOCK | O_DIRECT)

struct cairn_fd *cairn__fd_new(struct cairn_vol *vol, uint64_t fh, int flags, const char *path)
{
    struct cairn_fd *fd = calloc(1, sizeof(*fd));
    if (!fd || !(fd->path = strdup(path))) {
        free(fd);
        return NULL;
    }
    fd->vol = vol;
    fd->fh = fh;
    fd->flags = flags;
    fd->owner = __atomic_add_fetch(&vol->next_owner, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&vol->lock);
    fd->next = vol->fds;
    if (vol->fds)
        vol->fds->prev = fd;
    vol->fds = fd;
    pthread_mutex_unlock(&vol->lock);
    return fd;
}

void cairn__fd_unlink_free(struct cairn_fd *fd)
{
    struct cairn_vol *vol = fd->vol;
    pthread_mutex_lock(&vol->lock);
    if (fd->prev)
        fd->prev->next = fd->next;
    else
        vol->fds = fd->next;
    if (fd->next)
        fd->next->prev = fd->prev;
    pthread_mutex_unlock(&vol->lock);
    free(fd->path);
    free(fd);
}

/* An open's completion: the handle, or the handle closed again when no
 * memory is left for it. */
struct open_ctx {
    cairn_open_cb cb;
    void *arg;
    struct cairn_fd *fd;
};

static void orphan_done_cb(struct cl_op *op)
{
    cl_op_release(op);
    free(op);
}

static ssize_t open_finish(struct cairn__req *r)
{
    struct open_ctx *o = r->out;
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_FH))
        return -EPROTO;
    o->fd = cairn__fd_new(r->vol, m->fh, (int)r->aux, r->path);
    if (o->fd)
        return 0;
    /* no memory for the handle: close it on the bricks, fire and forget */
    struct cl_op *rel = malloc(sizeof(*rel));
    if (rel) {
        cl_op_init(rel, RPC_OP_RELEASE, orphan_done_cb, NULL);
        RPC_SET(&rel->args, fh, RPC_T_FH, m->fh);
        cl_submit(r->vol->stack, rel);
    }
    return -ENOMEM;
}

static void open_done_cb(ssize_t result, void *arg)
{
    struct open_ctx *o = arg;
    o->cb((int)result, result == 0 ? o->fd : NULL, o->arg);
    free(o);
}

int cairn_open_async(cairn_vol_t *vol, const char *path, int flags, mode_t mode, cairn_open_cb cb,
                     void *arg)
{
    if (!vol || !cb)
        return -EINVAL;
    if (flags & ~OPEN_FLAGS)
        return -EINVAL;
    int create = (flags & O_CREAT) != 0, err;
    struct cairn__req *r =
        cairn__req_new(vol, create ? RPC_OP_CREATE : RPC_OP_OPEN, path, NULL, &err);
    if (!r)
        return err;
    if (!strcmp(r->path, "/") && (create || (flags & O_ACCMODE) != O_RDONLY)) {
        cairn__req_free(r);
        return create && (flags & O_EXCL) ? -EEXIST : -EISDIR;
    }
    struct open_ctx *o = calloc(1, sizeof(*o));
    if (!o) {
        cairn__req_free(r);
        return -ENOMEM;
    }
    o->cb = cb;
    o->arg = arg;
    struct rpc_msg *a = &r->op.args;
    uint64_t wire = (uint64_t)(unsigned)(flags & ~(O_CREAT | O_CLOEXEC | O_NONBLOCK));
    RPC_SET(a, flags, RPC_T_FLAGS, wire);
    if (create) {
        gfid_generate(&a->gfid);
        a->present |= 1ull << RPC_T_GFID;
        RPC_SET(a, mode, RPC_T_MODE, (uint64_t)(S_IFREG | (mode & 07777)));
        cairn__set_creator(r, 1);
    }
    r->aux = (uint64_t)(unsigned)flags;
    r->finish = open_finish;
    r->out = o;
    r->cb = open_done_cb;
    r->arg = o;
    return cairn__submit(r);
}

struct open_wait {
    struct cairn__wait w;
    struct cairn_fd *fd;
};

static void open_wait_cb(int result, cairn_fd_t *fd, void *arg)
{
    struct open_wait *ow = arg;
    ow->fd = fd;
    cairn__wait_cb(result, &ow->w);
}

int cairn_open(cairn_vol_t *vol, const char *path, int flags, mode_t mode, cairn_fd_t **fd)
{
    if (!fd)
        return -EINVAL;
    *fd = NULL;
    struct open_wait ow = {.fd = NULL};
    cairn__wait_init(&ow.w);
    int rc =
        (int)cairn__wait_for(&ow.w, cairn_open_async(vol, path, flags, mode, open_wait_cb, &ow));
    if (rc == 0)
        *fd = ow.fd;
    return rc;
}

/* Closing: FLUSH of the handle's lock owner when it asked for locks (the
 * brick drops them then), and RELEASE. The handle's memory goes first: the
 * caller may not use it once close is called. */
struct close_ctx {
    struct cairn_vol *vol;
    uint64_t fh;
    cairn_cb cb;
    void *arg;
    int flush_err;
};

static void release_done_cb(ssize_t result, void *arg)
{
    struct close_ctx *c = arg;
    /* A handle of a connection that is gone is closed already. */
    if (result == -ENOTCONN)
        result = 0;
    if (c->cb)
        c->cb(c->flush_err ? c->flush_err : result, c->arg);
    free(c);
}

static int send_release(struct close_ctx *c)
{
    int err;
    struct cairn__req *r = cairn__req_new(c->vol, RPC_OP_RELEASE, NULL, NULL, &err);
    if (!r)
        return err;
    RPC_SET(&r->op.args, fh, RPC_T_FH, c->fh);
    r->cb = release_done_cb;
    r->arg = c;
    return cairn__submit(r);
}

static void flush_done_cb(ssize_t result, void *arg)
{
    struct close_ctx *c = arg;
    c->flush_err = result == -ENOTCONN ? 0 : (int)result;
    int rc = send_release(c);
    if (rc < 0)
        release_done_cb(rc, c);
}

int cairn_close_async(cairn_fd_t *fd, cairn_cb cb, void *arg)
{
    if (!fd)
        return -EBADF;
    struct close_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    *c = (struct close_ctx){.vol = fd->vol, .fh = fd->fh, .cb = cb, .arg = arg};
    int rc, err;
    if (__atomic_load_n(&fd->locked, __ATOMIC_RELAXED)) {
        struct cairn__req *r = cairn__req_fd(fd, RPC_OP_FLUSH, 0, &err);
        if (!r) {
            free(c);
            return err;
        }
        RPC_SET(&r->op.args, owner, RPC_T_OWNER, fd->owner);
        r->cb = flush_done_cb;
        r->arg = c;
        r->fd = NULL; /* freed now: the request carries the handle number */
        cairn__fd_unlink_free(fd);
        return cairn__submit(r);
    }
    cairn__fd_unlink_free(fd);
    if ((rc = send_release(c)) < 0)
        free(c);
    return rc;
}

int cairn_close(cairn_fd_t *fd)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    return (int)cairn__wait_for(&w, cairn_close_async(fd, cairn__wait_cb, &w));
}

void cairn__close_leftovers(struct cairn_vol *vol)
{
    int n = 0;
    while (vol->fds) {
        (void)cairn_close(vol->fds);
        n++;
    }
    if (n)
        log_warn("volume %s closed with %d file handles open: closed them", vol->name, n);
    cairn__dir_release_all(vol);
}
