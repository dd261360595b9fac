/* Namespace operations: lookup, attributes, creating and removing names. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/log.h"
#include "brick.h"

#define VFS (r->b->vfs)

static int put_loc_attr(struct brick_req *r, const struct brick_loc *loc)
{
    struct rpc_attr a;
    int rc = brick_loc_attr(r->b, loc, &a);
    if (rc == 0) {
        rpc_put_attr(r->out, RPC_T_ATTR, &a);
        brick_put_noxattrs(r, loc);
    }
    return rc;
}

int brick_op_lookup(struct brick_req *r)
{
    struct brick_loc loc;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc == 0)
        rc = put_loc_attr(r, &loc);
    brick_loc_release(r->b, &loc);
    return rc;
}

/* The handle named by FH, file or directory. */
static int any_fh(struct brick_req *r, struct brick_fh **fh)
{
    int rc = brick_fh_get(r->bc, r->in->fh, 0, fh);
    return rc == 0 ? 0 : brick_fh_get(r->bc, r->in->fh, 1, fh);
}

int brick_op_getattr(struct brick_req *r)
{
    if (rpc_has(r->in, RPC_T_FH)) {
        struct brick_fh *fh;
        struct rpc_attr a;
        int rc = any_fh(r, &fh);
        if (rc < 0)
            return rc;
        rc = brick_fd_attr(r->b, fh->fd, &a);
        brick_fh_put(r->bc, fh);
        if (rc == 0)
            rpc_put_attr(r->out, RPC_T_ATTR, &a);
        return rc;
    }
    return brick_op_lookup(r);
}

static void set_times(const struct rpc_msg *in, struct timespec ts[2])
{
    uint64_t v = in->valid;
    ts[0].tv_nsec = ts[1].tv_nsec = UTIME_OMIT;
    ts[0].tv_sec = ts[1].tv_sec = 0;
    if (v & RPC_SET_ATIME_NOW) {
        ts[0].tv_nsec = UTIME_NOW;
    } else if ((v & RPC_SET_ATIME) && rpc_has(in, RPC_T_ATIME)) {
        ts[0].tv_sec = in->atime.sec;
        ts[0].tv_nsec = in->atime.nsec;
    }
    if (v & RPC_SET_MTIME_NOW) {
        ts[1].tv_nsec = UTIME_NOW;
    } else if ((v & RPC_SET_MTIME) && rpc_has(in, RPC_T_MTIME)) {
        ts[1].tv_sec = in->mtime.sec;
        ts[1].tv_nsec = in->mtime.nsec;
    }
}

/* SETATTR on an open fd (FH given, or the path opened for a truncate). */
int brick_setattr_fd(struct brick_req *r, int fd, const struct stat *cur)
{
    const struct rpc_msg *in = r->in;
    uint64_t v = in->valid;
    int rc;
    /* What the file has already is not set again; a chown (which clears
     * set-id bits) is followed by the chmod. */
    if (cur && (!(v & RPC_SET_UID) || cur->st_uid == (uid_t)in->uid) &&
        (!(v & RPC_SET_GID) || cur->st_gid == (gid_t)in->gid)) {
        v &= ~(uint64_t)(RPC_SET_UID | RPC_SET_GID);
        if ((v & RPC_SET_MODE) && (cur->st_mode & 07777) == (in->mode & 07777) &&
            !(in->mode & 06000))
            v &= ~(uint64_t)RPC_SET_MODE;
    }
    if (v & (RPC_SET_UID | RPC_SET_GID)) {
        uid_t u = v & RPC_SET_UID ? (uid_t)in->uid : (uid_t)-1;
        gid_t g = v & RPC_SET_GID ? (gid_t)in->gid : (gid_t)-1;
        if ((rc = VFS->fchown(fd, u, g)) < 0)
            return rc;
    }
    if ((v & RPC_SET_MODE) && (rc = VFS->fchmod(fd, (mode_t)(in->mode & 07777))) < 0)
        return rc;
    if (v & RPC_SET_SIZE) {
        if (in->size > INT64_MAX)
            return -EFBIG;
        if ((rc = VFS->ftruncate(fd, (off_t)in->size)) < 0)
            return rc;
    }
    /* After a truncate (an arbiter gets the request without SIZE). */
    if ((v & RPC_SET_KILL_SUIDGID) && (rc = brick_kill_setid_at(r->b, fd, "", NULL)) < 0)
        return rc;
    if (v & (RPC_SET_ATIME | RPC_SET_MTIME | RPC_SET_ATIME_NOW | RPC_SET_MTIME_NOW)) {
        struct timespec ts[2];
        set_times(in, ts);
        if ((rc = VFS->futimens(fd, ts)) < 0)
            return rc;
    }
    return 0;
}

