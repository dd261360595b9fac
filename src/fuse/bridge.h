/* The FUSE bridge: libfuse low-level handlers that turn each request into an
 * operation on the client stack and answer from its completion.
 *
 * Most handlers allocate a struct fop, fill its cl_op, and submit it; the
 * op's done callback replies to the kernel and frees the fop. Some answer
 * without the bricks (a lookup answered from known.c, a create written back
 * by wb.c). A handler can still wait: fop_path settles the write-back queues
 * the request depends on first, and a few paths (materialising a written-
 * back file, asking a directory's default ACL) wait for the bricks. Moving
 * the caches and write-back into client layers (docs/architecture.md) is
 * what removes those waits from the bridge. */
#ifndef CAIRN_FUSE_BRIDGE_H
#define CAIRN_FUSE_BRIDGE_H

#define FUSE_USE_VERSION 314
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdint.h>

#include "../client/client.h"
#include "../client/itable.h"
#include "../client/opstats.h"
#include "killpriv.h"

#define CF_MAX_BACKUPS 8

/* Mount configuration (options.c). */
struct cf_config {
    struct net_addr server;
    struct net_addr backup[CF_MAX_BACKUPS]; /* -o backup-servers, tried in order */
    int n_backup;
    char volume[256];
    char subdir[PATH_MAX]; /* HOST:/VOLUME/DIR: "/DIR", the mount's root; "/": the volume's */
    char mountpoint[PATH_MAX];
    char fsname[NET_HOST_MAX + 300];
    char log_file[PATH_MAX];
    char ssl_key[PATH_MAX], ssl_cert[PATH_MAX], ssl_ca[PATH_MAX]; /* "": /etc/ssl/cairn.* */
    int mgmt_ssl;        /* -o mgmt-ssl=on|off; -1: on when secure-access exists (cl_tls_mgmt_on) */
    int log_level;       /* -1: the volume's diagnostics.client-log-level */
    int ping_timeout_ms; /* 0: the volume's network.ping-timeout */
    double attr_timeout; /* < 0: the volume's client.attribute-timeout */
    double entry_timeout; /* < 0: the volume's client.entry-timeout */
    int foreground, debug, read_only;
    int selinux;          /* -o selinux: security.selinux is stored (else EOPNOTSUPP) */
    int io_uring;         /* -o io-uring=on|off (default on): requests over io_uring */
    int dio_mode;         /* -o direct-io-mode=auto|enable|disable: enum cf_dio_mode */
    int others;           /* who else may use the mount: enum cf_others */
    int mounter_only;     /* cf_decide_access fell back to no allow_other */
    char fuse_opts[4096]; /* options passed through to libfuse, comma-separated */
    /* GlusterFS mount options taken without effect (logged at info) and
     * xlator-options naming nothing of Cairn's (logged as warnings), one a
     * line, for the log once it is open */
    char notes[2048], warnings[2048];
};

/* Who besides the mounter may use the mount. The kernel checks permissions
 * from the mode bits and ACLs either way (default_permissions is always
 * set), as on a local disk. */
enum cf_others {
    CF_OTHERS_AUTO,  /* default: allow_other where the mounter may set it */
    CF_OTHERS_ASKED, /* -o allow_other: set it or fail */
    CF_OTHERS_OFF,   /* -o no-allow-other: only the mounter */
    CF_OTHERS_ROOT,  /* -o allow_root: the mounter and root (libfuse's) */
};

/* Parses the command line; on a usage error prints it and returns -EINVAL. */
int cf_parse_args(int argc, char **argv, struct cf_config *cfg);
/* Adds allow_other to the FUSE options where cfg->others wants it and the
 * mounter may set it: root always; another user only when fuse.conf has
 * user_allow_other (fusermount3 refuses it otherwise). Without it an asked
 * allow_other fails (-EPERM, said on stderr) and the default falls back to
 * a mount only its mounter can use (cfg->mounter_only, for the caller to
 * warn about). 0 or -errno. */
int cf_decide_access(struct cf_config *cfg, const char *fuse_conf);

struct cf_live;
struct cf_leases;
struct cf_known;
struct cf_wb;
struct cf_wbrm;
struct cf_wbd;
struct cf_wbm;
struct cf_uring;
struct cf_rc;
struct cf_ps;
struct cf_wbh;

/* State of one mount, the session's userdata. */
struct cf {
    struct cl_layer *stack;
    struct cl_itable *it;
    /* Changed live by the management connection's thread (live.c): read them
     * with cf_attr_timeout / cf_entry_timeout. */
    double attr_timeout, entry_timeout;
    int attr_fixed, entry_fixed; /* set by mount option: leases do not lengthen it */
    int selinux;                 /* -o selinux (ops_xattr.c) */
    int dio_mode;                /* -o direct-io-mode: enum cf_dio_mode */
    struct cf_live *live;
    struct cf_leases *leases; /* lease.c */
    struct cf_known *known;   /* known.c */
    struct cf_wb *wb;         /* wb.c */
    struct cf_wbrm *wbrm;     /* wb_rm.c */
    struct cf_wbd *wbd;       /* wb_dir.c */
    struct cf_wbm *wbm;       /* wb_mkdir.c */
    struct cf_uring *uring;   /* uring.c */
    struct cf_rc *rc;         /* readcache.c */
    struct cf_ps *ps;         /* pagestore.c */
    struct cf_wbh *wbh;       /* wbehind.c */
    struct cf_lsa *lsa;       /* lsahead.c */
    struct memtrim *trim;     /* ../lib/memtrim.c */
    struct cf_sd *sd;         /* statedump.c */
    /* Operations and round trips per opcode (fop_submit counts them); read
     * as the root's virtual xattr CF_STATS_XATTR (ops_xattr.c). */
    struct cl_opstats stats;
};

