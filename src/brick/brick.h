/* The brick: one exported directory, the state shared by every connection,
 * and the internal interfaces of the brick's modules (resolve, objects,
 * handles, locks, operations).
 *
 * Threads: operations run on worker threads (pool.c); everything reachable
 * from struct brick is either immutable after brick_open or protected by its
 * own lock. */
#ifndef CAIRN_BRICK_H
#define CAIRN_BRICK_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "../lib/gfid.h"
#include "../rpc/conn.h"
#include "../rpc/msg.h"
#include "storage.h"

/* The brick's private directory at its root: hidden from clients. */
#define BRICK_PRIVATE ".cairn"
/* BRICK/.cairn/fill: "member=N", written by cairnd for a new empty copy
 * (version.c, docs/elastic.md) */
#define BRICK_FILL_NAME "fill"
/* xattrs Cairn keeps on every object (docs/brick-format.md). Renaming them
 * orphans every existing brick's ids. */
#define BRICK_XATTR_PREFIX "trusted.cairn."
#define BRICK_XATTR_GFID "trusted.cairn.gfid"
#define BRICK_XATTR_VERSION "trusted.cairn.version" /* reserved */
/* u32 LE bitmask: replicas of the set that missed changes (version.c) */
#define BRICK_XATTR_PENDING "trusted.cairn.pending"
/* distribute: a directory's hash layout, a link-to file's target subvolume */
#define BRICK_XATTR_LAYOUT "trusted.cairn.layout"
#define BRICK_XATTR_LINKTO "trusted.cairn.linkto"
/* shard: a sharded file's block size and whole size (docs/shard.md); the
 * one name of ours a MAKE_FILE may set, as the file it describes is made */
#define BRICK_XATTR_SHARD "trusted.cairn.shard"

/* Handshake feature bits this brick offers (none yet). */
#define BRICK_FEATURES 0ull

struct brick_locks;
struct brick_dircache;
struct brick_leases;
struct lease_wait;
struct brick_dent;
struct brick_warm;
struct brick_trash;
struct brick_spare;
struct brick_accused;
struct brick_quota;

/* MAKE_FILE spreads its temporary files over this many directories in
 * .cairn/tmp (see open_tmp in brick.c). */
#define BRICK_TMP_DIRS 64
/* A new file's name while it is built: a gfid in .cairn/tmp, or a spare's
 * name in .cairn/spare (spare.c). */
#define BRICK_NEW_NAME_MAX 64

/* storage.reserve (space.c). */
struct brick_space {
    pthread_mutex_t lock;
    int percent;                    /* the reserve as a share of the file system, or -1: ... */
    int64_t bytes;                  /* ... as a size */
    uint64_t avail, total, reserve; /* the last reading, in bytes */
    uint64_t taken;                 /* granted since that reading */
    uint64_t checked_ms;            /* when it was taken; 0: read at the next request */
    int refusing;                   /* for the log: refused, and no room to spare since */
    uint64_t refused, logged_ms;
};

struct brick {
    char *path, *volume, *id;
    int root_fd;                 /* O_RDONLY|O_DIRECTORY on the brick root */
    int tmp_fd;                  /* .cairn/tmp: files MAKE_FILE builds before naming them; -1 */
    int tmp_fds[BRICK_TMP_DIRS]; /* its subdirectories (-1: use tmp_fd) */
    const struct brick_vfs *vfs;
    struct brick_locks *locks;
    struct brick_dircache *dircache; /* open parent directories (dircache.c) */
    uint64_t shape_gen;              /* atomic; brick_dir_shape_changed */
    struct brick_leases *leases;     /* lease.c */
    struct brick_warm *warm;         /* warm.c; NULL: not warming */
    struct brick_trash *trash;       /* trash.c; NULL: trees are removed in place */
    struct brick_spare *spare;       /* spare.c; NULL: new files get new inodes */
    struct brick_accused *accused;   /* accused.c */
    struct brick_space space;        /* space.c */
    struct brick_quota *quota;       /* quota.c; NULL: out of memory at start, quota off */
    struct brick_top *top;           /* top.c; NULL: nothing counted */
    pthread_mutex_t opt_lock;        /* protects the live options below */
    char *auth_allow, *auth_reject;
    char *ssl_allow;            /* auth.ssl-allow; NULL: "*" */
    struct rpc_tls_ctx *tls;    /* server.ssl: every connection is TLS (set before serving) */
    char *statedump_path;       /* server.statedump-path; NULL: SD_DEFAULT_DIR */
    int stall_ms;               /* atomic; network.ping-timeout: a request running longer
                                 * means the disk stalls (server.c) */
    int squash;                 /* atomic; server.root-squash, all-squash: BRICK_SQUASH_* */
    uint32_t anonuid, anongid;  /* atomic; server.anonuid, server.anongid */
    pthread_mutex_t conns_lock; /* the list of connection states below */
    struct brick_conn *conns;   /* every one not yet freed (handles.c) */
};

