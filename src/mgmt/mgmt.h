/* cairnd's state: the volumes it manages and their brick processes.
 *
 * One mutex (struct mgmt.lock) guards everything below; CLI commands, GETVOL
 * and the brick supervisor all run under it, so a command sees and leaves a
 * consistent state. Commands are short except volume stop, which waits for
 * its brick processes to exit (bounded by MGMT_STOP_TIMEOUT_MS per brick). */
#ifndef CAIRN_MGMT_H
#define CAIRN_MGMT_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../lib/gfid.h"
#include "../lib/net.h"
#include "../lib/options.h"

#define MGMT_VOLNAME_MAX 64
#define MGMT_STOP_TIMEOUT_MS 5000
#define MGMT_VERSION "0.1.0"
/* cairnd's metrics endpoint's default port (--metrics ADDR without one) */
#define CAIRN_METRICS_PORT 24809

enum mgmt_vol_status { MGMT_VOL_CREATED, MGMT_VOL_STARTED, MGMT_VOL_STOPPED };

struct mgmt_brick {
    char id[GFID_STRLEN]; /* uuid of the brick, also in BRICK/.cairn/brick.info */
    char host[NET_HOST_MAX];
    char path[PATH_MAX];
    uint16_t port;       /* last port given to the brick process; kept across restarts */
    pid_t pid;           /* running brick process, 0 if none */
    uint64_t started_ms; /* when pid was spawned */
    uint64_t retry_ms;   /* when a dead brick may be spawned again */
    unsigned backoff_ms; /* current restart delay */
    unsigned restarts;
    int local; /* 1 when this server serves the brick (pool.h) */
};

struct cl_place; /* client/distribute.h */

struct mgmt_vol {
    struct mgmt_vol *next;
    char name[MGMT_VOLNAME_MAX + 1];
    char id[GFID_STRLEN];
    enum mgmt_vol_status status;
    int n_bricks;
    struct mgmt_brick *bricks; /* array of n_bricks, owned */
    int replica; /* bricks per replica set (consecutive bricks); 0 or 1: distribute only */
    int arbiter; /* 1: the last brick of each replica set is an arbiter */
    /* > 0: a dispersed volume; replica is then the bricks of each disperse
     * set (k + m) and this its redundancy m (docs/disperse.md) */
    int redundancy;
    struct opt_set opts; /* options set by `volume set`, owned */
    uint64_t gen;        /* pool generation of its last change (GETVOL, NOTIFY) */
    /* id of the brick `volume reset-brick ... start` stopped, until its
     * commit ("" for none): its server keeps it down (docs/elastic.md) */
    char reset_id[GFID_STRLEN];
    /* this server stopped its bricks of the volume for want of server
     * quorum (quorum.c); runtime only */
    int quorum_down;
    /* Where files go (placement.c, docs/elastic.md): NULL for a volume of
     * per-directory hash ranges (made before placements, or with
     * cluster.placement ranges); else the volume-wide placement, one set
     * per distribute set in brick order, and the one before it while files
     * may still be where it put them (until a rebalance finishes). Owned. */
    struct cl_place *place, *place_prev;
};

/* A server of the trusted pool (replicated state; pool.h). */
struct mgmt_peer {
    char uuid[GFID_STRLEN];
    uint64_t raft_id;
    char host[NET_HOST_MAX]; /* as probed: names the server in brick paths */
    uint16_t port;           /* its cairnd port */
    char raft_addr[NET_HOST_MAX + 8];
};

struct mgmt_pool;
struct mgmt_notify;
struct mgmt_applier;

struct mgmt {
    pthread_mutex_t lock;
    char workdir[PATH_MAX];
    char brickd[PATH_MAX]; /* the cairn-brickd executable */
    /* --ssl-key/--ssl-cert/--ssl-ca: this server's TLS files, for its
     * bricks and its own connections ("": /etc/ssl/cairn.*) */
    char ssl_key[PATH_MAX], ssl_cert[PATH_MAX], ssl_ca[PATH_MAX];
    /* management TLS (the file secure-access in the workdir): every
     * connection to this cairnd is TLS with this context, and so are its
     * own to other cairnds. NULL: plain TCP. */
    struct rpc_tls_ctx *mgmt_tls;
    struct net_addr listen;
    uint16_t port_min, port_max; /* brick port range */
    struct mgmt_vol *vols;       /* sorted by name */
    volatile int stopping;
    /* Set by SIGHUP (logrotate, `systemctl reload cairnd`): the supervisor
     * passes the signal on to the bricks and self-heal daemons, so each
     * reopens its log file too. */
    volatile sig_atomic_t reopen_logs;
    /* The pool (pool.h). All zero in a struct mgmt that never joins one. */
    pthread_cond_t cond;      /* broadcast (with lock) after every applied entry */
    pthread_mutex_t cmd_lock; /* serializes mutating commands on this server */
    char uuid[GFID_STRLEN];   /* this server's identity */
    uint16_t raft_port;       /* 0: the cairnd port + 1000 */
    uint64_t gen;             /* entries applied to the state so far */
    struct mgmt_peer *peers;  /* replicated: every server of the pool, self included */
    int n_peers;              /* 0 while standalone */
    struct opt_set pool_opts; /* replicated: options set by `volume set all` */
    /* Server quorum as this server last found it (quorum.c): 1 met, 0 lost,
     * -1 not known yet (cairnd just started). */
    int server_quorum;
    struct mgmt_pool *pool; /* Raft runtime, NULL while standalone */
    struct mgmt_applier *applier;
    struct mgmt_notify *notify;
    int64_t clock_skew_test; /* seconds added to this server's clock reports (tests) */
};

