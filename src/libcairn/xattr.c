/* Extended attributes, by path (a symbolic link's own, as the l*xattr
 * calls). */
#include <errno.h>
#include <string.h>
#include <linux/limits.h>
#include <sys/xattr.h>

#include "internal.h"

/* GETXATTR and LISTXATTR: the size asked (outlen 0), or the value. */
static ssize_t value_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (r->outlen == 0) {
        if (rpc_has(m, RPC_T_SIZE))
            return (ssize_t)m->size;
        return rpc_has(m, RPC_T_DATA) ? (ssize_t)m->data.len : -EPROTO;
    }
    if (!rpc_has(m, RPC_T_DATA))
        return -EPROTO;
    if (m->data.len > r->outlen)
        return -ERANGE;
    memcpy(r->out, m->data.p, m->data.len);
    return (ssize_t)m->data.len;
}

static int check_name(const char *name)
{
    if (!name || !*name)
        return -EINVAL;
    return strlen(name) > XATTR_NAME_MAX ? -ERANGE : 0;
}

ssize_t cairn_getxattr(cairn_vol_t *vol, const char *path, const char *name, void *value,
                       size_t size)
{
    int err;
    if (!vol || (size && !value))
        return -EINVAL;
    if ((err = check_name(name)) < 0)
        return err;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_GETXATTR, path, NULL, &err);
    if (!r)
        return err;
    rpc_set_str(&r->op.args, RPC_T_NAME, &r->op.args.name, name);
    RPC_SET(&r->op.args, size, RPC_T_SIZE, (uint64_t)size);
    r->finish = value_finish;
    r->out = value;
    r->outlen = size;
    return cairn__run(r);
}

ssize_t cairn_listxattr(cairn_vol_t *vol, const char *path, char *list, size_t size)
{
    int err;
    if (!vol || (size && !list))
        return -EINVAL;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_LISTXATTR, path, NULL, &err);
    if (!r)
        return err;
    RPC_SET(&r->op.args, size, RPC_T_SIZE, (uint64_t)size);
    r->finish = value_finish;
    r->out = list;
    r->outlen = size;
    return cairn__run(r);
}

int cairn_setxattr(cairn_vol_t *vol, const char *path, const char *name, const void *value,
                   size_t size, int flags)
{
    int err;
    if (!vol || (size && !value) || (flags & ~(XATTR_CREATE | XATTR_REPLACE)))
        return -EINVAL;
    if ((err = check_name(name)) < 0)
        return err;
    if (size > XATTR_SIZE_MAX)
        return -E2BIG;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_SETXATTR, path, NULL, &err);
    if (!r)
        return err;
    struct rpc_msg *a = &r->op.args;
    rpc_set_str(a, RPC_T_NAME, &a->name, name);
    rpc_set_bytes(a, RPC_T_DATA, &a->data, size ? value : "", size);
    RPC_SET(a, flags, RPC_T_FLAGS, (uint64_t)(unsigned)flags);
    return (int)cairn__run(r);
}

int cairn_removexattr(cairn_vol_t *vol, const char *path, const char *name)
{
    int err;
    if (!vol)
        return -EINVAL;
    if ((err = check_name(name)) < 0)
        return err;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_REMOVEXATTR, path, NULL, &err);
    if (!r)
        return err;
    rpc_set_str(&r->op.args, RPC_T_NAME, &r->op.args.name, name);
    return (int)cairn__run(r);
}
