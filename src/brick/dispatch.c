/* Requests to handlers: the opcode table, compound requests, replies. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../lib/log.h"
#include "../rpc/opinfo.h"
#include "brick.h"

typedef int (*op_fn)(struct brick_req *r);

static const op_fn op_table[RPC_OP_MAX] = {
    [RPC_OP_LOOKUP] = brick_op_lookup,
    [RPC_OP_GETATTR] = brick_op_getattr,
    [RPC_OP_SETATTR] = brick_op_setattr,
    [RPC_OP_MKNOD] = brick_op_mknod,
    [RPC_OP_MKDIR] = brick_op_mkdir,
    [RPC_OP_SYMLINK] = brick_op_symlink,
    [RPC_OP_LINK] = brick_op_link,
    [RPC_OP_UNLINK] = brick_op_unlink,
    [RPC_OP_RMDIR] = brick_op_rmdir,
    [RPC_OP_RENAME] = brick_op_rename,
    [RPC_OP_READLINK] = brick_op_readlink,
    [RPC_OP_OPEN] = brick_op_open,
    [RPC_OP_CREATE] = brick_op_create,
    [RPC_OP_READ] = brick_op_read,
    [RPC_OP_WRITE] = brick_op_write,
    [RPC_OP_FLUSH] = brick_op_flush,
    [RPC_OP_RELEASE] = brick_op_release,
    [RPC_OP_FSYNC] = brick_op_fsync,
    [RPC_OP_FALLOCATE] = brick_op_fallocate,
    [RPC_OP_LSEEK] = brick_op_lseek,
    [RPC_OP_OPENDIR] = brick_op_opendir,
    [RPC_OP_READDIR] = brick_op_readdir,
    [RPC_OP_RELEASEDIR] = brick_op_releasedir,
    [RPC_OP_STATFS] = brick_op_statfs,
    [RPC_OP_SETXATTR] = brick_op_setxattr,
    [RPC_OP_GETXATTR] = brick_op_getxattr,
    [RPC_OP_LISTXATTR] = brick_op_listxattr,
    [RPC_OP_REMOVEXATTR] = brick_op_removexattr,
    [RPC_OP_GETLK] = brick_op_getlk,
    [RPC_OP_SETLK] = brick_op_setlk,
    [RPC_OP_FLOCK] = brick_op_flock,
    [RPC_OP_MARK] = brick_op_mark,
    [RPC_OP_INDEX] = brick_op_index,
    [RPC_OP_UNMARK] = brick_op_unmark,
    [RPC_OP_STATS] = brick_op_stats,
    [RPC_OP_TOP] = brick_op_top,
    [RPC_OP_LEASE_RETURN] = brick_op_lease_return,
    [RPC_OP_MAKE_FILE] = brick_op_make_file,
    [RPC_OP_CHECKSUM] = brick_op_checksum,
    [RPC_OP_ACCUSED_SEEN] = brick_op_accused_seen,
    [RPC_OP_QUOTA] = brick_op_quota,
    [RPC_OP_QUOTA_OTHERS] = brick_op_quota_others,
};

/* Bytes a request moved, for the counters: WRITE's data, READ's reply. */
static uint64_t moved_bytes(const struct brick_req *r, int rc)
{
    if (rc < 0)
        return 0;
    if (r->opcode == RPC_OP_WRITE)
        return r->in->data.len;
    if (r->opcode != RPC_OP_READ)
        return 0;
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, r->out->data, r->out->len);
    while (rpc_iter_next(&it, &f) > 0)
        if (f.tag == RPC_T_DATA)
            return f.len;
    return 0;
}

/* Whether r may have changed a directory's mode, group or default ACL
 * (brick_dir_shape). Asked whether it failed or not: a failure may come
 * after part of the change. */
static int may_reshape_dirs(const struct brick_req *r)
{
    if (r->opcode == RPC_OP_SETATTR)
        return rpc_has(r->in, RPC_T_VALID) &&
               (r->in->valid & (RPC_SET_MODE | RPC_SET_UID | RPC_SET_GID));
    return rpc_op_is(r->opcode, RPC_OPF_RESHAPE);
}

