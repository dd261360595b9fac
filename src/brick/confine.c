/* Connections confined to a directory of the volume (a mount of
 * HOST:/VOLUME/DIR): the handshake names the directory, and from then on
 * every path of that connection's requests is taken as relative to it.
 *
 * The brick, not the client, keeps a confined connection inside: each
 * request's PATH and PATH2 (also inside a COMPOUND's sub-requests) is
 * checked as any path is (no "..", no ".", no empty component) and then
 * prefixed with the directory before anything reads it (leases, marks,
 * the operation), so the rest of the brick sees real paths only. Those
 * are resolved beneath the brick root without following symbolic links
 * (resolve.c), so no name the client can send reaches above the
 * directory; handles (FH) are the connection's own, opened through such
 * paths. What the brick sends back with a path in it is translated the
 * other way: lease recalls (lease.c), heal index lines (version.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/log.h"
#include "brick.h"

int brick_confine_open(struct brick *b, const struct rpc_bytes *dir, char **out, char *why,
                       size_t whylen)
{
    *out = NULL;
    int rc = brick_path_check(dir->p, dir->len);
    if (rc < 0) {
        snprintf(why, whylen, "'%.*s' is not a directory path of the volume", (int)dir->len,
                 (const char *)dir->p);
        return rc == -ENAMETOOLONG ? rc : -EINVAL;
    }
    if (dir->len == 1)
        return 0; /* "/": the whole volume */
    struct brick_loc loc;
    struct stat st;
    rc = brick_resolve(b, dir, BRICK_LOC_EXISTING, &loc);
    if (rc == 0) {
        rc = b->vfs->fstatat(loc.dirfd, loc.name, &st);
        brick_loc_release(b, &loc);
    }
    if (rc == 0 && !S_ISDIR(st.st_mode))
        rc = -ENOTDIR;
    if (rc < 0) {
        snprintf(why, whylen, "directory %.*s of volume %s %s on brick %s", (int)dir->len,
                 (const char *)dir->p, b->volume,
                 rc == -ENOENT    ? "does not exist"
                 : rc == -ENOTDIR ? "is not a directory"
                 : rc == -ELOOP   ? "has a symbolic link on its way"
                                  : strerror(-rc),
                 b->path);
        return rc == -ELOOP ? -ENOENT : rc;
    }
    char *s = malloc((size_t)dir->len + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s, dir->p, dir->len);
    s[dir->len] = 0;
    *out = s;
    return 0;
}

/* Opcodes that remove or move their PATH (RENAME and LINK: PATH2 too):
 * the confined root must stay where its mount is. */
static int moves_path(uint64_t op)
{
    return op == RPC_OP_UNLINK || op == RPC_OP_RMDIR || op == RPC_OP_RENAME || op == RPC_OP_LINK;
}

static int rewrite(const char *dir, size_t dl, const uint8_t *in, size_t len, uint64_t op,
                   struct rpc_buf *out, int depth);

/* One PATH or PATH2: dir + path ("/" is dir itself). */
static int put_path(const char *dir, size_t dl, const struct rpc_field *f, uint64_t op,
                    struct rpc_buf *out)
{
    int rc = brick_path_check(f->val, f->len);
    if (rc < 0)
        return rc;
    if (f->len == 1) {
        if (moves_path(op))
            return -EBUSY; /* the root of a mount, as rmdir(2) of one */
        rpc_put_bytes(out, f->tag, dir, dl);
        return 0;
    }
    if (dl + f->len >= RPC_PATH_MAX)
        return -ENAMETOOLONG;
    char buf[RPC_PATH_MAX];
    memcpy(buf, dir, dl);
    memcpy(buf + dl, f->val, f->len);
    rpc_put_bytes(out, f->tag, buf, dl + f->len);
    return 0;
}

/* A compound's sub-request: its own OP decides what its paths may do. */
static int put_sub(const char *dir, size_t dl, const struct rpc_field *f, struct rpc_buf *out,
                   int depth)
{
    struct rpc_msg m;
    if (depth > 0 || rpc_msg_decode(f->val, f->len, &m, NULL) < 0)
        return -EPROTO; /* exec_compound would refuse it too */
    size_t mark = rpc_put_begin(out, RPC_T_SUB);
    int rc = rewrite(dir, dl, f->val, f->len, rpc_has(&m, RPC_T_OP) ? m.op : 0, out, depth + 1);
    rpc_put_end(out, mark);
    return rc;
}

static int rewrite(const char *dir, size_t dl, const uint8_t *in, size_t len, uint64_t op,
                   struct rpc_buf *out, int depth)
{
    struct rpc_iter it;
    struct rpc_field f;
    int rc;
    rpc_iter_init(&it, in, len);
    while ((rc = rpc_iter_next(&it, &f)) > 0) {
        if (f.tag == RPC_T_PATH || f.tag == RPC_T_PATH2)
            rc = put_path(dir, dl, &f, op, out);
        else if (f.tag == RPC_T_SUB)
            rc = put_sub(dir, dl, &f, out, depth);
        else
            rpc_put_bytes(out, f.tag, f.val, f.len);
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        return -EPROTO;
    return out->err;
}

int brick_confine_frame(const char *dir, struct rpc_frame *f)
{
    if (!rpc_has(&f->msg, RPC_T_PATH) && !rpc_has(&f->msg, RPC_T_PATH2) && !f->msg.n_sub)
        return 0; /* by handle, or nothing to resolve */
    struct rpc_buf out;
    rpc_buf_init(&out);
    int rc = rewrite(dir, strlen(dir), f->body, f->hdr.body_len, f->hdr.opcode, &out, 0);
    struct rpc_msg m;
    if (rc == 0 && rpc_msg_decode(out.data, out.len, &m, NULL) < 0)
        rc = -EPROTO;
    if (rc < 0) {
        rpc_buf_free(&out);
        return rc;
    }
    free(f->body);
    f->body = out.data; /* the frame owns the buffer now */
    f->hdr.body_len = (uint32_t)out.len;
    f->msg = m;
    return 0;
}

int brick_confine_inside(const struct brick_conn *bc, const char *p, size_t len)
{
    if (!bc->subdir)
        return 1;
    size_t dl = strlen(bc->subdir);
    return len >= dl && !memcmp(p, bc->subdir, dl) && (len == dl || p[dl] == '/');
}

const char *brick_confine_out(const struct brick_conn *bc, const char *p)
{
    if (!bc->subdir)
        return p;
    if (!brick_confine_inside(bc, p, strlen(p)))
        return NULL;
    const char *rest = p + strlen(bc->subdir);
    return *rest ? rest : "/";
}
