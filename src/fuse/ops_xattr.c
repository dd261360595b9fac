/* Extended attribute handlers, including system.posix_acl_* (ACLs are
 * stored by the brick; the kernel enforces them with default_permissions).
 *
 * Names under "trusted.cairn." are the volume's own (a directory's layout,
 * a link-to file's target, replication's pending marks): the layers below
 * the mount read and write them on the bricks, users of the mount neither
 * see nor change them. A get answers ENODATA, a set or removal EPERM, and
 * listings leave them out; the mount root's io-stats name is the one
 * exception (it is the mount's, not the bricks'). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/memtrim.h"
#include "bridge.h"

#define CAPS "security.capability"
#define SELINUX "security.selinux"
#define INTERNAL "trusted.cairn."
#define LIST_MAX 65536 /* the kernel's XATTR_LIST_MAX */

static int internal_name(const char *name)
{
    return strncmp(name, INTERNAL, sizeof(INTERNAL) - 1) == 0;
}

/* Without -o selinux the SELinux label is not an attribute of this file
 * system: tools that ask for it on every file (ls -l, cp -a) learn so
 * once per mount instead of paying a round trip per file. Returns 1 when
 * the request was answered. */
static int selinux_refused(fuse_req_t req, const char *name)
{
    struct cf *cf = fuse_req_userdata(req);
    if (cf->selinux || strcmp(name, SELINUX) != 0)
        return 0;
    fuse_reply_err(req, EOPNOTSUPP);
    return 1;
}

size_t cf_stats_format(struct cf *cf, char *buf, size_t cap)
{
    size_t n = cl_opstats_format(&cf->stats, buf, cap);
    if (n >= cap)
        n = cap - 1;
    if (n > 0 && buf[n - 1] != '\n' && n < cap - 1)
        buf[n++] = '\n';
    n += cf_rc_format(cf, buf + n, cap - n);
    n += cf_ps_format(cf, buf + n, cap - n);
    n += cf_wb_format(cf, buf + n, cap - n);
    n += cf_wbh_format(cf, buf + n, cap - n);
    n += cf_lsa_format(cf, buf + n, cap - n);
    n += cf_uring_format(cf, buf + n, cap - n);
    n += cf_fmt_len(memtrim_format(cf->trim, buf + n, cap - n), cap - n);
    return n;
}

/* The counters of this mount as the root's virtual xattr CF_STATS_XATTR:
 * reading returns the table (opstats.h), writing "clear" zeroes it.
 * Returns 1 when name is that xattr (the request is answered). */
static int stats_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    if (ino != FUSE_ROOT_ID || strcmp(name, CF_STATS_XATTR) != 0)
        return 0;
    struct cf *cf = fuse_req_userdata(req);
    char *buf = malloc(65536);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return 1;
    }
    size_t n = cf_stats_format(cf, buf, 65536);
    if (size == 0)
        fuse_reply_xattr(req, n);
    else if (n > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, buf, n);
    free(buf);
    return 1;
}

static int stats_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                          size_t size)
{
    if (ino != FUSE_ROOT_ID || strcmp(name, CF_STATS_XATTR) != 0)
        return 0;
    struct cf *cf = fuse_req_userdata(req);
    if (size == 5 && memcmp(value, "clear", 5) == 0) {
        cl_opstats_clear(&cf->stats);
        fuse_reply_err(req, 0);
    } else {
        fuse_reply_err(req, EINVAL);
    }
    return 1;
}

void cf_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (stats_setxattr(req, ino, name, value, size) || selinux_refused(req, name))
        return;
    if (internal_name(name)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if (cf_wb_setxattr(req, ino, name, value, size, flags) ||
        cf_wbd_acl(req, ino, name, value, size, flags))
        return;
    struct fop *f = fop_new(req, RPC_OP_SETXATTR, fop_done_err_cb);
    if (!f)
        return;
    cf_known_forget_attr(f->cf, ino); /* an ACL changes the mode */
    cf_known_forget_xattrs(f->cf, ino);
    if (!strcmp(name, "system.posix_acl_default"))
        cf_known_set_dir_acl(f->cf, ino, 2); /* creates in it go to the bricks from now on */
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    size_t nl = strlen(name);
    if (nl > NAME_MAX || nl == 0)
        FOP_FAIL(f, -ERANGE);
    memcpy(f->name, name, nl + 1);
    /* value belongs to the FUSE worker: keep a copy until the reply. */
    if (!(f->data = malloc(size ? size : 1)))
        FOP_FAIL(f, -ENOMEM);
    if (size)
        memcpy(f->data, value, size);
    struct rpc_msg *a = &f->op.args;
    rpc_set_bytes(a, RPC_T_NAME, &a->name, f->name, nl);
    rpc_set_bytes(a, RPC_T_DATA, &a->data, f->data, size);
    RPC_SET(a, flags, RPC_T_FLAGS, (uint64_t)(unsigned)flags);
    fop_submit(f);
}

