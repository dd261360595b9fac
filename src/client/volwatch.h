/* A mount's management connection: fetching a volume's layout from the first
 * of several cairnd servers that answers, and staying connected to hear the
 * layout change notifications (docs/protocol.md, MGMT_GETVOL).
 *
 * The watcher runs one thread. It connects to a server, asks GETVOL (which
 * subscribes the connection), and passes every layout whose generation (GEN)
 * is above the last one it passed to changed_cb. When the connection drops,
 * or cairnd stops answering pings, it reconnects with backoff: first to the
 * same server, then to each of the others in turn. Callbacks run on the
 * watcher's thread, one at a time, never after cl_volwatch_stop returns.
 *
 * Ownership: the servers array and volume name are copied. A cl_volinfo
 * passed to changed_cb belongs to the watcher and is valid during the call. */
#ifndef CAIRN_CLIENT_VOLWATCH_H
#define CAIRN_CLIENT_VOLWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"

#define CL_MAX_MGMT_SERVERS 16

/* Asks each server in order for the layout of volume name until one answers
 * (subdir, NULL or "/" for the whole volume: the directory to be mounted,
 * which auth.allow may restrict).
 * A server that cannot be reached, or does not answer in timeout_ms, is
 * skipped; an answer (the layout, or an error such as "Volume v is not
 * started") ends the search: every server of a pool answers alike. On
 * success *used (if not NULL) is the index of the server that answered. On
 * failure returns -errno with the reason (of the last server tried, or the
 * server's answer) in err. */
int cl_volume_fetch_any(const struct net_addr *servers, int n, const char *name, const char *subdir,
                        int timeout_ms, struct cl_volinfo *out, int *used, char *err,
                        size_t errlen);

struct cl_volwatch_params {
    const struct net_addr *servers; /* the main server first, then the backups */
    int n_servers;                  /* 1..CL_MAX_MGMT_SERVERS */
    int first;                      /* index of the server to connect to first */
    const char *volume;
    const char *subdir; /* the directory mounted (NULL: the whole volume), asked with GETVOL */
    uint64_t gen;       /* generation the caller already has: older layouts are ignored */
    int timeout_ms;     /* connect and GETVOL answer bound; cairnd silent this long is dead */
    /* A newer layout of the started volume. */
    void (*changed_cb)(const struct cl_volinfo *v, void *ctx);
    /* The volume is no longer served: text is cairnd's reason ("Volume v is not
     * started", "... does not exist"). Called once per such change. */
    void (*gone_cb)(const char *text, void *ctx);
    /* Optional: every CL_REPORT_MS while connected (and at once after
     * connecting), fills body with the client's counters (PATH, COUNTER*),
     * sent to cairnd as MGMT_CLIENT_STATS for its metrics. */
    void (*report_cb)(struct rpc_buf *body, void *ctx);
    void *ctx;
};

#define CL_REPORT_MS 5000

struct cl_volwatch;

/* Starts the watcher's thread (it connects in the background). Returns NULL
 * on ENOMEM or when no thread can be started (logged). */
struct cl_volwatch *cl_volwatch_start(const struct cl_volwatch_params *p);
/* Stops the thread, closes the connection, waits for its reader, frees w. */
void cl_volwatch_stop(struct cl_volwatch *w);

#endif
