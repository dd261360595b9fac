/* File data: open, create, read, write and the calls on open handles. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/log.h"
#include "brick.h"

#define VFS (r->b->vfs)

/* Largest READ answered in one reply: well inside RPC_MAX_BODY. */
#define BRICK_MAX_READ (4u << 20)

/* Open flags a client may ask for; the rest (O_CREAT, O_NOFOLLOW, O_PATH,
 * O_TMPFILE, O_DIRECTORY, ...) are the brick's business. O_DIRECT is the
 * client's: its kernel bypasses its own page cache; request buffers on the
 * brick are not aligned for O_DIRECT, and O_SYNC/O_DSYNC carry durability. */
#define OPEN_FLAGS_ALLOWED (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME | O_EXCL)

static int open_flags(const struct rpc_msg *in)
{
    int f = rpc_has(in, RPC_T_FLAGS) ? (int)(in->flags & OPEN_FLAGS_ALLOWED) : O_RDONLY;
    if ((f & O_ACCMODE) == O_ACCMODE)
        return -EINVAL;
    return f | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
}

/* Replies FH and ATTR for a freshly opened fd, which the handle takes. st
 * and g, when the caller has them current, save the stat and xattr reads. */
static int reply_open_known(struct brick_req *r, int fd, int flags, const struct stat *known,
                            const gfid_t *g)
{
    struct rpc_attr a;
    struct stat st;
    uint64_t id;
    int rc = 0;
    if (known && g) {
        st = *known;
        rpc_attr_from_stat(&a, &st, g);
    } else if ((rc = brick_fd_attr(r->b, fd, &a)) < 0 || (rc = VFS->fstatat(fd, "", &st)) < 0) {
        VFS->close(fd);
        return rc;
    }
    struct brick_fh *fh = brick_fh_new(fd, 0, flags);
    if (!fh) {
        VFS->close(fd);
        return -ENOMEM;
    }
    fh->dev = st.st_dev;
    fh->ino = st.st_ino;
    fh->gfid = a.gfid;
    fh->has_gfid = 1;
    /* Where a change through it is indexed for heal (version.c); a copy
     * that fails to be made only costs that lookup its fallback. */
    if (rpc_has(r->in, RPC_T_PATH)) {
        fh->path = strndup((const char *)r->in->path.p, r->in->path.len);
        fh->top = brick_top_open(r->b, (const char *)r->in->path.p, r->in->path.len, RPC_TOP_OPEN);
    }
    /* Counted, or the purge could reuse the inode while it is open. */
    if ((rc = brick_spare_opened(r->b, st.st_dev, st.st_ino, r->bc)) < 0) {
        brick_fh_put(r->bc, fh);
        return rc;
    }
    fh->in_open_set = 1;
    fh->owner = r->bc;
    if ((rc = brick_fh_add(r->bc, fh, &id)) < 0) {
        brick_fh_put(r->bc, fh);
        return rc;
    }
    r->opened = id;
    rpc_put_u64(r->out, RPC_T_FH, id);
    rpc_put_attr(r->out, RPC_T_ATTR, &a);
    return 0;
}

static int reply_open(struct brick_req *r, int fd, int flags)
{
    return reply_open_known(r, fd, flags, NULL, NULL);
}

/* Opens an existing regular file. Anything else is refused before it is
 * opened: opening a device or FIFO on the server has side effects (and the
 * kernel client never asks). */
static int open_existing(struct brick_req *r, const struct brick_loc *loc, int flags)
{
    struct stat st;
    int rc = VFS->fstatat(loc->dirfd, loc->name, &st);
    if (rc < 0)
        return rc;
    if (S_ISDIR(st.st_mode))
        return -EISDIR;
    if (S_ISLNK(st.st_mode))
        return -ELOOP;
    if (!S_ISREG(st.st_mode))
        return -EOPNOTSUPP;
    int fd = VFS->openat(loc->dirfd, loc->name, flags & ~(O_CREAT | O_EXCL), 0);
    if (fd < 0)
        return fd;
    if ((rc = VFS->fstatat(fd, "", &st)) < 0 || !S_ISREG(st.st_mode)) {
        VFS->close(fd);
        return rc < 0 ? rc : -EOPNOTSUPP; /* replaced under us */
    }
    return fd;
}

