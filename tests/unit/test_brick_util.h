/* Helpers shared by the brick unit tests: a brick in a temporary directory
 * and calls into it through brick_exec, the function the server's workers
 * run, with messages encoded and decoded as on the wire. */
#ifndef CAIRN_TEST_BRICK_UTIL_H
#define CAIRN_TEST_BRICK_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/brick/brick.h"
#include "../../src/lib/log.h"
#include "check.h"

struct tb {
    struct brick *b;
    struct brick_conn *bc;
    char dir[256];
};

struct tb_reply {
    int status;
    struct rpc_buf buf;
    struct rpc_msg m;
};

static inline int tb_open_at(struct tb *t, const char *dir, const char *volume,
                             const struct brick_vfs *vfs)
{
    char err[512];
    int rc = brick_open(&t->b, dir, volume, "brick-test-id", vfs, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "brick_open %s: %s\n", dir, err);
        return rc;
    }
    t->bc = brick_conn_new(t->b, NULL, "test");
    t->bc->handshaken = 1;
    /* no spares made ahead unless a test asks (they would change the
     * counts tests check) */
    brick_set_option(t->b, "storage.spare-inodes", "0");
    return 0;
}

static inline int tb_open(struct tb *t, const struct brick_vfs *vfs)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/cairn-brick-test-XXXXXX");
    if (!mkdtemp(t->dir))
        return -errno;
    return tb_open_at(t, t->dir, "testvol", vfs);
}

static inline void tb_close(struct tb *t, int remove)
{
    brick_conn_shutdown(t->bc);
    brick_conn_put(t->bc);
    brick_close(t->b);
    if (remove) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", t->dir);
    }
}

/* Runs op with args on the test connection; the reply's fields are decoded
 * into rep->m. Returns the status. */
static inline int tb_call_on(struct tb *t, struct brick_conn *bc, uint16_t op,
                             const struct rpc_msg *args, struct tb_reply *rep)
{
    struct rpc_buf in;
    struct rpc_msg m;
    rpc_buf_init(&in);
    rpc_msg_encode(args, &in);
    if (rpc_msg_decode(in.data, in.len, &m, NULL) < 0) {
        rpc_buf_free(&in);
        return -EPROTO;
    }
    rpc_buf_init(&rep->buf);
    struct brick_req r = {
        .b = t->b, .bc = bc, .opcode = op, .reqid = 1, .in = &m, .out = &rep->buf};
    rep->status = brick_exec(&r);
    if (rep->status < 0)
        rpc_buf_reset(&rep->buf);
    memset(&rep->m, 0, sizeof(rep->m));
    if (rpc_msg_decode(rep->buf.data, rep->buf.len, &rep->m, NULL) < 0)
        rep->status = -EPROTO;
    rpc_buf_free(&in);
    return rep->status;
}

static inline int tb_call(struct tb *t, uint16_t op, const struct rpc_msg *args,
                          struct tb_reply *rep)
{
    return tb_call_on(t, t->bc, op, args, rep);
}

static inline void tb_free(struct tb_reply *rep)
{
    rpc_buf_free(&rep->buf);
}

/* Fire-and-forget form: the status only. */
static inline int tb_do(struct tb *t, uint16_t op, const struct rpc_msg *args)
{
    struct tb_reply rep;
    int rc = tb_call(t, op, args, &rep);
    tb_free(&rep);
    return rc;
}

static inline struct rpc_msg tb_msg(const char *path)
{
    struct rpc_msg m;
    memset(&m, 0, sizeof(m));
    if (path)
        rpc_set_str(&m, RPC_T_PATH, &m.path, path);
    return m;
}

/* op on a path with no other field */
static inline int tb_dop(struct tb *t, uint16_t op, const char *path)
{
    struct rpc_msg m = tb_msg(path);
    return tb_do(t, op, &m);
}

static inline void tb_set_gfid(struct rpc_msg *m, const gfid_t *g)
{
    m->gfid = *g;
    m->present |= 1ull << RPC_T_GFID;
}

/* CREATE path with mode; returns status, *fh and *g (the gfid made). */
static inline int tb_create(struct tb *t, const char *path, unsigned mode, uint64_t *fh, gfid_t *g)
{
    struct rpc_msg m = tb_msg(path);
    gfid_t gg;
    gfid_generate(&gg);
    if (g)
        *g = gg;
    tb_set_gfid(&m, &gg);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | mode);
    RPC_SET(&m, umask, RPC_T_UMASK, 0);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    RPC_SET(&m, uid, RPC_T_UID, 0);
    RPC_SET(&m, gid, RPC_T_GID, 0);
    struct tb_reply rep;
    int rc = tb_call(t, RPC_OP_CREATE, &m, &rep);
    if (rc == 0 && fh)
        *fh = rep.m.fh;
    tb_free(&rep);
    return rc;
}

static inline int tb_mkdir(struct tb *t, const char *path, unsigned mode)
{
    struct rpc_msg m = tb_msg(path);
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | mode);
    RPC_SET(&m, umask, RPC_T_UMASK, 0);
    return tb_do(t, RPC_OP_MKDIR, &m);
}

static inline int tb_lookup(struct tb *t, const char *path, struct rpc_attr *a)
{
    struct rpc_msg m = tb_msg(path);
    struct tb_reply rep;
    int rc = tb_call(t, RPC_OP_LOOKUP, &m, &rep);
    if (rc == 0 && a)
        *a = rep.m.attr;
    tb_free(&rep);
    return rc;
}

static inline int tb_fh_op(struct tb *t, uint16_t op, uint64_t fh)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    return tb_do(t, op, &m);
}

static inline int tb_write(struct tb *t, uint64_t fh, uint64_t off, const void *p, size_t len)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, off);
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, p, len);
    struct tb_reply rep;
    int rc = tb_call(t, RPC_OP_WRITE, &m, &rep);
    if (rc == 0)
        rc = (int)rep.m.size;
    tb_free(&rep);
    return rc;
}

/* Reads into buf; returns the byte count or -errno. */
static inline int tb_read(struct tb *t, uint64_t fh, uint64_t off, void *buf, size_t len)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, off);
    RPC_SET(&m, size, RPC_T_SIZE, len);
    struct tb_reply rep;
    int rc = tb_call(t, RPC_OP_READ, &m, &rep);
    if (rc == 0) {
        rc = (int)rep.m.data.len;
        if ((size_t)rc > len)
            rc = -EOVERFLOW;
        else
            memcpy(buf, rep.m.data.p, (size_t)rc);
    }
    tb_free(&rep);
    return rc;
}

/* A path inside the brick directory, for checks behind the brick's back. */
static inline const char *tb_path(struct tb *t, const char *rel)
{
    static __thread char p[4][PATH_MAX];
    static __thread int i;
    char *out = p[i++ & 3];
    snprintf(out, PATH_MAX, "%s%s", t->dir, rel);
    return out;
}

#endif
