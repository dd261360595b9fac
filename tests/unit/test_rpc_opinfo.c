/* The opcode table (src/rpc/opinfo.h): every opcode has its entry, and
 * each property holds exactly the opcodes listed here. The lists are the
 * ones the code kept in its own switches before the table; a change to a
 * property is a change of behaviour and belongs in this test too. */
#include <stdint.h>
#include <string.h>

#include "../../src/rpc/msg.h"
#include "../../src/rpc/opinfo.h"
#include "check.h"

#define END 0 /* ends a list; 0 is no opcode */

/* Every opcode of enum rpc_op, with the name logs print. */
static const struct {
    uint16_t op;
    const char *name;
} all[] = {
    {RPC_OP_HANDSHAKE, "HANDSHAKE"},
    {RPC_OP_PING, "PING"},
    {RPC_OP_COMPOUND, "COMPOUND"},
    {RPC_OP_LOOKUP, "LOOKUP"},
    {RPC_OP_GETATTR, "GETATTR"},
    {RPC_OP_SETATTR, "SETATTR"},
    {RPC_OP_MKNOD, "MKNOD"},
    {RPC_OP_MKDIR, "MKDIR"},
    {RPC_OP_SYMLINK, "SYMLINK"},
    {RPC_OP_LINK, "LINK"},
    {RPC_OP_UNLINK, "UNLINK"},
    {RPC_OP_RMDIR, "RMDIR"},
    {RPC_OP_RENAME, "RENAME"},
    {RPC_OP_READLINK, "READLINK"},
    {RPC_OP_OPEN, "OPEN"},
    {RPC_OP_CREATE, "CREATE"},
    {RPC_OP_READ, "READ"},
    {RPC_OP_WRITE, "WRITE"},
    {RPC_OP_FLUSH, "FLUSH"},
    {RPC_OP_RELEASE, "RELEASE"},
    {RPC_OP_FSYNC, "FSYNC"},
    {RPC_OP_FALLOCATE, "FALLOCATE"},
    {RPC_OP_LSEEK, "LSEEK"},
    {RPC_OP_OPENDIR, "OPENDIR"},
    {RPC_OP_READDIR, "READDIR"},
    {RPC_OP_RELEASEDIR, "RELEASEDIR"},
    {RPC_OP_STATFS, "STATFS"},
    {RPC_OP_SETXATTR, "SETXATTR"},
    {RPC_OP_GETXATTR, "GETXATTR"},
    {RPC_OP_LISTXATTR, "LISTXATTR"},
    {RPC_OP_REMOVEXATTR, "REMOVEXATTR"},
    {RPC_OP_GETLK, "GETLK"},
    {RPC_OP_SETLK, "SETLK"},
    {RPC_OP_FLOCK, "FLOCK"},
    {RPC_OP_MARK, "MARK"},
    {RPC_OP_INDEX, "INDEX"},
    {RPC_OP_UNMARK, "UNMARK"},
    {RPC_OP_CHECKSUM, "CHECKSUM"},
    {RPC_OP_LEASE_RECALL, "LEASE_RECALL"},
    {RPC_OP_LEASE_RETURN, "LEASE_RETURN"},
    {RPC_OP_MAKE_FILE, "MAKE_FILE"},
    {RPC_OP_ACCUSED, "ACCUSED"},
    {RPC_OP_ACCUSED_SEEN, "ACCUSED_SEEN"},
    {RPC_OP_QUOTA, "QUOTA"},
    {RPC_OP_QUOTA_OTHERS, "QUOTA_OTHERS"},
    {RPC_OP_STATS, "STATS"},
    {RPC_OP_TOP, "TOP"},
    {RPC_OP_MGMT_CLI, "MGMT_CLI"},
    {RPC_OP_MGMT_GETVOL, "MGMT_GETVOL"},
    {RPC_OP_MGMT_RECONF, "MGMT_RECONF"},
    {RPC_OP_MGMT_CLIENT_STATS, "MGMT_CLIENT_STATS"},
    {RPC_OP_MGMT_POOL_HELLO, "MGMT_POOL_HELLO"},
    {RPC_OP_MGMT_POOL_PROVE, "MGMT_POOL_PROVE"},
};
#define N_ALL (sizeof(all) / sizeof(all[0]))

static int in_enum(uint64_t op)
{
    for (size_t i = 0; i < N_ALL; i++)
        if (all[i].op == op)
            return 1;
    return 0;
}