/* Opens (and on first use initialises) the brick at path for volume: checks
 * that it is a directory, creates .cairn/brick.info or refuses a brick that
 * belongs to another volume, and sets the root's gfid. id may be NULL (taken
 * from brick.info, else made up). vfs NULL means brick_vfs_posix. Sets the
 * process umask to 0: modes are computed from the request. On failure returns
 * -errno with a one-line reason in err. */
int brick_open(struct brick **out, const char *path, const char *volume, const char *id,
               const struct brick_vfs *vfs, char *err, size_t errlen);
void brick_close(struct brick *b);
/* Where a new object with id g is built before it is named (MAKE_FILE,
 * CREATE, MKDIR, MKNOD, SYMLINK): one of .cairn/tmp's subdirectories, by
 * the id's random last byte (.cairn/tmp itself when that one could not be
 * opened); name gets the id as text. Requires b->tmp_fd >= 0. */
int brick_tmp_dir(struct brick *b, const gfid_t *g, char name[GFID_STRLEN]);

/* Applies one live option (MGMT_RECONF); unknown names are ignored. */
void brick_set_option(struct brick *b, const char *name, const char *value);

/* ---- statedump.c: the internal state written to a file on SIGUSR1 ---- */

/* Writes the dump; 0 with its file name in written, or -errno (written
 * then names the file or directory that failed). */
int brick_statedump(struct brick *b, char *written, size_t len);
/* The parts of a dump, each by the module owning the state (each takes
 * its locks with sd_lock, writing "skipped=busy" when it cannot). */
void brick_space_dump(struct brick *b, FILE *f);
void brick_conns_dump(struct brick *b, FILE *f);
/* One RPC_T_CLIENT per handshaken connection but asker (STATS CLIENTS). */
void brick_conns_put_clients(struct brick *b, const struct brick_conn *asker, struct rpc_buf *out);
void brick_lease_dump(struct brick *b, FILE *f);
void brick_locks_dump(struct brick *b, FILE *f);

/* ---- one client connection ---- */

struct brick_fh;

/* A request running on a connection (brick_conn_enter), kept by its
 * caller until brick_conn_leave. */
struct brick_running {
    struct brick_running *prev, *next;
    uint64_t since_ms; /* net_now_ms() when it started */
    uint16_t opcode;
};

struct brick_conn {
    struct brick *b;
    struct rpc_conn *rc; /* NULL for in-process use (tests) */
    pthread_mutex_t lock;
    int refs, closed, handshaken;
    int busy;     /* requests running (brick_conn_enter) */
    int released; /* its handles, locks and leases let go (handles.c) */
    struct brick_running *running, *running_tail; /* those requests, oldest first */
    struct brick_conn *all_prev, *all_next;       /* b->conns, under b->conns_lock */
    struct brick_fh **fhs;                        /* slot table; FH = slot | generation << 20 */
    uint32_t *fh_gen;
    uint32_t n_fhs, cap_fhs;
    char peer[96];
    char addr[64];  /* numeric peer address, for auth.allow / auth.reject */
    int local_peer; /* the peer is this host (loopback or our own address) */
    void *owner;    /* the server that accepted it */
    char *subdir;   /* confined to this directory ("/a/b", confine.c); NULL: the whole
                       volume. Set by the handshake before handshaken, never changed after */
};

/* A new connection state with one reference; rc may be NULL. */
struct brick_conn *brick_conn_new(struct brick *b, struct rpc_conn *rc, const char *peer);
void brick_conn_get(struct brick_conn *bc);
void brick_conn_put(struct brick_conn *bc);
/* The connection went away: no request of it runs from now on, and once the
 * ones running have ended (at once when none is) every handle is closed and
 * its locks, lock waits and leases are released. Idempotent.
 *
 * Teardown in two steps because a connection's requests run on workers
 * while its reader sees it close: a client that gave up on a brick (one
 * stopped, then woken with a backlog of its requests) leaves requests
 * queued behind the close, and one that ran after the release registered
 * a lease for a connection about to be freed. */
void brick_conn_shutdown(struct brick_conn *bc);
/* A request of bc starts to run (brick_exec): 0, with run kept in bc's
 * list of running requests, or -ENOTCONN once bc is shut down; the request
 * is then dropped, as if the brick had never received it (its client
 * failed it with the connection, and marked the brick for heal where
 * others applied it). Each 0 is paired with brick_conn_leave, which
 * releases bc's state when the last request running on a shut-down
 * connection ends. */