int brick_op_open(struct brick_req *r)
{
    struct brick_loc loc;
    int flags = open_flags(r->in);
    if (flags < 0)
        return flags;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc == 0 && loc.is_root)
        rc = -EISDIR;
    if (rc == 0) {
        int fd = open_existing(r, &loc, flags), killed = 0;
        if (fd >= 0 && (flags & O_TRUNC) && (r->in->flags & RPC_OPEN_KILL_SUIDGID) &&
            (rc = brick_kill_setid_at(r->b, fd, "", &killed)) < 0) {
            VFS->close(fd);
            fd = rc;
        }
        if (killed)
            rpc_put_u64(r->out, RPC_T_FLAGS, 1);
        rc = fd < 0 ? fd : reply_open(r, fd, flags);
    }
    brick_loc_release(r->b, &loc);
    return rc;
}

/* What init_created may take for granted about a new file. */
enum {
    NEW_STAGED = 1 << 0,   /* built before it is named */
    NEW_ST_KNOWN = 1 << 1, /* st holds its owner and mode already */
};

/* A new file made by CREATE: id, owner; on failure it is removed again.
 * Leaves the file's attributes, read after the last change, in st. */
static int init_created(struct brick_req *r, const struct brick_loc *loc, int fd, const gfid_t *g,
                        mode_t mode, struct stat *st, unsigned how)
{
    uid_t uid;
    gid_t gid;
    /* A lookup racing with the create of a named file may have given it
     * an id already; the creator's id wins. A file built before it is
     * named meets no lookup, and a spare may still carry its old id. */
    int rc = how & NEW_STAGED ? -EEXIST
                              : VFS->fsetxattr(fd, BRICK_XATTR_GFID, g->b, GFID_LEN, XATTR_CREATE);
    if (rc == -EEXIST)
        rc = VFS->fsetxattr(fd, BRICK_XATTR_GFID, g->b, GFID_LEN, 0);
    if (rc < 0)
        return rc;
    brick_create_owner(r->b, loc, r->in, &uid, &gid);
    if (!(how & NEW_ST_KNOWN) && (rc = VFS->fstatat(fd, "", st)) < 0)
        return rc;
    if (st->st_uid != uid || st->st_gid != gid) {
        if ((rc = VFS->fchown(fd, uid, gid)) < 0)
            return rc;
        if ((mode & (S_ISUID | S_ISGID)) && (rc = VFS->fchmod(fd, mode)) < 0)
            return rc;
        if ((rc = VFS->fstatat(fd, "", st)) < 0) /* owner, mode and ctime changed */
            return rc;
    }
    return 0;
}

/* A new file with id g, to be built before it is named: a spare inode,
 * where it lies, when the brick has one (spare.c), else a new inode in
 * .cairn/tmp. *dirfd and name get where it is; *how says what init_created
 * may skip (a spare's attributes are known: st). times_later: the caller
 * sets both times itself. */
static int open_new(struct brick *b, const gfid_t *g, int *dirfd, char name[BRICK_NEW_NAME_MAX],
                    int flags, mode_t mode, int times_later, struct stat *st, unsigned *how)
{
    int fd = brick_spare_take(b, dirfd, name, BRICK_NEW_NAME_MAX, flags, mode, times_later, st);
    *how = NEW_STAGED | (fd >= 0 ? NEW_ST_KNOWN : 0);
    if (fd >= 0)
        return fd;
    *dirfd = brick_tmp_dir(b, g, name);
    return b->vfs->openat(*dirfd, name, flags | O_CREAT | O_EXCL, mode);
}

