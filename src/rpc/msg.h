/* Cairn messages: opcodes, field tags, and the decoded form of a body.
 *
 * One decoder serves every opcode: a body is a set of tagged fields, and each
 * opcode documents (docs/protocol.md) which fields it needs. Tags and opcode
 * numbers are wire-visible: never renumber, only append. Each opcode's name
 * and properties are in opinfo.h: a new one gets an entry there. */
#ifndef CAIRN_RPC_MSG_H
#define CAIRN_RPC_MSG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../lib/gfid.h"
#include "wire.h"

enum rpc_op {
    /* connection */
    RPC_OP_HANDSHAKE = 1,
    RPC_OP_PING = 2,
    RPC_OP_COMPOUND = 3, /* SUB fields, each a nested body with an OP field; run in order */
    /* brick: namespace */
    RPC_OP_LOOKUP = 10,
    RPC_OP_GETATTR = 11,
    RPC_OP_SETATTR = 12,
    RPC_OP_MKNOD = 13,
    RPC_OP_MKDIR = 14,
    RPC_OP_SYMLINK = 15,
    RPC_OP_LINK = 16,
    RPC_OP_UNLINK = 17,
    RPC_OP_RMDIR = 18,
    RPC_OP_RENAME = 19,
    RPC_OP_READLINK = 20,
    /* brick: data */
    RPC_OP_OPEN = 30,
    RPC_OP_CREATE = 31,
    RPC_OP_READ = 32,
    RPC_OP_WRITE = 33,
    RPC_OP_FLUSH = 34,
    RPC_OP_RELEASE = 35,
    RPC_OP_FSYNC = 36,
    RPC_OP_FALLOCATE = 37,
    RPC_OP_LSEEK = 38,
    /* brick: directories */
    RPC_OP_OPENDIR = 40,
    RPC_OP_READDIR = 41,
    RPC_OP_RELEASEDIR = 42,
    RPC_OP_STATFS = 43,
    /* brick: xattrs */
    RPC_OP_SETXATTR = 50,
    RPC_OP_GETXATTR = 51,
    RPC_OP_LISTXATTR = 52,
    RPC_OP_REMOVEXATTR = 53,
    /* brick: locks */
    RPC_OP_GETLK = 60,
    RPC_OP_SETLK = 61,
    RPC_OP_FLOCK = 62,
    /* brick: replication (docs/replication.md) */
    RPC_OP_MARK = 70,     /* FLAGS (the missed opcode), PATH/FH, PATH2, PENDING: record marks */
    RPC_OP_INDEX = 71,    /* OFFSET, SIZE: list the brick's heal index (DATA: "gfid path\n"*) */
    RPC_OP_UNMARK = 72,   /* PATH, GFID, PENDING: clear healed marks (and the index entry) */
    RPC_OP_CHECKSUM = 73, /* FH, OFFSET, SIZE, FLAGS (block size): DATA = u64 per block, SIZE */

