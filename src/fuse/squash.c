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
 * The bricks map the owner of what a process creates as well (brick
 * object.c), so a client that does not map still creates as the anonymous
 * user; the checks, like all permission checks, stay with the client. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/log.h"
#include "bridge.h"

#define SQ_GROUPS 64
#define MAY_X 1
#define MAY_W 2
#define MAY_R 4

struct cf_squash {
    pthread_mutex_t lock;
    int root, all;
    uid_t anonuid;
    gid_t anongid;
};

/* One mount per process: the settings are the process's. */
static struct cf_squash sq = {.lock = PTHREAD_MUTEX_INITIALIZER, .anonuid = 65534,
                              .anongid = 65534};

/* The credentials a request is checked with when squashed. */
struct sq_cred {
    uid_t uid;
    gid_t gid;
    int n;
    gid_t groups[SQ_GROUPS];
};

void cf_squash_configure(struct cf *cf, const struct opt_set *opts)
{
    (void)cf;
    pthread_mutex_lock(&sq.lock);
    int changed = sq.root != opt_bool(opts, "server.root-squash") ||
                  sq.all != opt_bool(opts, "server.all-squash") ||
                  sq.anonuid != (uid_t)opt_int(opts, "server.anonuid") ||
                  sq.anongid != (gid_t)opt_int(opts, "server.anongid");
    sq.root = opt_bool(opts, "server.root-squash");
    sq.all = opt_bool(opts, "server.all-squash");
    sq.anonuid = (uid_t)opt_int(opts, "server.anonuid");
    sq.anongid = (gid_t)opt_int(opts, "server.anongid");
    struct cf_squash now = sq;
    pthread_mutex_unlock(&sq.lock);
    if (changed)
        log_info("squash: root-squash %s, all-squash %s, anonymous user %u:%u",
                 now.root ? "on" : "off", now.all ? "on" : "off", (unsigned)now.anonuid,
                 (unsigned)now.anongid);
}

/* Maps uid and gid as the bricks would; 1 when squashing changed either. */
static int map_ids(const struct cf_squash *s, uid_t *uid, gid_t *gid)
{
    uid_t u = *uid;
    gid_t g = *gid;
    if (s->all) {
        u = s->anonuid;
        g = s->anongid;
    } else if (s->root) {
        if (u == 0)
            u = s->anonuid;
        if (g == 0)
            g = s->anongid;
    }
    int changed = u != *uid || g != *gid;
    *uid = u;
    *gid = g;
    return changed;
}

int cf_squash_ids(fuse_req_t req, uid_t *uid, gid_t *gid)
{
    const struct fuse_ctx *c = fuse_req_ctx(req);
    *uid = c->uid;
    *gid = c->gid;
    pthread_mutex_lock(&sq.lock);
    struct cf_squash s = sq;
    pthread_mutex_unlock(&sq.lock);
    return map_ids(&s, uid, gid);
}

/* The squashed credentials of req's caller: 1, or 0 when the caller is not
 * squashed (or squashed to root), and the kernel's check was the right one. */
static int squashed(fuse_req_t req, struct sq_cred *cr)
{
    pthread_mutex_lock(&sq.lock);
    struct cf_squash s = sq;
    pthread_mutex_unlock(&sq.lock);
    if (!s.root && !s.all)
        return 0;
    const struct fuse_ctx *c = fuse_req_ctx(req);
    cr->uid = c->uid;
    cr->gid = c->gid;
    cr->n = 0;
    int changed = map_ids(&s, &cr->uid, &cr->gid);
    if (!changed || cr->uid == 0)
        return 0;
    if (s.all)
        return 1; /* the anonymous group alone */
    gid_t g[SQ_GROUPS];
    int n = fuse_req_getgroups(req, SQ_GROUPS, g);
    for (int i = 0; i < n && i < SQ_GROUPS; i++)
        cr->groups[cr->n++] = g[i] == 0 ? s.anongid : g[i];
    return 1;
}

static int in_group(const struct sq_cred *cr, gid_t g)
{
    if (cr->gid == g)
        return 1;
    for (int i = 0; i < cr->n; i++)
        if (cr->groups[i] == g)
            return 1;
    return 0;
}

/* The mode bits' answer for an unprivileged user (POSIX ACLs: their mask
 * is the group class; named entries are not read, docs/security.md). */
static int may(const struct sq_cred *cr, const struct stat *st, int mask)
{
    mode_t m = st->st_mode;
    int bits = cr->uid == st->st_uid   ? (int)(m >> 6) & 7
               : in_group(cr, st->st_gid) ? (int)(m >> 3) & 7
                                          : (int)m & 7;
    return (bits & mask) == mask ? 0 : -EACCES;
}