const char *mgmt_status_name(enum mgmt_vol_status s);
struct mgmt_vol *mgmt_vol_find(struct mgmt *m, const char *name);
/* Inserts v (taking ownership) keeping the list sorted by name. */
/* What `volume create` was told of a dispersed volume; -1: not given
 * (disperse 0: the word without a count). */
struct mgmt_shape_args {
    int disperse, data, redundancy;
};
/* Checks and completes a dispersed shape over n_bricks bricks as GlusterFS
 * does (redundancy chosen when not given, below half the set; the brick
 * count a multiple of the set). Returns the set size and *redundancy, with
 * note set to a line for the user (or ""); -1 with err. Pure. */
int mgmt_disperse_shape(const struct mgmt_shape_args *a, int n_bricks, int *redundancy, char *note,
                        size_t notelen, char *err, size_t errlen);

void mgmt_vol_insert(struct mgmt *m, struct mgmt_vol *v);
/* Unlinks v from the list (the caller frees it). */
void mgmt_vol_unlink(struct mgmt *m, struct mgmt_vol *v);
void mgmt_vol_free(struct mgmt_vol *v);

/* ---- placement.c: a volume's placement in its record ---- */

/* The line KEY=GEN ID:WEIGHT:STATE... (STATE active or draining). */
void mgmt_place_format(FILE *f, const char *key, const struct cl_place *p);
/* Parses the value of such a line: 0 with *out (malloc'd), -EINVAL or
 * -ENOMEM. */
int mgmt_place_parse(const char *val, struct cl_place **out);
/* The placement of a new volume: sets ids 1..sets, weight 1, generation 1.
 * NULL on ENOMEM. */
struct cl_place *mgmt_place_new(int sets);
/* cur with add new sets (ids above every id of cur), generation + 1: 0 with
 * *out (malloc'd), -E2BIG (more sets than distribute takes) or -ENOMEM. */
int mgmt_place_grow(const struct cl_place *cur, int add, struct cl_place **out);

/* ---- volstore.c: DIR/vols/NAME/info ---- */

/* write(2)/read(2) of exactly len bytes on a file, retrying on EINTR and
 * short counts; 0 or -errno (-EIO on a short read at end of file). */
int mgmt_write_all(int fd, const void *buf, size_t len);
int mgmt_read_all(int fd, void *buf, size_t len);

/* Serializes a volume as the info file's text; returns a malloc'd string or
 * NULL on ENOMEM. */
char *mgmt_vol_format(const struct mgmt_vol *v);
/* Parses an info file; on failure returns -EINVAL with the line and reason in
 * err. On success *out is a new volume owned by the caller. */
int mgmt_vol_parse(const char *text, size_t len, struct mgmt_vol **out, char *err, size_t errlen);
/* Writes DIR/vols/NAME/info atomically (temporary file, fsync, rename, fsync
 * of the directory). 0 or -errno. */
int mgmt_vol_save(const char *workdir, const struct mgmt_vol *v);
/* Removes DIR/vols/NAME. */
int mgmt_vol_remove(const char *workdir, const char *name);
/* Loads every volume under DIR/vols into m->vols. A corrupted file stops the
 * load: returns -EINVAL with the reason in err (cairnd refuses to start
 * rather than forget a volume). */
int mgmt_store_load(struct mgmt *m, char *err, size_t errlen);

/* ---- bricks.c: brick processes ---- */

/* Spawns the brick's process if it is not running. 0 or -errno. */
int mgmt_brick_spawn(struct mgmt *m, struct mgmt_vol *v, struct mgmt_brick *b);
/* Terminates the brick's process (SIGTERM, SIGKILL after the timeout) and
 * waits for it. */
void mgmt_brick_kill(struct mgmt *m, struct mgmt_brick *b);
/* Starts the thread that reaps and restarts dead brick processes, and
 * passes SIGHUP on to them when m->reopen_logs is set. */
