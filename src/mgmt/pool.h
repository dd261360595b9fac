/* The trusted pool: servers (peers) that share one replicated state (peers,
 * volumes, bricks, options, status intent).
 *
 * Every change to that state is an *entry* (a TLV body, kinds below) that is
 * applied by mgmt_apply(), the one deterministic state transition. A lone
 * cairnd (standalone: no DIR/raft) applies its entries directly. A server of
 * a pool of two or more proposes them through the Raft log (libraft, see
 * pool_raft.c); every server applies the committed entries in log order, so
 * the servers' states never diverge and survive the loss of a minority.
 * Each server keeps the state it applied last in its workdir (volume files
 * and DIR/pool.info), so it reads its last known state even without quorum.
 *
 * Locking: m->lock guards the state (as before). Raft runs on its own libuv
 * thread and never takes m->lock: it hands committed entries to the applier
 * thread (pool_apply.c), which applies them under m->lock and broadcasts
 * m->cond. */
#ifndef CAIRN_MGMT_POOL_H
#define CAIRN_MGMT_POOL_H

#include <stdint.h>

#include "../rpc/msg.h"
#include "../rpc/wire.h"
#include "mgmt.h"

/* Entry kinds (the OP field of an entry). Stored in the Raft log of every
 * server: never renumber. */
enum mgmt_entry_kind {
    MGMT_E_IMPORT = 1,     /* DATA: full state (mgmt_state_format); GEN via DATA */
    MGMT_E_PEER_ADD = 2,   /* ID uuid, HOST, PORT mgmt port, OFFSET raft id, PATH raft address */
    MGMT_E_PEER_DEL = 3,   /* ID uuid */
    MGMT_E_VOL_CREATE = 4, /* DATA: the volume's info text (mgmt_vol_format) */
    MGMT_E_VOL_DELETE = 5, /* NAME, ID volume id */
    MGMT_E_VOL_STATUS = 6, /* NAME, ID, MODE status, BRICK* {ID, PORT} ports to use */
    MGMT_E_VOL_OPTS = 7,   /* NAME, ID, FLAGS 1: reset all first, OPTION* {NAME[, DATA]} */
    MGMT_E_POOL_OPTS = 8,  /* OPTION* {NAME[, DATA]}: `volume set all`, pool-wide */
    /* NAME, ID, DATA: the volume's info text with its new bricks (replace-,
     * reset-, add-brick; docs/elastic.md). Numbered from the range of
     * management numbers this change was given, so that kinds other
     * branches add do not collide. */
    MGMT_E_VOL_BRICKS = 106,
};

/* ---- pool_state.c: identity, peers, DIR/pool.info, whole-state text ---- */

/* Reads DIR/uuid (creating it on first start) and DIR/pool.info (peers and
 * generation). 0 or -errno with the reason in err. */
int mgmt_pool_load(struct mgmt *m, char *err, size_t errlen);
/* Writes DIR/pool.info atomically. */
int mgmt_pool_save(struct mgmt *m);
struct mgmt_peer *mgmt_peer_find_uuid(struct mgmt *m, const char *uuid);
struct mgmt_peer *mgmt_peer_find_raft(struct mgmt *m, uint64_t raft_id);
/* The pool member that serves bricks named host: compares names, then
 * resolved addresses. NULL if no member does. */
struct mgmt_peer *mgmt_peer_for_host(struct mgmt *m, const char *host);
/* Whether the peer record is this server. */
int mgmt_peer_is_self(const struct mgmt *m, const struct mgmt_peer *p);
/* The whole replicated state as text (peers, volumes, generation); malloc'd. */
char *mgmt_state_format(struct mgmt *m);
/* Replaces the state with the one in text (keeping running brick processes
 * of bricks that remain); writes the store. 0 or -EINVAL. */
int mgmt_state_replace(struct mgmt *m, const char *text, size_t len, char *err, size_t errlen);
/* Forgets every peer and volume (a server detached from its pool). */
void mgmt_state_clear(struct mgmt *m);
/* Raft id derived from a uuid (never 0). */
uint64_t mgmt_raft_id(const char *uuid);
/* Recomputes b->local for every brick. */
void mgmt_mark_local(struct mgmt *m);

/* ---- pool_apply.c ---- */

/* Applies one entry (the state transition). Called with m->lock held.
 * Returns 0, or a negative errno with the reason in err when the entry is
 * refused (every server refuses it alike). */
int mgmt_apply(struct mgmt *m, const uint8_t *data, size_t len, char *err, size_t errlen);
/* Makes an entry take effect: applied directly when standalone, or
 * replicated through the pool's log and applied everywhere. Called with
 * m->lock held, which is released while waiting. 0 or -errno with err. */
int mgmt_commit(struct mgmt *m, struct rpc_buf *entry, char *err, size_t errlen);
/* Waits (m->lock held) until the state has reached generation gen, at most
 * timeout_ms. 0 or -ETIMEDOUT. */
int mgmt_wait_gen(struct mgmt *m, uint64_t gen, int timeout_ms);

/* ---- pool_raft.c: the Raft instance of a pooled server ---- */

struct mgmt_pool;
/* Starts Raft from DIR/raft. With bootstrap, a new log whose configuration
 * is this server alone. 0 or -errno. */
int mgmt_pool_start(struct mgmt *m, int bootstrap, const char *self_addr, char *err, size_t errlen);
/* Stops Raft (and the applier), waits for it. */
void mgmt_pool_stop(struct mgmt *m);
/* Whether DIR/raft holds a pool membership. */
int mgmt_pool_exists(const struct mgmt *m);
/* Removes DIR/raft (the pool secret with it). */
int mgmt_pool_wipe(struct mgmt *m);
/* Creates DIR/raft (mode 0700) if missing. 0 or -errno. */
int mgmt_raft_dir_make(struct mgmt *m);
/* Proposes an entry (raft_apply) and waits until it is committed: 0, or
 * -errno with a reason. Called without m->lock. */