/* CREATE of a new file: opened under a temporary name in .cairn/tmp, given
 * its id and owner, then renamed to loc with RENAME_NOREPLACE, so that no
 * lookup meets it without its id. Returns the open fd (st: its attributes
 * once named), -EEXIST when the name is taken, or -errno; on failure
 * nothing is left. */
static int create_staged(struct brick_req *r, const struct brick_loc *loc, const gfid_t *g,
                         int flags, mode_t mode, struct stat *st)
{
    char tmp[BRICK_NEW_NAME_MAX];
    int tdir;
    unsigned how;
    int fd = open_new(r->b, g, &tdir, tmp, flags, mode, 0, st, &how);
    if (fd < 0)
        return fd;
    int rc = init_created(r, loc, fd, g, mode, st, how);
    if (rc == 0)
        rc = VFS->renameat2(tdir, tmp, loc->dirfd, loc->name, RENAME_NOREPLACE);
    if (rc == 0 && (rc = VFS->fstatat(fd, "", st)) < 0) /* the rename moved ctime */
        VFS->unlinkat(loc->dirfd, loc->name, 0);
    if (rc < 0) {
        if (rc != -EEXIST)
            log_debug("create of %s failed: %s", loc->path, strerror(-rc));
        VFS->close(fd);
        VFS->unlinkat(tdir, tmp, 0);
        return rc;
    }
    return fd;
}

int brick_op_create(struct brick_req *r)
{
    struct brick_loc loc;
    gfid_t g;
    int rc = brick_req_gfid(r->in, &g);
    if (rc < 0)
        return rc;
    int flags = open_flags(r->in);
    if (flags < 0)
        return flags;
    mode_t type = (mode_t)(r->in->mode & S_IFMT);
    if (type && type != S_IFREG)
        return -EINVAL;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_CREATE, &loc)) < 0)
        goto out;
    if (loc.is_root) {
        rc = -EISDIR;
        goto out;
    }
    /* Made in .cairn/tmp and renamed into place with its id and owner
     * (create_staged), unless the parent's default ACL must shape it. */
    int acl = brick_dir_default_acl(r->b, &loc);
    mode_t mode = brick_create_mode_acl(r->in, acl);
    int staged = r->b->tmp_fd >= 0 && !acl;
    for (int tries = 0; tries < 5; tries++) {
        struct stat st;
        int fd = staged ? create_staged(r, &loc, &g, flags, mode, &st)
                        : VFS->openat(loc.dirfd, loc.name, flags | O_CREAT | O_EXCL, mode);
        if (fd >= 0) {
            if (!staged && (rc = init_created(r, &loc, fd, &g, mode, &st, 0)) < 0) {
                log_debug("create of %s failed after the create: %s", loc.path, strerror(-rc));
                VFS->close(fd);
                VFS->unlinkat(loc.dirfd, loc.name, 0);
                goto out;
            }
            if ((rc = reply_open_known(r, fd, flags, &st, &g)) == 0)
                brick_put_noxattrs(r, &loc);
            goto out;
        }
        if (fd != -EEXIST || (flags & O_EXCL)) {
            rc = fd;
            goto out;
        }
        /* Without O_EXCL an existing file is opened; it may go away
         * between the two calls, then we try the create again. */
        fd = open_existing(r, &loc, flags);
        if (fd >= 0) {
            rc = reply_open(r, fd, flags);
            goto out;
        }
        if (fd != -ENOENT) {
            rc = fd;
            goto out;
        }
    }
    rc = -EAGAIN;
out:
    brick_loc_release(r->b, &loc);
    return rc;
}

static int file_fh(struct brick_req *r, struct brick_fh **fh)
{
    if (!rpc_has(r->in, RPC_T_FH))
        return -EBADF;
    return brick_fh_get(r->bc, r->in->fh, 0, fh);
}

