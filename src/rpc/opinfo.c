/* The opcode table (opinfo.h). A new opcode gets its entry here, with
 * every property it has; tests/unit/test_rpc_opinfo.c lists the expected
 * members of each property and fails on an opcode it does not know. */
#include "opinfo.h"

#include "msg.h"

/* Shorthands for the table only. */
#define CHANGE RPC_OPF_CHANGE
#define RO RPC_OPF_READONLY
#define DATA RPC_OPF_DATA
#define META RPC_OPF_META
#define MAKES RPC_OPF_MAKES
#define PATH2 RPC_OPF_PATH2
#define LEASE RPC_OPF_LEASE
#define LEASE_NAME (RPC_OPF_LEASE | RPC_OPF_LEASE_PARENT)
#define NO_HOLD RPC_OPF_NO_HOLD
#define OPEN RPC_OPF_OPEN
#define RELEASE RPC_OPF_RELEASE
#define LOCK RPC_OPF_LOCK
#define QUICK RPC_OPF_QUICK
#define RESHAPE RPC_OPF_RESHAPE
#define UNROUTED RPC_OPF_UNROUTED

static const struct rpc_opinfo table[RPC_OP_MAX] = {
    /* connection */
    [RPC_OP_HANDSHAKE] = {"HANDSHAKE", NO_HOLD},
    [RPC_OP_PING] = {"PING", NO_HOLD},
    [RPC_OP_COMPOUND] = {"COMPOUND", UNROUTED},
    /* namespace */
    [RPC_OP_LOOKUP] = {"LOOKUP", RO | QUICK | LEASE_NAME},
    [RPC_OP_GETATTR] = {"GETATTR", RO | QUICK | LEASE},
    [RPC_OP_SETATTR] = {"SETATTR", CHANGE | META | QUICK | LEASE | RESHAPE},
    [RPC_OP_MKNOD] = {"MKNOD", CHANGE | MAKES | QUICK | LEASE_NAME},
    [RPC_OP_MKDIR] = {"MKDIR", CHANGE | MAKES | QUICK | LEASE_NAME},
    [RPC_OP_SYMLINK] = {"SYMLINK", CHANGE | MAKES | QUICK | LEASE_NAME},
    [RPC_OP_LINK] = {"LINK", CHANGE | PATH2 | QUICK | LEASE_NAME},
    [RPC_OP_UNLINK] = {"UNLINK", CHANGE | QUICK | LEASE_NAME},
    [RPC_OP_RMDIR] = {"RMDIR", CHANGE | QUICK | LEASE_NAME | RESHAPE},
    [RPC_OP_RENAME] = {"RENAME", CHANGE | PATH2 | QUICK | RESHAPE},
    [RPC_OP_READLINK] = {"READLINK", RO | QUICK},
    /* data */
    [RPC_OP_OPEN] = {"OPEN", OPEN | QUICK},
    [RPC_OP_CREATE] = {"CREATE", CHANGE | MAKES | OPEN | QUICK | LEASE_NAME},
    [RPC_OP_READ] = {"READ", RO | QUICK},
    [RPC_OP_WRITE] = {"WRITE", CHANGE | DATA | QUICK},
    [RPC_OP_FLUSH] = {"FLUSH", RO | QUICK},
    [RPC_OP_RELEASE] = {"RELEASE", RO | RELEASE | QUICK},
    [RPC_OP_FSYNC] = {"FSYNC", RO},
    [RPC_OP_FALLOCATE] = {"FALLOCATE", CHANGE | DATA},
    [RPC_OP_LSEEK] = {"LSEEK", RO | QUICK},
    /* directories */
    [RPC_OP_OPENDIR] = {"OPENDIR", RO | OPEN | QUICK},
    [RPC_OP_READDIR] = {"READDIR", RO | QUICK | LEASE},
    [RPC_OP_RELEASEDIR] = {"RELEASEDIR", RO | RELEASE | QUICK},
    [RPC_OP_STATFS] = {"STATFS", RO | QUICK},
    /* extended attributes */
    [RPC_OP_SETXATTR] = {"SETXATTR", CHANGE | META | QUICK | RESHAPE},
    [RPC_OP_GETXATTR] = {"GETXATTR", RO | QUICK | LEASE},
    [RPC_OP_LISTXATTR] = {"LISTXATTR", RO | QUICK},
    [RPC_OP_REMOVEXATTR] = {"REMOVEXATTR", CHANGE | META | QUICK | RESHAPE},
    /* locks */
    [RPC_OP_GETLK] = {"GETLK", RO | LOCK | QUICK},
    [RPC_OP_SETLK] = {"SETLK", RO | LOCK | QUICK},
    [RPC_OP_FLOCK] = {"FLOCK", RO | LOCK | QUICK},
    /* replication */
    [RPC_OP_MARK] = {"MARK", UNROUTED},
    [RPC_OP_INDEX] = {"INDEX", UNROUTED},
    [RPC_OP_UNMARK] = {"UNMARK", UNROUTED},
    [RPC_OP_CHECKSUM] = {"CHECKSUM", 0},
    /* leases, whole files, accusations */
    [RPC_OP_LEASE_RECALL] = {"LEASE_RECALL", 0},
    [RPC_OP_LEASE_RETURN] = {"LEASE_RETURN", NO_HOLD | QUICK},
    [RPC_OP_MAKE_FILE] = {"MAKE_FILE", CHANGE | MAKES | QUICK | LEASE_NAME},
    [RPC_OP_ACCUSED] = {"ACCUSED", 0},
    [RPC_OP_ACCUSED_SEEN] = {"ACCUSED_SEEN", QUICK},
    /* quota */
    [RPC_OP_QUOTA] = {"QUOTA", 0},
    [RPC_OP_QUOTA_OTHERS] = {"QUOTA_OTHERS", 0},
    /* statistics, management */
    [RPC_OP_STATS] = {"STATS", 0},
    [RPC_OP_TOP] = {"TOP", 0},
    [RPC_OP_MGMT_CLI] = {"MGMT_CLI", 0},
    [RPC_OP_MGMT_GETVOL] = {"MGMT_GETVOL", 0},
    [RPC_OP_MGMT_RECONF] = {"MGMT_RECONF", NO_HOLD},
    [RPC_OP_MGMT_CLIENT_STATS] = {"MGMT_CLIENT_STATS", 0},
    [RPC_OP_MGMT_POOL_HELLO] = {"MGMT_POOL_HELLO", 0},
    [RPC_OP_MGMT_POOL_PROVE] = {"MGMT_POOL_PROVE", 0},
};

const struct rpc_opinfo *rpc_opinfo(uint64_t op)
{
    return op < RPC_OP_MAX && table[op].name ? &table[op] : NULL;
}

const char *rpc_op_name(uint64_t op)
{
    const struct rpc_opinfo *i = rpc_opinfo(op);
    return i ? i->name : "UNKNOWN";
}