    /* Leases (docs/consistency.md). RECALL is sent by the brick (a
     * notification, PATH and, for a change of one entry, NAME); the holder
     * drops what it cached under the lease, then answers with RETURN (PATH). */
    RPC_OP_LEASE_RECALL = 80,
    RPC_OP_LEASE_RETURN = 81,
    /* A whole small file in one request (write-back, docs/consistency.md):
     * CREATE's fields (PATH, GFID, MODE, UMASK, UID, GID), DATA (the
     * contents from offset 0), SIZE (final size, when larger), XATTRS,
     * VALID with MODE/UID/GID/ATIME/MTIME applied last, FLAGS 1: fsync.
     * Fails with EEXIST when PATH exists. Reply: ATTR. */
    RPC_OP_MAKE_FILE = 82,
    /* Accusations (docs/replication.md, "Reads come from a good copy"):
     * ACCUSED is sent by a brick (a notification, PENDING: the members of
     * its replica set it holds marks against, GEN: its sequence number)
     * when that set changes; the client stops reading from the accused
     * copies, then answers with ACCUSED_SEEN (GEN). A change whose marks
     * made a copy newly accused is answered only once every other client
     * has seen it. */
    RPC_OP_ACCUSED = 83,
    RPC_OP_ACCUSED_SEEN = 84,
    /* Directory quota (docs/quota.md). QUOTA: reply QUOTA* (PATH, SIZE bytes,
     * CALLS objects: each limited directory's usage on this brick).
     * QUOTA_OTHERS (cairnd -> brick): QUOTA* (PATH, SIZE, CALLS: the usage
     * of the volume's other replica sets), GEN (the summation's number). */
    RPC_OP_QUOTA = 86,
    RPC_OP_QUOTA_OTHERS = 87,
    /* brick: statistics (volume profile) */
    RPC_OP_TOP = 96,   /* FLAGS (RPC_TOP_*), SIZE (entries at most)[, TOPPERF]: TOPENTRY*, ... */
    RPC_OP_STATS = 95, /* FLAGS (RPC_STATS_*): reply OPSTAT*, NSEC (duration), GEN (interval no.) */
    /* management (cairnd) */
    RPC_OP_MGMT_CLI = 100,    /* ARG...: one CLI command; reply: TEXT, STATUS */
    RPC_OP_MGMT_GETVOL = 101, /* NAME: volume layout for clients */
    RPC_OP_MGMT_RECONF = 102, /* cairnd -> brick: OPTION*, the live options' values */
    /* mount -> cairnd, on its GETVOL connection: PATH (mount point), COUNTER*
     * (docs/metrics.md); reply empty (ENOSYS from an older cairnd) */
    RPC_OP_MGMT_CLIENT_STATS = 103,
    /* cairnd -> cairnd, first on a connection for internal commands
     * (src/mgmt/pool_auth.h): DATA the hello; reply DATA the answer, or
     * ENOKEY from a server without a pool secret (ENOSYS from an older one) */
    RPC_OP_MGMT_POOL_HELLO = 104,
    /* then DATA the proof; reply empty, or EACCES */
    RPC_OP_MGMT_POOL_PROVE = 105,
    RPC_OP_MAX = 128,
};

/* A PATH or PATH2 is shorter than this many bytes (at most 4,095, the
 * longest path a Linux client can name at once), whatever the brick's own
 * path. Every brick and client takes a path up to it; deeper names are
 * refused with ENAMETOOLONG by the call that would make them
 * (docs/protocol.md). Lowering it strands objects stored deeper. */
#define RPC_PATH_MAX 4096

