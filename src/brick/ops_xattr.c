/* Extended attributes: passed through to the backing file system (user.,
 * trusted., security., system.posix_acl_*), except the names Cairn keeps for
 * itself, which clients can neither see nor touch (EPERM). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "../lib/log.h"
#include "brick.h"

#define VFS (r->b->vfs)
#define XATTR_NAME_MAX_ 255
#define XATTR_SIZE_MAX_ 65536
#define XATTR_LIST_MAX_ 65536

static const char *const reserved[] = {BRICK_XATTR_GFID, BRICK_XATTR_VERSION};

static int is_reserved(const char *name)
{
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (!strcmp(name, reserved[i]))
            return 1;
    return 0;
}

/* The NAME field as a C string, checked. */
static int xname(struct brick_req *r, char out[XATTR_NAME_MAX_ + 1])
{
    const struct rpc_bytes *n = &r->in->name;
    if (!rpc_has(r->in, RPC_T_NAME) || n->len == 0 || memchr(n->p, 0, n->len))
        return -EINVAL;
    if (n->len > XATTR_NAME_MAX_)
        return -ERANGE;
    rpc_bytes_str(n, out, XATTR_NAME_MAX_ + 1);
    return is_reserved(out) ? -EPERM : 0;
}

int brick_op_setxattr(struct brick_req *r)
{
    char name[XATTR_NAME_MAX_ + 1];
    struct brick_loc loc;
    int rc = xname(r, name);
    if (rc < 0)
        return rc;
    uint64_t flags = rpc_has(r->in, RPC_T_FLAGS) ? r->in->flags : 0;
    if (flags & ~(uint64_t)(XATTR_CREATE | XATTR_REPLACE))
        return -EINVAL;
    size_t len = rpc_has(r->in, RPC_T_DATA) ? r->in->data.len : 0;
    if (len > XATTR_SIZE_MAX_)
        return -E2BIG;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc)) == 0)
        rc = VFS->setxattr(loc.dirfd, loc.name, name, len ? (const void *)r->in->data.p : "", len,
                           (int)flags);
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_op_getxattr(struct brick_req *r)
{
    char name[XATTR_NAME_MAX_ + 1];
    struct brick_loc loc;
    int rc = xname(r, name);
    if (rc < 0)
        return rc;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc)) < 0)
        goto out;
    if (r->in->size == 0) {
        long n = VFS->getxattr(loc.dirfd, loc.name, name, NULL, 0);
        if (n < 0)
            rc = (int)n;
        else
            rpc_put_u64(r->out, RPC_T_SIZE, (uint64_t)n);
        goto out;
    }
    size_t size = r->in->size > XATTR_SIZE_MAX_ ? XATTR_SIZE_MAX_ : (size_t)r->in->size;
    size_t mark = rpc_put_begin(r->out, RPC_T_DATA);
    uint8_t *p = rpc_buf_grow(r->out, size);
    if (!p) {
        rc = -ENOMEM;
        goto out;
    }
    long n = VFS->getxattr(loc.dirfd, loc.name, name, p, size);
    if (n < 0) {
        rc = (int)n;
        goto out;
    }
    r->out->len = mark + (size_t)n;
    rpc_put_end(r->out, mark);
out:
    brick_loc_release(r->b, &loc);
    return rc;
}

/* The object's names without Cairn's own; *out is malloc'ed. */
static long list_names(struct brick_req *r, const struct brick_loc *loc, char **out)
{
    char *buf = NULL, first[512];
    *out = NULL;
    /* Most objects have only Cairn's few names: one call, no size query. */
    long n = VFS->listxattr(loc->dirfd, loc->name, first, sizeof(first));
    if (n == 0)
        return 0;
    if (n > 0) {
        if (!(buf = malloc((size_t)n)))
            return -ENOMEM;
        memcpy(buf, first, (size_t)n);
    }
    for (int tries = 0; n == -ERANGE && tries < 5; tries++) {
        n = VFS->listxattr(loc->dirfd, loc->name, NULL, 0);
        if (n <= 0)
            return n;
        free(buf);
        if (!(buf = malloc((size_t)n)))
            return -ENOMEM;
        n = VFS->listxattr(loc->dirfd, loc->name, buf, (size_t)n);
        /* -ERANGE: a name added meanwhile, ask again */
    }
    if (n < 0) {
        free(buf);
        return n;
    }
    long w = 0;
    for (long i = 0; i < n;) {
        size_t l = strnlen(buf + i, (size_t)(n - i));
        if (!is_reserved(buf + i)) {
            memmove(buf + w, buf + i, l);
            w += (long)l;
            buf[w++] = 0;
        }
        i += (long)l + 1;
    }
    *out = buf;
    return w;
}

int brick_op_listxattr(struct brick_req *r)
{
    struct brick_loc loc;
    char *names = NULL;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc < 0)
        goto out;
    long n = list_names(r, &loc, &names);
    if (n < 0) {
        rc = (int)n;
        goto out;
    }
    if (r->in->size == 0)
        rpc_put_u64(r->out, RPC_T_SIZE, (uint64_t)n);
    else if ((uint64_t)n > r->in->size || n > XATTR_LIST_MAX_)
        rc = -ERANGE;
    else
        rpc_put_bytes(r->out, RPC_T_DATA, names ? names : "", (size_t)n);
out:
    free(names);
    brick_loc_release(r->b, &loc);
    return rc;
}

/* NOXATTRS: the object has no attribute a user of a mount could see. The
 * volume's own names (a directory's layout, pending marks) do not count:
 * mounts never show them (src/fuse/ops_xattr.c). */
void brick_put_noxattrs(struct brick_req *r, const struct brick_loc *loc)
{
    if (!rpc_has(r->in, RPC_T_LEASE))
        return;
    char *names;
    long n = list_names(r, loc, &names), users = 0;
    for (long i = 0; i < n; i += (long)strlen(names + i) + 1)
        if (strncmp(names + i, BRICK_XATTR_PREFIX, strlen(BRICK_XATTR_PREFIX)) != 0)
            users++;
    free(names);
    if (n >= 0 && users == 0)
        rpc_put_u64(r->out, RPC_T_NOXATTRS, 1);
}

int brick_op_removexattr(struct brick_req *r)
{
    char name[XATTR_NAME_MAX_ + 1];
    struct brick_loc loc;
    int rc = xname(r, name);
    if (rc < 0)
        return rc;
    if ((rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc)) == 0)
        rc = VFS->removexattr(loc.dirfd, loc.name, name);
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_xattr_name_ok(const char *name)
{
    return name[0] && strlen(name) <= XATTR_NAME_MAX_ && !is_reserved(name) &&
           strncmp(name, BRICK_XATTR_PREFIX, strlen(BRICK_XATTR_PREFIX)) != 0;
}