#define CF_STATS_XATTR "trusted.cairn.io-stats"

/* The length of a line snprintf made into n bytes (len its return). */
static inline size_t cf_fmt_len(int len, size_t n)
{
    return len < 0 ? 0 : (size_t)len < n ? (size_t)len : n - 1;
}

/* -o direct-io-mode: which handles skip the kernel's page cache. */
enum cf_dio_mode {
    CF_DIO_AUTO,    /* handles opened for writing (cf_set_direct), and O_DIRECT */
    CF_DIO_ENABLE,  /* every handle of a file */
    CF_DIO_DISABLE, /* O_DIRECT handles only */
};

/* Sets fi->direct_io (FOPEN_DIRECT_IO) and keep_cache for a file handle
 * about to be given to the kernel, per -o direct-io-mode (ops_file.c). */
void cf_set_direct(struct cf *cf, struct fuse_file_info *fi);

static inline double cf_attr_timeout(struct cf *cf)
{
    double d;
    __atomic_load(&cf->attr_timeout, &d, __ATOMIC_RELAXED);
    return d;
}

static inline double cf_entry_timeout(struct cf *cf)
{
    double d;
    __atomic_load(&cf->entry_timeout, &d, __ATOMIC_RELAXED);
    return d;
}

/* ---- live.c: volume changes applied to a running mount ----
 * Starts the management connection (after daemonizing: threads do not
 * survive fork) to servers[first] of the n servers, with vol the layout the
 * stack was built from (taken over: cf_live_stop frees it). Live options of
 * later layouts are applied to cf and its stack; mount options given on the
 * command line keep precedence. Returns 0 or -errno. */
int cf_live_start(struct cf *cf, const struct cf_config *cfg, const struct net_addr *servers, int n,
                  int first, struct cl_volinfo *vol);
/* Stops the management connection: before the stack is destroyed. */
void cf_live_stop(struct cf *cf);

/* FUSE requests over io_uring (uring.c). cf_uring_enable_kernel turns the
 * fuse module's enable_uring on (before the mount, as root);
 * cf_uring_attach makes the session's I/O go through uring.c (after the
 * mount, before the loop); cf_uring_stop ends the queue threads (after
 * the loop). Without the ring, requests keep coming over /dev/fuse. */
void cf_uring_enable_kernel(void);
int cf_uring_attach(struct cf *cf, struct fuse_session *se);
void cf_uring_stop(struct cf *cf);
/* "FUSE requests over io_uring: N (Q of C CPU queues)" or "...: off", a
 * line of the mount's io-stats; returns its length (< n). */
size_t cf_uring_format(struct cf *cf, char *buf, size_t n);
/* 1 once the INIT reply asked for FUSE_DIRECT_IO_ALLOW_MMAP: a direct
 * handle may be mapped shared. */
int cf_uring_dio_mmap(struct cf *cf);
/* Frees what cf_live_start took over (the layout): after the stack is gone. */
void cf_live_free(struct cf *cf);

/* ---- statedump.c: the mount's state written to a file on SIGUSR1 ----
 * cf_statedump_block blocks SIGUSR1 in the calling thread (first thing in
 * main, so every thread inherits it); cf_statedump_start (after
 * daemonizing) starts the thread that takes it, writing under dir
 * (server.statedump-path; NULL or "": the default); cf_statedump_set_dir
 * follows a change of the option; cf_statedump_stop ends the thread. */
void cf_statedump_block(void);
int cf_statedump_start(struct cf *cf, const char *mountpoint, const char *volume, const char *dir);
void cf_statedump_set_dir(struct cf *cf, const char *dir);
void cf_statedump_stop(struct cf *cf);
/* The mount's io-stats text (what CF_STATS_XATTR reads): its length, < n. */
size_t cf_stats_format(struct cf *cf, char *buf, size_t n);

/* ---- lease.c: kernel caching under leases (docs/consistency.md) ----
 * cf_leases_start hooks the recall handler into the stack parameters (call
 * it before the stack is built, after daemonizing). Stop it after the FUSE
 * loop ended, free it after the stack is gone. */
int cf_leases_start(struct cf *cf, struct fuse_session *se, struct cl_stack_params *sp);
void cf_leases_stop(struct cf *cf);
void cf_leases_free(struct cf *cf);
/* client.leases and client.lease-cache-timeout (live). */
void cf_lease_configure(struct cf *cf, int enabled, double cache_timeout);
struct fop;
/* After this mount renamed node: what the kernel cached about it and below
 * it is dropped (the brick dropped those leases with the rename). */
