/* Quota over a distributed volume's replica sets (docs/quota.md).
 *
 * A brick knows only what its own replica set holds of a limited
 * directory. For a volume of several sets, the cairnd serving the
 * volume's first brick sums the sets' usage every features.soft-timeout
 * seconds (features.hard-timeout once some directory is above its soft
 * limit): it asks every data brick for its counts (QUOTA), takes each
 * set's fullest copy, and tells every brick what the other sets hold
 * (QUOTA_OTHERS), which the brick adds to its own counts when it decides
 * whether a request goes past a hard limit. Between two sums each set
 * grants from its own view, so a limit can be overshot by what the other
 * sets accepted meanwhile: at most (sets - 1) times the room the last sum
 * left (docs/quota.md works it out). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/quota.h"
#include "../rpc/conn.h"
#include "../rpc/tls.h"
#include "mgmt.h"

#define CALL_MS 5000

/* One brick as copied out of the volume (no lock held while calling). */
struct qbrick {
    char host[NET_HOST_MAX];
    char path[PATH_MAX];
    uint16_t port;
    int up, data; /* running; holds data (not an arbiter) */
};

/* What the thread remembers of a volume between two sums. */
struct qvol_state {
    struct qvol_state *next;
    char name[MGMT_VOLNAME_MAX + 1];
    uint64_t next_ms;
    /* a change of the limits or a brick (re)started: sum at once */
    char *limits;
    uint64_t pids;
};

/* A connection to brick b, over TLS when the volume's bricks require it
 * (tls: server.ssl's client context, from mgmt_brick_tls). */
static struct rpc_conn *brick_conn(const char *vol, const struct qbrick *b, struct rpc_tls_ctx *tls)
{
    struct net_addr a;
    snprintf(a.host, sizeof(a.host), "%s", b->host);
    a.port = b->port;
    int err = 0;
    char why[256];
    struct rpc_conn *c = rpc_conn_dial(&a, 1000, tls, NULL, NULL, b->path, &err, why, sizeof(why));
    if (!c) {
        log_debug("quota: cannot reach brick %s:%s: %s", b->host, b->path, why);
        return NULL;
    }
    struct rpc_buf hs;
    rpc_buf_init(&hs);
    rpc_put_str(&hs, RPC_T_NAME, vol);
    rpc_put_str(&hs, RPC_T_PATH, b->path);
    int rc = rpc_conn_start(c);
    if (rc == 0)
        rc = rpc_conn_call_sync(c, RPC_OP_HANDSHAKE, &hs, NULL, CALL_MS);
    rpc_buf_free(&hs);
    if (rc < 0) {
        rpc_conn_close(c, 0);
        rpc_conn_put(c);
        return NULL;
    }
    return c;
}

static void conn_done(struct rpc_conn *c)
{
    if (c) {
        rpc_conn_close(c, 0);
        rpc_conn_put(c);
    }
}

/* Brick counts into bytes/files (per limit of q, maxima over calls). */
static int read_counts(struct rpc_conn *c, const struct quota_limits *q, int64_t *bytes,
                       int64_t *files)
{
    struct rpc_frame *f = NULL;
    int rc = rpc_conn_call_sync(c, RPC_OP_QUOTA, NULL, &f, CALL_MS);
    if (rc < 0)
        return rc;
    struct rpc_iter it;
    struct rpc_field fl;
    rpc_iter_init(&it, f->msg.body, f->msg.body_len);
    while (rpc_iter_next(&it, &fl) > 0) {
        struct rpc_msg m;
        char path[4096];
        if (fl.tag != RPC_T_QUOTA || rpc_msg_decode(fl.val, fl.len, &m, NULL) < 0 ||
            !rpc_has(&m, RPC_T_PATH) || rpc_bytes_str(&m.path, path, sizeof(path)) < 0)
            continue;
        for (int k = 0; k < q->n; k++)
            if (!strcmp(q->l[k].path, path)) {
                if ((int64_t)m.size > bytes[k])
                    bytes[k] = (int64_t)m.size;
                if ((int64_t)m.calls > files[k])
                    files[k] = (int64_t)m.calls;
            }
    }
    rpc_frame_free(f);
    return 0;
}

