/* Root squash and all squash (server.root-squash, server.all-squash,
 * server.anonuid, server.anongid; docs/security.md).
 *
 * The bricks do not check permissions: the kernel of the mount does
 * (default_permissions), with the caller's own credentials, and root passes
 * every check there. So a squashed caller is handled here, before anything
 * answers it, the write-back queues included:
 *
 * - its identity is mapped (cf_squash_ids) wherever the mount names an
 *   owner: creates sent to the bricks and those written back, so that a
 *   file made under write-back gets the owner the bricks would give it;
 * - each request that the kernel let through with the caller's own
 *   credentials is checked again with the squashed ones (the cf_sq_*
 *   handlers, which take the place of the plain ones in the session's
 *   table): search and write on the parent of a name, read and write on an
 *   opened object, ownership for chmod, chown, explicit times and ACLs, the
 *   sticky bit, as the kernel checks an unprivileged user.
 *
 * The decisions themselves are ../lib/squash.c's; the bricks map the owner
 * of what a process creates with it as well (brick object.c), so a client
 * that does not map still creates as the anonymous user; the checks, like
 * all permission checks, stay with the client. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/log.h"
#include "../lib/squash.h"
#include "bridge.h"

/* One mount per process: the settings are the process's. */
static pthread_mutex_t sq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct squash sq = {.anonuid = 65534, .anongid = 65534};
/* Whether sq squashes anyone: read without the lock by every request, so
 * a mount without squash pays one load, not a lock. */
static int sq_on;

static struct squash settings(void)
{
    pthread_mutex_lock(&sq_lock);
    struct squash s = sq;
    pthread_mutex_unlock(&sq_lock);
    return s;
}

void cf_squash_configure(struct cf *cf, const struct opt_set *opts)
{
    (void)cf;
    struct squash s;
    squash_from_options(&s, opts);
    pthread_mutex_lock(&sq_lock);
    int changed = memcmp(&s, &sq, sizeof(s)) != 0;
    sq = s;
    __atomic_store_n(&sq_on, s.root || s.all, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&sq_lock);
    if (changed)
        log_info("squash: root-squash %s, all-squash %s, anonymous user %u:%u",
                 s.root ? "on" : "off", s.all ? "on" : "off", (unsigned)s.anonuid,
                 (unsigned)s.anongid);
}

int cf_squash_ids(fuse_req_t req, uid_t *uid, gid_t *gid)
{
    const struct fuse_ctx *c = fuse_req_ctx(req);
    *uid = c->uid;
    *gid = c->gid;
    struct squash s = settings();
    return squash_ids(&s, uid, gid);
}

/* The squashed credentials of req's caller: 1, or 0 when the caller acts
 * as itself (or is squashed to root), and the kernel's check was the one. */
static int squashed(fuse_req_t req, struct squash_cred *cr)
{
    if (!__atomic_load_n(&sq_on, __ATOMIC_ACQUIRE))
        return 0;
    struct squash s = settings();
    if (!s.root && !s.all)
        return 0;
    const struct fuse_ctx *c = fuse_req_ctx(req);
    uid_t uid = c->uid;
    gid_t gid = c->gid;
    if (!squash_ids(&s, &uid, &gid))
        return 0;
    /* the groups only for whom root squash maps (reading them costs) */
    gid_t g[SQUASH_GROUPS];
    int n = s.all ? 0 : fuse_req_getgroups(req, SQUASH_GROUPS, g);
    return squash_cred(&s, c->uid, c->gid, g, n < 0 ? 0 : n, cr);
}

/* Attributes of node as the bricks have them (or known.c, which keeps the
 * ones a lease makes current), after what is written back about the node
 * itself reached them. */
static int node_attr(struct cf *cf, uint64_t node, struct stat *st)
{
    if (cf_known_attr(cf, node, st))
        return 0;
    (void)cf_wbm_settle_up(cf, node);
    (void)cf_wbd_settle(cf, node);
    int rc = cf_wb_settle(cf, node);
    if (rc < 0)
        return rc;
    char path[RPC_PATH_MAX + 1];
    if ((rc = cl_itable_path(cf->it, node, NULL, path, sizeof(path))) < 0)
        return rc;
    struct cl_op o;
    cl_op_init(&o, RPC_OP_GETATTR, NULL, NULL);
    rpc_set_str(&o.args, RPC_T_PATH, &o.args.path, path);
    rc = cl_op_run(cf->stack, &o);
    if (rc == 0 && !rpc_has(&o.reply->msg, RPC_T_ATTR))
        rc = -EPROTO;
    if (rc == 0)
        rpc_attr_to_stat(&o.reply->msg.attr, st);
    cl_op_release(&o);
    return cl_status_errno(rc);
}

/* 0, or the error to answer req with (answered here then: returns 1). */
static int refuse(fuse_req_t req, int rc)
{
    if (rc < 0)
        fuse_reply_err(req, -rc);
    return rc < 0;
}

static int check_node(fuse_req_t req, const struct squash_cred *cr, uint64_t node, int mask)
{
    struct stat st;
    int rc = node_attr(fuse_req_userdata(req), node, &st);
    return rc < 0 ? rc : squash_may(cr, &st, mask);
}