void cf_lease_drop_node(struct cf *cf, uint64_t node);
/* Asks for a lease with the request (when leases are on). */
void cf_lease_ask(struct fop *f);
/* Replies that carry timeouts are decided and sent between these two. */
void cf_reply_begin(struct cf *cf);
void cf_reply_end(struct cf *cf);
/* The kernel attribute timeout for what is known under a lease. */
double cf_lease_cache_timeout(struct cf *cf);
/* Whether f's reply came with every lease it asked for (the name's too),
 * all still valid. */
int cf_lease_held(const struct fop *f);
/* Whether f's reply came with at least the object's lease, still valid:
 * its attributes and data may be cached, its name maybe not. */
int cf_lease_object_held(const struct fop *f);
/* Whether f's reply came with at least the object's lease and no recall
 * since its request concerned path (the parent's lease, refused or
 * recalled, does not matter for what the reply leased on path itself). */
int cf_lease_held_path(const struct fop *f, const char *path);
/* Whether the leases bit (RPC_LEASE_READ: attributes, RPC_LEASE_NAME: the
 * name) cover entry d of f's listing reply, still valid: a merged
 * listing's entry carries its own, any other has the reply's. */
int cf_lease_entry_held(const struct fop *f, const struct rpc_msg *d, unsigned bit);
/* For a request sent outside a fop: the mark to send it with (0: leases
 * are off, ask for none), and whether no recall since it concerned path. */
uint64_t cf_lease_mark(struct cf *cf);
int cf_lease_kept(struct cf *cf, uint64_t mark, const char *path);
/* Kernel timeouts for f's reply: long under a lease, else the volume's. */
double cf_lease_entry_timeout(const struct fop *f);
double cf_lease_attr_timeout(const struct fop *f, const struct rpc_attr *a);
/* The same, for what a lease held (or not) covers. */
double cf_lease_entry_timeout_as(const struct fop *f, int held);
double cf_lease_attr_timeout_as(const struct fop *f, int held, const struct rpc_attr *a);

/* ---- known.c: answers without the brick, under leases ---- */
int cf_known_init(struct cf *cf);
void cf_known_free(struct cf *cf);
/* Writes, for a statedump, section [client.leases]: every node this mount
 * knows something of under a lease, its path and what is known
 * ("complete", "exclusive-dir", ...). */
void cf_known_dump(struct cf *cf, FILE *f);
/* dir was made by this mount under a lease: it is complete (empty);
 * excl: the lease is exclusive. */
void cf_known_dir_made(struct cf *cf, uint64_t dir, int excl);
/* 1 when dir is complete and its lease exclusive (write-back may create in it). */
int cf_known_excl(struct cf *cf, uint64_t dir);
/* A file this mount holds exclusively (asked with OPEN or CREATE, for
 * write-behind), until its lease is recalled or its last handle here
 * closes (file_shared). */
void cf_known_file_excl(struct cf *cf, uint64_t node);
void cf_known_file_shared(struct cf *cf, uint64_t node);
int cf_known_is_file_excl(struct cf *cf, uint64_t node);
/* Whether dir has a default ACL: 0 unknown, 1 none, 2 yes. */
int cf_known_dir_acl(struct cf *cf, uint64_t dir);
void cf_known_set_dir_acl(struct cf *cf, uint64_t dir, int acl);
/* This mount added / removed name in dir (no effect unless dir is complete).
 * st: the new entry's inode number and type, for listings answered here
 * (NULL when not known: the bricks list dir then). */
void cf_known_add(struct cf *cf, uint64_t dir, const char *name, const struct stat *st);
/* cf_known_add for an existing object (a rename's), its type as known. */
void cf_known_add_node(struct cf *cf, uint64_t dir, const char *name, uint64_t node);
void cf_known_remove(struct cf *cf, uint64_t dir, const char *name);
/* A complete directory's entries, each with its type known: what a
 * listing answered without the bricks shows ("." and ".." apart). One
 * allocation, freed by the caller; NULL when dir is not so known. */
struct cf_known_ent {
    const char *name;
    uint64_t ino;
    mode_t type;
};
struct cf_known_list {
    size_t n;
    struct cf_known_ent e[];
};
struct cf_known_list *cf_known_list(struct cf *cf, uint64_t dir);
/* Whether cf_known_list would answer for dir now. */
int cf_known_listable(struct cf *cf, uint64_t dir);
/* 1 when dir is complete and has no entry name. */
int cf_known_absent(struct cf *cf, uint64_t dir, const char *name);
/* 1 when dir is complete and has no entries. */
int cf_known_dir_empty(struct cf *cf, uint64_t dir);
/* node was created here under a lease: it has no security.capability. */
void cf_known_nocaps(struct cf *cf, uint64_t node);
int cf_known_has_nocaps(struct cf *cf, uint64_t node);
/* node was made here (under a lease) without set-id bits, and this mount
 * set none since (nosetid 0: it may have them). A write clears none. */
void cf_known_nosetid(struct cf *cf, uint64_t node, int nosetid);
int cf_known_has_nosetid(struct cf *cf, uint64_t node);
/* A directory's attributes (from a change's reply, under its lease). */
void cf_known_set_attr(struct cf *cf, uint64_t node, const struct stat *st);
int cf_known_attr(struct cf *cf, uint64_t node, struct stat *st);
/* A change of dir's entries written back: its known mtime and ctime become
 * now, and a removed subdirectory takes one link, as the bricks will make
 * them. Nothing when its attributes are not known. */