int brick_conn_enter(struct brick_conn *bc, struct brick_running *run, uint16_t opcode);
void brick_conn_leave(struct brick_conn *bc, struct brick_running *run);
/* The request running longest on any connection of b, shut down or not:
 * 1 with its start, opcode and peer, or 0 when none runs. */
int brick_oldest_request(struct brick *b, uint64_t *since_ms, uint16_t *opcode, char *peer,
                         size_t peer_len);
/* auth.allow, auth.reject or auth.ssl-allow changed: closes every
 * handshaken connection the handshake would now refuse (its address, for
 * the directory it was opened for, or its certificate name). */
void brick_close_unallowed(struct brick *b);

/* ---- path resolution (resolve.c) ---- */

enum brick_loc_use {
    BRICK_LOC_EXISTING, /* the object must exist: .cairn is ENOENT */
    BRICK_LOC_CREATE,   /* the object is being made: .cairn is EPERM */
};

/* An object named by a request path: its parent directory and final name.
 * For the root, dirfd is the root itself and name is ".". */
struct brick_loc {
    int dirfd;
    int own;                 /* dirfd was opened for this loc */
    struct brick_dent *dent; /* dirfd is borrowed from the directory cache */
    int is_root;
    int parent_is_root;
    char name[NAME_MAX + 1];
    const char *path; /* for log lines; NUL-terminated copy */
    char pathbuf[RPC_PATH_MAX];
};

/* Checks a request path: starts with '/', shorter than RPC_PATH_MAX,
 * components neither empty, ".", "..", longer than NAME_MAX, nor containing
 * NUL. Returns 0, -EINVAL or -ENAMETOOLONG. Pure. Nothing here depends on
 * the brick's own path: every object is reached from the root's fd. */
int brick_path_check(const uint8_t *p, size_t len);
/* Validates the path and opens its parent beneath the root without
 * following symlinks. 0 or -errno; on success release with
 * brick_loc_release. */
int brick_resolve(struct brick *b, const struct rpc_bytes *path, enum brick_loc_use use,
                  struct brick_loc *loc);
void brick_loc_release(struct brick *b, struct brick_loc *loc);

/* ---- connections confined to a directory (confine.c) ---- */

/* The handshake's SUBDIR: checks it names an existing directory of the
 * brick (no symbolic link on the way) and gives a malloc'd copy in *out
 * (NULL for "/", the whole volume). 0, or -EINVAL, -ENAMETOOLONG, -ENOENT,
 * -ENOTDIR with why saying what was wrong. */
int brick_confine_open(struct brick *b, const struct rpc_bytes *dir, char **out, char *why,
                       size_t whylen);
/* Rewrites request f of a connection confined to dir: each PATH and PATH2
 * (in a COMPOUND's sub-requests too), checked by brick_path_check, becomes
 * dir + path; the body is replaced and f->msg decoded again. 0, or the
 * errno to answer: -EINVAL / -ENAMETOOLONG for a bad path, -EBUSY for a
 * removal, rename or link of the confined root, -EPROTO. */
int brick_confine_frame(const char *dir, struct rpc_frame *f);
/* Whether real path p[0..len) is in bc's directory (1 when unconfined). */
int brick_confine_inside(const struct brick_conn *bc, const char *p, size_t len);
/* Real path p as bc names it ("/" for its directory), or NULL when p is
 * outside it. Points into p or at a literal. */
const char *brick_confine_out(const struct brick_conn *bc, const char *p);

/* ---- open parent directories (dircache.c) ---- */

int brick_dircache_init(struct brick *b);
void brick_dircache_fini(struct brick *b);
/* An O_PATH fd of the directory path (relative to the root, len bytes, no
 * leading '/'), resolved like brick_resolve does, from the cache or opened
 * and cached; *dent is the reference to give back with brick_dircache_put.
 * Returns the fd or -errno. */
int brick_dircache_get(struct brick *b, const char *path, size_t len, struct brick_dent **dent);
void brick_dircache_put(struct brick *b, struct brick_dent *dent);
/* Drops the cached directories at and below path (a request path). Every
 * operation that moves or removes a directory calls it after the change
 * (rename: both paths; rmdir), before replying. */
void brick_dircache_invalidate(struct brick *b, const char *path);

/* What of a directory shapes a new object made in it: its set-group-ID
 * bit and group (BSD group semantics), and whether it has a default ACL. */