static int owner(const struct sq_cred *cr, const struct stat *st)
{
    return cr->uid == st->st_uid ? 0 : -EPERM;
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

static int check_node(fuse_req_t req, const struct sq_cred *cr, uint64_t node, int mask)
{
    struct stat st;
    int rc = node_attr(fuse_req_userdata(req), node, &st);
    return rc < 0 ? rc : may(cr, &st, mask);
}

/* Removing or replacing name in dir: write and search on dir, and with the
 * sticky bit, ownership of dir or of the entry. */
static int check_remove(fuse_req_t req, const struct sq_cred *cr, uint64_t dir, const char *name)
{
    struct cf *cf = fuse_req_userdata(req);
    struct stat d, e;
    int rc = node_attr(cf, dir, &d);
    if (rc == 0)
        rc = may(cr, &d, MAY_W | MAY_X);
    if (rc < 0 || !(d.st_mode & S_ISVTX) || cr->uid == d.st_uid)
        return rc;
    uint64_t node = cl_itable_child(cf->it, dir, name);
    if (!node)
        return 0; /* nothing there to remove: the bricks say so */
    if ((rc = node_attr(cf, node, &e)) < 0)
        return rc == -ENOENT ? 0 : rc;
    return cr->uid == e.st_uid ? 0 : -EPERM;
}

void cf_sq_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct sq_cred cr;
    if (squashed(req, &cr) && refuse(req, check_node(req, &cr, parent, MAY_X)))
        return;
    cf_lookup(req, parent, name);
}

void cf_sq_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi)
{
    struct sq_cred cr;
    if (squashed(req, &cr)) {
        struct stat st;
        int rc = node_attr(fuse_req_userdata(req), ino, &st);
        if (rc == 0 && (to_set & FUSE_SET_ATTR_MODE))
            rc = owner(&cr, &st);
        /* chown: the owner may only keep the owner, and give one of its
         * groups */
        if (rc == 0 && (to_set & FUSE_SET_ATTR_UID))
            rc = owner(&cr, &st) < 0 || attr->st_uid != st.st_uid ? -EPERM : 0;
        if (rc == 0 && (to_set & FUSE_SET_ATTR_GID))
            rc = owner(&cr, &st) < 0 ||
                         (attr->st_gid != st.st_gid && !in_group(&cr, attr->st_gid))
                     ? -EPERM
                     : 0;
        if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE) && !fi)
            rc = may(&cr, &st, MAY_W);
        int times = to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME);
        int now = to_set & (FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW);
        if (rc == 0 && times && owner(&cr, &st) < 0) {
            /* to the current time: write permission suffices */
            int all_now = (!(to_set & FUSE_SET_ATTR_ATIME) || (now & FUSE_SET_ATTR_ATIME_NOW)) &&
                          (!(to_set & FUSE_SET_ATTR_MTIME) || (now & FUSE_SET_ATTR_MTIME_NOW));
            rc = all_now ? (may(&cr, &st, MAY_W) < 0 ? -EACCES : 0) : -EPERM;
        }
        if (refuse(req, rc))
            return;
    }
    cf_setattr(req, ino, attr, to_set, fi);
}

static int check_new(fuse_req_t req, fuse_ino_t parent)
{
    struct sq_cred cr;
    return squashed(req, &cr) && refuse(req, check_node(req, &cr, parent, MAY_W | MAY_X));
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
    struct sq_cred cr;
    if (squashed(req, &cr) && refuse(req, check_remove(req, &cr, parent, name)))
        return;
    cf_unlink(req, parent, name);
}

void cf_sq_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct sq_cred cr;
    if (squashed(req, &cr) && refuse(req, check_remove(req, &cr, parent, name)))
        return;
    cf_rmdir(req, parent, name);
}

void cf_sq_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                  const char *newname, unsigned int flags)
{
    struct sq_cred cr;
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
            rc = may(&cr, &st, MAY_W);
        if (refuse(req, rc))
            return;
    }
    cf_rename(req, parent, name, newparent, newname, flags);
}

static int open_mask(int flags)
{
    int acc = flags & O_ACCMODE;
    int mask = acc == O_RDONLY ? MAY_R : acc == O_WRONLY ? MAY_W : MAY_R | MAY_W;
    return flags & O_TRUNC ? mask | MAY_W : mask;
}

void cf_sq_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct sq_cred cr;
    if (squashed(req, &cr) && refuse(req, check_node(req, &cr, ino, open_mask(fi->flags))))
        return;
    cf_open(req, ino, fi);
}

void cf_sq_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct sq_cred cr;
    if (squashed(req, &cr) && refuse(req, check_node(req, &cr, ino, MAY_R)))
        return;
    cf_opendir(req, ino, fi);
}

/* Extended attributes as for an unprivileged user: user.* by write
 * permission, ACLs by the owner, trusted.* and security.* not at all. */
static int check_xattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    struct sq_cred cr;
    if (!squashed(req, &cr))
        return 0;
    int rc;
    if (!strncmp(name, "trusted.", 8) || !strncmp(name, "security.", 9)) {
        rc = -EPERM;
    } else {
        struct stat st;
        rc = node_attr(fuse_req_userdata(req), ino, &st);
        if (rc == 0)
            rc = !strncmp(name, "system.posix_acl_", 17) ? owner(&cr, &st) : may(&cr, &st, MAY_W);
    }
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