static int setattr_loc(struct brick_req *r, const struct brick_loc *loc)
{
    const struct rpc_msg *in = r->in;
    uint64_t v = in->valid;
    int rc;
    if (v & RPC_SET_SIZE) {
        /* Truncation needs an open file: the rest goes through it too. */
        int fd = VFS->openat(loc->dirfd, loc->name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK, 0);
        if (fd < 0)
            return fd == -ELOOP ? -EINVAL : fd;
        struct stat st;
        rc = VFS->fstatat(fd, "", &st);
        if (rc == 0 && !S_ISREG(st.st_mode))
            rc = -EINVAL;
        if (rc == 0)
            rc = brick_setattr_fd(r, fd, NULL);
        VFS->close(fd);
        return rc;
    }
    if (v & (RPC_SET_UID | RPC_SET_GID)) {
        uid_t u = v & RPC_SET_UID ? (uid_t)in->uid : (uid_t)-1;
        gid_t g = v & RPC_SET_GID ? (gid_t)in->gid : (gid_t)-1;
        if ((rc = VFS->fchownat(loc->dirfd, loc->name, u, g)) < 0)
            return rc;
    }
    if ((v & RPC_SET_MODE) &&
        (rc = VFS->fchmodat(loc->dirfd, loc->name, (mode_t)(in->mode & 07777))) < 0)
        return rc;
    /* an arbiter's copy, sent without the truncate */
    if ((v & RPC_SET_KILL_SUIDGID) &&
        (rc = brick_kill_setid_at(r->b, loc->dirfd, loc->name, NULL)) < 0)
        return rc;
    if (v & (RPC_SET_ATIME | RPC_SET_MTIME | RPC_SET_ATIME_NOW | RPC_SET_MTIME_NOW)) {
        struct timespec ts[2];
        set_times(in, ts);
        if ((rc = VFS->utimensat(loc->dirfd, loc->name, ts)) < 0)
            return rc;
    }
    return 0;
}

int brick_op_setattr(struct brick_req *r)
{
    int rc;
    if (!rpc_has(r->in, RPC_T_VALID))
        return -EINVAL;
    if (rpc_has(r->in, RPC_T_FH)) {
        struct brick_fh *fh;
        struct rpc_attr a;
        if ((rc = any_fh(r, &fh)) < 0)
            return rc;
        rc = brick_setattr_fd(r, fh->fd, NULL);
        if (rc == 0)
            rc = brick_fd_attr(r->b, fh->fd, &a);
        brick_fh_put(r->bc, fh);
        if (rc == 0)
            rpc_put_attr(r->out, RPC_T_ATTR, &a);
        return rc;
    }
    struct brick_loc loc;
    rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc == 0)
        rc = setattr_loc(r, &loc);
    if (rc == 0)
        rc = put_loc_attr(r, &loc);
    else
        log_debug("setattr of %s: %s", loc.path, strerror(-rc));
    brick_loc_release(r->b, &loc);
    return rc;
}

/* Gives the object just made at (dirfd, name) its id and its owner.
 * parent is where it is named (or will be): a setgid parent gives it
 * its group. Leaves the object's attributes in st. */
static int own_made(struct brick_req *r, const struct brick_loc *parent, int dirfd,
                    const char *name, const gfid_t *g, mode_t mode, struct stat *st)
{
    uid_t uid;
    gid_t gid;
    int rc = VFS->setxattr(dirfd, name, BRICK_XATTR_GFID, g->b, GFID_LEN, XATTR_CREATE);
    if (rc == -EEXIST) /* a racing lookup gave it an id: the creator's wins */
        rc = VFS->setxattr(dirfd, name, BRICK_XATTR_GFID, g->b, GFID_LEN, 0);
    if (rc < 0)
        return rc;
    brick_create_owner(r->b, parent, r->in, &uid, &gid);
    if ((rc = VFS->fstatat(dirfd, name, st)) < 0)
        return rc;
    if (st->st_uid != uid || st->st_gid != gid) {
        if ((rc = VFS->fchownat(dirfd, name, uid, gid)) < 0)
            return rc;
        /* chown drops set-id bits of files; the creator asked for them. */
        if ((mode & (S_ISUID | S_ISGID)) && !S_ISLNK(st->st_mode) &&
            (rc = VFS->fchmodat(dirfd, name, st->st_mode & 07777)) < 0)
            return rc;
    }
    return 0;
}