enum rpc_tag {
    RPC_T_OP = 1,        /* u: opcode of a compound's sub-request */
    RPC_T_PATH = 2,      /* s: volume-relative path, starts with '/' */
    RPC_T_PATH2 = 3,     /* s: second path (rename target, new link) */
    RPC_T_NAME = 4,      /* s: xattr name, symlink target, volume name */
    RPC_T_GFID = 5,      /* 16 bytes: object id */
    RPC_T_FH = 6,        /* u: server handle of an open file or directory */
    RPC_T_MODE = 7,      /* u */
    RPC_T_UID = 8,       /* u */
    RPC_T_GID = 9,       /* u */
    RPC_T_UMASK = 10,    /* u */
    RPC_T_FLAGS = 11,    /* u: open flags, rename flags, xattr flags, fsync datasync */
    RPC_T_RDEV = 12,     /* u */
    RPC_T_OFFSET = 13,   /* u */
    RPC_T_SIZE = 14,     /* u: length, byte count, buffer size */
    RPC_T_DATA = 15,     /* bytes: file data, xattr value, readlink result */
    RPC_T_ATTR = 16,     /* attr: see rpc_attr encoding */
    RPC_T_VALID = 17,    /* u: setattr mask (RPC_SET_*) */
    RPC_T_ATIME = 18,    /* time: 12 bytes (i64 seconds, u32 nanoseconds) */
    RPC_T_MTIME = 19,    /* time */
    RPC_T_LOCK = 20,     /* lock: see rpc_lock encoding */
    RPC_T_OWNER = 21,    /* u: lock owner */
    RPC_T_DIRENT = 22,   /* nested, repeated: OFFSET, NAME, MODE, and ATTR when plus */
    RPC_T_STATFS = 23,   /* statfs: 8 x u64 */
    RPC_T_ARG = 24,      /* s, repeated: CLI argument */
    RPC_T_TEXT = 25,     /* s: human-readable output */
    RPC_T_STATUS = 26,   /* u: CLI exit status */
    RPC_T_SUB = 27,      /* nested, repeated: compound sub-request or sub-reply */
    RPC_T_ERRNO = 28,    /* u: positive errno of a compound sub-reply */
    RPC_T_GROUP = 29,    /* u, repeated: supplementary groups of the caller */
    RPC_T_PID = 30,      /* u */
    RPC_T_FEATURES = 31, /* u: handshake feature bits */
    RPC_T_BRICK = 32,    /* nested, repeated: volume layout entries (HOST, PORT, PATH) */
    RPC_T_HOST = 33,     /* s */
    RPC_T_PORT = 34,     /* u */
    RPC_T_OPTION = 35,   /* nested, repeated: NAME and DATA (value) */
    RPC_T_EOF = 36,      /* u: readdir reached the end */
    RPC_T_WHENCE = 37,   /* u */
    RPC_T_ID = 38,       /* s: volume id, brick id */
    RPC_T_GEN = 39,      /* u: generation of a volume's layout and options (GETVOL) */
    RPC_T_REPLICA = 40,  /* u: GETVOL: bricks per replica set (absent: 1) */
    RPC_T_ARBITER = 41,  /* u: GETVOL: 1 when the last brick of each set is an arbiter */
    RPC_T_PENDING = 42,  /* u: bitmask of the replica set's members that miss this change */
    RPC_T_LEASE = 43,    /* u: request: a lease is wanted; reply: RPC_LEASE_* granted */
    RPC_T_XATTRS = 45,   /* bytes: a nested body of NAME, DATA pairs (extended attributes) */
    RPC_T_PATTR = 44,    /* attr: reply to a change of entries asked with LEASE: the directory's
                            attributes after it (gfid not set) */
    RPC_T_NOXATTRS = 46, /* u: 1: beside ATTR (a reply or DIRENT asked with LEASE), the object
                            has no extended attributes a client can see */
    RPC_T_EXTENTS =
        47, /* bytes: WRITE: n x (u64 offset, u32 length); DATA is the pieces, in order */
    /* 48-51: distribute (docs/replication.md, Distribute) */
    RPC_T_LAYOUT = 48, /* bytes: MKDIR: trusted.cairn.layout to set on the new directory */
    RPC_T_LINKTO = 49, /* bytes: MKNOD: trusted.cairn.linkto to set on the new (link-to) file */
    /* 50-52: STATS with RPC_STATS_MONITOR (cairnd's metrics, docs/metrics.md) */
    RPC_T_BUCKET = 50,  /* nested, rep, in OPSTAT: NSEC (upper bound), CALLS (requests that took
                           at most that long, cumulative) */
    RPC_T_ERRSTAT = 51, /* nested, rep, in OPSTAT: ERRNO, CALLS (requests that failed with it) */
    RPC_T_COUNTER = 52, /* nested, rep: NAME, CALLS (a brick-wide count, see docs/protocol.md) */
    /* 53-54: TOP (brick/top.c) */
    RPC_T_TOPENTRY = 53, /* nested, rep: PATH, CALLS[, SIZE bytes, NSEC time] */
    RPC_T_TOPPERF = 54,  /* nested: request SIZE (block), CALLS (blocks); reply SIZE, NSEC */
    RPC_T_CLIENT = 55,   /* nested, rep: STATS CLIENTS reply: HOST (peer address:port), SIZE (bytes
                            read from it), OFFSET (bytes written to it) */
    RPC_T_OPSTAT = 56,   /* nested, repeated: OP, CALLS, NSEC, NSECMAX, SIZE (bytes moved) */
    RPC_T_CALLS = 57,    /* u: number of requests */
    RPC_T_NSEC = 58,     /* u: nanoseconds (a latency sum, a duration) */
    RPC_T_NSECMAX = 59,  /* u: the longest latency, nanoseconds */
    RPC_T_SUBDIR = 60,   /* s: HANDSHAKE, MGMT_GETVOL: the directory a mount of a part of the
                            volume is confined to ("/a/b") */
    RPC_T_WAITING = 61,  /* u: INDEX reply: entries left out, waiting for members named down */
    RPC_T_QUOTA = 62,    /* nested, rep: QUOTA, QUOTA_OTHERS: PATH, SIZE (bytes), CALLS (objects) */
    RPC_T_REDUNDANCY = 63, /* u: GETVOL: a dispersed volume's redundancy (REPLICA: its set) */
    /* tags 64..127: present_hi records them */
    RPC_T_PLACE = 66, /* bytes: GETVOL: the volume's placement (distribute.h cl_place wire form) */
    RPC_T_PLACE_PREV =
        67, /* bytes: GETVOL: the placement before it, while files may still be there */
    RPC_T_MAX = 128,
};

