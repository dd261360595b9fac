/* Requests and their completion: paths, submitting to the stack, results
 * to callbacks, and the waits the synchronous calls make. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int cairn__path_norm(const char *in, char *out, size_t outlen)
{
    if (!in)
        return -EINVAL;
    if (!*in)
        return -ENOENT;
    if (outlen < 2)
        return -ENAMETOOLONG;
    size_t len = 0; /* out[0..len) is the result so far, without a trailing '/' */
    const char *s = in;
    while (*s) {
        while (*s == '/')
            s++;
        size_t n = strcspn(s, "/");
        if (n == 0)
            break;
        if (n > 255)
            return -ENAMETOOLONG;
        if (n == 1 && s[0] == '.') {
            /* nothing */
        } else if (n == 2 && s[0] == '.' && s[1] == '.') {
            while (len > 0 && out[len - 1] != '/')
                len--;
            if (len > 0)
                len--; /* the '/' before it */
        } else {
            if (len + 1 + n >= outlen || len + 1 + n >= RPC_PATH_MAX)
                return -ENAMETOOLONG;
            out[len++] = '/';
            memcpy(out + len, s, n);
            len += n;
        }
        s += n;
    }
    if (len == 0)
        out[len++] = '/';
    out[len] = 0;
    return 0;
}

void cairn__path_parent(const char *path, char *out, size_t outlen)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash && slash != path ? (size_t)(slash - path) : 1;
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, path, n);
    out[n] = 0;
}

struct cairn__req *cairn__req_new(struct cairn_vol *vol, uint16_t opcode, const char *path,
                                  const char *path2, int *err)
{
    size_t room = (path ? RPC_PATH_MAX : 0) + (path2 ? RPC_PATH_MAX : 0);
    struct cairn__req *r = malloc(sizeof(*r) + room);
    if (!r) {
        *err = -ENOMEM;
        return NULL;
    }
    memset(r, 0, sizeof(*r));
    cl_op_init(&r->op, opcode, NULL, r);
    r->vol = vol;
    char *p = r->buf;
    int rc = 0;
    if (path) {
        r->path = p;
        p += RPC_PATH_MAX;
        if ((rc = cairn__path_norm(path, r->path, RPC_PATH_MAX)) == 0)
            rpc_set_str(&r->op.args, RPC_T_PATH, &r->op.args.path, r->path);
    }
    if (path2 && rc == 0) {
        r->path2 = p;
        if ((rc = cairn__path_norm(path2, r->path2, RPC_PATH_MAX)) == 0)
            rpc_set_str(&r->op.args, RPC_T_PATH2, &r->op.args.path2, r->path2);
    }
    if (rc < 0) {
        free(r);
        *err = rc;
        return NULL;
    }
    return r;
}

struct cairn__req *cairn__req_fd(struct cairn_fd *fd, uint16_t opcode, int change, int *err)
{
    if (!fd) {
        *err = -EBADF;
        return NULL;
    }
    struct cairn__req *r = cairn__req_new(fd->vol, opcode, NULL, NULL, err);
    if (!r)
        return NULL;
    r->fd = fd;
    RPC_SET(&r->op.args, fh, RPC_T_FH, fd->fh);
    if (change && fd->path)
        rpc_set_str(&r->op.args, RPC_T_PATH, &r->op.args.path, fd->path);
    return r;
}

void cairn__set_creator(struct cairn__req *r, int umask)
{
    struct rpc_msg *a = &r->op.args;
    RPC_SET(a, uid, RPC_T_UID, (uint64_t)geteuid());
    RPC_SET(a, gid, RPC_T_GID, (uint64_t)getegid());
    RPC_SET(a, pid, RPC_T_PID, (uint64_t)getpid());
    if (umask)
        RPC_SET(a, umask, RPC_T_UMASK, (uint64_t)__atomic_load_n(&r->vol->umask, __ATOMIC_RELAXED));
}

void cairn__req_free(struct cairn__req *r)
{
    cl_op_release(&r->op);
    free(r);
}

static void req_done_cb(struct cl_op *op)
{
    struct cairn__req *r = op->ctx;
    struct cairn_vol *vol = r->vol;
    ssize_t result = cl_status_errno(op->status);
    if (result == 0 && r->finish)
        result = r->finish(r);
    cairn_cb cb = r->cb;
    void *arg = r->arg;
    cairn__req_free(r);
    if (cb)
        cb(result, arg);
    pthread_mutex_lock(&vol->lock);
    if (--vol->inflight == 0)
        pthread_cond_broadcast(&vol->idle);
    pthread_mutex_unlock(&vol->lock);
}

int cairn__submit(struct cairn__req *r)
{
    struct cairn_vol *vol = r->vol;
    pthread_mutex_lock(&vol->lock);
    vol->inflight++;
    pthread_mutex_unlock(&vol->lock);
    r->op.done = req_done_cb;
    cl_submit(vol->stack, &r->op);
    return 0;
}

void cairn__wait_init(struct cairn__wait *w)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->done = 0;
    w->result = 0;
}

void cairn__wait_cb(ssize_t result, void *arg)
{
    struct cairn__wait *w = arg;
    pthread_mutex_lock(&w->lock);
    w->result = result;
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void cairn__wait_abandon(struct cairn__wait *w)
{
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
}

ssize_t cairn__wait_end(struct cairn__wait *w)
{
    rpc_cork_flush(); /* what this thread held back goes before it waits */
    pthread_mutex_lock(&w->lock);
    while (!w->done)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    ssize_t result = w->result;
    cairn__wait_abandon(w);
    return result;
}

ssize_t cairn__wait_for(struct cairn__wait *w, int rc)
{
    if (rc < 0) {
        cairn__wait_abandon(w);
        return rc;
    }
    return cairn__wait_end(w);
}

ssize_t cairn__run(struct cairn__req *r)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    r->cb = cairn__wait_cb;
    r->arg = &w;
    return cairn__wait_for(&w, cairn__submit(r));
}