/* After an object was made in place: its id, its owner, and the
 * attributes for the reply. On failure the object is removed again, so a
 * failed create leaves nothing behind. */
static int finish_create(struct brick_req *r, const struct brick_loc *loc, const gfid_t *g,
                         mode_t mode, int is_dir)
{
    struct stat st;
    int rc = own_made(r, loc, loc->dirfd, loc->name, g, mode, &st);
    if (rc == 0)
        rc = put_loc_attr(r, loc);
    if (rc < 0) {
        log_debug("creating %s failed after the create: %s", loc->path, strerror(-rc));
        VFS->unlinkat(loc->dirfd, loc->name, is_dir ? AT_REMOVEDIR : 0);
    }
    return rc;
}

/* The distribute layer's xattr a MKDIR (LAYOUT) or MKNOD (LINKTO) carries,
 * set on the new object before it is answered; on failure the object is
 * removed again. */
static int set_dht_xattr(struct brick_req *r, const struct brick_loc *loc, int is_dir)
{
    enum rpc_tag tag = is_dir ? RPC_T_LAYOUT : RPC_T_LINKTO;
    if (!rpc_has(r->in, tag))
        return 0;
    const struct rpc_bytes *v = is_dir ? &r->in->layout : &r->in->linkto;
    int rc = v->len > 4096 ? -E2BIG
                           : VFS->setxattr(loc->dirfd, loc->name,
                                           is_dir ? BRICK_XATTR_LAYOUT : BRICK_XATTR_LINKTO,
                                           v->len ? (const void *)v->p : "", v->len, 0);
    if (rc < 0)
        VFS->unlinkat(loc->dirfd, loc->name, is_dir ? AT_REMOVEDIR : 0);
    return rc;
}

/* What a create makes: a directory, a node (MKNOD: type in mode) or a
 * symlink to target. */
struct made {
    enum { MADE_DIR, MADE_NODE, MADE_LINK } kind;
    mode_t mode; /* permission bits (and set-id, sticky) */
    mode_t type; /* MADE_NODE */
    dev_t rdev;  /* MADE_NODE */
    const char *target;
};

static int make_at(struct brick_req *r, int dirfd, const char *name, const struct made *m)
{
    switch (m->kind) {
    case MADE_DIR:
        return VFS->mkdirat(dirfd, name, m->mode);
    case MADE_NODE:
        return VFS->mknodat(dirfd, name, m->type | m->mode, m->rdev);
    default:
        return VFS->symlinkat(m->target, dirfd, name);
    }
}

/* Makes loc under a temporary name in .cairn/tmp, with its distribute
 * xattr (layout, link-to), id and owner, and renames it into place
 * complete. Neither a lookup nor another client's racing create of the
 * same name (a racing mkdir compares the copies' ids and replaces foreign
 * ones; a distribute lookup takes a file without its link-to xattr for
 * data) ever meets an object without them; and a brick crash leaves no
 * half-made one (the brick empties .cairn/tmp when it starts). */
