/* Namespace calls: attributes, making and removing names, links, statvfs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SYMLOOP_MAX 40

ssize_t cairn__finish_attr(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_ATTR))
        return -EPROTO;
    if (r->out)
        rpc_attr_to_stat(&m->attr, r->out);
    return 0;
}

/* Submits r with the caller's completion. */
static int start(struct cairn__req *r, cairn_cb cb, void *arg)
{
    r->cb = cb;
    r->arg = arg;
    return cairn__submit(r);
}

int cairn_lstat(cairn_vol_t *vol, const char *path, struct stat *st)
{
    int err;
    if (!vol || !st)
        return -EINVAL;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_LOOKUP, path, NULL, &err);
    if (!r)
        return err;
    r->finish = cairn__finish_attr;
    r->out = st;
    return (int)cairn__run(r);
}

/* Where a link at path whose content is target points: target itself when
 * absolute, else beside the link. */
static int link_dest(const char *path, const char *target, char *out, size_t outlen)
{
    char dir[RPC_PATH_MAX];
    if (target[0] == '/') {
        if (strlen(target) >= outlen)
            return -ENAMETOOLONG;
        strcpy(out, target);
        return 0;
    }
    cairn__path_parent(path, dir, sizeof(dir));
    size_t dl = strlen(dir), tl = strlen(target);
    if (dl + 1 + tl >= outlen)
        return -ENAMETOOLONG;
    memcpy(out, dir, dl);
    out[dl] = '/';
    memcpy(out + dl + 1, target, tl + 1);
    return 0;
}

int cairn_stat(cairn_vol_t *vol, const char *path, struct stat *st)
{
    char cur[RPC_PATH_MAX], target[RPC_PATH_MAX], next[RPC_PATH_MAX];
    int rc = cairn__path_norm(path, cur, sizeof(cur));
    for (int hops = 0; rc == 0; hops++) {
        if ((rc = cairn_lstat(vol, cur, st)) < 0 || !S_ISLNK(st->st_mode))
            return rc;
        if (hops == SYMLOOP_MAX)
            return -ELOOP;
        ssize_t n = cairn_readlink(vol, cur, target, sizeof(target) - 1);
        if (n < 0)
            return (int)n;
        target[n] = 0;
        if (n == 0)
            return -ENOENT;
        if ((rc = link_dest(cur, target, next, sizeof(next))) == 0)
            rc = cairn__path_norm(next, cur, sizeof(cur));
    }
    return rc;
}

/* The public bits are the wire's (docs/protocol.md, SETATTR VALID). */
_Static_assert(CAIRN_SET_MODE == RPC_SET_MODE && CAIRN_SET_UID == RPC_SET_UID &&
                   CAIRN_SET_GID == RPC_SET_GID && CAIRN_SET_SIZE == RPC_SET_SIZE &&
                   CAIRN_SET_ATIME == RPC_SET_ATIME && CAIRN_SET_MTIME == RPC_SET_MTIME &&
                   CAIRN_SET_ATIME_NOW == RPC_SET_ATIME_NOW &&
                   CAIRN_SET_MTIME_NOW == RPC_SET_MTIME_NOW,
               "CAIRN_SET_* bits differ from RPC_SET_*");

void cairn__setattr_args(struct rpc_msg *a, const struct stat *attr, unsigned valid)
{
    struct stat perm = *attr;
    perm.st_mode &= 07777;
    uint64_t v = valid & CAIRN_SET_ALL;
    if (v & RPC_SET_ATIME_NOW)
        v &= ~(uint64_t)RPC_SET_ATIME;
    if (v & RPC_SET_MTIME_NOW)
        v &= ~(uint64_t)RPC_SET_MTIME;
    rpc_set_setattr(a, &perm, v);
}