void cf_known_touch_dir(struct cf *cf, uint64_t dir, int subdir_gone);
void cf_known_forget_attr(struct cf *cf, uint64_t node);
/* After a change of dir's entries by f (under the reply lock): keeps the
 * directory attributes its reply carried, or forgets stale ones. */
void fop_parent_attr(struct fop *f, uint64_t dir);
/* name is absent from node (reported under a lease). An extended attribute
 * set or removed here forgets them all, security.capability included. */
void cf_known_noxattr(struct cf *cf, uint64_t node, const char *name);
int cf_known_xattr_absent(struct cf *cf, uint64_t node, const char *name);
void cf_known_forget_xattrs(struct cf *cf, uint64_t node);
/* A reply under a lease named node (for a directory: its entries too). */
void cf_known_leased(struct cf *cf, uint64_t node);
/* A reply named node with attributes st, under its lease when held: a file
 * with more than one name is not leased (a change through another name
 * recalls the leases on that name only), leased or not, and one that
 * gained a name since loses its lease. */
void cf_known_leased_as(struct cf *cf, uint64_t node, const struct stat *st, int held);
/* At opendir: 0 no listing cache; 1 cache this pass (the kernel drops the
 * old one); 2 keep the cache, filled under the same lease. */
int cf_known_dir_cache(struct cf *cf, uint64_t dir);
/* A listing reply came without the lease: what the kernel caches from it
 * must not be kept. */
void cf_known_dir_uncached(struct cf *cf, uint64_t dir);
/* node has no extended attributes at all (a brick's NOXATTRS, under a lease). */
void cf_known_noxattrs(struct cf *cf, uint64_t node);
int cf_known_xattr_free(struct cf *cf, uint64_t node);
/* The lease on node is gone: forget what was known about it. */
void cf_known_forget(struct cf *cf, uint64_t node);
/* The kernel forgot node: its record goes (node ids are not reused). */
void cf_known_gone(struct cf *cf, uint64_t node);
void cf_known_forget_all(struct cf *cf);
/* 1 when dir's listing is in the kernel's cache, filled under the lease
 * still held (what cf_known_dir_cache answers 2 for), without marking it. */
int cf_known_dir_cache_kept(struct cf *cf, uint64_t dir);
/* ops_dir.c: directory handles opened without the brick (fop_submit opens
 * them there when a request needs the brick handle). */
int cf_dir_is_lazy(uint64_t fh);
int cf_dir_real_fh(struct cf *cf, uint64_t fh, uint64_t *real);
/* 1 while a reply under a lease named node and no recall forgot it. */
int cf_known_is_leased(struct cf *cf, uint64_t node);

/* ---- readcache.c: windows of files read at random, under their lease ---- */
struct cf_rc_window {
    uint64_t start, gen, epoch;
    size_t len;
};
int cf_rc_init(struct cf *cf);
void cf_rc_free(struct cf *cf);
/* performance.read-ahead, performance.read-ahead-page-count (x 128 KiB),
 * performance.cache-size (live). */
void cf_rc_configure(struct cf *cf, int on, int pages, size_t max);
/* A read of size at off: 1 when answered from the cache (*n bytes copied
 * to out, which holds size); 2 when the window plan describes should be
 * read from the brick instead (then cf_rc_fill); 0 when the read is not
 * cached at all. */
int cf_rc_read(struct cf *cf, fuse_ino_t ino, int open_flags, uint64_t off, size_t size, char *out,
               size_t *n, struct cf_rc_window *plan);
void cf_rc_fill(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan, const char *data,
                size_t len);
/* After a miss (plan of the window fetched for it) through brick handle fh:
 * fills out (room for CF_RC_AHEAD_N) with windows of ino to read ahead
 * through fh, returns how many; each ends with cf_rc_ahead_done, after its
 * cf_rc_fill, or with a call here as landed (miss NULL), which continues
 * the sweep past it and ends it. cf_rc_release_wait(fh) returns once none
 * through fh is in flight, and starts no new one meanwhile: before the
 * handle is released. */
#define CF_RC_AHEAD_N 4
int cf_rc_ahead_plan(struct cf *cf, fuse_ino_t ino, uint64_t fh, const struct cf_rc_window *miss,
                     const struct cf_rc_window *landed, struct cf_rc_window *out);
void cf_rc_ahead_done(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan);
/* A read of the kernel that missed (plan miss) inside a window being read
 * ahead: cf_rc_wait_ahead returns 1 when w (its owner's, until answered)
 * now waits for that window, 0 when there is none to wait for (fetch it).
 * cf_rc_landed, when a window read ahead came back and before its
 * cf_rc_ahead_done or next cf_rc_ahead_plan, returns the reads waiting for
 * it; none attaches after that. */
struct cf_rc_waiter {
    struct cf_rc_waiter *next;
    fuse_req_t req;
    uint64_t fh, off;
    size_t size;
};
int cf_rc_wait_ahead(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *miss,
                     struct cf_rc_waiter *w);
struct cf_rc_waiter *cf_rc_landed(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan);
/* plan's window is now in the kernel's page cache (pagestore.c): reading
 * ahead skips it until ino is opened again (cf_rc_opened; each open drops
 * the file's cached pages). */
