/* A client connection that ends without releasing handles it changed files
 * through leaves those files marked RPC_PENDING_DIRTY (and in the heal
 * index); released handles and unchanged ones leave nothing. */
#include <sys/xattr.h>

#include "test_brick_util.h"

static uint32_t pending_of(struct tb *t, const char *rel)
{
    char p[512];
    uint8_t v[4];
    snprintf(p, sizeof(p), "%s%s", t->dir, rel);
    ssize_t n = lgetxattr(p, BRICK_XATTR_PENDING, v, sizeof(v));
    if (n != 4)
        return 0;
    return (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
}

static int index_has(struct tb *t, const gfid_t *g)
{
    char p[512], s[GFID_STRLEN];
    gfid_format(g, s);
    snprintf(p, sizeof(p), "%s/.cairn/index/%s", t->dir, s);
    return access(p, F_OK) == 0;
}

static int write_fh(struct tb *t, struct brick_conn *bc, uint64_t fh)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, 0);
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, "abc", 3);
    struct tb_reply rep;
    int rc = tb_call_on(t, bc, RPC_OP_WRITE, &m, &rep);
    tb_free(&rep);
    return rc;
}

int main(void)
{
    log_init("test", LOG_ERROR);
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    gfid_t gw, gr, gc, go;
    uint64_t fw, fr, fc, fo;
    /* written then released: clean */
    CHECK_EQ(tb_create(&t, "/released", 0644, &fr, &gr), 0);
    CHECK_EQ(write_fh(&t, t.bc, fr), 0);
    CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fr), 0);
    /* written, never released; created, never released; opened read-only */
    CHECK_EQ(tb_create(&t, "/written", 0644, &fw, &gw), 0);
    CHECK_EQ(write_fh(&t, t.bc, fw), 0);
    CHECK_EQ(tb_create(&t, "/created", 0644, &fc, &gc), 0);
    CHECK_EQ(tb_create(&t, "/other", 0644, &fo, &go), 0);
    CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fo), 0);
    struct rpc_msg m = tb_msg("/other");
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDONLY);
    struct tb_reply rep;
    CHECK_EQ(tb_call(&t, RPC_OP_OPEN, &m, &rep), 0);
    tb_free(&rep);
    CHECK_EQ(pending_of(&t, "/written"), 0); /* nothing before the connection ends */
    /* the client dies */
    brick_conn_shutdown(t.bc);
    CHECK_EQ(pending_of(&t, "/written"), RPC_PENDING_DIRTY);
    CHECK(index_has(&t, &gw));
    CHECK_EQ(pending_of(&t, "/created"), RPC_PENDING_DIRTY);
    CHECK(index_has(&t, &gc));
    CHECK_EQ(pending_of(&t, "/released"), 0);
    CHECK(!index_has(&t, &gr));
    CHECK_EQ(pending_of(&t, "/other"), 0);
    CHECK(!index_has(&t, &go));
    /* heal's UNMARK with the dirty bit clears it and the index entry */
    struct brick_conn *bc2 = brick_conn_new(t.b, NULL, "heal");
    bc2->handshaken = 1;
    m = tb_msg("/written");
    tb_set_gfid(&m, &gw);
    RPC_SET(&m, pending, RPC_T_PENDING, 0x7 | RPC_PENDING_DIRTY);
    CHECK_EQ(tb_call_on(&t, bc2, RPC_OP_UNMARK, &m, &rep), 0);
    tb_free(&rep);
    CHECK_EQ(pending_of(&t, "/written"), 0);
    CHECK(!index_has(&t, &gw));
    brick_conn_shutdown(bc2);
    brick_conn_put(bc2);
    tb_close(&t, 1);
    return check_summary("test_brick_dirty");
}