/* Every known opcode has a name and an entry; no other value has either. */
static void test_names(void)
{
    for (size_t i = 0; i < N_ALL; i++) {
        CHECK(rpc_opinfo(all[i].op) != NULL);
        CHECK_STR(rpc_op_name(all[i].op), all[i].name);
    }
    int strays = 0;
    for (uint32_t op = 0; op <= UINT16_MAX; op++)
        if (!in_enum(op) && (rpc_opinfo(op) || strcmp(rpc_op_name(op), "UNKNOWN") != 0))
            strays++;
    CHECK_EQ(strays, 0);
    static const uint64_t big[] = {RPC_OP_MAX, 1ull << 16, (1ull << 32) + RPC_OP_WRITE, UINT64_MAX};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        CHECK(rpc_opinfo(big[i]) == NULL);
        CHECK(!rpc_op_is(big[i], UINT32_MAX));
        CHECK_STR(rpc_op_name(big[i]), "UNKNOWN");
    }
}

/* Property flag holds exactly the opcodes of want (ended by END), over
 * every 16-bit value. */
static void expect_set(const char *what, uint32_t flag, const uint16_t *want)
{
    int wrong = 0;
    for (uint32_t op = 0; op <= UINT16_MAX; op++) {
        int listed = 0;
        for (const uint16_t *w = want; *w != END; w++)
            listed |= *w == op;
        if (listed != rpc_op_is(op, flag)) {
            wrong++;
            fprintf(stderr, "%s: %s (%u) is %s\n", what, rpc_op_name(op), op,
                    listed ? "missing" : "extra");
        }
    }
    CHECK_EQ(wrong, 0);
}