void cf_rc_stored(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan);
void cf_rc_opened(struct cf *cf, fuse_ino_t ino);
void cf_rc_release_wait(struct cf *cf, uint64_t fh);
/* This mount changes ino's data (write, truncate, fallocate), or the lease
 * on it went: its windows are not used again. */
void cf_rc_changed(struct cf *cf, fuse_ino_t ino);
void cf_rc_forget_all(struct cf *cf);
/* 1 while plan's window is still valid (no change and the lease held
 * since it was planned). */
int cf_rc_current(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan);
/* "FUSE read cache: ..." line of the io-stats (empty without the cache). */
size_t cf_rc_format(struct cf *cf, char *buf, size_t n);
/* The read cache's counters as COUNTER fields (live.c reports them to
 * cairnd): read_cache_hits, read_cache_misses, read_cache_bytes. */
void cf_rc_report(struct cf *cf, struct rpc_buf *b);
/* One COUNTER field {NAME, CALLS} (live.c). */
void cf_put_counter(struct rpc_buf *b, const char *name, uint64_t value);

/* ---- pagestore.c: read-ahead windows stored into the kernel's page cache ----
 * cf_ps_start after the mount (the thread writes notifications to se),
 * cf_ps_stop after the request loop ended (no store is made after it),
 * cf_ps_free once no recall thread can call in (after cf_leases_stop).
 * Without a started store every call is a no-op. */
int cf_ps_start(struct cf *cf, struct fuse_session *se);
void cf_ps_stop(struct cf *cf);
void cf_ps_free(struct cf *cf);
/* A window of ino just read from the brick under plan: the data of the
 * READ reply *frame. A store taken takes the frame too (*frame becomes
 * NULL); otherwise the caller keeps it. */
void cf_ps_offer(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan,
                 struct rpc_frame **frame);
/* ino is opened for writing (or created) by this mount: no store of it
 * from now until cf_ps_forget; waits (bounded) for one in progress. */
void cf_ps_writer(struct cf *cf, fuse_ino_t ino);
/* ino's lease is being recalled: waits (bounded) for a store in progress. */
void cf_ps_quiesce(struct cf *cf, fuse_ino_t ino);
/* Runs fn(arg) once no store of ino is in progress: at once, or on the
 * store thread once the store in progress has ended and, when the file
 * changed while it ran, its pages were dropped again. */
void cf_ps_after(struct cf *cf, fuse_ino_t ino, void (*fn)(void *), void *arg);
/* The kernel forgot ino. */
void cf_ps_forget(struct cf *cf, fuse_ino_t ino);
/* "FUSE page-cache fill: ..." line of the io-stats. */
size_t cf_ps_format(struct cf *cf, char *buf, size_t n);

/* ---- wbehind.c: write-behind of file data (docs/consistency.md) ---- */
int cf_wbh_init(struct cf *cf);
struct opt_set;
/* performance.write-behind, -window-size (per file), -trickling-writes,
 * performance.aggregate-size, performance.strict-o-direct and
 * client.write-back-size (over all files), from a volume's options. */
void cf_wbh_configure(struct cf *cf, const struct opt_set *opts);
/* Frees, after the stack is gone (cf_wbh_settle_all drains before). */
void cf_wbh_free(struct cf *cf);
/* Answers the write here (returns 1) when it may be written behind; else
 * waits until the file's writes behind are on the bricks and returns 0. */
int cf_wbh_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi);
/* Until node's writes behind are on the bricks. */
void cf_wbh_sync(struct cf *cf, uint64_t node);
/* Whether a handle opened with flags would be written behind under an
 * exclusive lease on its file (what an OPEN or CREATE asks for). */
int cf_wbh_wanted(struct cf *cf, int flags);
/* The bricks refused node's exclusive lease asked with an OPEN or CREATE:
 * its writes ask again after a while (wbehind.c). */
void cf_wbh_refused(struct cf *cf, uint64_t node);
/* The same, and returns (once) the error of one of them, as -errno. */
int cf_wbh_flush(struct cf *cf, uint64_t node);
/* Until the writes behind of every file of dir (or of all files) are on
 * the bricks. */
void cf_wbh_settle_dir(struct cf *cf, uint64_t dir);
void cf_wbh_settle_all(struct cf *cf);
/* 1 while some file has writes behind (or an error to return). */
int cf_wbh_busy(struct cf *cf);
/* This mount gives node another name: it is no longer written behind. */
void cf_wbh_linked(struct cf *cf, uint64_t node);
/* "FUSE write-behind: ..." line of the io-stats. */
size_t cf_wbh_format(struct cf *cf, char *buf, size_t n);
/* The write-back counters, one line of io-stats. */
size_t cf_wb_format(struct cf *cf, char *buf, size_t n);
/* The write-back queue as COUNTER fields: wb_pending_files,
 * wb_pending_bytes, wb_oldest_ms (age of the oldest closed file waiting to
 * be sent, 0 when none), wb_made. */
void cf_wb_report(struct cf *cf, struct rpc_buf *b);
/* ---- lsahead.c: listings of subdirectories fetched ahead ---- */
struct cf_lsa_list {
    struct cf_lsa_list *prev, *next;
    uint64_t dir, mark, gen, made_ms;
    gfid_t gfid;
    struct rpc_frame **fr; /* READDIR replies, in order; the last has EOF */
    size_t n, bytes;
};
int cf_lsa_init(struct cf *cf);
void cf_lsa_free(struct cf *cf);
/* Something changed through this mount: no listing fetched before serves. */
void cf_lsa_changed(struct cf *cf);
/* A listing under the lease showed directory dir: fetch its listing. */
void cf_lsa_want(struct cf *cf, uint64_t dir);
/* An OPENDIR of dir found no listing: it is not fetched, or if it is
 * being fetched, waits for it; 1: it has come. */
