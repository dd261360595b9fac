/* CREATE's reply carries the attributes the new file has after every change
 * the brick made to it (id, owner, set-id bits), without asking the disk
 * again: they must equal what a LOOKUP then reports. */
#include <stdio.h>
#include <sys/xattr.h>

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

/* MAKE_FILE: a whole file in one request, or nothing at all. */
static void make_file(struct tb *t)
{
    struct rpc_msg m = tb_msg("/d/made");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | 0644);
    RPC_SET(&m, umask, RPC_T_UMASK, 022);
    RPC_SET(&m, uid, RPC_T_UID, 1234);
    RPC_SET(&m, gid, RPC_T_GID, 5678);
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, "hello", 5);
    RPC_SET(&m, size, RPC_T_SIZE, 8192);
    struct rpc_buf x;
    rpc_buf_init(&x);
    rpc_put_str(&x, RPC_T_NAME, "user.k");
    rpc_put_bytes(&x, RPC_T_DATA, "v", 1);
    rpc_set_bytes(&m, RPC_T_XATTRS, &m.xattrs, x.data, (uint32_t)x.len);
    m.mtime.sec = 1500000000;
    m.mtime.nsec = 7;
    m.present |= 1ull << RPC_T_MTIME;
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_MTIME | RPC_SET_MODE);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | 0600);
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_MAKE_FILE, &m, &rep), 0);
    struct rpc_attr made = rep.m.attr, seen;
    tb_free(&rep);
    CHECK_EQ(tb_lookup(t, "/d/made", &seen), 0);
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK_EQ(made.size, 8192);
    CHECK_EQ(seen.size, 8192);
    CHECK_EQ(seen.mode & 07777, 0600);
    CHECK_EQ(seen.uid, 1234);
    CHECK_EQ(seen.gid, 5678);
    CHECK_EQ(seen.mtime, 1500000000);
    CHECK_EQ(seen.mtime_ns, 7);
    char path[PATH_MAX], buf[16] = "";
    snprintf(path, sizeof(path), "%s/d/made", t->dir);
    CHECK_EQ(getxattr(path, "user.k", buf, sizeof(buf)), 1);
    FILE *fp = fopen(path, "rb");
    CHECK(fp && fread(buf, 1, 5, fp) == 5 && !memcmp(buf, "hello", 5));
    if (fp)
        fclose(fp);
    /* the name is taken */
    CHECK_EQ(tb_do(t, RPC_OP_MAKE_FILE, &m), -EEXIST);
    /* a refused attribute leaves nothing behind */
    rpc_buf_reset(&x);
    rpc_put_str(&x, RPC_T_NAME, "trusted.cairn.gfid");
    rpc_put_bytes(&x, RPC_T_DATA, "v", 1);
    struct rpc_msg bad = m;
    rpc_set_str(&bad, RPC_T_PATH, &bad.path, "/d/refused");
    gfid_generate(&bad.gfid);
    rpc_set_bytes(&bad, RPC_T_XATTRS, &bad.xattrs, x.data, (uint32_t)x.len);
    CHECK_EQ(tb_do(t, RPC_OP_MAKE_FILE, &bad), -EPERM);
    CHECK_EQ(tb_lookup(t, "/d/refused", &seen), -ENOENT);
    rpc_buf_free(&x);
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
    make_file(&t);
    tb_close(&t, 1);
    return check_summary("test_brick_create");
}
