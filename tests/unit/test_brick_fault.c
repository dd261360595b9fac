/* Failures injected through the storage interface: a full disk or an I/O
 * error in the middle of an operation gives a clean error and leaves no
 * partial state (no half-created object, no file without its id), and short
 * writes are completed. */
#include <sys/xattr.h>

#include "../../src/lib/net.h"
#include "test_brick_util.h"

static int exists(struct tb *t, const char *rel)
{
    struct stat st;
    return lstat(tb_path(t, rel), &st) == 0;
}

static void test_create_failures(struct tb *t)
{
    uint64_t fh;
    /* the id cannot be stored: the new file is removed again */
    brick_fault_arm(BVFS_SETXATTR, ENOSPC, 0, 0);
    CHECK_EQ(tb_create(t, "/c1", 0644, &fh, NULL), -ENOSPC);
    CHECK(!exists(t, "/c1"));
    brick_fault_arm(BVFS_SETXATTR, ENOSPC, 0, 0);
    CHECK_EQ(tb_mkdir(t, "/d1", 0755), -ENOSPC);
    CHECK(!exists(t, "/d1"));
    brick_fault_arm(BVFS_SETXATTR, EIO, 0, 0);
    struct rpc_msg m = tb_msg("/s1");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    rpc_set_str(&m, RPC_T_NAME, &m.name, "target");
    CHECK_EQ(tb_do(t, RPC_OP_SYMLINK, &m), -EIO);
    CHECK(!exists(t, "/s1"));
    brick_fault_arm(BVFS_SETXATTR, ENOSPC, 0, 0);
    m = tb_msg("/n1");
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFIFO | 0644);
    CHECK_EQ(tb_do(t, RPC_OP_MKNOD, &m), -ENOSPC);
    CHECK(!exists(t, "/n1"));
    /* the owner cannot be set: same */
    brick_fault_arm(BVFS_FCHOWN, EIO, 0, 0);
    m = tb_msg("/c2");
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | 0644);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    RPC_SET(&m, uid, RPC_T_UID, 1000);
    RPC_SET(&m, gid, RPC_T_GID, 1000);
    CHECK_EQ(tb_do(t, RPC_OP_CREATE, &m), -EIO);
    CHECK(!exists(t, "/c2"));
    brick_fault_arm(BVFS_FCHOWNAT, EIO, 0, 0);
    m = tb_msg("/d2");
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | 0755);
    RPC_SET(&m, uid, RPC_T_UID, 1000);
    CHECK_EQ(tb_do(t, RPC_OP_MKDIR, &m), -EIO);
    CHECK(!exists(t, "/d2"));
    /* the create itself fails */
    brick_fault_arm(BVFS_OPENAT, ENOSPC, 0, 0);
    CHECK_EQ(tb_create(t, "/c3", 0644, &fh, NULL), -ENOSPC);
    CHECK(!exists(t, "/c3"));
    brick_fault_arm(BVFS_MKDIRAT, EDQUOT, 0, 0);
    CHECK_EQ(tb_mkdir(t, "/d3", 0755), -EDQUOT);
    CHECK(!exists(t, "/d3"));
    CHECK(brick_fault_reset() >= 8);
    /* and afterwards everything works again */
    CHECK_EQ(tb_create(t, "/c1", 0644, &fh, NULL), 0);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASE, fh), 0);
    CHECK_EQ(tb_mkdir(t, "/d1", 0755), 0);
}