int cf_lsa_unwant(struct cf *cf, uint64_t dir);
/* dir's listing, fetched ahead and still good, held (locked) until
 * cf_lsa_done (drop: it was served to its end); or NULL. */
const struct cf_lsa_list *cf_lsa_get(struct cf *cf, uint64_t dir);
void cf_lsa_done(struct cf *cf, const struct cf_lsa_list *l, int drop);
int cf_lsa_has(struct cf *cf, uint64_t dir);
/* "FUSE listing-ahead: ..." line of the io-stats. */
size_t cf_lsa_format(struct cf *cf, char *buf, size_t n);
/* fop.c: the brick handle behind a handle the kernel holds (a write-back
 * file's or a lazy directory's is made real first). 0 or -errno. */
int fop_real_fh(struct cf *cf, uint64_t *fh);

/* lease.c: drops the kernel's cached attributes of node (not its pages). */
void cf_lease_inval_attr(struct cf *cf, uint64_t node);

/* A wait until due_ms (net_now_ms, CLOCK_MONOTONIC) or a signal on a
 * condition variable on that clock (net_cond_init_mono). */
void cf_wait_until_ms(pthread_cond_t *c, pthread_mutex_t *m, uint64_t due_ms);

/* ---- wb.c: write-back of new small files (docs/consistency.md) ----
 * The cf_wb_* handler hooks return 1 when they answered the request. */
struct cf_wb;
int cf_wb_init(struct cf *cf);
void cf_wb_configure(struct cf *cf, int enabled, size_t max_bytes, size_t max_files);
/* Whether write-back and write-behind take new work: the option, and no
 * brick refused space lately (cf_wb_nospace). */
int cf_wb_enabled(struct cf *cf);
/* A request failed with ENOSPC or EDQUOT (in the background or not): for
 * the next 5 seconds (WB_NOSPACE_MS), new creates and writes wait for the bricks, so
 * each learns of a full volume at its own call. */
void cf_wb_nospace(struct cf *cf);
int cf_wb_settle_all(struct cf *cf); /* fsyncdir; before the stack goes */
void cf_wb_free(struct cf *cf);
int cf_wb_is_fh(uint64_t fh);
/* Puts the pending file node / every pending file of dir on the bricks. */
int cf_wb_settle(struct cf *cf, uint64_t node);
int cf_wb_settle_dir(struct cf *cf, uint64_t dir);
int cf_wb_settle_name(struct cf *cf, uint64_t parent, const char *name);
/* An error of write-back in dir not reported yet (reported once), or 0. */
int cf_wb_dir_error(struct cf *cf, uint64_t dir);
int cf_wb_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                 struct fuse_file_info *fi);
int cf_wb_getattr(fuse_req_t req, fuse_ino_t ino);
int cf_wb_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set);
int cf_wb_write(fuse_req_t req, struct fuse_file_info *fi, const char *buf, size_t size, off_t off);
/* A read through the kernel's handle of a file still written back and open:
 * answered from what the mount holds (a direct handle's reads come here). */
int cf_wb_read(fuse_req_t req, struct fuse_file_info *fi, size_t size, off_t off);
int cf_wb_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
int cf_wb_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
int cf_wb_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                   int flags);
int cf_wb_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
/* Opens a closed file not yet sent (it stays written back). */
int cf_wb_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* A rename answered here: the names move in this mount's tables and the
 * directories' cached times move on. */
void cf_wb_moved(struct cf *cf, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname);
/* Renames a file not yet sent to a name absent everywhere (both
 * directories written back): no request at all. */
int cf_wb_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                 const char *newname, unsigned int flags);
/* RELEASE of a write-back handle: 1 when it was one; *real_fh the brick
 * handle still to close (0: none). */
int cf_wb_release(fuse_req_t req, struct fuse_file_info *fi, uint64_t *real_fh);
/* The brick handle behind fh (materializing a pending file); 0 or -errno. */
int cf_wb_real_fh(struct cf *cf, uint64_t fh, uint64_t *real);
/* fsync of a write-back handle: the file goes to the bricks with an fsync. */
int cf_wb_fsync_fh(struct cf *cf, uint64_t fh);
/* For wb_rm.c: node's written-back file, if it was never sent, is dropped
 * (1); 0 when none is pending here (or it is in flight); -EBUSY while the
 * kernel still has it open. */
int cf_wb_drop_unsent(struct cf *cf, uint64_t node);
/* For wb_mkdir.c: the closed files of dir never sent are dropped (its MKDIR
 * failed); the count. */
size_t cf_wb_drop_dir(struct cf *cf, uint64_t dir);
/* A background error in dir: returned by the next create or fsyncdir there. */
void cf_wb_note_error(struct cf *cf, uint64_t dir, int err);
size_t cf_wb_max_files(struct cf *cf);
/* Before a name in parent is written back: a change of parent's attributes,
 * and a removal of that name, reach the bricks first. */