struct brick_dir_shape {
    int sgid;
    gid_t gid;
    int acl;
};
/* The shape kept with a cached directory (dent NULL: the root), when it
 * was read at generation gen and less than a second before now_ms: 1,
 * else 0. */
int brick_dircache_shape(struct brick *b, struct brick_dent *dent, uint64_t gen, uint64_t now_ms,
                         struct brick_dir_shape *s);
void brick_dircache_set_shape(struct brick *b, struct brick_dent *dent, uint64_t gen,
                              uint64_t now_ms, const struct brick_dir_shape *s);

/* ---- objects (object.c) ---- */

/* The gfid of loc; objects without one get one (files put on the brick by
 * hand). */
int brick_gfid_ensure(struct brick *b, const struct brick_loc *loc, gfid_t *g);
/* The same for an open regular file or directory. */
int brick_gfid_ensure_fd(struct brick *b, int fd, gfid_t *g);
/* Attributes (stat + gfid) of loc / of an open fd. */
int brick_loc_attr(struct brick *b, const struct brick_loc *loc, struct rpc_attr *a);
int brick_fd_attr(struct brick *b, int fd, struct rpc_attr *a);
/* The mode to create with: MODE unmasked when the parent has a default ACL
 * (the file system applies it), else MODE & ~UMASK. */
mode_t brick_create_mode(struct brick *b, const struct brick_loc *loc, const struct rpc_msg *in);
/* The same, when the caller already asked whether loc's directory has a
 * default ACL (brick_dir_default_acl: 1 yes, 0 no). */
mode_t brick_create_mode_acl(const struct rpc_msg *in, int default_acl);
int brick_dir_default_acl(struct brick *b, const struct brick_loc *loc);
/* The shape of loc's directory. A copy or untar makes many files in one
 * directory, so it is kept with the cached directory (a stat and an
 * extended attribute read saved per file) until a request that may change
 * a directory's mode, group or ACL runs (brick_dir_shape_changed), and for
 * a second at most (changes made on the brick by hand). */
void brick_dir_shape(struct brick *b, const struct brick_loc *loc, struct brick_dir_shape *s);
/* Called after every request that may change a directory's mode, group or
 * default ACL (SETATTR of those, SETXATTR, REMOVEXATTR, RENAME, RMDIR). */
void brick_dir_shape_changed(struct brick *b);
/* brick_fd_attr for an object whose gfid the caller just set. */
int brick_fd_attr_gfid(struct brick *b, int fd, const gfid_t *g, struct rpc_attr *a);
#define BRICK_SQUASH_ROOT 1
#define BRICK_SQUASH_ALL 2
/* Owner of a new object: the request's UID/GID, squashed when a process
 * (PID, not one of the client's own: heal) asked and server.root-squash or
 * server.all-squash says so, with the parent's group when the parent is
 * setgid. */
void brick_create_owner(struct brick *b, const struct brick_loc *loc, const struct rpc_msg *in,
                        uid_t *uid, gid_t *gid);
/* The GFID a create request carries: -EINVAL when missing or null. */
int brick_req_gfid(const struct rpc_msg *in, gfid_t *g);

/* ---- requests ---- */

/* A handler's return value that means "the reply is sent later" (a lock
 * wait). */
#define BRICK_DEFERRED 1

struct brick_req {
    struct brick *b;
    struct brick_conn *bc;
    uint16_t opcode;
    uint64_t reqid;
    int in_compound;
    const struct rpc_msg *in;
    struct rpc_buf *out;   /* reply fields; discarded on failure */
    char text[256];        /* optional error text for the reply */
    struct brick_req *top; /* the compound a sub-request belongs to, else NULL */
    int lease_ok;          /* lease.c: the lease on the path is registered */
    int lease_name;        /* ... and the parent's, if the request asks for one */
    int lease_excl;        /* ... and the new directory's (or file's) is exclusive */
    uint64_t opened;       /* OPEN, CREATE: the handle made (for lease.c), else 0 */
    uint64_t lease_seq;
    struct lease_wait *lease_wait; /* the reply waits for recalls (top request) */
};

/* ---- warming subdirectories ahead of their listing (warm.c) ---- */

/* Starts the brick's warming thread (none unless b->vfs is the real one). */
int brick_warm_init(struct brick *b);
void brick_warm_fini(struct brick *b);
/* Queues dirfd/name, a subdirectory of a directory being listed, to have
 * its entries' inodes read into memory. Never blocks: a full queue drops
 * it. */
void brick_warm_subdir(struct brick *b, int dirfd, const char *name);
/* Tests: waits until the queue is walked; returns how many directories
 * have been walked so far. */
uint64_t brick_warm_settle(struct brick *b);