static void test_write_failures(struct tb *t)
{
    uint64_t fh;
    char buf[64];
    struct rpc_msg m0;
    CHECK_EQ(tb_create(t, "/w", 0644, &fh, NULL), 0);
    CHECK_EQ(tb_write(t, fh, 0, "original", 8), 8);
    /* ENOSPC: error, file unchanged */
    brick_fault_arm(BVFS_PWRITE, ENOSPC, 0, 0);
    CHECK_EQ(tb_write(t, fh, 0, "REPLACED-AND-LONGER", 19), -ENOSPC);
    CHECK_EQ(tb_read(t, fh, 0, buf, sizeof(buf)), 8);
    CHECK(!memcmp(buf, "original", 8));
    struct stat st;
    CHECK_EQ(stat(tb_path(t, "/w"), &st), 0);
    CHECK_EQ(st.st_size, 8);
    /* short writes are completed by the brick */
    brick_fault_short_write(3);
    CHECK_EQ(tb_write(t, fh, 8, "0123456789", 10), 10);
    brick_fault_short_write(0);
    CHECK_EQ(tb_read(t, fh, 0, buf, sizeof(buf)), 18);
    CHECK(!memcmp(buf, "original0123456789", 18));
    /* a failure after a partial write reports what was written */
    brick_fault_short_write(4);
    brick_fault_arm(BVFS_PWRITE, EIO, 1, 0);
    CHECK_EQ(tb_write(t, fh, 18, "abcdefgh", 8), 4);
    brick_fault_reset();
    /* several extents: the one that fails fails the write; those before it
     * stay written, those after it are not tried */
    uint8_t l[3 * RPC_EXTENT_LEN];
    rpc_extent_put(l, 0, 0, 2);
    rpc_extent_put(l, 1, 4, 2);
    rpc_extent_put(l, 2, 8, 2);
    m0 = tb_msg(NULL);
    RPC_SET(&m0, fh, RPC_T_FH, fh);
    rpc_set_bytes(&m0, RPC_T_EXTENTS, &m0.extents, l, sizeof(l));
    rpc_set_bytes(&m0, RPC_T_DATA, &m0.data, "AABBCC", 6);
    brick_fault_arm(BVFS_PWRITE, ENOSPC, 1, 0);
    CHECK_EQ(tb_do(t, RPC_OP_WRITE, &m0), -ENOSPC);
    CHECK_EQ(tb_read(t, fh, 0, buf, 10), 10);
    CHECK(!memcmp(buf, "AAiginal01", 10));
    /* a piece that stays short fails it with ENOSPC */
    brick_fault_short_write(1);
    brick_fault_arm(BVFS_PWRITE, EIO, 1, 0);
    CHECK_EQ(tb_do(t, RPC_OP_WRITE, &m0), -ENOSPC);
    brick_fault_reset();
    CHECK_EQ(tb_read(t, fh, 0, buf, 10), 10);
    CHECK(!memcmp(buf, "AAiginal01", 10));
    CHECK_EQ(tb_write(t, fh, 0, "original", 8), 8);
    /* read, fsync and truncate errors come back as they are */
    brick_fault_arm(BVFS_PREAD, EIO, 0, 0);
    CHECK_EQ(tb_read(t, fh, 0, buf, sizeof(buf)), -EIO);
    brick_fault_arm(BVFS_FSYNC, EIO, 0, 0);
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    CHECK_EQ(tb_do(t, RPC_OP_FSYNC, &m), -EIO);
    brick_fault_arm(BVFS_FTRUNCATE, ENOSPC, 0, 0);
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_SIZE);
    RPC_SET(&m, size, RPC_T_SIZE, 1 << 20);
    CHECK_EQ(tb_do(t, RPC_OP_SETATTR, &m), -ENOSPC);
    CHECK_EQ(stat(tb_path(t, "/w"), &st), 0);
    CHECK_EQ(st.st_size, 22);
    brick_fault_arm(BVFS_GETDENTS, EIO, 0, 0);
    m = tb_msg("/");
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_OPENDIR, &m, &rep), 0);
    uint64_t dfh = rep.m.fh;
    tb_free(&rep);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, dfh);
    RPC_SET(&m, size, RPC_T_SIZE, 4096);
    CHECK_EQ(tb_do(t, RPC_OP_READDIR, &m), -EIO);
    CHECK_EQ(tb_do(t, RPC_OP_READDIR, &m), 0); /* the fault was one-shot */
    tb_fh_op(t, RPC_OP_RELEASEDIR, dfh);
    /* a rename that fails leaves both names */
    brick_fault_arm(BVFS_RENAMEAT2, EIO, 0, 0);
    m = tb_msg("/w");
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, "/w2");
    CHECK_EQ(tb_do(t, RPC_OP_RENAME, &m), -EIO);
    CHECK(exists(t, "/w") && !exists(t, "/w2"));
    brick_fault_reset();
    tb_fh_op(t, RPC_OP_RELEASE, fh);
}