static int make_staged(struct brick_req *r, const struct brick_loc *loc, const gfid_t *g,
                       struct made m)
{
    int is_dir = m.kind == MADE_DIR, rmflag = is_dir ? AT_REMOVEDIR : 0;
    struct brick_loc tl = {.path = loc->path};
    tl.dirfd = brick_tmp_dir(r->b, g, tl.name);
    struct stat pst, st;
    if (is_dir && VFS->fstatat(loc->dirfd, "", &pst) == 0 && (pst.st_mode & S_ISGID))
        m.mode |= S_ISGID; /* what mkdir in a setgid parent would have given */
    int rc = make_at(r, tl.dirfd, tl.name, &m);
    if (rc < 0)
        return rc;
    if (m.kind != MADE_LINK && (rc = set_dht_xattr(r, &tl, is_dir)) < 0)
        return rc; /* removed it */
    if ((rc = own_made(r, loc, tl.dirfd, tl.name, g, m.mode, &st)) == 0 && is_dir &&
        (m.mode & S_ISGID) && !(st.st_mode & S_ISGID))
        rc = VFS->fchmodat(tl.dirfd, tl.name, m.mode & 07777);
    if (rc == 0)
        rc = VFS->renameat2(tl.dirfd, tl.name, loc->dirfd, loc->name, RENAME_NOREPLACE);
    if (rc < 0) {
        if (rc != -EEXIST)
            log_debug("making %s failed: %s", loc->path, strerror(-rc));
        VFS->unlinkat(tl.dirfd, tl.name, rmflag);
        return rc;
    }
    if ((rc = put_loc_attr(r, loc)) < 0)
        VFS->unlinkat(loc->dirfd, loc->name, rmflag);
    return rc;
}

/* Makes loc: staged (make_staged), or in place when the brick has no
 * .cairn/tmp or the parent has a default ACL, which must shape the object
 * as it is made; in place, a failure removes it again. */
static int make_object(struct brick_req *r, const struct brick_loc *loc, const gfid_t *g,
                       struct made m)
{
    int acl = m.kind != MADE_LINK && brick_dir_default_acl(r->b, loc);
    if (m.kind != MADE_LINK)
        m.mode = brick_create_mode_acl(r->in, acl);
    if (r->b->tmp_fd >= 0 && !acl)
        return make_staged(r, loc, g, m);
    int is_dir = m.kind == MADE_DIR;
    int rc = make_at(r, loc->dirfd, loc->name, &m);
    if (rc == 0 && m.kind != MADE_LINK)
        rc = set_dht_xattr(r, loc, is_dir);
    if (rc == 0)
        rc = finish_create(r, loc, g, m.mode, is_dir);
    return rc;
}

int brick_op_mknod(struct brick_req *r)
{
    struct brick_loc loc;
    gfid_t g;
    int rc = brick_req_gfid(r->in, &g);
    if (rc < 0)
        return rc;
    mode_t type = (mode_t)(r->in->mode & S_IFMT);
    if (type != S_IFREG && type != S_IFIFO && type != S_IFCHR && type != S_IFBLK &&
        type != S_IFSOCK && type != 0)
        return -EINVAL;
    if (!type)
        type = S_IFREG;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_CREATE, &loc)) < 0)
        goto out;
    dev_t rdev = (type == S_IFCHR || type == S_IFBLK) ? (dev_t)r->in->rdev : 0;
    rc = make_object(r, &loc, &g, (struct made){.kind = MADE_NODE, .type = type, .rdev = rdev});
out:
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_op_mkdir(struct brick_req *r)
{
    struct brick_loc loc;
    gfid_t g;
    int rc = brick_req_gfid(r->in, &g);
    if (rc < 0)
        return rc;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_CREATE, &loc)) < 0)
        goto out;
    if (loc.is_root) {
        rc = -EEXIST;
        goto out;
    }
    rc = make_object(r, &loc, &g, (struct made){.kind = MADE_DIR});
out:
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_op_symlink(struct brick_req *r)
{
    struct brick_loc loc;
    char target[PATH_MAX];
    gfid_t g;
    int rc = brick_req_gfid(r->in, &g);
    if (rc < 0)
        return rc;
    if (!rpc_has(r->in, RPC_T_NAME) || memchr(r->in->name.p, 0, r->in->name.len))
        return -EINVAL;
    if (r->in->name.len == 0)
        return -ENOENT;
    if (rpc_bytes_str(&r->in->name, target, sizeof(target)) < 0)
        return -ENAMETOOLONG;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_CREATE, &loc)) < 0)
        goto out;
    rc = make_object(r, &loc, &g, (struct made){.kind = MADE_LINK, .mode = 0777, .target = target});