/* One sum over the sets of a volume; returns 1 when some directory is
 * above its soft limit (the next sum comes sooner). */
static int sum_volume(const char *vol, struct qbrick *bricks, int n, int per,
                      const struct quota_limits *q, int dsoft, struct rpc_tls_ctx *tls)
{
    int n_sets = n / per, hot = 0;
    size_t cells = (size_t)n_sets * (size_t)q->n;
    int64_t *sb = calloc(cells + 1, sizeof(int64_t)), *sf = calloc(cells + 1, sizeof(int64_t));
    struct rpc_conn **conns = calloc((size_t)n + 1, sizeof(*conns));
    if (!sb || !sf || !conns)
        goto out;
    for (int i = 0; i < n; i++) {
        if (!bricks[i].up || !bricks[i].data)
            continue;
        conns[i] = brick_conn(vol, &bricks[i], tls);
        int s = i / per;
        if (conns[i] &&
            read_counts(conns[i], q, sb + (size_t)s * q->n, sf + (size_t)s * q->n) < 0) {
            conn_done(conns[i]);
            conns[i] = NULL;
        }
    }
    for (int k = 0; k < q->n; k++) {
        int64_t tb = 0;
        for (int s = 0; s < n_sets; s++)
            tb += sb[(size_t)s * q->n + k];
        int soft = q->l[k].soft ? q->l[k].soft : dsoft;
        if (q->l[k].hard > 0 && tb > (int64_t)((double)q->l[k].hard * soft / 100.0))
            hot = 1;
    }
    for (int i = 0; i < n; i++) {
        if (!conns[i])
            continue;
        int s = i / per;
        struct rpc_buf body;
        rpc_buf_init(&body);
        for (int k = 0; k < q->n; k++) {
            int64_t ob = 0, of = 0;
            for (int t = 0; t < n_sets; t++)
                if (t != s) {
                    ob += sb[(size_t)t * q->n + k];
                    of += sf[(size_t)t * q->n + k];
                }
            size_t mark = rpc_put_begin(&body, RPC_T_QUOTA);
            rpc_put_str(&body, RPC_T_PATH, q->l[k].path);
            rpc_put_u64(&body, RPC_T_SIZE, (uint64_t)ob);
            rpc_put_u64(&body, RPC_T_CALLS, (uint64_t)of);
            rpc_put_end(&body, mark);
        }
        int rc = rpc_conn_call_sync(conns[i], RPC_OP_QUOTA_OTHERS, &body, NULL, CALL_MS);
        if (rc < 0)
            log_debug("quota: telling brick %s:%s the other sets' usage: %s", bricks[i].host,
                      bricks[i].path, strerror(-rc));
        rpc_buf_free(&body);
    }
out:
    for (int i = 0; conns && i < n; i++)
        conn_done(conns[i]);
    free(conns);
    free(sb);
    free(sf);
    return hot;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct qvol_state *state_of(struct qvol_state **all, const char *name)
{
    for (struct qvol_state *s = *all; s; s = s->next)
        if (!strcmp(s->name, name))
            return s;
    struct qvol_state *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->next = *all;
    *all = s;
    return s;
}

/* The next volume due for a sum, copied out under m->lock; 0 when none. */
struct due {
    char name[MGMT_VOLNAME_MAX + 1];
    struct qbrick *bricks;
    int n, per, dsoft;
    int64_t soft_s, hard_s;
    char *limits;
    struct rpc_tls_ctx *tls; /* server.ssl: a reference; NULL: plain */
};

static int next_due(struct mgmt *m, struct qvol_state **all, uint64_t now, struct due *d)
{
    int found = 0;
    pthread_mutex_lock(&m->lock);
    for (struct mgmt_vol *v = m->vols; v && !found; v = v->next) {
        int per = v->replica > 1 ? v->replica : 1;
        if (v->status != MGMT_VOL_STARTED || v->n_bricks / per < 2 || !v->bricks[0].local ||
            strcmp(opt_value(&v->opts, "features.quota"), "on") ||
            !*opt_value(&v->opts, "features.quota-limits"))
            continue;
        struct qvol_state *s = state_of(all, v->name);
        if (!s)
            continue;
        uint64_t pids = 0;
        for (int i = 0; i < v->n_bricks; i++)
            pids = pids * 31 + (uint64_t)v->bricks[i].pid + v->bricks[i].port;
        const char *limits = opt_value(&v->opts, "features.quota-limits");
        if (pids != s->pids || !s->limits || strcmp(s->limits, limits)) {
            free(s->limits);
            s->limits = strdup(limits);
            s->pids = pids;
            s->next_ms = 0;
        }
        if (s->next_ms > now)
            continue;
        d->bricks = calloc((size_t)v->n_bricks, sizeof(*d->bricks));
        d->limits = strdup(opt_value(&v->opts, "features.quota-limits"));
        if (!d->bricks || !d->limits) {
            free(d->bricks);
            free(d->limits);
            continue;
        }
        if (opt_bool(&v->opts, "server.ssl")) {
            char why[256];
            if (!(d->tls = mgmt_brick_tls(v, why, sizeof(why)))) {
                log_warn("quota: volume %s: no TLS for its bricks: %s", v->name, why);
                free(d->bricks);
                free(d->limits);
                continue;
            }
        } else {
            d->tls = NULL;
        }
        snprintf(d->name, sizeof(d->name), "%s", v->name);
        d->n = v->n_bricks;
        d->per = per;
        d->dsoft = (int)opt_int(&v->opts, "features.default-soft-limit");
        d->soft_s = opt_int(&v->opts, "features.soft-timeout");
        d->hard_s = opt_int(&v->opts, "features.hard-timeout");
        for (int i = 0; i < v->n_bricks; i++) {
            struct qbrick *b = &d->bricks[i];
            snprintf(b->host, sizeof(b->host), "%s", v->bricks[i].host);
            snprintf(b->path, sizeof(b->path), "%s", v->bricks[i].path);
            b->port = v->bricks[i].port;
            /* a brick of another server is asked whenever it has a port */
            b->up = v->bricks[i].local ? v->bricks[i].pid != 0 : b->port != 0;
            b->data = !(v->arbiter && i % per == per - 1);
        }
        found = 1;
    }
    pthread_mutex_unlock(&m->lock);
    return found;
}

static void *quota_main(void *arg)
{
    struct mgmt *m = arg;
    struct qvol_state *all = NULL;
    while (!m->stopping) {
        struct due d;
        uint64_t now = now_ms();
        while (!m->stopping && next_due(m, &all, now, &d)) {
            struct quota_limits q;
            char err[128];
            int hot = 0;
            if (quota_limits_parse(d.limits, &q, err, sizeof(err)) == 0) {
                hot = sum_volume(d.name, d.bricks, d.n, d.per, &q, d.dsoft, d.tls);
                quota_limits_free(&q);
            }
            struct qvol_state *s = state_of(&all, d.name);
            if (s)
                s->next_ms = now_ms() + (uint64_t)(hot ? d.hard_s : d.soft_s) * 1000;
            free(d.bricks);
            free(d.limits);
            rpc_tls_ctx_put(d.tls);
        }
        struct timespec ts = {0, 200 * 1000000};
        nanosleep(&ts, NULL);
    }
    while (all) {
        struct qvol_state *n = all->next;
        free(all->limits);
        free(all);
        all = n;
    }
    return NULL;
}

int mgmt_quota_start(struct mgmt *m)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, quota_main, m);
    if (rc)
        return -rc;
    pthread_detach(t);
    return 0;
}