/* LEASE bits. A lease on a path covers the object's attributes and extended
 * attributes and, for a directory, its entries. A request's LEASE asks for
 * leases on PATH and on PATH's parent (READDIR: the directory and every
 * entry returned); the reply's LEASE says which were granted: READ, the
 * lease on PATH (READDIR: on the directory and every entry), and NAME as
 * well when the parent's was granted too or the request asks for none.
 * A merged listing's DIRENT (the distribute layer's, never on the wire)
 * carries its own LEASE: READ covers the entry's attributes, NAME its
 * name; the reply's then covers the listing as a whole. */
#define RPC_LEASE_READ 1u
/* MKDIR only: an exclusive lease on the new directory. Until it is recalled,
 * no other client reaches the directory or its entries: the brick holds
 * their requests and recalls the lease first, so the holder may create
 * files in it without waiting for the bricks (write-back). */
#define RPC_LEASE_EXCL 2u
/* Reply only, with READ: the name is leased too (the parent's lease, when
 * the request asked for one). READ alone covers the object but not its
 * name: the parent cools down after another client changed it, and its
 * entries are not cached meanwhile, while the object's attributes and data
 * still are. */
#define RPC_LEASE_NAME 4u

/* A bit of the marks (trusted.cairn.pending, LOOKUP's PENDING) that names
 * no member: the copy took changes from a client whose connection ended
 * with them possibly not on every replica (it died mid-fan-out), so it may
 * differ from the others without anyone accusing anyone. Wire-visible. */
#define RPC_PENDING_DIRTY (1u << 31)
/* HANDSHAKE FEATURES a client sends: it reads the volume's data and stops
 * reading accused copies when told (ACCUSED), confirming with
 * ACCUSED_SEEN. A brick waits only for connections that said so (cairnd's
 * liveness probe does not). */
#define RPC_FEATURE_ACCUSED 1ull

/* The PID the self-heal gives its changes: quota never refuses them
 * (docs/quota.md). Wire-visible. */
#define RPC_PID_HEAL ((uint64_t)-6)

/* setattr mask bits (wire-visible) */
#define RPC_SET_MODE (1u << 0)
#define RPC_SET_UID (1u << 1)
#define RPC_SET_GID (1u << 2)
#define RPC_SET_SIZE (1u << 3)
#define RPC_SET_ATIME (1u << 4)
#define RPC_SET_MTIME (1u << 5)
#define RPC_SET_ATIME_NOW (1u << 6)
#define RPC_SET_MTIME_NOW (1u << 7)
#define RPC_SET_CTIME (1u << 8)
/* SETATTR: after a truncate, clear set-user-ID, and set-group-ID when
 * group-executable (a caller without CAP_FSETID, as the VFS does). */
