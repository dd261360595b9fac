/* CREATE's reply carries the attributes the new file has after every change
 * the brick made to it (id, owner, set-id bits), without asking the disk
 * again: they must equal what a LOOKUP then reports. */
#include "test_brick_util.h"

static void create_as(struct tb *t, const char *path, unsigned mode, uint64_t uid, uint64_t gid)
{
    struct rpc_msg m = tb_msg(path);
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | mode);
    RPC_SET(&m, umask, RPC_T_UMASK, 022);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    RPC_SET(&m, uid, RPC_T_UID, uid);
    RPC_SET(&m, gid, RPC_T_GID, gid);
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_CREATE, &m, &rep), 0);
    struct rpc_attr made = rep.m.attr, seen;
    uint64_t fh = rep.m.fh;
    CHECK(rpc_has(&rep.m, RPC_T_ATTR));
    tb_free(&rep);
    CHECK_EQ(tb_lookup(t, path, &seen), 0);
    CHECK(!memcmp(made.gfid.b, g.b, GFID_LEN));
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK_EQ(made.nlink, seen.nlink);
    CHECK_EQ(made.mode, seen.mode);
    CHECK_EQ(made.mode & 07777, mode & ~022u);
    CHECK_EQ(made.uid, uid);
    CHECK_EQ(made.gid, gid);
    CHECK_EQ(made.uid, seen.uid);
    CHECK_EQ(made.gid, seen.gid);
    CHECK_EQ(made.size, seen.size);
    CHECK_EQ(made.ctime, seen.ctime);
    CHECK_EQ(made.ctime_ns, seen.ctime_ns);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASE, fh), 0);
}

int main(void)
{
    struct tb t;
    log_init("test_brick_create", LOG_WARN);
    CHECK_EQ(tb_open(&t, NULL), 0);
    CHECK_EQ(tb_mkdir(&t, "/d", 0777), 0);
    create_as(&t, "/d/root", 0644, 0, 0);
    create_as(&t, "/d/user", 0640, 1234, 5678);
    create_as(&t, "/d/setid", 06755, 1234, 5678); /* chown drops them; they come back */
    tb_close(&t, 1);
    return check_summary("test_brick_create");
}