static int check_attr(const struct stat *attr, unsigned valid)
{
    if (!attr || !valid || (valid & ~CAIRN_SET_ALL))
        return -EINVAL;
    if ((valid & CAIRN_SET_SIZE) && attr->st_size < 0)
        return -EINVAL;
    if ((valid & CAIRN_SET_ATIME) && !(valid & CAIRN_SET_ATIME_NOW) &&
        (attr->st_atim.tv_nsec < 0 || attr->st_atim.tv_nsec >= 1000000000))
        return -EINVAL;
    if ((valid & CAIRN_SET_MTIME) && !(valid & CAIRN_SET_MTIME_NOW) &&
        (attr->st_mtim.tv_nsec < 0 || attr->st_mtim.tv_nsec >= 1000000000))
        return -EINVAL;
    return 0;
}

static struct cairn__req *setattr_req(cairn_vol_t *vol, struct cairn_fd *fd, const char *path,
                                      const struct stat *attr, unsigned valid, struct stat *st,
                                      int *err)
{
    if ((*err = check_attr(attr, valid)) < 0)
        return NULL;
    if (!fd && !vol) {
        *err = -EINVAL;
        return NULL;
    }
    struct cairn__req *r = fd ? cairn__req_fd(fd, RPC_OP_SETATTR, 1, err)
                              : cairn__req_new(vol, RPC_OP_SETATTR, path, NULL, err);
    if (!r)
        return NULL;
    cairn__setattr_args(&r->op.args, attr, valid);
    r->finish = cairn__finish_attr;
    r->out = st;
    return r;
}

int cairn_setattr(cairn_vol_t *vol, const char *path, const struct stat *attr, unsigned valid,
                  struct stat *st)
{
    int err;
    struct cairn__req *r = setattr_req(vol, NULL, path, attr, valid, st, &err);
    return r ? (int)cairn__run(r) : err;
}

int cairn_fsetattr(cairn_fd_t *fd, const struct stat *attr, unsigned valid, struct stat *st)
{
    int err;
    if (!fd)
        return -EBADF;
    struct cairn__req *r = setattr_req(NULL, fd, NULL, attr, valid, st, &err);
    return r ? (int)cairn__run(r) : err;
}

int cairn_setattr_async(cairn_vol_t *vol, const char *path, const struct stat *attr, unsigned valid,
                        cairn_cb cb, void *arg)
{
    int err;
    struct cairn__req *r = setattr_req(vol, NULL, path, attr, valid, NULL, &err);
    return r ? start(r, cb, arg) : err;
}

int cairn_fsetattr_async(cairn_fd_t *fd, const struct stat *attr, unsigned valid, cairn_cb cb,
                         void *arg)
{
    int err;
    if (!fd)
        return -EBADF;
    struct cairn__req *r = setattr_req(NULL, fd, NULL, attr, valid, NULL, &err);
    return r ? start(r, cb, arg) : err;
}

int cairn_chmod(cairn_vol_t *vol, const char *path, mode_t mode)
{
    struct stat a = {.st_mode = mode};
    return cairn_setattr(vol, path, &a, CAIRN_SET_MODE, NULL);
}

int cairn_chown(cairn_vol_t *vol, const char *path, uid_t uid, gid_t gid)
{
    struct stat a = {.st_uid = uid, .st_gid = gid};
    unsigned valid =
        (uid != (uid_t)-1 ? CAIRN_SET_UID : 0) | (gid != (gid_t)-1 ? CAIRN_SET_GID : 0);
    if (!valid)
        return cairn_lstat(vol, path, &a);
    return cairn_setattr(vol, path, &a, valid, NULL);
}

int cairn_utimens(cairn_vol_t *vol, const char *path, const struct timespec times[2])
{
    struct stat a = {0};
    unsigned valid = 0;
    if (!times)
        return cairn_setattr(vol, path, &a, CAIRN_SET_ATIME_NOW | CAIRN_SET_MTIME_NOW, NULL);
    const unsigned set[2] = {CAIRN_SET_ATIME, CAIRN_SET_MTIME};
    const unsigned now[2] = {CAIRN_SET_ATIME_NOW, CAIRN_SET_MTIME_NOW};
    struct timespec *dst[2] = {&a.st_atim, &a.st_mtim};
    for (int i = 0; i < 2; i++) {
        if (times[i].tv_nsec == UTIME_OMIT)
            continue;
        if (times[i].tv_nsec == UTIME_NOW) {
            valid |= now[i];
            continue;
        }
        if (times[i].tv_nsec < 0 || times[i].tv_nsec >= 1000000000)
            return -EINVAL;
        *dst[i] = times[i];
        valid |= set[i];
    }
    if (!valid)
        return cairn_lstat(vol, path, &a); /* nothing to change: the path must exist */
    return cairn_setattr(vol, path, &a, valid, NULL);
}