void cf_wb_order_new(struct cf *cf, uint64_t parent, const char *name);

/* ---- wb_rm.c: write-back of unlink and rmdir (docs/consistency.md) ---- */
int cf_wbrm_init(struct cf *cf);
void cf_wbrm_free(struct cf *cf);
/* Answers the removal of name from parent here (returns 1) when parent is
 * complete and exclusively leased (and, for rmdir, the directory is too,
 * and empty); the request goes to the bricks from a queue. */
int cf_wbrm_remove(fuse_req_t req, fuse_ino_t parent, const char *name, int is_dir);
/* Answers the rename of a file (not a directory) already on the bricks
 * here (returns 1) when both directories are complete and exclusively
 * leased and newname is free; the RENAME goes to the bricks from the same
 * queue, in order. */
int cf_wbrm_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                   const char *newname, unsigned int flags);
/* Until every queued removal is answered by the bricks. */
int cf_wbrm_settle(struct cf *cf);
/* Settles the queue when a removal in it concerns a request on path (the
 * same object, or one below path). */
int cf_wbrm_settle_path(struct cf *cf, const char *path);
/* 1 when a removal of parent/name is queued or in flight. */
int cf_wbrm_queued(struct cf *cf, uint64_t parent, const char *name);
/* Settles the queue when a removal or rename of an entry of dir is in it
 * (dir 0: always). */
int cf_wbrm_settle_dir(struct cf *cf, uint64_t dir);

/* ---- wb_dir.c: write-back of directory attributes (docs/consistency.md) ---- */
int cf_wbd_init(struct cf *cf);
void cf_wbd_free(struct cf *cf);
/* Answers a SETATTR of mode, owner or explicit times of a directory this
 * mount holds exclusively, in a parent it holds exclusively (returns 1);
 * the SETATTR goes to the bricks from a queue, after the directory's
 * written-back files. */
int cf_wbd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set);
/* The ACL calls `cp -a` makes on each directory, answered (and 1 returned)
 * for a directory held as above: setting an access ACL that only says what
 * a mode says (queued as that chmod), and removing (value NULL) a default
 * ACL it is known not to have (ENODATA). */
int cf_wbd_acl(fuse_req_t req, fuse_ino_t ino, const char *name, const void *value, size_t size,
               int flags);
/* Until the pending SETATTR of node / of dir and of the directories in it
 * / of every directory is answered; the error of one that failed
 * meanwhile, or 0. */
int cf_wbd_settle(struct cf *cf, uint64_t node);
int cf_wbd_settle_in(struct cf *cf, uint64_t dir);
/* Sends the SETATTR of the fields to_set of attr for node (by path) and
 * waits; on failure logs it and drops what this mount and the kernel
 * cached of node's attributes. */
int cf_wbd_send_attr(struct cf *cf, uint64_t node, const struct stat *attr, int to_set);
/* The fields to_set of attr, applied to st. */
void cf_attr_apply(struct stat *st, const struct stat *attr, int to_set);
/* A SETATTR answered here: st, node's known attributes, becomes what the
 * bricks will make of it (the fields to_set of attr, ctime now), and is
 * kept as node's known attributes. */
void cf_attr_answered(struct cf *cf, uint64_t node, struct stat *st, const struct stat *attr,
                      int to_set);
/* What a written-back SETATTR of a symlink may carry (a directory's may
 * also change its mode). */
#define CF_ATTR_DEFERRABLE                                                                         \
    (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |           \
     FUSE_SET_ATTR_CTIME)
int cf_wbd_busy(struct cf *cf); /* any SETATTR pending */
int cf_wbd_settle_all(struct cf *cf);

/* ---- wb_mkdir.c: write-back of mkdir (docs/consistency.md) ---- */
int cf_wbm_init(struct cf *cf);
void cf_wbm_free(struct cf *cf);
/* Answers mkdir of name in parent here (returns 1) when parent is complete,
 * exclusively leased and without a default ACL, and name is free; the
 * MKDIR goes to the bricks from a queue. */
int cf_wbm_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
/* The same for a symlink: 1 when answered here (queued with the MKDIRs). */
int cf_wbm_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
/* Answers (returns 1) a SETATTR of owner or explicit times of a symlink
 * written back here whose SYMLINK is not answered yet: the worker sends the
 * SETATTR right after it. */
int cf_wbm_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set);
/* Until the pending MKDIR of node / of node and every directory above it /
 * of every directory made in dir / of all is answered; the error of one that
 * failed meanwhile, or 0. */
int cf_wbm_busy(struct cf *cf); /* any MKDIR pending */
int cf_wbm_settle(struct cf *cf, uint64_t node);
int cf_wbm_settle_up(struct cf *cf, uint64_t node);
int cf_wbm_settle_in(struct cf *cf, uint64_t dir);
int cf_wbm_settle_all(struct cf *cf);
/* Once the MKDIRs pending above node are answered: the error of one that
 * failed, for node or a directory above it, lately (the last 64 failures),
 * else 0. What would go by a path through it is not sent: the path may
 * name somebody else's directory by now. */
int cf_wbm_gone(struct cf *cf, uint64_t node);

/* ops_entry.c: the SETATTR arguments for the fields to_set of attr. */
void cf_setattr_args(struct rpc_msg *a, const struct stat *attr, int to_set);

