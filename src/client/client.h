/* Building a client stack for a volume: the volume layout from cairnd, the
 * protocol client layer (one per brick), and the stack on top of them.
 *
 * Ownership: cl_volinfo is filled by cl_volume_fetch and freed with
 * cl_volinfo_free. A stack returned by cl_stack_build is destroyed with
 * cl_stack_destroy, after every operation submitted to it has completed. */
#ifndef CAIRN_CLIENT_CLIENT_H
#define CAIRN_CLIENT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/net.h"
#include "../lib/options.h"
#include "layer.h"

#define CL_DEFAULT_PING_TIMEOUT_MS 10000

struct cl_brickinfo {
    struct net_addr addr; /* where the brick process listens */
    char *path;           /* brick directory on its server */
    char *id;
};

struct cl_volinfo {
    char *name, *id;
    struct cl_brickinfo *bricks;
    int n_bricks;
    int replica; /* bricks per replica set (consecutive); 1: no replication */
    int arbiter; /* 1: the last brick of each set is an arbiter */
    /* > 0: dispersed: each set of replica bricks is one disperse set of
     * replica - redundancy data fragments and redundancy more (disperse.h) */
    int redundancy;
    struct opt_set opts; /* options set on the volume */
    uint64_t gen;        /* generation (GEN); 0 when the server sent none */
    /* The volume-wide placement (PLACE, distribute.h; NULL: per-directory
     * hash ranges) and the one before it while a rebalance is due
     * (PLACE_PREV; NULL: none). Owned (malloc'd). */
    struct cl_place *place, *place_prev;
};

void cl_volinfo_free(struct cl_volinfo *v);
/* 1 when a and b name the same bricks (address, path, id, in order) in the
 * same sets, with placements of the same generations: a stack built from
 * one serves the other. */
int cl_volinfo_same_bricks(const struct cl_volinfo *a, const struct cl_volinfo *b);
/* Replaces dst's bricks, replica count, arbiter and placements with copies
 * of src's (a stack adopted src's bricks). 0, or -ENOMEM with dst
 * unchanged. */
int cl_volinfo_take_bricks(struct cl_volinfo *dst, const struct cl_volinfo *src);
/* Fills out from a GETVOL reply or notification body (NAME, ID, GEN, BRICK*,
 * OPTION*). Returns 0, -EPROTO (malformed; out is freed) or -ENOMEM. */
int cl_volinfo_parse(const struct rpc_frame *r, struct cl_volinfo *out);

/* Asks cairnd at mgmt for the layout of volume name (MGMT_GETVOL). On failure
 * returns -errno and writes the reason (cairnd's TEXT when it sent one, e.g.
 * "Volume v is not started") into err. timeout_ms bounds connect and reply. */
int cl_volume_fetch(const struct net_addr *mgmt, const char *name, int timeout_ms,
                    struct cl_volinfo *out, char *err, size_t errlen);

/* Asks every brick of v whether it serves directory subdir of the volume
 * to this client (the handshake a confined connection makes, proto.c),
 * before a mount of it: 0 when one accepts, or none answers (the mount
 * then waits for them as any mount does); -EACCES when one refuses by
 * auth.allow / auth.reject; -ENOENT or -ENOTDIR when every brick that
 * answered says the directory is not there. err gets the brick's reason.
 * subdir NULL or "/" is the whole volume: 0 at once, unless the volume
 * uses TLS (client.ssl or server.ssl): then a refused handshake (TLS, or
 * auth.ssl-allow) is -EACCES and a brick requiring TLS of a client without
 * it -EPROTONOSUPPORT, with the reason in err. */
int cl_subdir_check(const struct cl_volinfo *v, const char *subdir, int timeout_ms, char *err,
                    size_t errlen);

/* ---- protocol client layer (proto.c) ----
 * One connection to one brick. Connects and handshakes (NAME, PATH,
 * FEATURES), then sends each operation's args as one request; the reply frame
 * becomes the op's reply. A dropped connection is re-established in the
 * background with backoff; operations submitted meanwhile wait up to the ping
 * timeout, then fail with -ENOTCONN. Operations in flight when the connection
 * drops fail with -ENOTCONN (or -ETIMEDOUT if the brick stopped answering).
 *
 * Handles: the FH values an upper layer sees are the brick's handle tagged
 * with the connection's generation. Brick handles die with the connection,
 * so an operation on a handle of an earlier connection fails with -EIO
 * (RELEASE/RELEASEDIR of one succeed, there being nothing left to close)
 * instead of reaching whatever the new connection numbered the same. */
/* Lease recalls (docs/consistency.md). Called on a brick connection's
 * reader thread, so it must not block: it queues the work, and once the
 * cached copies are dropped calls cl_proto_lease_return(from, path). path is
 * the lease's path and name the entry that changed ("" for none); path NULL
 * means every lease from that brick is gone (its connection dropped), and
 * nothing is to be returned. */
typedef void (*cl_recall_fn)(void *ctx, struct cl_layer *from, const char *path, const char *name);

struct cl_proto_params {
    struct net_addr addr;
    const char *volume;     /* volume name, sent in the handshake */
    const char *brick_path; /* the brick's directory, sent in the handshake */
    const char *subdir;     /* NULL: the whole volume; "/a/b": every path is under it, the
                               brick confines the connection there (SUBDIR, protocol.md) */
    int ping_timeout_ms;    /* 0: CL_DEFAULT_PING_TIMEOUT_MS */
    cl_recall_fn recall;    /* may be NULL: recalls are then returned at once */
    void *recall_ctx;
    struct rpc_tls_ctx *tls; /* NULL: plain TCP; else TLS with it (the layer takes a reference) */
};