/* ---- removing a tree at once (trash.c) ---- */

/* Creates .cairn/trash and starts the purge thread, which first empties
 * what an earlier run left there. */
int brick_trash_init(struct brick *b);
void brick_trash_fini(struct brick *b);
/* RMDIR with a tree (DATA): when every entry below dirfd/name is listed in
 * tree (rpc_tree_check's format), moves the directory into the trash for
 * the purge thread (without a trash, removes it all before returning).
 * Returns 0, -EPROTO (a malformed tree), -ENOTEMPTY (an entry not listed,
 * named in why) or another -errno; nothing changes unless 0. */
int brick_trash_tree(struct brick *b, int dirfd, const char *name, const struct rpc_bytes *tree,
                     char *why, size_t wl);
/* UNLINK of dirfd/name: a small regular file with one link that no handle
 * has open is moved into the trash (its inode may become a spare), anything
 * else is unlinked (an open one then shows no link through its handles).
 * 0 or -errno. */
int brick_trash_file(struct brick *b, int dirfd, const char *name);
/* Tests: waits until the trash is purged; returns the entries removed so
 * far. */
uint64_t brick_trash_settle(struct brick *b);

/* ---- spare inodes (spare.c) ---- */

/* Makes or reads .cairn/spare: emptied files the purge kept. */
int brick_spare_init(struct brick *b);
void brick_spare_fini(struct brick *b);
/* The open set: a regular file opened through a handle, and closed, by an
 * owner (the connection). opens_by: how many opens of the file owner has
 * (0: none by anyone), or -1 when another owner has it open too (or had
 * it open since the file was last closed by everyone). */
int brick_spare_opened(struct brick *b, dev_t dev, ino_t ino, const void *owner);
void brick_spare_closed(struct brick *b, dev_t dev, ino_t ino, const void *owner);
int brick_spare_is_open(struct brick *b, dev_t dev, ino_t ino);
int brick_spare_opens_by(struct brick *b, dev_t dev, ino_t ino, const void *owner);
/* Takes a spare, empties it and opens it with flags (less O_CREAT,
 * O_EXCL, O_TRUNC), with mode and the current time (left to the caller
 * when times_later): a new empty file, owned by whoever owned the spare,
 * to be renamed from *dirfd and name (len bytes) once built. It may still
 * carry an old id (BRICK_XATTR_GFID), to be replaced. Returns the fd and
 * its attributes in *st (all but the times current), or -errno (-ENOENT:
 * no spare). */
int brick_spare_take(struct brick *b, int *dirfd, char *name, size_t len, int flags, mode_t mode,
                     int times_later, struct stat *st);
/* storage.spare-inodes: how many spares to make ahead in idle time. */
void brick_spare_set_ahead(struct brick *b, size_t n);
/* A client asked for a change (the server, for each such request): spares
 * are made ahead only after a while without one. */
void brick_spare_busy(struct brick *b);
/* Milliseconds since a client last asked for a change (UINT64_MAX without
 * the spare store). */
uint64_t brick_idle_ms(struct brick *b);
/* The purge thread between passes: makes up to max spares ahead when no
 * client asked for a change for a while and the brick holds fewer than
 * wanted. Returns the milliseconds to wait before asking again (a short
 * pause after a batch, longer when none was wanted). */
int brick_spare_make_ahead(struct brick *b, unsigned max);
/* The purge: once per pass, then for each regular file of the trash.
 * keep returns 1 when the file became a spare (renamed away from dirfd). */
void brick_spare_pass(struct brick *b);
int brick_spare_keep(struct brick *b, int dirfd, const char *name);
/* Tests and the log: files kept and taken so far, spares held now. */
void brick_spare_counts(struct brick *b, uint64_t *kept, uint64_t *taken, uint64_t *held);

/* ---- leases (lease.c, docs/consistency.md) ---- */

int brick_leases_init(struct brick *b);
void brick_leases_fini(struct brick *b);
/* Runs a request that waited for an exclusive lease (server.c: re-admits
 * it and hands it to a worker); takes over the reference on bc and f. */
typedef void (*brick_lease_runner)(struct brick *b, struct brick_conn *bc, struct rpc_frame *f);
void brick_lease_set_runner(struct brick *b, brick_lease_runner run);
/* Before a request of bc runs: when it reaches a directory another
 * connection holds exclusively (or an entry in it), a file another holds
 * exclusively, or lists a directory holding such a file, the request is kept,
 * the lease recalled, and 1 returned; the runner runs it once the lease is
 * returned or revoked. 0: run it now. */
