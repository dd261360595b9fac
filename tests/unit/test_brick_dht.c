/* The brick's part of distribute: MKDIR with LAYOUT and MKNOD with LINKTO
 * store the xattr on the new object before answering, and a value the brick
 * cannot store leaves no object behind. */
#include <sys/xattr.h>

#include "test_brick_util.h"

static void test_layout_on_mkdir(struct tb *t)
{
    struct rpc_msg m = tb_msg("/d");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | 0755);
    const uint8_t lay[16] = {1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    rpc_set_bytes(&m, RPC_T_LAYOUT, &m.layout, lay, sizeof(lay));
    CHECK_EQ(tb_do(t, RPC_OP_MKDIR, &m), 0);
    uint8_t v[64];
    CHECK_EQ(getxattr(tb_path(t, "/d"), BRICK_XATTR_LAYOUT, v, sizeof(v)), (ssize_t)sizeof(lay));
    CHECK(!memcmp(v, lay, sizeof(lay)));
    /* without LAYOUT no xattr */
    m = tb_msg("/plain");
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | 0755);
    CHECK_EQ(tb_do(t, RPC_OP_MKDIR, &m), 0);
    CHECK_EQ(getxattr(tb_path(t, "/plain"), BRICK_XATTR_LAYOUT, v, sizeof(v)), -1);
    CHECK_EQ(errno, ENODATA);
    /* too big: refused, and the directory is gone again */
    static uint8_t big[5000];
    m = tb_msg("/big");
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | 0755);
    rpc_set_bytes(&m, RPC_T_LAYOUT, &m.layout, big, sizeof(big));
    CHECK_EQ(tb_do(t, RPC_OP_MKDIR, &m), -E2BIG);
    struct stat st;
    CHECK_EQ(lstat(tb_path(t, "/big"), &st), -1);
}

static void test_linkto_on_mknod(struct tb *t)
{
    struct rpc_msg m = tb_msg("/d/link");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | S_ISVTX);
    RPC_SET(&m, umask, RPC_T_UMASK, 0);
    rpc_set_bytes(&m, RPC_T_LINKTO, &m.linkto, "2", 1);
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_MKNOD, &m, &rep), 0);
    CHECK(rpc_has(&rep.m, RPC_T_ATTR));
    CHECK_EQ(rep.m.attr.mode, (uint64_t)(S_IFREG | S_ISVTX));
    CHECK_EQ(rep.m.attr.size, 0u);
    tb_free(&rep);
    char v[8];
    CHECK_EQ(getxattr(tb_path(t, "/d/link"), BRICK_XATTR_LINKTO, v, sizeof(v)), 1);
    CHECK_EQ(v[0], '2');
    /* clients read it back with GETXATTR like any xattr */
    m = tb_msg("/d/link");
    rpc_set_str(&m, RPC_T_NAME, &m.name, BRICK_XATTR_LINKTO);
    RPC_SET(&m, size, RPC_T_SIZE, 16);
    CHECK_EQ(tb_call(t, RPC_OP_GETXATTR, &m, &rep), 0);
    CHECK(rep.m.data.len == 1 && rep.m.data.p[0] == '2');
    tb_free(&rep);
}

int main(void)
{
    log_init("test", LOG_WARN);
    struct tb t;
    if (tb_open(&t, NULL) < 0) {
        fprintf(stderr, "cannot open a test brick\n");
        return 1;
    }
    test_layout_on_mkdir(&t);
    test_linkto_on_mknod(&t);
    tb_close(&t, 1);
    return check_summary("test_brick_dht");
}