int cairn_truncate(cairn_vol_t *vol, const char *path, off_t length)
{
    struct stat a = {.st_size = length};
    return cairn_setattr(vol, path, &a, CAIRN_SET_SIZE, NULL);
}

/* A new object at path (MKDIR, MKNOD, SYMLINK), with an id made here. */
static struct cairn__req *new_entry(cairn_vol_t *vol, uint16_t opcode, const char *path, int *err)
{
    if (!vol) {
        *err = -EINVAL;
        return NULL;
    }
    struct cairn__req *r = cairn__req_new(vol, opcode, path, NULL, err);
    if (!r)
        return NULL;
    if (!strcmp(r->path, "/")) {
        cairn__req_free(r);
        *err = -EEXIST;
        return NULL;
    }
    gfid_generate(&r->op.args.gfid);
    r->op.args.present |= 1ull << RPC_T_GFID;
    cairn__set_creator(r, opcode != RPC_OP_SYMLINK);
    return r;
}

int cairn_mkdir_async(cairn_vol_t *vol, const char *path, mode_t mode, cairn_cb cb, void *arg)
{
    int err;
    struct cairn__req *r = new_entry(vol, RPC_OP_MKDIR, path, &err);
    if (!r)
        return err;
    RPC_SET(&r->op.args, mode, RPC_T_MODE, (uint64_t)(S_IFDIR | (mode & 07777)));
    return start(r, cb, arg);
}

int cairn_mkdir(cairn_vol_t *vol, const char *path, mode_t mode)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    return (int)cairn__wait_for(&w, cairn_mkdir_async(vol, path, mode, cairn__wait_cb, &w));
}

int cairn_mknod(cairn_vol_t *vol, const char *path, mode_t mode, dev_t dev)
{
    mode_t type = mode & S_IFMT;
    if (type == 0)
        type = S_IFREG;
    if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR &&
        type != S_IFBLK)
        return -EINVAL;
    int err;
    struct cairn__req *r = new_entry(vol, RPC_OP_MKNOD, path, &err);
    if (!r)
        return err;
    RPC_SET(&r->op.args, mode, RPC_T_MODE, (uint64_t)(type | (mode & 07777)));
    RPC_SET(&r->op.args, rdev, RPC_T_RDEV, (uint64_t)dev);
    return (int)cairn__run(r);
}

int cairn_symlink_async(cairn_vol_t *vol, const char *target, const char *linkpath, cairn_cb cb,
                        void *arg)
{
    if (!target)
        return -EINVAL;
    size_t tl = strlen(target);
    if (tl == 0)
        return -ENOENT;
    if (tl >= RPC_PATH_MAX)
        return -ENAMETOOLONG;
    int err;
    struct cairn__req *r = new_entry(vol, RPC_OP_SYMLINK, linkpath, &err);
    if (!r)
        return err;
    /* the target travels in the request's own memory: the caller's string
     * may go once the call returns */
    struct cairn__req *big = realloc(r, sizeof(*r) + RPC_PATH_MAX * 2);
    if (!big) {
        cairn__req_free(r);
        return -ENOMEM;
    }
    r = big;
    r->op.ctx = r;
    r->path = r->buf;
    rpc_set_str(&r->op.args, RPC_T_PATH, &r->op.args.path, r->path);
    r->path2 = r->buf + RPC_PATH_MAX;
    memcpy(r->path2, target, tl + 1);
    rpc_set_bytes(&r->op.args, RPC_T_NAME, &r->op.args.name, r->path2, tl);
    return start(r, cb, arg);
}

