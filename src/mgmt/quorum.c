/* Server quorum (docs/cluster.md, "Server quorum"), as GlusterFS defines it:
 * every QUORUM_EVERY_MS a thread asks each other server of the pool for a
 * PING on its cairnd port and counts the ones that answer, itself included.
 * While that count is below the pool's cluster.server-quorum-ratio (not
 * set: more than half of the pool), this server stops its bricks of the
 * volumes with cluster.server-quorum-type server; when the count is back,
 * it starts them again. Each change is logged.
 *
 * A PING, not a connect: a cairnd stopped with SIGSTOP still completes TCP
 * handshakes in the kernel, but answers nothing. A quorum must be missed on
 * QUORUM_LOST_PASSES passes in a row before bricks stop, so one slow answer
 * does not cost clients their bricks; it counts as back on the first pass
 * that finds it.
 *
 * The thread never holds m->lock while it waits for a server. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../client/client.h"
#include "../lib/log.h"
#include "../rpc/conn.h"
#include "pool.h"

#define QUORUM_EVERY_MS 1000
#define QUORUM_ANSWER_MS 1500
#define QUORUM_LOST_PASSES 2

int mgmt_quorum_met(int active, int total, int ratio_pct)
{
    if (total <= 1)
        return 1;
    /* GlusterFS: ceil(total * ratio / 100) servers with a ratio, else
     * total / 2 + 1 */
    int need = ratio_pct >= 0 ? (total * ratio_pct + 99) / 100 : total / 2 + 1;
    return active >= need;
}

static int follows_quorum(const struct mgmt_vol *v)
{
    return strcmp(opt_value(&v->opts, "cluster.server-quorum-type"), "server") == 0;
}

int mgmt_quorum_blocks(const struct mgmt *m, const struct mgmt_vol *v)
{
    return m->n_peers > 1 && follows_quorum(v) && m->server_quorum != 1;
}

/* The pool's ratio as a percentage, or -1 when not set. */
static int ratio_pct(const struct mgmt *m)
{
    const char *r = opt_set_get(&m->pool_opts, "cluster.server-quorum-ratio");
    int pct;
    int64_t bytes;
    if (!r || !*r || opt_parse_space(r, &pct, &bytes) < 0 || pct < 0)
        return -1;
    return pct;
}

/* Whether the cairnd at host:port answers a PING within QUORUM_ANSWER_MS. */
static int answers(const char *host, uint16_t port)
{
    struct net_addr a;
    snprintf(a.host, sizeof(a.host), "%s", host);
    a.port = port;
    char why[256];
    int err = 0;
    struct rpc_conn *c =
        cl_mgmt_dial(&a, QUORUM_ANSWER_MS, NULL, NULL, host, &err, why, sizeof(why));
    if (!c)
        return 0;
    int ok = 0;
    if (rpc_conn_start(c) == 0) {
        struct rpc_buf body;
        struct rpc_frame *r = NULL;
        rpc_buf_init(&body);
        ok = rpc_conn_call_sync(c, RPC_OP_PING, &body, &r, QUORUM_ANSWER_MS) == 0;
        rpc_buf_free(&body);
        rpc_frame_free(r);
    }
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
    return ok;
}

/* Stops or restarts this server's bricks of the volumes under server
 * quorum after the quorum changed. m->lock held. */