#define RPC_SET_KILL_SUIDGID (1u << 9)
/* WRITE FLAGS, and OPEN FLAGS beside the open flags (with O_TRUNC): the
 * same clearing after the write or truncate; the reply's FLAGS is 1 when
 * bits were cleared. */
#define RPC_WRITE_KILL_SUIDGID 1u
#define RPC_OPEN_KILL_SUIDGID (1ull << 32)
/* The permission bits mode keeps after that clearing. */
static inline mode_t rpc_kill_suidgid_mode(mode_t mode)
{
    mode &= 07777 & ~(mode_t)S_ISUID;
    return mode & S_IXGRP ? mode & ~(mode_t)S_ISGID : mode;
}

/* SETLK FLAGS bits; FLOCK FLAGS are LOCK_SH/EX/UN/NB plus RPC_FLOCK_CANCEL.
 * A cancel ends the caller's queued wait for that handle and owner with
 * -EINTR (the application's blocking call was interrupted); locks already
 * held stay. */
#define RPC_LK_WAIT 1u
#define RPC_LK_CANCEL 2u
#define RPC_FLOCK_CANCEL 0x100u

/* STATS FLAGS: which counters the reply carries. Cumulative: since the
 * brick started (or the last clear); interval: since the previous interval
 * request, which starts a new interval; clear: zero both, reply empty. */
#define RPC_STATS_CUMULATIVE 0u
#define RPC_STATS_INTERVAL 1u
#define RPC_STATS_CLEAR 2u
/* Monitor: counters that only ever grow (never cleared by the above),
 * with latency buckets and errors by errno per opcode, and the brick-wide
 * COUNTERs (cairnd's metrics endpoint, docs/metrics.md). */
#define RPC_STATS_MONITOR 3u
/* The brick's client connections, for `volume status VOL clients`. */
#define RPC_STATS_CLIENTS 4u

/* TOP's FLAGS: the list asked for (volume top), or clear. */
#define RPC_TOP_OPEN 0u
#define RPC_TOP_READ 1u
#define RPC_TOP_WRITE 2u
#define RPC_TOP_OPENDIR 3u
#define RPC_TOP_READDIR 4u
#define RPC_TOP_LISTS 5
#define RPC_TOP_READ_PERF 16u  /* READ's list, after a read test when TOPPERF is given */
#define RPC_TOP_WRITE_PERF 17u /* WRITE's list, after a write test */
#define RPC_TOP_CLEAR 32u

/* A WRITE's EXTENTS: each entry a u64 offset and a u32 length, little
 * endian. The pieces of DATA are written in order, each at its offset. */
#define RPC_EXTENT_LEN 12
#define RPC_EXTENTS_MAX 1024

/* An RMDIR's DATA, when present: the tree the removal takes along. Each
 * entry is a path relative to PATH followed by a NUL ("f", "sub", "sub/g"),
 * in any order. The brick removes the directory with everything below it
 * only when every entry it finds there is listed; otherwise ENOTEMPTY and
 * nothing changes (docs/protocol.md, RMDIR). */
#define RPC_TREE_MAX 65536
#define RPC_TREE_DEPTH 64       /* components of an entry, at most */
#define RPC_TREE_ENTRY_MAX 4096 /* bytes of an entry, less than */

/* Attributes of one object as they travel: 16-byte gfid then 13 u64 values. */
#define RPC_ATTR_LEN (16 + 13 * 8)
struct rpc_attr {
    gfid_t gfid;
    uint64_t mode, nlink, uid, gid, rdev, size, blocks, blksize;
    int64_t atime, mtime, ctime;
    uint32_t atime_ns, mtime_ns, ctime_ns;
};

struct rpc_time {
    int64_t sec;
    uint32_t nsec;
};

/* POSIX lock: type (F_RDLCK/F_WRLCK/F_UNLCK), whence-resolved start, length
 * (0 = to end), pid; 4 x u64. */
#define RPC_LOCK_LEN 32
struct rpc_lock {
    uint64_t type, start, len, pid;
};