static void test_sets(void)
{
    /* the old msg.c rpc_op_changes */
    expect_set("CHANGE", RPC_OPF_CHANGE,
               (const uint16_t[]){RPC_OP_SETATTR, RPC_OP_SETXATTR, RPC_OP_REMOVEXATTR, RPC_OP_WRITE,
                                  RPC_OP_FALLOCATE, RPC_OP_CREATE, RPC_OP_MAKE_FILE, RPC_OP_MKDIR,
                                  RPC_OP_MKNOD, RPC_OP_SYMLINK, RPC_OP_LINK, RPC_OP_UNLINK,
                                  RPC_OP_RMDIR, RPC_OP_RENAME, END});
    /* the old fuse/fop.c changes(), its "no" cases */
    expect_set("READONLY", RPC_OPF_READONLY,
               (const uint16_t[]){RPC_OP_LOOKUP, RPC_OP_GETATTR, RPC_OP_READLINK, RPC_OP_READ,
                                  RPC_OP_FLUSH, RPC_OP_RELEASE, RPC_OP_FSYNC, RPC_OP_LSEEK,
                                  RPC_OP_OPENDIR, RPC_OP_READDIR, RPC_OP_RELEASEDIR, RPC_OP_STATFS,
                                  RPC_OP_GETXATTR, RPC_OP_LISTXATTR, RPC_OP_GETLK, RPC_OP_SETLK,
                                  RPC_OP_FLOCK, END});
    /* the old replicate.c is_data */
    expect_set("DATA", RPC_OPF_DATA, (const uint16_t[]){RPC_OP_WRITE, RPC_OP_FALLOCATE, END});
    /* the old distribute.c is_dir_change */
    expect_set("META", RPC_OPF_META,
               (const uint16_t[]){RPC_OP_SETATTR, RPC_OP_SETXATTR, RPC_OP_REMOVEXATTR, END});
    /* the old distribute.c makes_name */
    expect_set("MAKES", RPC_OPF_MAKES,
               (const uint16_t[]){RPC_OP_CREATE, RPC_OP_MKNOD, RPC_OP_SYMLINK, RPC_OP_MAKE_FILE,
                                  RPC_OP_MKDIR, END});
    expect_set("PATH2", RPC_OPF_PATH2, (const uint16_t[]){RPC_OP_LINK, RPC_OP_RENAME, END});
    /* the old brick/lease.c grantable and asks_parent */
    expect_set("LEASE", RPC_OPF_LEASE,
               (const uint16_t[]){RPC_OP_LOOKUP, RPC_OP_GETATTR, RPC_OP_GETXATTR, RPC_OP_SETATTR,
                                  RPC_OP_CREATE, RPC_OP_MAKE_FILE, RPC_OP_MKDIR, RPC_OP_MKNOD,
                                  RPC_OP_SYMLINK, RPC_OP_LINK, RPC_OP_UNLINK, RPC_OP_RMDIR,
                                  RPC_OP_READDIR, END});
    expect_set("LEASE_PARENT", RPC_OPF_LEASE_PARENT,
               (const uint16_t[]){RPC_OP_LOOKUP, RPC_OP_CREATE, RPC_OP_MAKE_FILE, RPC_OP_MKDIR,
                                  RPC_OP_MKNOD, RPC_OP_SYMLINK, RPC_OP_LINK, RPC_OP_UNLINK,
                                  RPC_OP_RMDIR, END});
    /* the old brick_lease_admit switch */
    expect_set("NO_HOLD", RPC_OPF_NO_HOLD,
               (const uint16_t[]){RPC_OP_LEASE_RETURN, RPC_OP_HANDSHAKE, RPC_OP_PING,
                                  RPC_OP_MGMT_RECONF, END});
    /* the old proto.c op_returns_fh, replicate.c fan_open */
    expect_set("OPEN", RPC_OPF_OPEN,
               (const uint16_t[]){RPC_OP_OPEN, RPC_OP_CREATE, RPC_OP_OPENDIR, END});
    expect_set("RELEASE", RPC_OPF_RELEASE,
               (const uint16_t[]){RPC_OP_RELEASE, RPC_OP_RELEASEDIR, END});
    expect_set("LOCK", RPC_OPF_LOCK,
               (const uint16_t[]){RPC_OP_GETLK, RPC_OP_SETLK, RPC_OP_FLOCK, END});
    /* the old brick/server.c runs_inline (READ, WRITE, MAKE_FILE: by size) */
    expect_set("QUICK", RPC_OPF_QUICK,
               (const uint16_t[]){RPC_OP_READ,         RPC_OP_WRITE,        RPC_OP_MAKE_FILE,
                                  RPC_OP_LOOKUP,       RPC_OP_GETATTR,      RPC_OP_SETATTR,
                                  RPC_OP_MKNOD,        RPC_OP_MKDIR,        RPC_OP_SYMLINK,
                                  RPC_OP_LINK,         RPC_OP_UNLINK,       RPC_OP_RMDIR,
                                  RPC_OP_RENAME,       RPC_OP_READLINK,     RPC_OP_OPEN,
                                  RPC_OP_CREATE,       RPC_OP_FLUSH,        RPC_OP_RELEASE,
                                  RPC_OP_LSEEK,        RPC_OP_OPENDIR,      RPC_OP_READDIR,
                                  RPC_OP_RELEASEDIR,   RPC_OP_STATFS,       RPC_OP_SETXATTR,
                                  RPC_OP_GETXATTR,     RPC_OP_LISTXATTR,    RPC_OP_REMOVEXATTR,
                                  RPC_OP_GETLK,        RPC_OP_SETLK,        RPC_OP_FLOCK,
                                  RPC_OP_LEASE_RETURN, RPC_OP_ACCUSED_SEEN, END});
    /* the old brick/dispatch.c may_reshape_dirs (SETATTR: by VALID) */
    expect_set("RESHAPE", RPC_OPF_RESHAPE,
               (const uint16_t[]){RPC_OP_SETATTR, RPC_OP_SETXATTR, RPC_OP_REMOVEXATTR,
                                  RPC_OP_RENAME, RPC_OP_RMDIR, END});
    /* the old distribute.c refusal in dht_submit */
    expect_set("UNROUTED", RPC_OPF_UNROUTED,
               (const uint16_t[]){RPC_OP_MARK, RPC_OP_INDEX, RPC_OP_UNMARK, RPC_OP_COMPOUND, END});
}

/* How the properties relate, as the header describes them. */
static void test_relations(void)
{
    for (size_t i = 0; i < N_ALL; i++) {
        uint16_t op = all[i].op;
        int change = rpc_op_is(op, RPC_OPF_CHANGE), ro = rpc_op_is(op, RPC_OPF_READONLY);
        CHECK(!(change && ro));
        /* a file operation (LOOKUP to FLOCK, MAKE_FILE) changes or does
         * not, but OPEN (O_TRUNC decides); the others are neither */
        int file = (op >= RPC_OP_LOOKUP && op <= RPC_OP_FLOCK) || op == RPC_OP_MAKE_FILE;
        CHECK_EQ(change + ro, file && op != RPC_OP_OPEN);
        if (rpc_op_is(op, RPC_OPF_DATA | RPC_OPF_META | RPC_OPF_MAKES | RPC_OPF_PATH2))
            CHECK(change);
        if (rpc_op_is(op, RPC_OPF_LEASE_PARENT))
            CHECK(rpc_op_is(op, RPC_OPF_LEASE));
        if (rpc_op_is(op, RPC_OPF_RELEASE | RPC_OPF_LOCK))
            CHECK(ro);
    }
}

int main(void)
{
    test_names();
    test_sets();
    test_relations();
    return check_summary("rpc_opinfo");
}