int brick_lease_admit(struct brick *b, struct brick_conn *bc, struct rpc_frame *f);
/* How long a holder may take to answer a recall before losing its lease. */
void brick_lease_set_recall_timeout(struct brick *b, int ms);
/* Before a request runs: registers the leases it asks for. */
void brick_lease_pre(struct brick_req *r);
/* After it ran (rc its result): the grant in the reply, and the recalls of
 * other clients' leases on what a change touched. */
void brick_lease_post(struct brick_req *r, int rc);
/* At the end of a top-level request: when recalls are outstanding, keeps the
 * reply to send once they are answered and returns BRICK_DEFERRED; else rc. */
int brick_lease_defer(struct brick_req *r, int rc);
/* A connection closed: its leases go, replies waiting for them are sent. */
void brick_lease_conn_gone(struct brick_conn *bc);
/* Makes r's reply wait for one more thing than its recalls (accused.c: a
 * notice every other client must have seen first); brick_lease_unhold ends
 * that wait. NULL when r has no connection to answer on (in-process use) or
 * memory ran out: then nothing waits. */
struct lease_wait *brick_lease_hold(struct brick_req *r);
void brick_lease_unhold(struct brick *b, struct lease_wait *w);
/* features.lease-recall-timeout, in milliseconds. */
int brick_lease_recall_ms(struct brick *b);
/* A handle of owner whose open got path's lease exclusively closed: when it
 * was owner's last handle of the file, the lease is shared again (the
 * client sent what it wrote behind before closing). */
void brick_lease_file_closed(struct brick *b, const void *owner, const char *path, dev_t dev,
                             ino_t ino);

/* Applies a request's VALID (MODE, UID, GID, SIZE, times) to an open fd.
 * cur, when given, is the file's owner and mode now: what matches is
 * skipped. */
int brick_setattr_fd(struct brick_req *r, int fd, const struct stat *cur);
/* Clears set-user-ID, and set-group-ID when group-executable, of the
 * regular file name in dirfd, or of dirfd itself with name ""
 * (RPC_*_KILL_SUIDGID); *killed set to 1 when it did. */
int brick_kill_setid_at(struct brick *b, int dirfd, const char *name, int *killed);
/* 1 when name may be set by clients (not empty, not Cairn's own). */
int brick_xattr_name_ok(const char *name);
/* Adds NOXATTRS to the reply when the request asked for a lease and loc has
 * no extended attribute a client can see (`ls -l` asks for two on every
 * entry it lists; the client then answers them itself under the lease). */
void brick_put_noxattrs(struct brick_req *r, const struct brick_loc *loc);

/* Runs one request; returns 0, BRICK_DEFERRED or -errno (-ENOTCONN, not
 * run, when r->bc is shut down: brick_conn_enter). */
int brick_exec(struct brick_req *r);

/* Operation handlers, one per opcode (ops_*.c). */
int brick_op_lookup(struct brick_req *r);
int brick_op_getattr(struct brick_req *r);
int brick_op_setattr(struct brick_req *r);
int brick_op_mknod(struct brick_req *r);
int brick_op_mkdir(struct brick_req *r);
int brick_op_symlink(struct brick_req *r);
int brick_op_link(struct brick_req *r);
int brick_op_unlink(struct brick_req *r);
int brick_op_rmdir(struct brick_req *r);
int brick_op_rename(struct brick_req *r);
int brick_op_readlink(struct brick_req *r);
int brick_op_open(struct brick_req *r);
int brick_op_create(struct brick_req *r);
int brick_op_read(struct brick_req *r);
int brick_op_write(struct brick_req *r);
int brick_op_flush(struct brick_req *r);
int brick_op_release(struct brick_req *r);
int brick_op_fsync(struct brick_req *r);
int brick_op_fallocate(struct brick_req *r);
int brick_op_lseek(struct brick_req *r);
int brick_op_opendir(struct brick_req *r);
int brick_op_readdir(struct brick_req *r);
int brick_op_releasedir(struct brick_req *r);
int brick_op_statfs(struct brick_req *r);
int brick_op_setxattr(struct brick_req *r);
int brick_op_getxattr(struct brick_req *r);
int brick_op_listxattr(struct brick_req *r);
int brick_op_lease_return(struct brick_req *r);
int brick_op_make_file(struct brick_req *r);
int brick_op_removexattr(struct brick_req *r);
int brick_op_getlk(struct brick_req *r);
int brick_op_setlk(struct brick_req *r);
int brick_op_flock(struct brick_req *r);

/* ---- replica state (version.c, docs/replication.md) ---- */

/* Before a modifying request that carries PENDING runs: the heal index
 * entries and pending marks of the objects it changes. -errno fails it. */