/* Creates the layer and starts its connection thread; the first connection
 * attempt is made before returning (its failure is logged, not returned:
 * the layer keeps trying). Returns NULL on ENOMEM. */
struct cl_layer *cl_proto_new(const struct cl_proto_params *p);
/* 1 when the layer currently has a working connection. */
int cl_proto_connected(struct cl_layer *l);
/* Tells the brick that the lease on path was given up (after a recall). */
void cl_proto_lease_return(struct cl_layer *l, const char *path);
/* Number of connections made so far (a reconnect increments it). */
uint64_t cl_proto_generation(struct cl_layer *l);
/* The members of its replica set the brick holds marks against (bit i:
 * member i; docs/replication.md, "Reads come from a good copy"), as it last
 * said; kept while the brick is unreachable. */
uint32_t cl_proto_accused(struct cl_layer *l);
/* "host:port:/brick/path", for log lines. */
void cl_proto_describe(struct cl_layer *l, char *out, size_t len);
/* Closes the connection for good (a brick that left the volume): no
 * reconnect; operations in flight and later ones fail with ENOTCONN. The
 * layer stays valid (for late callers) until destroyed. */
void cl_proto_shutdown(struct cl_layer *l);
/* Points the layer at another brick (replace-brick, reset-brick, a brick
 * moved to another port; docs/elastic.md): the connection to the old one is
 * closed and the new one connected in the background. Operations wait for
 * it as for any reconnect; handles of the old connection fail with EIO.
 * 0 or -ENOMEM. */
int cl_proto_retarget(struct cl_layer *l, const struct net_addr *addr, const char *brick_path);

/* ---- TLS (tls.c, docs/security.md) ---- */
struct rpc_tls_ctx;
/* The key, certificate and CA files this process uses as a TLS client;
 * NULL or "" keeps the default (/etc/ssl/cairn.key, .pem, .ca). */
void cl_tls_set_files(const char *key, const char *cert, const char *ca);
/* The context connections to the bricks of a volume with options vol use:
 * *out NULL when client.ssl is off (and force is 0), else a context the
 * caller puts (rpc_tls_ctx_put). -EINVAL with why in err when the files do
 * not load. */
int cl_tls_ctx(const struct opt_set *vol, int force, struct rpc_tls_ctx **out, char *err,
               size_t errlen);
/* Management TLS: every connection to a cairnd (the CLI's, a mount's
 * layout fetch and watch, cairnd to cairnd) uses TLS when it is on. On
 * when the file CL_SECURE_ACCESS exists, unless cl_tls_set_mgmt chose
 * (1 on, 0 off, -1 the file decides again). */
#define CL_SECURE_ACCESS "/var/lib/cairnd/secure-access"
void cl_tls_set_mgmt(int on);
int cl_tls_mgmt_on(void);
/* The management context (a reference the caller puts): *out NULL when
 * management TLS is off; -EINVAL with why in err when the files do not
 * load. */
int cl_tls_mgmt_ctx(struct rpc_tls_ctx **out, char *err, size_t errlen);
/* rpc_conn_dial to a cairnd, with management TLS when it is on. */
struct rpc_conn *cl_mgmt_dial(const struct net_addr *a, int timeout_ms,
                              const struct rpc_conn_ops *ops, void *ctx, const char *peer, int *err,
                              char *why, size_t whylen);

/* ---- the stack (stack.c) ---- */
struct cl_stack_params {
    int ping_timeout_ms; /* 0: the volume's network.ping-timeout */
    const char *subdir;  /* NULL: the whole volume; else the directory mounted (proto) */
    cl_recall_fn recall; /* lease recalls of every brick (may be NULL) */
    void *recall_ctx;
};

/* Builds the stack for a volume from the list of levels in stack.c: a
 * protocol client per brick; a replicate layer over each replica set's (a
 * set of one brick is its protocol client alone); the distribute layer
 * (distribute.h) over the sets when there are several. Each layer is
 * configured with cl_stack_effective_options once it is made. A layout that
 * does not divide into sets is refused with -ENOTSUP and a message in err. */
int cl_stack_build(const struct cl_volinfo *v, const struct cl_stack_params *p,
                   struct cl_layer **out, char *err, size_t errlen);
/* cl_layer_destroy_tree of the stack's top. */
void cl_stack_destroy(struct cl_layer *top);
/* Elastic volumes (docs/elastic.md): whether a stack built from old can
 * serve nv's bricks without a rebuild (the same distribute sets, each
 * keeping its members in place and perhaps gaining some, or each losing
 * its last member); when not, why says what differs. Pure. */
int cl_stack_adoptable(const struct cl_volinfo *old, const struct cl_volinfo *nv, char *why,
                       size_t len);
/* Makes the running stack top (built from old with sp) serve nv's bricks,
 * without disturbing open files: a protocol layer whose brick changed is
 * retargeted, a set that gains members gets new protocol layers (new
 * copies, read only once healed), a set that loses its last member drops
 * it (cl_repl_remove_child). 0, -ENOTSUP (not adoptable: err says
 * why) or -ENOMEM (err). */
int cl_stack_adopt(struct cl_layer *top, const struct cl_volinfo *old, const struct cl_volinfo *nv,
                   const struct cl_stack_params *sp, char *err, size_t errlen);
/* The options the stack's layers are configured with (at build and on every
 * change): the volume's, with network.ping-timeout replaced by an explicit
 * ping_timeout_ms (> 0; whole seconds, at least 1). out is the caller's to
 * free (opt_set_free). 0 or -ENOMEM. */
int cl_stack_effective_options(const struct opt_set *vol, int ping_timeout_ms, struct opt_set *out);

#endif
