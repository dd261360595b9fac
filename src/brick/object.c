/* Objects on the brick: their ids (trusted.cairn.gfid), attributes, and the
 * mode and owner a new object gets. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/xattr.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/squash.h"
#include "brick.h"

int brick_req_gfid(const struct rpc_msg *in, gfid_t *g)
{
    if (!rpc_has(in, RPC_T_GFID) || gfid_is_null(&in->gfid))
        return -EINVAL;
    *g = in->gfid;
    return 0;
}

int brick_gfid_ensure(struct brick *b, const struct brick_loc *loc, gfid_t *g)
{
    if (loc->is_root) {
        gfid_root(g);
        return 0;
    }
    for (int tries = 0; tries < 3; tries++) {
        long n = b->vfs->getxattr(loc->dirfd, loc->name, BRICK_XATTR_GFID, g->b, GFID_LEN);
        if (n == GFID_LEN)
            return 0;
        if (n >= 0 || n == -ERANGE) {
            log_warn("bad %s on %s (%ld bytes)", BRICK_XATTR_GFID, loc->path, n);
            return -EIO;
        }
        if (n != -ENODATA)
            return (int)n;
        /* Put on the brick by hand: give it an id now; a racing lookup may
         * win, and then its id is the one. */
        gfid_generate(g);
        int rc =
            b->vfs->setxattr(loc->dirfd, loc->name, BRICK_XATTR_GFID, g->b, GFID_LEN, XATTR_CREATE);
        if (rc == 0) {
            log_debug("assigned an id to %s", loc->path);
            return 0;
        }
        if (rc != -EEXIST)
            return rc;
    }
    return -EIO;
}

int brick_gfid_ensure_fd(struct brick *b, int fd, gfid_t *g)
{
    for (int tries = 0; tries < 3; tries++) {
        long n = b->vfs->fgetxattr(fd, BRICK_XATTR_GFID, g->b, GFID_LEN);
        if (n == GFID_LEN)
            return 0;
        if (n >= 0 || n == -ERANGE)
            return -EIO;
        if (n != -ENODATA)
            return (int)n;
        gfid_generate(g);
        int rc = b->vfs->fsetxattr(fd, BRICK_XATTR_GFID, g->b, GFID_LEN, XATTR_CREATE);
        if (rc == 0)
            return 0;
        if (rc != -EEXIST)
            return rc;
    }
    return -EIO;
}

int brick_loc_attr(struct brick *b, const struct brick_loc *loc, struct rpc_attr *a)
{
    struct stat st;
    gfid_t g;
    int rc = b->vfs->fstatat(loc->dirfd, loc->name, &st);
    if (rc < 0)
        return rc;
    if ((rc = brick_gfid_ensure(b, loc, &g)) < 0)
        return rc;
    rpc_attr_from_stat(a, &st, &g);
    return 0;
}

int brick_fd_attr(struct brick *b, int fd, struct rpc_attr *a)
{
    struct stat st;
    gfid_t g;
    int rc = b->vfs->fstatat(fd, "", &st);
    if (rc < 0)
        return rc;
    if ((rc = brick_gfid_ensure_fd(b, fd, &g)) < 0)
        return rc;
    rpc_attr_from_stat(a, &st, &g);
    return 0;
}

int brick_fd_attr_gfid(struct brick *b, int fd, const gfid_t *g, struct rpc_attr *a)
{
    struct stat st;
    int rc = b->vfs->fstatat(fd, "", &st);
    if (rc < 0)
        return rc;
    rpc_attr_from_stat(a, &st, g);
    return 0;
}

int brick_kill_setid_at(struct brick *b, int dirfd, const char *name, int *killed)
{
    struct stat st;
    int rc = b->vfs->fstatat(dirfd, name, &st);
    if (rc < 0)
        return rc;
    mode_t n = rpc_kill_suidgid_mode(st.st_mode);
    if (n == (st.st_mode & 07777) || !S_ISREG(st.st_mode))
        return 0;
    rc = name[0] ? b->vfs->fchmodat(dirfd, name, n) : b->vfs->fchmod(dirfd, n);
    if (rc < 0)
        return rc;
    if (killed)
        *killed = 1;
    return 0;
}

void brick_dir_shape(struct brick *b, const struct brick_loc *loc, struct brick_dir_shape *s)
{
    /* the generation is read before the directory: a change that ends
     * meanwhile leaves what is kept stale */
    uint64_t gen = __atomic_load_n(&b->shape_gen, __ATOMIC_ACQUIRE);
    uint64_t now = net_now_ms();
    int kept = loc->dent || loc->dirfd == b->root_fd; /* a cached directory, or the root */
    if (kept && brick_dircache_shape(b, loc->dent, gen, now, s))
        return;
    struct stat st;
    int ok = b->vfs->fstatat(loc->dirfd, "", &st) == 0;
    s->sgid = ok && (st.st_mode & S_ISGID);
    s->gid = ok ? st.st_gid : 0;
    s->acl = b->vfs->getxattr(loc->dirfd, ".", "system.posix_acl_default", NULL, 0) > 0;
    if (ok && kept)
        brick_dircache_set_shape(b, loc->dent, gen, now, s);
}

void brick_dir_shape_changed(struct brick *b)
{
    __atomic_add_fetch(&b->shape_gen, 1, __ATOMIC_RELEASE);
}

int brick_dir_default_acl(struct brick *b, const struct brick_loc *loc)
{
    struct brick_dir_shape s;
    brick_dir_shape(b, loc, &s);
    return s.acl;
}

mode_t brick_create_mode_acl(const struct rpc_msg *in, int default_acl)
{
    mode_t mode = (mode_t)(in->mode & 07777);
    mode_t umask = (mode_t)(rpc_has(in, RPC_T_UMASK) ? in->umask & 0777 : 0);
    /* A default ACL on the parent replaces the umask (POSIX.1e); the file
     * system applies it when we create with the unmasked mode. */
    return umask && !default_acl ? mode & ~umask : mode;
}

mode_t brick_create_mode(struct brick *b, const struct brick_loc *loc, const struct rpc_msg *in)
{
    int umask = rpc_has(in, RPC_T_UMASK) && (in->umask & 0777);
    return brick_create_mode_acl(in, umask && brick_dir_default_acl(b, loc));
}

void brick_create_owner(struct brick *b, const struct brick_loc *loc, const struct rpc_msg *in,
                        uid_t *uid, gid_t *gid)
{
    *uid = rpc_has(in, RPC_T_UID) ? (uid_t)in->uid : 0;
    *gid = rpc_has(in, RPC_T_GID) ? (gid_t)in->gid : 0;
    /* A create on behalf of a process carries its pid; the client's own
     * (heal, layout repair) carry none or a negative one and keep the
     * owner they copy. */
    int on = __atomic_load_n(&b->squash, __ATOMIC_RELAXED);
    if (on && rpc_has(in, RPC_T_PID) && in->pid <= INT32_MAX) {
        struct squash s = {
            .root = (on & BRICK_SQUASH_ROOT) != 0,
            .all = (on & BRICK_SQUASH_ALL) != 0,
            .anonuid = __atomic_load_n(&b->anonuid, __ATOMIC_RELAXED),
            .anongid = __atomic_load_n(&b->anongid, __ATOMIC_RELAXED),
        };
        squash_ids(&s, uid, gid);
    }
    struct brick_dir_shape s;
    brick_dir_shape(b, loc, &s);
    if (s.sgid)
        *gid = s.gid; /* BSD group semantics of a setgid directory */
}