/* GETXATTR's answer: a size when asked for it, else the bytes. */
static void get_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_msg *m = &op->reply->msg;
    if (rpc_has(m, RPC_T_ERRNO) && m->err) {
        /* An absence reported with a lease (known.c keeps it). */
        int err = m->err < 4096 ? (int)m->err : EIO;
        cf_reply_begin(f->cf);
        if (err == ENODATA && op->args.op == RPC_OP_GETXATTR && cf_lease_held(f))
            cf_known_noxattr(f->cf, f->parent, f->name);
        fuse_reply_err(f->req, err);
        cf_reply_end(f->cf);
        fop_free(f);
        return;
    }
    if (f->size == 0) {
        if (rpc_has(m, RPC_T_SIZE))
            fuse_reply_xattr(f->req, m->size);
        else if (rpc_has(m, RPC_T_DATA))
            fuse_reply_xattr(f->req, m->data.len);
        else
            FOP_FAIL(f, -EPROTO);
    } else {
        if (!rpc_has(m, RPC_T_DATA))
            FOP_FAIL(f, -EPROTO);
        if (m->data.len > f->size)
            FOP_FAIL(f, -ERANGE);
        fuse_reply_buf(f->req, (const char *)m->data.p, m->data.len);
    }
    fop_free(f);
}

void cf_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    if (stats_getxattr(req, ino, name, size) || selinux_refused(req, name))
        return;
    if (internal_name(name)) {
        fuse_reply_err(req, ENODATA);
        return;
    }
    /* The kernel asks before every write (file_remove_privs); a file made
     * here under a lease has none (known.c). */
    if (!strcmp(name, CAPS) && cf_known_has_nocaps(fuse_req_userdata(req), ino)) {
        fuse_reply_err(req, ENODATA);
        return;
    }
    if (cf_wb_getxattr(req, ino, name, size))
        return;
    if (cf_known_xattr_absent(fuse_req_userdata(req), ino, name)) {
        fuse_reply_err(req, ENODATA);
        return;
    }
    struct fop *f = fop_new(req, RPC_OP_GETXATTR, get_cb);
    if (!f)
        return;
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    size_t nl = strlen(name);
    if (nl > NAME_MAX || nl == 0)
        FOP_FAIL(f, -ENODATA);
    memcpy(f->name, name, nl + 1);
    f->size = size;
    f->parent = ino; /* the node whose absent attributes known.c keeps */
    struct rpc_msg *a = &f->op.args;
    rpc_set_bytes(a, RPC_T_NAME, &a->name, f->name, nl);
    RPC_SET(a, size, RPC_T_SIZE, size);
    cf_lease_ask(f);
    fop_submit(f);
}

/* A listing from the bricks without the volume's own names, then as
 * asked: its size, or the names when they fit. */
static void list_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_msg *m = &op->reply->msg;
    if (rpc_has(m, RPC_T_ERRNO) && m->err)
        FOP_FAIL(f, -(m->err < 4096 ? (int)m->err : EIO));
    if (!rpc_has(m, RPC_T_DATA))
        FOP_FAIL(f, -EPROTO);
    const char *in = (const char *)m->data.p;
    size_t len = m->data.len, kept = 0;
    char *out = malloc(len ? len : 1);
    if (!out)
        FOP_FAIL(f, -ENOMEM);
    for (size_t i = 0; i < len;) {
        size_t l = strnlen(in + i, len - i);
        if (l > 0 && !internal_name(in + i)) {
            memcpy(out + kept, in + i, l);
            kept += l;
            out[kept++] = 0; /* a last name without its NUL gets one */
        }
        i += l + 1;
    }
    if (f->size == 0)
        fuse_reply_xattr(f->req, kept);
    else if (kept > f->size)
        fuse_reply_err(f->req, ERANGE);
    else
        fuse_reply_buf(f->req, out, kept);
    free(out);
    fop_free(f);
}

void cf_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    if (cf_wb_listxattr(req, ino, size))
        return;
    if (cf_known_xattr_free(fuse_req_userdata(req), ino)) {
        if (size == 0)
            fuse_reply_xattr(req, 0);
        else
            fuse_reply_buf(req, NULL, 0);
        return;
    }
    struct fop *f = fop_new(req, RPC_OP_LISTXATTR, list_cb);
    if (!f)
        return;
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    f->size = size;
    /* the whole list even for its size: the size without the volume's names */
    RPC_SET(&f->op.args, size, RPC_T_SIZE, LIST_MAX);
    fop_submit(f);
}

void cf_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    if (selinux_refused(req, name))
        return;
    if (internal_name(name)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if (cf_wb_removexattr(req, ino, name) || cf_wbd_acl(req, ino, name, NULL, 0, 0))
        return;
    struct fop *f = fop_new(req, RPC_OP_REMOVEXATTR, fop_done_err_cb);
    if (!f)
        return;
    cf_known_forget_attr(f->cf, ino);
    cf_known_forget_xattrs(f->cf, ino);
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    size_t nl = strlen(name);
    if (nl > NAME_MAX || nl == 0)
        FOP_FAIL(f, -ENODATA);
    memcpy(f->name, name, nl + 1);
    rpc_set_bytes(&f->op.args, RPC_T_NAME, &f->op.args.name, f->name, nl);
    fop_submit(f);
}