static void act(struct mgmt *m, int met, int active, int total)
{
    for (struct mgmt_vol *v = m->vols; v; v = v->next) {
        if (!follows_quorum(v) || v->status != MGMT_VOL_STARTED) {
            v->quorum_down = 0;
            continue;
        }
        if (met && v->quorum_down) {
            log_error("volume %s: server quorum regained (%d of %d servers reachable): "
                      "starting this server's bricks",
                      v->name, active, total);
            v->quorum_down = 0;
            for (int i = 0; i < v->n_bricks; i++)
                v->bricks[i].retry_ms = 0; /* the supervisor starts them now */
        } else if (!met && !v->quorum_down) {
            int running = 0;
            for (int i = 0; i < v->n_bricks; i++)
                running += v->bricks[i].local && v->bricks[i].pid;
            log_error("volume %s: server quorum lost (%d of %d servers reachable): stopping "
                      "this server's %d brick%s",
                      v->name, active, total, running, running == 1 ? "" : "s");
            v->quorum_down = 1;
            for (int i = 0; i < v->n_bricks; i++)
                if (v->bricks[i].local)
                    mgmt_brick_kill(m, &v->bricks[i]);
        }
    }
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *quorum_main(void *arg)
{
    struct mgmt *m = arg;
    int missed = 0;
    while (!m->stopping) {
        pthread_mutex_lock(&m->lock);
        int total = m->n_peers, n = 0, ratio = ratio_pct(m), any = 0;
        struct mgmt_peer *others = total > 1 ? calloc((size_t)total, sizeof(*others)) : NULL;
        for (int i = 0; others && i < total; i++)
            if (!mgmt_peer_is_self(m, &m->peers[i]))
                others[n++] = m->peers[i];
        for (struct mgmt_vol *v = m->vols; v; v = v->next)
            any |= follows_quorum(v);
        pthread_mutex_unlock(&m->lock);
        int active = 1;
        if (any)
            for (int i = 0; i < n; i++)
                active += answers(others[i].host, others[i].port);
        free(others);
        int met = !any || total <= 1 || mgmt_quorum_met(active, total, ratio);
        missed = met ? 0 : missed + 1;
        pthread_mutex_lock(&m->lock);
        /* not known yet (just started): the first count decides */
        if (met || m->server_quorum < 0 || missed >= QUORUM_LOST_PASSES) {
            m->server_quorum = met;
            act(m, met, active, total);
        }
        pthread_mutex_unlock(&m->lock);
        sleep_ms(QUORUM_EVERY_MS);
    }
    return NULL;
}

int mgmt_quorum_start(struct mgmt *m)
{
    pthread_t t;
    if (pthread_create(&t, NULL, quorum_main, m) != 0)
        return -EAGAIN;
    pthread_detach(t);
    return 0;
}

/* Whether every option a set/reset names is a quorum option: those stay
 * allowed, so that an administrator can turn server quorum off. */
static int only_quorum_keys(int argc, char **argv, int set)
{
    if (argc < 4)
        return 0;
    for (int i = 3; i < argc; i += set ? 2 : 1) {
        const char *k = opt_canonical(argv[i]);
        if (strcmp(k, "cluster.server-quorum-type") != 0 &&
            strcmp(k, "cluster.server-quorum-ratio") != 0 && strcmp(k, "force") != 0)
            return 0;
    }
    return 1;
}

int mgmt_quorum_refuses(struct mgmt *m, int argc, char **argv, FILE *out)
{
    while (argc > 0 && strcmp(argv[0], "--mode=script") == 0) {
        argc--;
        argv++;
    }
    if (argc < 3 || strcmp(argv[0], "volume") != 0)
        return 0;
    static const char *const ops[] = {"set", "reset", "start", "stop", "delete", NULL};
    int k = 0;
    while (ops[k] && strcmp(argv[1], ops[k]) != 0)
        k++;
    if (!ops[k] || ((k == 0 || k == 1) && only_quorum_keys(argc, argv, k == 0)))
        return 0;
    pthread_mutex_lock(&m->lock);
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    int refuse = v && mgmt_quorum_blocks(m, v);
    pthread_mutex_unlock(&m->lock);
    if (refuse)
        fprintf(out,
                "volume %s: failed: Quorum not met. Volume operation not allowed. (this server "
                "reaches too few servers of the pool for volume %s, whose "
                "cluster.server-quorum-type is server)\n",
                argv[1], argv[2]);
    return refuse;
}
