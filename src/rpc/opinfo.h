/* What each opcode is: its name and its properties, in one table
 * (opinfo.c) indexed by opcode.
 *
 * Code that asks "is this one of the operations that ..." asks here,
 * rather than keeping its own list of opcodes: a new opcode then gets its
 * properties in one place, and two layers cannot disagree about it. A
 * switch that does different work per opcode (a handler table, a choice
 * of which path a change touches) stays where the work is.
 *
 * A property says what the opcode may do, whatever its fields; where
 * fields decide (OPEN with O_TRUNC, a READ's size), the reader checks
 * them and says so next to the flag. Unknown opcodes (any value, not only
 * the enum's gaps) have no name and no properties. Pure, thread-safe. */
#ifndef CAIRN_RPC_OPINFO_H
#define CAIRN_RPC_OPINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Changes a file or the namespace: data, attributes, extended attributes,
 * or names. OPEN is not one (it changes the file only with O_TRUNC, which
 * the reader checks). Read by the brick's leases (lease.c: a change
 * recalls other clients' leases and cools the path down), its spare maker
 * (server.c: a client asking for changes keeps it from making spares) and
 * replicate (replicate.c: a change fans out to every copy, marks for the
 * ones that missed it). */
#define RPC_OPF_CHANGE (1u << 0)
/* A file operation that changes nothing a listing or a cache of
 * attributes shows: a look, a read, a handle's open or close, a flush or
 * fsync, a lock. OPEN is not one (it changes with O_TRUNC). The FUSE
 * bridge (fop.c) treats every operation without it as a change, unknown
 * and non-file ones included, so that is the safe default. */
#define RPC_OPF_READONLY (1u << 1)
/* Changes a file's data by its handle (WRITE, FALLOCATE). Read by
 * replicate (replicate.c: an arbiter keeps no data, so it is sent a MARK
 * instead, and the quorum needs a brick with data) and the brick's
 * versioning (version.c: the handle's file is marked if the connection
 * ends before it is closed). */
#define RPC_OPF_DATA (1u << 2)
/* Changes an object's attributes or extended attributes (SETATTR,
 * SETXATTR, REMOVEXATTR), by PATH or FH. Read by distribute (a
 * directory's copies on every subvolume all take it) and the brick's
 * versioning (version.c, as for RPC_OPF_DATA). */
#define RPC_OPF_META (1u << 3)
/* Makes a new object under a new name, PATH (CREATE, MAKE_FILE, MKNOD,
 * MKDIR, SYMLINK; not LINK, which names an existing one). Read by
 * distribute (distribute.c: which leases it asks for and passes up). */
#define RPC_OPF_MAKES (1u << 4)
/* Needs PATH2 besides PATH (LINK, RENAME). Read by distribute. */
#define RPC_OPF_PATH2 (1u << 5)
/* Its LEASE field may be granted: the reply carries a lease on PATH
 * (LINK: PATH2, the new name; READDIR: the directory and its entries).
 * Read by the brick's leases (lease.c). */
#define RPC_OPF_LEASE (1u << 6)
/* With RPC_OPF_LEASE: the lease covers the name too, so the parent
 * directory's lease is asked as well (reply LEASE_NAME only when granted);
 * without it the object's lease alone covers what the reply shows
 * (attributes, extended attributes, a listing). Read by lease.c. */
#define RPC_OPF_LEASE_PARENT (1u << 7)
/* Requests that never wait behind another client's exclusive lease: the
 * connection's own business (a lease returned, a handshake, a ping, the
 * options from cairnd), whatever paths they carry. Read by
 * brick_lease_admit (lease.c). */
#define RPC_OPF_NO_HOLD (1u << 8)
/* Opens a handle: the reply carries FH, which RELEASE or RELEASEDIR
 * closes (OPEN, CREATE, OPENDIR). Read by the protocol client (proto.c:
 * the handle is tagged with the connection's generation) and replicate
 * (an open fans out to every copy). */
#define RPC_OPF_OPEN (1u << 9)
/* Closes a handle (RELEASE, RELEASEDIR): succeeds even when the handle
 * is already gone (its connection ended). Read by proto.c, replicate.c,
 * distribute.c. */
#define RPC_OPF_RELEASE (1u << 10)
/* A byte-range or whole-file lock request (GETLK, SETLK, FLOCK): it may
 * wait, and one copy of a file or directory carries its locks. Read by
 * replicate.c and distribute.c. */
#define RPC_OPF_LOCK (1u << 11)
/* The brick answers it without long disk work, so it may run on the
 * connection's reader thread (server.c, runs_inline); READ, WRITE and
 * MAKE_FILE only when small, which the brick checks. */
#define RPC_OPF_QUICK (1u << 12)
/* May change a directory's mode, owner, group or default ACL (or move or
 * remove a directory), so what the brick cached of directories' shapes
 * is stale (dispatch.c); SETATTR only when VALID has MODE, UID or GID,
 * which the brick checks. */
#define RPC_OPF_RESHAPE (1u << 13)
/* Addressed to one brick's own state (its marks, its heal index) or a
 * batch for one brick, not to a place in the volume's namespace: a layer
 * that routes by name or handle cannot send it (distribute refuses it
 * with ENOTSUP). */
#define RPC_OPF_UNROUTED (1u << 14)

struct rpc_opinfo {
    const char *name; /* as logs and `volume profile` print it */
    uint32_t flags;   /* RPC_OPF_* */
};

/* The entry of op, or NULL when op is no opcode. */
const struct rpc_opinfo *rpc_opinfo(uint64_t op);

/* Whether op has any of the properties in flags (false when unknown). */
static inline bool rpc_op_is(uint64_t op, uint32_t flags)
{
    const struct rpc_opinfo *i = rpc_opinfo(op);
    return i && (i->flags & flags) != 0;
}

/* The name of op, "UNKNOWN" when op is no opcode. */
const char *rpc_op_name(uint64_t op);

#endif