int mgmt_pool_propose(struct mgmt_pool *p, const void *data, size_t len, char *err, size_t errlen);
/* Membership: adds a voter, removes a server. Without m->lock. */
int mgmt_pool_add_voter(struct mgmt_pool *p, uint64_t id, const char *addr, char *err,
                        size_t errlen);
int mgmt_pool_remove(struct mgmt_pool *p, uint64_t id, char *err, size_t errlen);
struct mgmt_pool_info {
    int state; /* RAFT_FOLLOWER, RAFT_CANDIDATE, RAFT_LEADER, 0 unavailable */
    uint64_t leader_id;
    unsigned voters;
};
void mgmt_pool_info(struct mgmt_pool *p, struct mgmt_pool_info *out);
/* Waits up to timeout_ms for a known leader; returns its id or 0. */
uint64_t mgmt_pool_wait_leader(struct mgmt_pool *p, int timeout_ms);
/* Hands a committed entry or a snapshot to the applier (pool_apply.c). */
void mgmt_applier_push(struct mgmt *m, const void *data, size_t len, int restore);
/* Blocks until the applier has applied everything pushed so far. */
void mgmt_applier_drain(struct mgmt *m);
int mgmt_applier_start(struct mgmt *m);
void mgmt_applier_stop(struct mgmt *m);

/* ---- pool_rpc.c: talking to other servers' cairnd ---- */

/* Runs a command on the cairnd at host:port; *text (malloc'd, may be NULL)
 * gets its output. Returns the command's exit status, or -errno when the
 * server cannot be reached. */
int mgmt_peer_call(const char *host, uint16_t port, int argc, const char *const *argv, char **text,
                   int timeout_ms);
/* Runs one command line received from addr (local: from this host;
 * pool_proved: on a connection that proved it knows the pool secret): on
 * the leader when it changes the state, here otherwise. Internal commands
 * need pool_proved when this server has a secret (by address otherwise).
 * Called without m->lock. Returns the exit status. */
int mgmt_cli_dispatch(struct mgmt *m, int argc, char **argv, FILE *out, const char *addr, int local,
                      int pool_proved);
/* Internal commands one cairnd sends another (words starting "__"). */
int mgmt_cmd_internal(struct mgmt *m, int argc, char **argv, FILE *out);
/* Brick work on the servers that own a volume's bricks (this one included):
 * checks before create/start and the spawn/kill after a status change.
 * force: 0, 1, or for a new copy of an elastic change (docs/elastic.md)
 * MGMT_CHECK_FILL (as force, and the directory must be empty or missing)
 * or MGMT_CHECK_RESET (the volume's own brick, empty but for .cairn). */
#define MGMT_CHECK_FILL 2
#define MGMT_CHECK_RESET 3
int mgmt_owner_check_bricks(struct mgmt *m, const char *owner_uuid, const char *volname, int force,
                            int n, char **paths, char *err, size_t errlen);
struct mgmt_import_brick;
/* volume import's work on the server owning brick b (this one or another
 * of the pool, which runs it as __import): step "check" puts the GlusterFS
 * volume id in out, "convert" (given volid) the brick's summary line; on
 * failure out holds the reason. 0 or -errno. */
int mgmt_owner_import(struct mgmt *m, const struct mgmt_brick *b, const char *step,
                      const struct mgmt_import_brick *ib, const char *volid, char *out,
                      size_t outlen);
/* One step of an import's placement (mgmt_import_cmd: place-names, ...) on
 * the server owning brick b, as an mgmt_import_run_fn: 0 with *text the
 * answer, or -errno with *text the reason (the caller frees it). Called
 * with m->lock held; released while the step runs. */
int mgmt_owner_import_step(struct mgmt *m, const struct mgmt_brick *b, int argc,
                           const char *const *argv, char **text);
/* Asks the owners of volname's bricks to check them and name their ports;
 * adds BRICK {ID, PORT} fields to entry. */
int mgmt_prepare_start_entry(struct mgmt *m, const char *volname, int force, struct rpc_buf *entry,
                             char *err, size_t errlen);
int mgmt_owners_sync(struct mgmt *m, const char *volname, uint64_t gen, int force, char *err,
                     size_t errlen);
/* Local part of those (also used by the internal commands). */
int mgmt_local_check_bricks(struct mgmt *m, const char *volname, int force, int n, char **paths,
                            char *err, size_t errlen);

/* ---- cmd_peer.c ---- */
int mgmt_cmd_peer(struct mgmt *m, int argc, char **argv, FILE *out);
int mgmt_cmd_pool(struct mgmt *m, int argc, char **argv, FILE *out);
/* Whether argv (after "cairn") changes the pool state. */
int mgmt_cmd_mutates(int argc, char **argv);

/* ---- notify.c: clients told about volume changes ---- */
struct rpc_conn;
/* addr: the client's numeric address, dir the directory it mounts (NULL or
 * "/": the whole volume); auth.allow/auth.reject apply to both. */
void mgmt_notify_subscribe(struct mgmt *m, struct rpc_conn *c, const char *volname,
                           const char *addr, const char *dir);
void mgmt_notify_unsubscribe(struct mgmt *m, struct rpc_conn *c);
/* Sends the current layout of volname to every subscribed connection. m->lock held. */
void mgmt_notify_volume(struct mgmt *m, const char *volname);
/* The GETVOL reply body for v (also the notification's body). */
void mgmt_layout_body(const struct mgmt_vol *v, struct rpc_buf *b);

#endif