#define RPC_STATFS_LEN 64
/* STATFS reply FLAGS: the sizes are a quota limit's (features.quota-deem-
 * statfs), the same on every replica set: not to be added up. */
#define RPC_STATFS_QUOTA 1u
struct rpc_statfs {
    uint64_t bsize, frsize, blocks, bfree, bavail, files, ffree, namemax;
};

struct rpc_bytes {
    const uint8_t *p;
    uint32_t len;
};

/* A decoded body. Pointers point into the decoded buffer and are valid for as
 * long as it is. Fields that may repeat are counted; iterate over them with
 * rpc_iter and the *_first bytes. */
struct rpc_msg {
    uint64_t present;    /* bit (1 << tag) for each field seen, tags 0..63 */
    uint64_t present_hi; /* bit (1 << (tag - 64)) for tags 64..127 */
    uint64_t op, fh, mode, uid, gid, umask, flags, rdev, offset, size, valid, owner, status, err,
        pid, features, port, eof, whence, gen, replica, arbiter, pending, lease, calls, nsec,
        nsecmax, noxattrs, waiting, redundancy;
    struct rpc_bytes place, place_prev;
    struct rpc_bytes path, path2, name, data, text, host, id, xattrs, layout, linkto, extents,
        subdir, topperf;
    gfid_t gfid;
    struct rpc_attr attr, pattr;
    struct rpc_time atime, mtime;
    struct rpc_lock lock;
    struct rpc_statfs statfs;
    uint32_t n_dirent, n_arg, n_sub, n_group, n_brick, n_option, n_opstat, n_bucket, n_errstat,
        n_counter, n_topentry, n_client, n_quota;
    uint32_t groups[32]; /* the first 32 supplementary groups */
    const uint8_t *body;
    size_t body_len;
};

static inline bool rpc_has(const struct rpc_msg *m, enum rpc_tag t)
{
    unsigned u = (unsigned)t;
    return u < 64 ? (m->present >> u) & 1 : (m->present_hi >> (u - 64)) & 1;
}

/* Records (rpc_mark) or forgets (rpc_unmark) that field t is present. */
static inline void rpc_mark(struct rpc_msg *m, enum rpc_tag t)
{
    unsigned u = (unsigned)t;
    if (u < 64)
        m->present |= 1ull << u;
    else
        m->present_hi |= 1ull << (u - 64);
}

static inline void rpc_unmark(struct rpc_msg *m, enum rpc_tag t)
{
    unsigned u = (unsigned)t;
    if (u < 64)
        m->present &= ~(1ull << u);
    else
        m->present_hi &= ~(1ull << (u - 64));
}

/* Whether a reply grants every lease its request asked for (the name's
 * too: RPC_LEASE_NAME), or at least the object's. */
static inline bool rpc_lease_whole(const struct rpc_msg *m)
{
    const unsigned both = RPC_LEASE_READ | RPC_LEASE_NAME;
    return rpc_has(m, RPC_T_LEASE) && (m->lease & both) == both;
}

static inline bool rpc_lease_object(const struct rpc_msg *m)
{
    return rpc_has(m, RPC_T_LEASE) && (m->lease & RPC_LEASE_READ);
}

/* Decodes a body. Rejects: truncated fields, wrong lengths for fixed-size
 * fields, duplicated singleton fields, strings containing NUL, unknown tags.
 * Returns 0 or -EPROTO; *why (may be NULL) names the first problem. Pure. */
int rpc_msg_decode(const uint8_t *p, size_t len, struct rpc_msg *m, const char **why);

/* Checks a decoded WRITE's EXTENTS against its DATA: whole entries, 1 to
 * RPC_EXTENTS_MAX of them, each of at least one byte and ending at most at
 * INT64_MAX, lengths adding up to DATA's. Returns the number of extents, or
 * -EPROTO with *why (may be NULL) naming the problem. Pure. */
int rpc_extents_check(const struct rpc_msg *m, const char **why);