static int exec_one(struct brick_req *r)
{
    if (r->opcode >= RPC_OP_MAX || !op_table[r->opcode])
        return -ENOSYS;
    uint64_t t0 = brick_stats_now();
    /* Replica state is recorded in the same execution as the change. */
    brick_lease_pre(r);
    /* A brick below storage.reserve refuses before anything is marked. */
    int rc = brick_space_check(r);
    /* Quota refuses before anything is marked as well, and counts what
     * the request changed once it ran (quota.c). */
    struct brick_qop qop;
    qop.held = 0;
    qop.fh = NULL;
    if (rc == 0)
        rc = brick_quota_pre(r, &qop);
    if (rc == 0)
        rc = brick_version_pre(r);
    if (rc == 0)
        rc = op_table[r->opcode](r);
    brick_quota_post(r, &qop, rc);
    if (rc >= 0 && rc != BRICK_DEFERRED)
        brick_version_post(r);
    /* Marks made a copy newly accused: every client stops reading it
     * before this is answered. */
    brick_accused_publish(r);
    /* An absent extended attribute asked with a lease is answered as a
     * reply with ERRNO, so that it carries the lease the client caches the
     * absence under (docs/consistency.md). */
    if (rc == -ENODATA && r->opcode == RPC_OP_GETXATTR && r->lease_ok) {
        rpc_buf_reset(r->out);
        rpc_put_u64(r->out, RPC_T_ERRNO, ENODATA);
        rc = 0;
    }
    if (may_reshape_dirs(r))
        brick_dir_shape_changed(r->b);
    brick_lease_post(r, rc);
    brick_stats_note(r->opcode, brick_stats_now() - t0, moved_bytes(r, rc), rc);
    if (rc < 0 && rc != -ENOENT)
        log_debug("%s from %s failed: %s%s%s", rpc_op_name(r->opcode), r->bc->peer, strerror(-rc),
                  r->text[0] ? ": " : "", r->text);
    return rc;
}

/* Runs the SUB fields in order; the reply has one SUB (ERRNO and that
 * operation's reply fields) per sub-request run, up to the first failure. */
static int exec_compound(struct brick_req *r)
{
    struct rpc_iter it;
    struct rpc_field f;
    struct rpc_buf sub_out;
    int rc;
    rpc_buf_init(&sub_out);
    rpc_iter_init(&it, r->in->body, r->in->body_len);
    while ((rc = rpc_iter_next(&it, &f)) > 0) {
        if (f.tag != RPC_T_SUB)
            continue;
        struct rpc_msg m;
        const char *why = NULL;
        int st;
        rpc_buf_reset(&sub_out);
        struct brick_req s = {.b = r->b,
                              .bc = r->bc,
                              .reqid = r->reqid,
                              .in_compound = 1,
                              .in = &m,
                              .out = &sub_out,
                              .top = r};
        if (rpc_msg_decode(f.val, f.len, &m, &why) < 0) {
            snprintf(r->text, sizeof(r->text), "bad sub-request: %s", why ? why : "?");
            st = -EPROTO;
        } else if (!rpc_has(&m, RPC_T_OP) || m.op >= RPC_OP_MAX || m.op == RPC_OP_COMPOUND ||
                   m.op == RPC_OP_HANDSHAKE) {
            st = rpc_has(&m, RPC_T_OP) && m.op < RPC_OP_MAX ? -EINVAL : -ENOSYS;
        } else {
            s.opcode = (uint16_t)m.op;
            st = exec_one(&s);
        }
        size_t mark = rpc_put_begin(r->out, RPC_T_SUB);
        rpc_put_u64(r->out, RPC_T_ERRNO, (uint64_t)(st < 0 ? -st : 0));
        if (st == 0)
            rpc_buf_put(r->out, sub_out.data, sub_out.len);
        else if (s.text[0])
            rpc_put_str(r->out, RPC_T_TEXT, s.text);
        rpc_put_end(r->out, mark);
        if (st < 0)
            break;
    }
    rpc_buf_free(&sub_out);
    if (r->out->err)
        return r->out->err;
    return rc < 0 ? -EPROTO : 0;
}

int brick_exec(struct brick_req *r)
{
    r->text[0] = 0;
    struct brick_running run;
    if (brick_conn_enter(r->bc, &run, r->opcode) < 0)
        return -ENOTCONN; /* its client is gone: see brick_conn_shutdown */
    int rc;
    if (r->opcode == RPC_OP_COMPOUND) {
        brick_stats_note(RPC_OP_COMPOUND, 0, 0, 0);
        rc = exec_compound(r);
    } else {
        rc = exec_one(r);
        if (rc == 0 && r->out->err)
            rc = r->out->err;
    }
    rc = brick_lease_defer(r, rc);
    brick_conn_leave(r->bc, &run);
    return rc;
}

void (*brick_local_reply_cb)(struct brick_conn *bc, uint64_t reqid, int status,
                             const struct rpc_buf *body);

void brick_send_reply(struct brick_conn *bc, uint16_t opcode, uint64_t reqid, int status,
                      const struct rpc_buf *body, const char *text)
{
    struct rpc_buf err;
    rpc_buf_init(&err);
    if (status < 0) {
        if (text && *text)
            rpc_put_str(&err, RPC_T_TEXT, text);
        body = &err;
    }
    if (bc->rc)
        rpc_conn_reply(bc->rc, reqid, opcode, status, body);
    else if (brick_local_reply_cb)
        brick_local_reply_cb(bc, reqid, status, body);
    rpc_buf_free(&err);
}