int mgmt_supervisor_start(struct mgmt *m);
/* Kills brick processes left running by a previous cairnd (pid files under
 * DIR/run). */
void mgmt_bricks_kill_stale(struct mgmt *m);
/* Path of the brick's log file: DIR/logs/bricks/<path with dashes>.log;
 * <brick id>-<the end of that>.log when that name would exceed NAME_MAX. */
void mgmt_brick_log_path(const struct mgmt *m, const struct mgmt_brick *b, char *out, size_t len);
/* Gives b a free port in the brick range (none of avoid), keeping its
 * previous one when free. 0 or -EADDRINUSE. */
int mgmt_brick_alloc_port(struct mgmt *m, struct mgmt_brick *b, const uint16_t *avoid, int n_avoid);
/* Whether the brick's directory exists and carries v's marker; 0 or -ENOENT
 * with the reason in err. */
int mgmt_check_brick_dir(const struct mgmt_vol *v, const struct mgmt_brick *b, char *err,
                         size_t errlen);
/* Tells the running bricks of v about changed live options. */
void mgmt_bricks_reconfigure(struct mgmt *m, struct mgmt_vol *v);

/* ---- probe.c: whether brick processes answer ---- */

/* Starts the thread that pings this server's running bricks. */
int mgmt_probe_start(struct mgmt *m);
/* Whether b's process runs and answers (the `volume status` Online): not
 * when it has left a ping unanswered for two seconds (stopped with
 * SIGSTOP, wedged). Never waits: reads what the probe thread found. */
int mgmt_brick_online(const struct mgmt_brick *b);

/* ---- quorum.c: server quorum (docs/cluster.md) ---- */

/* Starts the thread that counts the pool's servers this one reaches and
 * stops or starts the bricks of volumes with cluster.server-quorum-type
 * server accordingly. */
int mgmt_quorum_start(struct mgmt *m);
/* Whether this server must not run v's bricks now (server quorum lost or
 * not known yet). Called with m->lock held. */
int mgmt_quorum_blocks(const struct mgmt *m, const struct mgmt_vol *v);
/* Whether argv (a command, after "cairn") must be refused here because it
 * changes a volume under server quorum while this server has lost it;
 * prints the refusal. Takes m->lock. */
int mgmt_quorum_refuses(struct mgmt *m, int argc, char **argv, FILE *out);
/* Pure: whether active servers of total meet the ratio (a percentage;
 * negative: not set, more than half), as GlusterFS counts it. */
int mgmt_quorum_met(int active, int total, int ratio_pct);

/* ---- brickinfo.c: BRICK/.cairn/brick.info, the marker that a directory is
 * a brick (lines volume=NAME, volume-id=UUID, brick-id=UUID) ---- */

int mgmt_brickinfo_write(const struct mgmt_vol *v, const struct mgmt_brick *b);
/* Reads the marker: 0 with the volume's name and id, -ENOENT if there is
 * none, or another -errno. */
int mgmt_brickinfo_read(const char *brick_path, char *volname, size_t nlen, char *volid,
                        size_t idlen);
/* Removes the marker if it belongs to volume id volid. */
void mgmt_brickinfo_remove(const char *brick_path, const char *volid);
/* BRICK/.cairn/fill: tells the brick it is a new empty copy, member
 * `member` of its replica set, to be filled by heal before anyone reads
 * it (the brick's version.c applies it; docs/elastic.md). Never renamed:
 * the brick reads it by this name. */
#define MGMT_FILL_NAME "fill"
/* Makes the directory of a new copy b of v (reset: the old copy's .cairn
 * is removed first), writes its marker and the fill file. 0 or -errno. */
/* A brick of a new distribute set (add-brick of whole sets): its directory
 * and marker, no fill file (nothing to heal it from). 0 or -errno. */
int mgmt_brick_prepare_set(const struct mgmt_vol *v, const struct mgmt_brick *b);
int mgmt_brick_prepare_fill(const struct mgmt_vol *v, const struct mgmt_brick *b, int member,
                            int reset);

/* ---- validate.c ---- */

/* 0, or -EINVAL with a reason in err. */
int mgmt_check_volname(const char *name, char *err, size_t errlen);
/* Whether host names this server (resolves to the listen address, or to a
 * local address when listening on all addresses). */
int mgmt_host_is_local(const struct mgmt *m, const char *host);
/* How long volume set waits for host names of auth.allow / auth.reject to
 * resolve, all of them together. */