/* Checks an RMDIR's tree (DATA): 1 to RPC_TREE_MAX entries, each ending in
 * a NUL, made of 1 to RPC_TREE_DEPTH components of 1 to 255 bytes separated
 * by single '/', none of them "." or "..", each shorter than
 * RPC_TREE_ENTRY_MAX. Returns the number of entries, or -EPROTO with *why
 * (may be NULL) naming the problem. Pure. */
int rpc_tree_check(const struct rpc_bytes *tree, const char **why);

/* Extent i of a checked EXTENTS field. */
static inline void rpc_extent_get(const struct rpc_bytes *x, uint32_t i, uint64_t *off,
                                  uint32_t *len)
{
    *off = rpc_get64(x->p + (size_t)i * RPC_EXTENT_LEN);
    *len = rpc_get32(x->p + (size_t)i * RPC_EXTENT_LEN + 8);
}

/* Writes entry i of an EXTENTS field into p. */
static inline void rpc_extent_put(uint8_t *p, uint32_t i, uint64_t off, uint32_t len)
{
    rpc_le64(p + (size_t)i * RPC_EXTENT_LEN, off);
    rpc_le32(p + (size_t)i * RPC_EXTENT_LEN + 8, len);
}

/* The next extended attribute of an XATTRS body (iterate with an rpc_iter
 * over it): NAME then DATA. Returns 1 with name and value set, 0 at the
 * end, -EPROTO for anything else (a field of another tag, a DATA without
 * its NAME, an empty or NUL-containing name, a name longer than 255). Pure. */
int rpc_xattrs_next(struct rpc_iter *it, struct rpc_bytes *name, struct rpc_bytes *value);

/* Encodes every present field of m (the inverse of rpc_msg_decode for
 * singleton fields and GROUP; DIRENT, ARG, SUB, BRICK and OPTION are written
 * by their producers). Setters below keep m->present in step. */
void rpc_msg_encode(const struct rpc_msg *m, struct rpc_buf *b);

#define RPC_SET(m, field, tag, value)                                                              \
    do {                                                                                           \
        (m)->field = (value);                                                                      \
        rpc_mark((m), (tag));                                                                      \
    } while (0)
static inline void rpc_set_str(struct rpc_msg *m, enum rpc_tag tag, struct rpc_bytes *slot,
                               const char *s)
{
    slot->p = (const uint8_t *)s;
    slot->len = (uint32_t)__builtin_strlen(s);
    rpc_mark(m, tag);
}
static inline void rpc_set_bytes(struct rpc_msg *m, enum rpc_tag tag, struct rpc_bytes *slot,
                                 const void *p, size_t len)
{
    slot->p = (const uint8_t *)p;
    slot->len = (uint32_t)len;
    rpc_mark(m, tag);
}

/* Copies a string field into a NUL-terminated buffer; -ENAMETOOLONG if it
 * does not fit. */
int rpc_bytes_str(const struct rpc_bytes *b, char *out, size_t outlen);

/* Sets a SETATTR's fields from attr for the RPC_SET_* bits of valid
 * (MODE, UID, GID, SIZE, ATIME and MTIME unless set to now) and VALID. */
void rpc_set_setattr(struct rpc_msg *a, const struct stat *attr, uint64_t valid);

void rpc_put_attr(struct rpc_buf *b, uint16_t tag, const struct rpc_attr *a);
int rpc_attr_decode(const uint8_t *p, size_t len, struct rpc_attr *a);
void rpc_attr_from_stat(struct rpc_attr *a, const struct stat *st, const gfid_t *g);
void rpc_attr_to_stat(const struct rpc_attr *a, struct stat *st);
void rpc_put_time(struct rpc_buf *b, uint16_t tag, int64_t sec, uint32_t nsec);
void rpc_put_lock(struct rpc_buf *b, uint16_t tag, const struct rpc_lock *l);
void rpc_put_statfs(struct rpc_buf *b, uint16_t tag, const struct rpc_statfs *s);
void rpc_put_gfid(struct rpc_buf *b, uint16_t tag, const gfid_t *g);

#endif