int brick_version_pre(struct brick_req *r);
/* After it succeeded: marks of the objects it made; PENDING in a LOOKUP
 * reply when asked. */
void brick_version_post(struct brick_req *r);
int brick_op_mark(struct brick_req *r);
int brick_op_index(struct brick_req *r);
/* The number of objects in the heal index (what heal info lists, counted
 * without reading them), or -errno. */
long brick_index_count(struct brick *b);
/* Applies BRICK/.cairn/fill (a new copy marks its root against itself);
 * 0 when there is none. Called once at start, before any client. */
int brick_version_fill(struct brick *b);
int brick_op_unmark(struct brick_req *r);
/* ops_heal.c: CHECKSUM (per-block checksums for range heal) and its hash. */
int brick_op_checksum(struct brick_req *r);
uint64_t brick_block_sum(const uint8_t *p, size_t len);
int brick_op_stats(struct brick_req *r);

/* ---- top.c: the paths served most (volume top) ---- */
struct top_entry;
int brick_top_init(struct brick *b);
void brick_top_fini(struct brick *b);
/* path (len bytes) was opened (list RPC_TOP_OPEN or RPC_TOP_OPENDIR):
 * counts it and returns its entry with a reference for the handle (NULL:
 * not counted). */
struct top_entry *brick_top_open(struct brick *b, const char *path, size_t len, int list);
/* The handle holding e is gone; was_file: it was a file's. */
void brick_top_close(struct brick *b, struct top_entry *e, int was_file);
/* One request of list through a handle of e (READ, WRITE: bytes moved and
 * the time the file system took). No lock. */
void brick_top_count(struct top_entry *e, int list, uint64_t bytes, uint64_t ns);
int brick_op_top(struct brick_req *r);

/* The connection holding fh ended without releasing it after changes came
 * through it: marks the file RPC_PENDING_DIRTY (version.c). */
void brick_version_conn_gone(struct brick *b, struct brick_fh *fh);
/* At start: tells accused.c the marks of every object in the heal index. */
int brick_version_load(struct brick *b);

/* ---- storage.reserve (space.c, docs/replication.md) ---- */

void brick_space_init(struct brick *b);
void brick_space_fini(struct brick *b);
/* The option's value (a percentage or a size); -EINVAL when it is neither. */
int brick_space_set_reserve(struct brick *b, const char *value);
/* Before a request runs: -ENOSPC (with the reason in r->text) when it would
 * make a name or store data while the file system's free space is below
 * the reserve; 0 otherwise (and for everything that takes no space). */
int brick_space_check(struct brick_req *r);

/* ---- directory quota (quota.c, docs/quota.md) ---- */

/* What an object holds, its subtree included (quota.c). */
struct brick_qobj {
    int exists, is_dir;
    int64_t bytes, files, dirs;
};

/* A request's quota state from brick_quota_pre to brick_quota_post (the
 * caller's, on its stack). */
struct brick_qop {
    int kind, active, held, striped, stripe, reserved;
    int fd;              /* Q_FILE by handle: the file, else -1 */
    struct brick_fh *fh; /* ... its handle (a reference) */
    ino_t ino;
    int64_t grow, grow_objs;         /* what it adds where it lands */
    struct brick_qobj before, moved; /* the object before; what a rename or link moves */
    char path[RPC_PATH_MAX], path2[RPC_PATH_MAX];
};

void brick_quota_init(struct brick *b);
void brick_quota_fini(struct brick *b);
/* Applies a features.quota* option: 1 when name is one of them, 0 when it
 * is not, -EINVAL for a bad value. Changed limits are counted afresh by
 * the brick's crawler thread, in the background. */
int brick_quota_set_option(struct brick *b, const char *name, const char *value);
/* Tests and QUOTA: waits for a crawl asked for to end; 0 or -ETIMEDOUT. */
int brick_quota_settle(struct brick *b);
/* Before a request runs: -EDQUOT (reason in r->text) when it would take a
 * limited directory past its hard limit, else 0; op is then kept for
 * brick_quota_post, which must follow with the request's result. */
int brick_quota_pre(struct brick_req *r, struct brick_qop *op);
void brick_quota_post(struct brick_req *r, struct brick_qop *op, int rc);
/* STATFS of path with features.quota-deem-statfs: rewrites s to the
 * innermost size limit covering path and returns 1; 0 when none does. */
int brick_quota_statfs(struct brick *b, const char *path, struct rpc_statfs *s);
int brick_op_quota(struct brick_req *r);
int brick_op_quota_others(struct brick_req *r);
void brick_quota_dump(struct brick *b, FILE *f);

/* ---- accusations (accused.c, docs/replication.md) ---- */