static void test_open_refused(void)
{
    /* a brick of another volume is refused, and its marker kept */
    struct tb t;
    CHECK_EQ(tb_open(&t, &brick_vfs_fault), 0);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", t.dir);
    tb_close(&t, 0);
    struct brick *b;
    char err[512];
    CHECK_EQ(brick_open(&b, dir, "othervol", NULL, NULL, err, sizeof(err)), -EEXIST);
    CHECK(strstr(err, "testvol") != NULL);
    /* reopening with the right volume keeps the id */
    CHECK_EQ(brick_open(&b, dir, "testvol", NULL, NULL, err, sizeof(err)), 0);
    CHECK_STR(b->id, "brick-test-id");
    brick_close(b);
    CHECK(brick_open(&b, "/nonexistent-cairn-brick", "v", NULL, NULL, err, sizeof(err)) < 0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
}

/* Faults by command (what a running cairn-brickd takes from its
 * .cairn/test-faults under CAIRN_TEST_FAULTS=1), and stalls. */
static void test_commands(struct tb *t)
{
    char err[256];
    uint64_t fh;
    CHECK_EQ(tb_create(t, "/cmd", 0644, &fh, NULL), 0);
    CHECK_EQ(brick_fault_command("fail pwrite ENOSPC", err, sizeof(err)), 0);
    CHECK_EQ(tb_write(t, fh, 0, "x", 1), -ENOSPC);
    CHECK_EQ(tb_write(t, fh, 0, "x", 1), 1); /* once */
    CHECK_EQ(brick_fault_command("fail fsync 5 1 sticky", err, sizeof(err)), 0);
    CHECK_EQ(tb_fh_op(t, RPC_OP_FSYNC, fh), 0); /* skipped */
    CHECK_EQ(tb_fh_op(t, RPC_OP_FSYNC, fh), -EIO);
    CHECK_EQ(tb_fh_op(t, RPC_OP_FSYNC, fh), -EIO);
    CHECK_EQ(brick_fault_command("reset", err, sizeof(err)), 0);
    CHECK_EQ(tb_fh_op(t, RPC_OP_FSYNC, fh), 0);
    /* a stall: the call waits, then runs */
    CHECK_EQ(brick_fault_command("stall fsync 200", err, sizeof(err)), 0);
    uint64_t t0 = net_now_ms();
    CHECK_EQ(tb_fh_op(t, RPC_OP_FSYNC, fh), 0);
    CHECK(net_now_ms() - t0 >= 200);
    CHECK_EQ(brick_fault_reset(), 1u); /* the stall; "reset" cleared the others */
    CHECK_EQ(brick_fault_command("  ", err, sizeof(err)), 0);
    const char *bad[] = {"stall",
                         "stall fsync",
                         "stall nosuchcall 10",
                         "stall fsync -1",
                         "fail pwrite EWHAT",
                         "fail pwrite 0",
                         "fail pwrite EIO x",
                         "fail pwrite EIO 0 always",
                         "reset now",
                         "explode fsync 1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        CHECK_EQ(brick_fault_command(bad[i], err, sizeof(err)), -EINVAL);
        CHECK(err[0] != 0);
    }
    CHECK_EQ(brick_fault_reset(), 0u);
    tb_fh_op(t, RPC_OP_RELEASE, fh);
}

int main(void)
{
    log_init("test", LOG_ERROR);
    struct tb t;
    if (tb_open(&t, &brick_vfs_fault) < 0)
        return 1;
    test_create_failures(&t);
    test_write_failures(&t);
    test_commands(&t);
    tb_close(&t, 1);
    test_open_refused();
    return check_summary("test_brick_fault");
}