out:
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_op_link(struct brick_req *r)
{
    struct brick_loc from, to;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &from);
    if (rc < 0) {
        brick_loc_release(r->b, &from);
        return rc;
    }
    rc = brick_resolve(r->b, &r->in->path2, BRICK_LOC_CREATE, &to);
    if (rc == 0 && (from.is_root || to.is_root))
        rc = from.is_root ? -EPERM : -EEXIST;
    if (rc == 0)
        rc = VFS->linkat(from.dirfd, from.name, to.dirfd, to.name);
    if (rc == 0)
        rc = put_loc_attr(r, &to);
    brick_loc_release(r->b, &to);
    brick_loc_release(r->b, &from);
    return rc;
}

static int remove_name(struct brick_req *r, int flags)
{
    struct brick_loc loc;
    int tree = rpc_has(r->in, RPC_T_DATA);
    if (tree && !(flags & AT_REMOVEDIR))
        return -EINVAL;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc == 0 && loc.is_root)
        rc = flags ? -EBUSY : -EISDIR;
    if (rc == 0 && tree)
        rc = brick_trash_tree(r->b, loc.dirfd, loc.name, &r->in->data, r->text, sizeof(r->text));
    else if (rc == 0 && !flags)
        rc = brick_trash_file(r->b, loc.dirfd, loc.name);
    else if (rc == 0)
        rc = VFS->unlinkat(loc.dirfd, loc.name, flags);
    if (rc == 0 && (flags & AT_REMOVEDIR))
        brick_dircache_invalidate(r->b, loc.path);
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_op_unlink(struct brick_req *r)
{
    return remove_name(r, 0);
}

int brick_op_rmdir(struct brick_req *r)
{
    return remove_name(r, AT_REMOVEDIR);
}

int brick_op_rename(struct brick_req *r)
{
    unsigned flags = rpc_has(r->in, RPC_T_FLAGS) ? (unsigned)r->in->flags : 0;
    if ((flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) || r->in->flags > UINT32_MAX)
        return -EINVAL;
    struct brick_loc from, to;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &from);
    if (rc < 0) {
        brick_loc_release(r->b, &from);
        return rc;
    }
    rc = brick_resolve(r->b, &r->in->path2, BRICK_LOC_CREATE, &to);
    if (rc == 0 && (from.is_root || to.is_root))
        rc = -EBUSY;
    if (rc == 0)
        rc = VFS->renameat2(from.dirfd, from.name, to.dirfd, to.name, flags);
    if (rc == 0) {
        /* Whichever of them is a directory moved or went away. */
        brick_dircache_invalidate(r->b, from.path);
        brick_dircache_invalidate(r->b, to.path);
    }
    brick_loc_release(r->b, &to);
    brick_loc_release(r->b, &from);
    return rc;
}

int brick_op_readlink(struct brick_req *r)
{
    struct brick_loc loc;
    char buf[PATH_MAX];
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc == 0) {
        long n = VFS->readlinkat(loc.dirfd, loc.name, buf, sizeof(buf));
        if (n < 0)
            rc = (int)n;
        else if ((size_t)n >= sizeof(buf))
            rc = -ENAMETOOLONG;
        else
            rpc_put_bytes(r->out, RPC_T_DATA, buf, (size_t)n);
    }
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_op_statfs(struct brick_req *r)
{
    struct brick_loc loc;
    struct statfs st;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc == 0) {
        int fd = VFS->openat(loc.dirfd, loc.name, O_PATH | O_NOFOLLOW, 0);
        rc = fd < 0 ? fd : VFS->fstatfs(fd, &st);
        if (fd >= 0)
            VFS->close(fd);
    }
    if (rc == 0) {
        struct rpc_statfs s = {
            .bsize = (uint64_t)st.f_bsize,
            .frsize = (uint64_t)(st.f_frsize ? st.f_frsize : st.f_bsize),
            .blocks = st.f_blocks,
            .bfree = st.f_bfree,
            .bavail = st.f_bavail,
            .files = st.f_files,
            .ffree = st.f_ffree,
            .namemax = (uint64_t)st.f_namelen,
        };
        /* df of a limited directory: its limit and usage (quota.c); FLAGS
         * 1 tells distribute not to add the sets' answers up. */
        int deemed = brick_quota_statfs(r->b, loc.path, &s);
        rpc_put_statfs(r->out, RPC_T_STATFS, &s);
        if (deemed)
            rpc_put_u64(r->out, RPC_T_FLAGS, RPC_STATFS_QUOTA);
    }
    brick_loc_release(r->b, &loc);
    return rc;
}