struct fop {
    struct cl_op op;
    fuse_req_t req;
    struct cf *cf;
    uint64_t parent, parent2; /* for entry replies and table updates */
    uint32_t flags;
    size_t size, pos; /* reply buffer size and fill (read, readdir) */
    uint64_t off;     /* readdir: the kernel offset asked for */
    struct fuse_file_info fi;
    void *data;         /* owned copy of write data, xattr value */
    uint64_t lease_seq; /* lease.c: recall sequence + 1 when a lease was asked */
    uint64_t path_node; /* PATH is this node's own (fop_path without a name) */
    int retried;        /* sent again by another name of a hard-linked file */
    char name[NAME_MAX + 1], name2[NAME_MAX + 1];
    char path[PATH_MAX], path2[PATH_MAX];
    cl_done_cb user_done; /* fop_submit: the completion after the counters */
};

/* Allocates a fop for req with opcode and completion callback; on ENOMEM
 * replies to req itself and returns NULL. */
struct fop *fop_new(fuse_req_t req, uint16_t opcode, cl_done_cb done);
void fop_free(struct fop *f);
/* Whether name in parent makes a volume path the bricks take (shorter
 * than RPC_PATH_MAX, whatever the depth the kernel reached it by): 0 or
 * -ENAMETOOLONG (0 too for an unknown parent: the request fails on its
 * own). Every handler that makes or removes a name asks first, before a
 * write-back queue may answer it: a path no brick takes must be refused
 * by the call, never accepted and lost when sent. */
int cf_name_fits(struct cf *cf, fuse_ino_t parent, const char *name);
/* Sets PATH to the path of ino (plus "/name" when name is not NULL; the name
 * is copied into f->name). Returns 0 or -errno. */
int fop_path(struct fop *f, fuse_ino_t ino, const char *name);
/* Sets PATH2 to newparent's path plus "/name2" (copied into f->name2). */
int fop_path2(struct fop *f, fuse_ino_t ino, const char *name);
/* For a change by handle: also sends ino's path, which names the leases the
 * brick must recall (nothing when the file has no name left). */
void fop_lease_key(struct fop *f, fuse_ino_t ino);
/* Submits to the stack (the reply comes from done). */
void fop_submit(struct fop *f);
/* Replies with -status (transport failures as ENOTCONN) and frees f. */
void fop_fail(struct fop *f, int status);
/* Caller identity for operations that create objects. */
void fop_set_creator(struct fop *f, int with_umask);
/* Fills a FUSE entry from a reply's ATTR, counting one lookup of
 * (f->parent, f->name). Returns 0 or -errno. */
int fop_entry(struct fop *f, struct fuse_entry_param *e);
int fop_errno(int status);
/* Closes a handle the kernel never learned about (an interrupted open);
 * asynchronous, so completion threads may call it. */
void fop_release_orphan(struct cf *cf, uint16_t opcode, uint64_t fh);
#define FOP_FAIL(f, status)                                                                        \
    do {                                                                                           \
        fop_fail((f), (status));                                                                   \
        return;                                                                                    \
    } while (0)

/* Generic completions: reply nothing but success/errno; reply the ATTR; reply
 * an entry from ATTR. All free the fop. */
void fop_done_err_cb(struct cl_op *op);
void fop_done_attr_cb(struct cl_op *op);
void fop_done_entry_cb(struct cl_op *op);
/* Release of a file or directory handle: always success to the kernel,
 * which has forgotten the handle either way; failures are logged. */
void fop_done_release_cb(struct cl_op *op);

/* Handlers (ops_*.c). */
void cf_init(void *userdata, struct fuse_conn_info *conn);
void cf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void cf_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void cf_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void cf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi);
void cf_readlink(fuse_req_t req, fuse_ino_t ino);
void cf_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void cf_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void cf_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void cf_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void cf_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void cf_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags);
void cf_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void cf_statfs(fuse_req_t req, fuse_ino_t ino);

void cf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi);
void cf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void cf_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi);
void cf_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void cf_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                  struct fuse_file_info *fi);
void cf_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);

void cf_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void cf_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void cf_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

void cf_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                 int flags);
void cf_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void cf_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void cf_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

void cf_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock);
void cf_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
              int sleep);
void cf_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op);

/* ---- squash.c: server.root-squash and server.all-squash ----
 * cf_squash_configure takes the four options (at mount and when they
 * change live). cf_squash_ids gives the owner the bricks give what the
 * caller of req creates (its uid and gid, squashed); 1 when squashed. The
 * cf_sq_* handlers check a squashed caller's permission as the kernel checks
 * an unprivileged user's, answer req when refused, and hand the others to
 * the plain handler of the same name. */
void cf_squash_configure(struct cf *cf, const struct opt_set *opts);
int cf_squash_ids(fuse_req_t req, uid_t *uid, gid_t *gid);
void cf_sq_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void cf_sq_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi);
void cf_sq_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void cf_sq_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void cf_sq_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void cf_sq_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                  struct fuse_file_info *fi);
void cf_sq_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void cf_sq_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void cf_sq_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void cf_sq_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                  const char *newname, unsigned int flags);
void cf_sq_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_sq_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cf_sq_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                    size_t size, int flags);
void cf_sq_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