#define MGMT_RESOLVE_MS 3000
/* Rewrites an auth.allow / auth.reject list for storing: address patterns
 * stay (IPv6 addresses in their shortest form), each host name becomes the
 * addresses it resolves to now, since bricks match numeric addresses. An
 * entry that is neither a pattern nor a name that resolves within
 * MGMT_RESOLVE_MS is refused: 0, or -EINVAL with every bad entry in err
 * (a set entry like "on" would otherwise refuse every client). In a
 * directory entry "/DIR(A|B...)" each of A, B... is rewritten the same way. */
int mgmt_resolve_addr_list(const char *option, const char *list, char *out, size_t outlen,
                           char *err, size_t errlen);
/* Whether path (absolute, normalized) can be a new brick of this server:
 * a directory, or missing where `volume create` can make it (as GlusterFS
 * does): its deepest existing ancestor is a directory this server may
 * write. *missing says which; *st gets the status of the directory or of
 * that ancestor, whose file system the brick will be on. label names the
 * brick in messages. 0, or -errno with the reason in err. */
int mgmt_brick_dir_usable(const char *label, const char *path, struct stat *st, int *missing,
                          char *err, size_t errlen);
/* Splits HOST:/abs/path into b's host and path, normalized (no "//", no
 * trailing '/', no "." or ".." components). 0 or -EINVAL. */
int mgmt_brick_split(const char *arg, struct mgmt_brick *b);
/* The canonical form of path (symbolic links resolved) into out
 * (PATH_MAX), also when its last components do not exist yet. */
void mgmt_brick_canonical(const char *path, char *out);

/* ---- commands: cmd.c, cmd_volume.c, cmd_opts.c, cmd_info.c ---- */

/* Runs one CLI command; writes its output to out and returns the exit
 * status. Called with m->lock held. */
int mgmt_cli_run(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_create(struct mgmt *m, int argc, char **argv, FILE *out);
/* volume import: volume create over the bricks of a stopped GlusterFS
 * volume, converted in place (import.c). */
int mgmt_cmd_import(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_start(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_stop(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_delete(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_set(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_get(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_reset(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_info(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_list(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_status(struct mgmt *m, int argc, char **argv, FILE *out);
/* cmd_bricks.c: volume add-brick, replace-brick, reset-brick and
 * remove-brick (docs/elastic.md). */
int mgmt_cmd_bricks(struct mgmt *m, int argc, char **argv, FILE *out);
/* cmd_statedump.c: `volume statedump`, and its part on this server
 * (internal __statedump VOLNAME [client PID]). */
int mgmt_cmd_statedump(struct mgmt *m, int argc, char **argv, FILE *out);
/* volume quota (cmd_quota.c): every sub-command but list and list-objects. */
int mgmt_cmd_quota(struct mgmt *m, int argc, char **argv, FILE *out);
/* Starts the thread summing distributed volumes' quota usage (quota.c). */
int mgmt_quota_start(struct mgmt *m);
int mgmt_cmd_statedump_local(struct mgmt *m, int argc, char **argv, FILE *out);
/* volume info and status with --xml (flag removed): GlusterFS's volInfo and
 * volStatus documents, errors included (opRet -1); the exit status. */
int mgmt_xml_info(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_xml_status(struct mgmt *m, int argc, char **argv, FILE *out);

/* ---- server.c ---- */

/* Accepts connections on fd and serves MGMT_CLI and MGMT_GETVOL until
 * m->stopping is set. */
int mgmt_server_run(struct mgmt *m, int fd);
struct sockaddr_storage;
/* Whether a connection comes from this server: its address can be bound. */
int mgmt_addr_is_local(const struct sockaddr_storage *ss);

/* ---- metrics.c: the Prometheus endpoint (docs/metrics.md) ---- */

/* Serves GET /metrics on the listening socket fd (taken) from a thread of
 * its own until m->stopping. allow: address patterns (auth.allow's form)
 * that may scrape besides this host; NULL for none. 0 or -errno. */
int mgmt_metrics_start(struct mgmt *m, int fd, const char *allow);
struct rpc_msg;
/* A mount's report (MGMT_CLIENT_STATS: PATH, COUNTER*) on connection key,
 * from addr, mounting volume vol: kept, replacing the previous report of
 * the same mount, until mgmt_metrics_client_gone(key). */
void mgmt_metrics_client_report(const void *key, const char *vol, const char *addr,
                                const struct rpc_msg *msg);
void mgmt_metrics_client_gone(const void *key);

/* The file in the state directory whose presence turns management TLS on
 * (GlusterFS's /var/lib/glusterd/secure-access). */
#define MGMT_SECURE_ACCESS "secure-access"

/* The TLS context cairnd's connections to the bricks of v use: NULL when
 * server.ssl is off, or (logged, why set) when this server's files do not
 * load. The caller puts it (rpc_tls_ctx_put). bricks.c */
struct rpc_tls_ctx *mgmt_brick_tls(const struct mgmt_vol *v, char *why, size_t whylen);

#endif