int brick_op_read(struct brick_req *r)
{
    struct brick_fh *fh;
    int rc = file_fh(r, &fh);
    if (rc < 0)
        return rc;
    uint64_t size = r->in->size, off = r->in->offset;
    if (size > BRICK_MAX_READ)
        size = BRICK_MAX_READ;
    if (off > INT64_MAX) {
        rc = -EINVAL;
        goto out;
    }
    size_t mark = rpc_put_begin(r->out, RPC_T_DATA);
    uint8_t *p = rpc_buf_grow(r->out, size);
    if (!p) {
        rc = -ENOMEM;
        goto out;
    }
    size_t got = 0;
    uint64_t t0 = brick_stats_now();
    while (got < size) {
        long n = VFS->pread(fh->fd, p + got, size - got, (off_t)(off + got));
        if (n == -EINTR)
            continue;
        if (n < 0) {
            rc = (int)n;
            goto out;
        }
        if (n == 0)
            break; /* end of file */
        got += (size_t)n;
    }
    r->out->len = mark + got;
    rpc_put_end(r->out, mark);
    brick_top_count(fh->top, RPC_TOP_READ, got, brick_stats_now() - t0);
out:
    brick_fh_put(r->bc, fh);
    return rc;
}

/* Writes len bytes at off, as write(2) would: *done is what was written
 * (it stays written when a later part fails). Returns 0 or -errno (only
 * when nothing was written). */
static int write_at(struct brick_req *r, int fd, const uint8_t *p, size_t len, uint64_t off,
                    size_t *done)
{
    *done = 0;
    while (*done < len) {
        long n = VFS->pwrite(fd, p + *done, len - *done, (off_t)(off + *done));
        if (n == -EINTR)
            continue;
        if (n < 0)
            return *done ? 0 : (int)n;
        if (n == 0)
            return *done ? 0 : -EIO;
        *done += (size_t)n;
    }
    return 0;
}

/* EXTENTS: each piece of DATA at its offset, in order. A piece that fails
 * or falls short fails the request (with ENOSPC when short); the pieces
 * before it stay written. */
static int write_extents(struct brick_req *r, int fd, size_t *done)
{
    const char *why;
    int n = rpc_extents_check(r->in, &why);
    *done = 0;
    if (n < 0) {
        snprintf(r->text, sizeof(r->text), "%s", why);
        return n;
    }
    const uint8_t *p = r->in->data.p;
    for (int i = 0; i < n; i++) {
        uint64_t off;
        uint32_t len;
        size_t put;
        rpc_extent_get(&r->in->extents, (uint32_t)i, &off, &len);
        int rc = write_at(r, fd, p, len, off, &put);
        *done += put;
        if (rc == 0 && put < len)
            rc = -ENOSPC;
        if (rc < 0)
            return rc;
        p += len;
    }
    return 0;
}

int brick_op_write(struct brick_req *r)
{
    struct brick_fh *fh;
    struct rpc_attr a;
    int rc = file_fh(r, &fh);
    if (rc < 0)
        return rc;
    size_t len = rpc_has(r->in, RPC_T_DATA) ? r->in->data.len : 0, done = 0;
    uint64_t off = r->in->offset, t0 = brick_stats_now();
    if (rpc_has(r->in, RPC_T_EXTENTS)) {
        rc = write_extents(r, fh->fd, &done);
    } else if (off > INT64_MAX || off + len > INT64_MAX) {
        rc = -EFBIG;
        goto out;
    } else {
        rc = write_at(r, fh->fd, r->in->data.p, len, off, &done);
    }
    if (done > 0)
        brick_top_count(fh->top, RPC_TOP_WRITE, done, brick_stats_now() - t0);
    int killed = 0;
    if (rc == 0 && done > 0 && rpc_has(r->in, RPC_T_FLAGS) &&
        (r->in->flags & RPC_WRITE_KILL_SUIDGID))
        rc = brick_kill_setid_at(r->b, fh->fd, "", &killed);
    if (killed)
        rpc_put_u64(r->out, RPC_T_FLAGS, 1);
    /* The id read at open saves an xattr read per write. */
    if (rc == 0 && (rc = fh->has_gfid ? brick_fd_attr_gfid(r->b, fh->fd, &fh->gfid, &a)
                                      : brick_fd_attr(r->b, fh->fd, &a)) == 0) {
        rpc_put_u64(r->out, RPC_T_SIZE, done);
        rpc_put_attr(r->out, RPC_T_ATTR, &a);
    }
out:
    brick_fh_put(r->bc, fh);
    return rc;
}