/* Removing or replacing name in dir (squash_remove). */
static int check_remove(fuse_req_t req, const struct squash_cred *cr, uint64_t dir,
                        const char *name)
{
    struct cf *cf = fuse_req_userdata(req);
    struct stat d, e;
    int rc = node_attr(cf, dir, &d);
    if (rc < 0)
        return rc;
    /* the entry matters only under a sticky bit; nothing there: the
     * bricks say so */
    uint64_t node = (d.st_mode & S_ISVTX) ? cl_itable_child(cf->it, dir, name) : 0;
    int known = node && node_attr(cf, node, &e) == 0;
    return squash_remove(cr, &d, known ? &e : NULL);
}

void cf_sq_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct squash_cred cr;
    if (squashed(req, &cr) && refuse(req, check_node(req, &cr, parent, SQUASH_X)))
        return;
    cf_lookup(req, parent, name);
}

void cf_sq_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi)
{
    struct squash_cred cr;
    if (squashed(req, &cr)) {
        struct stat st;
        int rc = node_attr(fuse_req_userdata(req), ino, &st);
        int atime = to_set & FUSE_SET_ATTR_ATIME, mtime = to_set & FUSE_SET_ATTR_MTIME;
        struct squash_change ch = {
            .mode = to_set & FUSE_SET_ATTR_MODE,
            .uid_set = to_set & FUSE_SET_ATTR_UID,
            .gid_set = to_set & FUSE_SET_ATTR_GID,
            .uid = attr->st_uid,
            .gid = attr->st_gid,
            .size = (to_set & FUSE_SET_ATTR_SIZE) && !fi,
            .times = atime || mtime,
            .times_now = (!atime || (to_set & FUSE_SET_ATTR_ATIME_NOW)) &&
                         (!mtime || (to_set & FUSE_SET_ATTR_MTIME_NOW)),
        };
        if (rc == 0)
            rc = squash_setattr(&cr, &st, &ch);
        if (refuse(req, rc))
            return;
    }
    cf_setattr(req, ino, attr, to_set, fi);
}

static int check_new(fuse_req_t req, fuse_ino_t parent)
{
    struct squash_cred cr;
    return squashed(req, &cr) && refuse(req, check_node(req, &cr, parent, SQUASH_W | SQUASH_X));
}

void cf_sq_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    if (!check_new(req, parent))
        cf_mknod(req, parent, name, mode, rdev);
}

void cf_sq_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    if (!check_new(req, parent))
        cf_mkdir(req, parent, name, mode);
}

void cf_sq_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    if (!check_new(req, parent))
        cf_symlink(req, link, parent, name);
}

void cf_sq_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                  struct fuse_file_info *fi)
{
    if (!check_new(req, parent))
        cf_create(req, parent, name, mode, fi);
}

void cf_sq_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    if (!check_new(req, newparent))
        cf_link(req, ino, newparent, newname);
}

void cf_sq_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct squash_cred cr;
    if (squashed(req, &cr) && refuse(req, check_remove(req, &cr, parent, name)))
        return;
    cf_unlink(req, parent, name);
}

void cf_sq_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct squash_cred cr;
    if (squashed(req, &cr) && refuse(req, check_remove(req, &cr, parent, name)))
        return;
    cf_rmdir(req, parent, name);
}

void cf_sq_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                  const char *newname, unsigned int flags)
{
    struct squash_cred cr;
    if (squashed(req, &cr)) {
        struct cf *cf = fuse_req_userdata(req);
        int rc = check_remove(req, &cr, parent, name);
        if (rc == 0)
            rc = check_remove(req, &cr, newparent, newname);
        /* a directory that changes parent rewrites its ".." */
        uint64_t src = cl_itable_child(cf->it, parent, name);
        struct stat st;
        if (rc == 0 && src && parent != newparent && node_attr(cf, src, &st) == 0 &&
            S_ISDIR(st.st_mode))
            rc = squash_may(&cr, &st, SQUASH_W);
        if (refuse(req, rc))
            return;
    }
    cf_rename(req, parent, name, newparent, newname, flags);
}

static int open_mask(int flags)
{
    int acc = flags & O_ACCMODE;
    int mask = acc == O_RDONLY ? SQUASH_R : acc == O_WRONLY ? SQUASH_W : SQUASH_R | SQUASH_W;
    return flags & O_TRUNC ? mask | SQUASH_W : mask;
}

void cf_sq_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct squash_cred cr;
    if (squashed(req, &cr) && refuse(req, check_node(req, &cr, ino, open_mask(fi->flags))))
        return;
    cf_open(req, ino, fi);
}

void cf_sq_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct squash_cred cr;
    if (squashed(req, &cr) && refuse(req, check_node(req, &cr, ino, SQUASH_R)))
        return;
    cf_opendir(req, ino, fi);
}

/* Extended attributes as for an unprivileged user (squash_xattr). */
static int check_xattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    struct squash_cred cr;
    if (!squashed(req, &cr))
        return 0;
    struct stat st;
    int rc = node_attr(fuse_req_userdata(req), ino, &st);
    if (rc == 0)
        rc = squash_xattr(&cr, &st, name);
    return refuse(req, rc);
}

void cf_sq_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                    size_t size, int flags)
{
    if (!check_xattr(req, ino, name))
        cf_setxattr(req, ino, name, value, size, flags);
}

void cf_sq_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    if (!check_xattr(req, ino, name))
        cf_removexattr(req, ino, name);
}