/* Starts the bookkeeping (after the directory cache: it reads the index). */
int brick_accused_init(struct brick *b);
void brick_accused_fini(struct brick *b);
/* The object with id g now carries marks bits (0: none, or it left the
 * index). */
void brick_accused_note(struct brick *b, const gfid_t *g, uint32_t bits);
/* The members of the set this brick holds marks against. */
uint32_t brick_accused_mask(struct brick *b);
/* 1 when the object with id g is known to differ only on members in down
 * (its marks accuse some of them and nobody else, and it is not dirty):
 * nothing can heal it before one of them is back. */
int brick_accused_waits_for(struct brick *b, const gfid_t *g, uint32_t down);
/* At the handshake: when listens (the client sent RPC_FEATURE_ACCUSED),
 * bc hears of every change of the mask from now on, and growth waits for
 * it. Returns the mask clients were last told, and its number in *gen, for
 * the handshake's reply. */
uint32_t brick_accused_subscribe(struct brick_conn *bc, int listens, uint64_t *gen);
void brick_accused_conn_gone(struct brick_conn *bc);
/* After a request ran: when the mask changed, tells every client; growth
 * holds the request's reply until the others confirmed. */
void brick_accused_publish(struct brick_req *r);
int brick_op_accused_seen(struct brick_req *r);

/* Request counters (stats.c): op's execution took ns and moved bytes. */
void brick_stats_note(unsigned op, uint64_t ns, uint64_t bytes, int rc);
/* Brick-wide counts, reported by STATS MONITOR under these names (stats.c). */
enum brick_counter {
    BRICK_C_LEASE_GRANTS,  /* a connection became a holder of a lease */
    BRICK_C_LEASE_RECALLS, /* recalls sent to holders */
    /* recalls that ended (returned, revoked, holder gone), and the sum of
     * how long they took, in milliseconds */
    BRICK_C_LEASE_RECALLS_ENDED,
    BRICK_C_LEASE_RECALL_MS,
    BRICK_C_LEASE_REVOCATIONS, /* recalls not answered in time */
    BRICK_C_MAX,
};
void brick_stats_count(enum brick_counter c, uint64_t n);
uint64_t brick_stats_now(void);

/* ---- handles (handles.c) ---- */

struct brick_fh {
    int refs; /* under the connection's lock */
    int fd;
    int is_dir;
    int flags; /* open flags */
    dev_t dev;
    ino_t ino;
    pthread_mutex_t dir_lock; /* serialises lseek+getdents on directories */
    int changed;              /* a change came through it (version.c); atomic */
    int has_gfid;             /* gfid: the file's id, read when it was opened */
    int in_open_set;          /* counted by dev/ino in spare.c's open set */
    const void *owner;        /* ... for this connection */
    char *xpath;              /* the path of its owner's exclusive lease (lease.c) */
    char *path;               /* the volume path it was opened by (version.c); may be NULL */
    struct top_entry *top;    /* its path's counts (top.c); NULL: not counted */
    gfid_t gfid;
};

/* Adds fh (one reference, now the table's) and returns its handle id. */
int brick_fh_add(struct brick_conn *bc, struct brick_fh *fh, uint64_t *id);
/* The handle named id with a new reference, or -EBADF (also when it is a
 * directory and a file is wanted or the other way round). */
int brick_fh_get(struct brick_conn *bc, uint64_t id, int is_dir, struct brick_fh **out);
void brick_fh_put(struct brick_conn *bc, struct brick_fh *fh);
/* Removes id from the table (dropping the table's reference): 0 or -EBADF. */
int brick_fh_remove(struct brick_conn *bc, uint64_t id, int is_dir);
/* A handle from an fd (taken over). */
struct brick_fh *brick_fh_new(int fd, int is_dir, int flags);

/* ---- locks (locks.c) ---- */

int brick_locks_init(struct brick *b);
void brick_locks_fini(struct brick *b);
/* Drops every lock, lock fd and pending wait of bc. */
void brick_locks_conn_gone(struct brick_conn *bc);
/* FLUSH: releases the POSIX locks owner holds on fh's file. */
void brick_locks_flush(struct brick_conn *bc, struct brick_fh *fh, uint64_t owner);

/* Sends a reply for r (deferred replies too); in-process connections get
 * theirs through brick_local_reply_cb when set. */
void brick_send_reply(struct brick_conn *bc, uint16_t opcode, uint64_t reqid, int status,
                      const struct rpc_buf *body, const char *text);
extern void (*brick_local_reply_cb)(struct brick_conn *bc, uint64_t reqid, int status,
                                    const struct rpc_buf *body);

#endif