int brick_op_flush(struct brick_req *r)
{
    struct brick_fh *fh;
    int rc = file_fh(r, &fh);
    if (rc < 0)
        return rc;
    if (rpc_has(r->in, RPC_T_OWNER))
        brick_locks_flush(r->bc, fh, r->in->owner);
    brick_fh_put(r->bc, fh);
    return 0;
}

int brick_op_release(struct brick_req *r)
{
    return brick_fh_remove(r->bc, r->in->fh, 0);
}

int brick_op_fsync(struct brick_req *r)
{
    struct brick_fh *fh;
    int rc = brick_fh_get(r->bc, r->in->fh, 0, &fh);
    if (rc < 0 && (rc = brick_fh_get(r->bc, r->in->fh, 1, &fh)) < 0)
        return rc;
    rc = VFS->fsync(fh->fd, rpc_has(r->in, RPC_T_FLAGS) && (r->in->flags & 1));
    brick_fh_put(r->bc, fh);
    return rc;
}

int brick_op_fallocate(struct brick_req *r)
{
    struct brick_fh *fh;
    uint64_t off = r->in->offset, len = r->in->size;
    if (off > INT64_MAX || len > INT64_MAX || r->in->flags > INT32_MAX)
        return -EINVAL;
    int rc = file_fh(r, &fh);
    if (rc < 0)
        return rc;
    rc = VFS->fallocate(fh->fd, (int)r->in->flags, (off_t)off, (off_t)len);
    brick_fh_put(r->bc, fh);
    return rc;
}

int brick_op_lseek(struct brick_req *r)
{
    struct brick_fh *fh;
    uint64_t whence = r->in->whence;
    if (r->in->offset > INT64_MAX || (whence != SEEK_DATA && whence != SEEK_HOLE))
        return -EINVAL;
    int rc = file_fh(r, &fh);
    if (rc < 0)
        return rc;
    /* The handle's file position is not used by anything else (reads and
     * writes are positional), so moving it is harmless. */
    off_t o = VFS->lseek(fh->fd, (off_t)r->in->offset, (int)whence);
    brick_fh_put(r->bc, fh);
    if (o < 0)
        return (int)o;
    rpc_put_u64(r->out, RPC_T_OFFSET, (uint64_t)o);
    return 0;
}

/* MAKE_FILE's XATTRS: a nested body of NAME, DATA pairs, set in order. */
static int set_xattrs(struct brick_req *r, int fd)
{
    const struct rpc_bytes *x = &r->in->xattrs;
    struct rpc_iter it;
    struct rpc_bytes n, v;
    char name[XATTR_NAME_MAX + 1];
    int rc;
    rpc_iter_init(&it, x->p, x->len);
    while ((rc = rpc_xattrs_next(&it, &n, &v)) > 0) {
        rpc_bytes_str(&n, name, sizeof(name));
        if (!brick_xattr_name_ok(name) && strcmp(name, BRICK_XATTR_SHARD) != 0)
            return -EPERM;
        if ((rc = VFS->fsetxattr(fd, name, v.p, v.len, 0)) < 0)
            return rc;
    }
    return rc < 0 ? -EINVAL : 0;
}

/* st: the file's attributes before (set-id bits aside, a write by the
 * brick changes none of those brick_setattr_fd compares). */