int cairn_symlink(cairn_vol_t *vol, const char *target, const char *linkpath)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    return (int)cairn__wait_for(&w, cairn_symlink_async(vol, target, linkpath, cairn__wait_cb, &w));
}

static ssize_t readlink_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_DATA))
        return -EPROTO;
    size_t n = m->data.len < r->outlen ? m->data.len : r->outlen;
    memcpy(r->out, m->data.p, n);
    return (ssize_t)n;
}

ssize_t cairn_readlink(cairn_vol_t *vol, const char *path, char *buf, size_t size)
{
    if (!vol || !buf || !size)
        return -EINVAL;
    int err;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_READLINK, path, NULL, &err);
    if (!r)
        return err;
    r->finish = readlink_finish;
    r->out = buf;
    r->outlen = size;
    return cairn__run(r);
}

int cairn_unlink_async(cairn_vol_t *vol, const char *path, cairn_cb cb, void *arg)
{
    int err;
    if (!vol)
        return -EINVAL;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_UNLINK, path, NULL, &err);
    if (!r)
        return err;
    if (!strcmp(r->path, "/")) {
        cairn__req_free(r);
        return -EISDIR;
    }
    return start(r, cb, arg);
}

int cairn_unlink(cairn_vol_t *vol, const char *path)
{
    struct cairn__wait w;
    cairn__wait_init(&w);
    return (int)cairn__wait_for(&w, cairn_unlink_async(vol, path, cairn__wait_cb, &w));
}

int cairn_rmdir(cairn_vol_t *vol, const char *path)
{
    int err;
    if (!vol)
        return -EINVAL;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_RMDIR, path, NULL, &err);
    if (!r)
        return err;
    if (!strcmp(r->path, "/")) {
        cairn__req_free(r);
        return -EBUSY;
    }
    return (int)cairn__run(r);
}

int cairn_rename(cairn_vol_t *vol, const char *oldpath, const char *newpath, unsigned flags)
{
    int err;
    if (!vol || (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) ||
        flags == (RENAME_NOREPLACE | RENAME_EXCHANGE))
        return -EINVAL;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_RENAME, oldpath, newpath, &err);
    if (!r)
        return err;
    if (!strcmp(r->path, "/") || !strcmp(r->path2, "/")) {
        cairn__req_free(r);
        return -EBUSY;
    }
    /* a directory into itself */
    size_t ol = strlen(r->path);
    if (!strncmp(r->path2, r->path, ol) && r->path2[ol] == '/') {
        cairn__req_free(r);
        return -EINVAL;
    }
    if (flags)
        RPC_SET(&r->op.args, flags, RPC_T_FLAGS, (uint64_t)flags);
    return (int)cairn__run(r);
}

int cairn_link(cairn_vol_t *vol, const char *oldpath, const char *newpath)
{
    int err;
    if (!vol)
        return -EINVAL;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_LINK, oldpath, newpath, &err);
    if (!r)
        return err;
    if (!strcmp(r->path2, "/")) {
        cairn__req_free(r);
        return -EEXIST;
    }
    return (int)cairn__run(r);
}

static ssize_t statfs_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_STATFS))
        return -EPROTO;
    const struct rpc_statfs *s = &m->statfs;
    struct statvfs *b = r->out;
    memset(b, 0, sizeof(*b));
    b->f_bsize = s->bsize;
    b->f_frsize = s->frsize;
    b->f_blocks = s->blocks;
    b->f_bfree = s->bfree;
    b->f_bavail = s->bavail;
    b->f_files = s->files;
    b->f_ffree = s->ffree;
    b->f_favail = s->ffree;
    b->f_namemax = s->namemax;
    return 0;
}

int cairn_statvfs(cairn_vol_t *vol, const char *path, struct statvfs *buf)
{
    int err;
    if (!vol || !buf)
        return -EINVAL;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_STATFS, path, NULL, &err);
    if (!r)
        return err;
    r->finish = statfs_finish;
    r->out = buf;
    return (int)cairn__run(r);
}