static int fill_made(struct brick_req *r, int fd, const struct stat *st)
{
    const struct rpc_msg *in = r->in;
    int rc;
    size_t done = 0;
    while (rpc_has(in, RPC_T_DATA) && done < in->data.len) {
        long n = VFS->pwrite(fd, in->data.p + done, in->data.len - done, (off_t)done);
        if (n == -EINTR)
            continue;
        if (n < 0)
            return (int)n;
        done += (size_t)n;
    }
    if (rpc_has(in, RPC_T_SIZE) && in->size > done) {
        if (in->size > INT64_MAX)
            return -EFBIG;
        if ((rc = VFS->ftruncate(fd, (off_t)in->size)) < 0)
            return rc;
    }
    /* an access ACL among the xattrs changes the mode */
    int known = !rpc_has(in, RPC_T_XATTRS);
    if (!known && (rc = set_xattrs(r, fd)) < 0)
        return rc;
    if (rpc_has(in, RPC_T_VALID) && (rc = brick_setattr_fd(r, fd, known ? st : NULL)) < 0)
        return rc;
    if (rpc_has(in, RPC_T_FLAGS) && (in->flags & 1) && (rc = VFS->fsync(fd, 0)) < 0)
        return rc;
    return 0;
}

int brick_op_make_file(struct brick_req *r)
{
    struct brick_loc loc;
    gfid_t g;
    int rc = brick_req_gfid(r->in, &g);
    if (rc < 0)
        return rc;
    mode_t type = (mode_t)(r->in->mode & S_IFMT);
    if (type && type != S_IFREG)
        return -EINVAL;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_CREATE, &loc)) < 0)
        goto out;
    if (loc.is_root) {
        rc = -EISDIR;
        goto out;
    }
    /* Built under a temporary name in .cairn/tmp (or as a spare inode in
     * .cairn/spare) and renamed into place once complete, so that not even
     * a brick crash leaves a half-made file (the brick empties .cairn/tmp
     * when it starts, and a spare is emptied when taken). A parent with a
     * default ACL must shape the file as it is made: there the file is
     * named first, and loses its name again on failure. */
    int acl = brick_dir_default_acl(r->b, &loc);
    mode_t mode = brick_create_mode_acl(r->in, acl);
    char tmp[BRICK_NEW_NAME_MAX];
    int named = r->b->tmp_fd < 0 || acl;
    int tdir = -1;
    uint64_t v = rpc_has(r->in, RPC_T_VALID) ? r->in->valid : 0;
    int times_later =
        (v & (RPC_SET_ATIME | RPC_SET_ATIME_NOW)) && (v & (RPC_SET_MTIME | RPC_SET_MTIME_NOW));
    unsigned how = 0;
    struct stat st;
    int fd =
        named ? VFS->openat(loc.dirfd, loc.name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY,
                            mode)
              : open_new(r->b, &g, &tdir, tmp, O_RDWR | O_NOFOLLOW, mode, times_later, &st, &how);
    if (fd < 0) {
        rc = fd;
        goto out;
    }
    struct rpc_attr a;
    if ((rc = init_created(r, &loc, fd, &g, mode, &st, how)) < 0 ||
        (rc = fill_made(r, fd, &st)) < 0 ||
        (!named && (rc = VFS->renameat2(tdir, tmp, loc.dirfd, loc.name, RENAME_NOREPLACE)) < 0) ||
        (rc = brick_fd_attr_gfid(r->b, fd, &g, &a)) < 0) {
        if (rc != -EEXIST)
            log_debug("making %s failed: %s", loc.path, strerror(-rc));
        VFS->close(fd);
        VFS->unlinkat(named ? loc.dirfd : tdir, named ? loc.name : tmp, 0);
        goto out;
    }
    VFS->close(fd);
    rpc_put_attr(r->out, RPC_T_ATTR, &a);
out:
    brick_loc_release(r->b, &loc);
    return rc;
}
