/* The management connection of a mount: GETVOL from the first server that
 * answers, then a watcher thread that stays subscribed to layout changes and
 * reconnects (same server first, then the others) when cairnd goes away. */
#include "volwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"

#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 5000
#define IDLE_PING_MS 3000

static void copy_text(const struct rpc_frame *r, char *err, size_t errlen)
{
    size_t n = r->msg.text.len < errlen - 1 ? r->msg.text.len : errlen - 1;
    memcpy(err, r->msg.text.p, n);
    err[n] = 0;
}

/* GETVOL on an open connection. *answered is set when the server replied
 * (with the layout or an error of its own), as opposed to a transport
 * failure. On success out holds the layout. */
static int getvol(struct rpc_conn *c, const char *peer, const char *name, const char *subdir,
                  int timeout_ms, struct cl_volinfo *out, int *answered, char *err, size_t errlen)
{
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_str(&b, RPC_T_NAME, name);
    if (subdir && strcmp(subdir, "/"))
        rpc_put_str(&b, RPC_T_SUBDIR, subdir);
    struct rpc_frame *reply = NULL;
    int rc = rpc_conn_call_sync(c, RPC_OP_MGMT_GETVOL, &b, &reply, timeout_ms);
    rpc_buf_free(&b);
    *answered = reply != NULL;
    if (rc < 0) {
        if (reply && rpc_has(&reply->msg, RPC_T_TEXT))
            copy_text(reply, err, errlen);
        else if (reply)
            snprintf(err, errlen, "cairnd at %s refused volume %s: %s", peer, name, strerror(-rc));
        else if (rc == -ETIMEDOUT)
            snprintf(err, errlen, "no answer from cairnd at %s", peer);
        else
            snprintf(err, errlen, "cairnd at %s closed the connection", peer);
    } else if ((rc = cl_volinfo_parse(reply, out)) < 0) {
        snprintf(err, errlen, "cairnd at %s sent a malformed layout of volume %s", peer, name);
    }
    rpc_frame_free(reply);
    return rc;
}

int cl_volume_fetch_any(const struct net_addr *servers, int n, const char *name, const char *subdir,
                        int timeout_ms, struct cl_volinfo *out, int *used, char *err, size_t errlen)
{
    int rc = -EINVAL;
    memset(out, 0, sizeof(*out));
    snprintf(err, errlen, "no management server given");
    for (int i = 0; i < n; i++) {
        char peer[NET_HOST_MAX + 16];
        net_format_addr(&servers[i], peer, sizeof(peer));
        char why[256];
        struct rpc_conn *c =
            cl_mgmt_dial(&servers[i], timeout_ms, NULL, NULL, peer, &rc, why, sizeof(why));
        if (!c && rc == -ENOMEM) {
            snprintf(err, errlen, "out of memory");
            return rc;
        }
        if (!c) {
            snprintf(err, errlen, "cannot connect to cairnd at %s: %.180s", peer, why);
            if (i + 1 < n)
                log_warn("%s; trying the next server", err);
            continue;
        }
        if ((rc = rpc_conn_start(c)) < 0) {
            rpc_conn_put(c);
            snprintf(err, errlen, "cannot start a connection thread: %s", strerror(-rc));
            return rc;
        }
        int answered = 0;
        rc = getvol(c, peer, name, subdir, timeout_ms, out, &answered, err, errlen);
        rpc_conn_close(c, -ENOTCONN);
        rpc_conn_put(c);
        if (rc == 0 && used)
            *used = i;
        if (rc == 0 || answered)
            return rc;
        if (i + 1 < n)
            log_warn("%s; trying the next server", err);
    }
    return rc;
}

/* ---- the watcher ---- */

struct queued {
    struct queued *next;
    struct rpc_frame *f;
};

struct cl_volwatch {
    struct net_addr servers[CL_MAX_MGMT_SERVERS];
    int n_servers, cur;
    char *volume;
    char *subdir; /* NULL: the whole volume */
    int timeout_ms;
    void (*changed_cb)(const struct cl_volinfo *v, void *ctx);
    void (*gone_cb)(const char *text, void *ctx);
    void (*report_cb)(struct rpc_buf *body, void *ctx);
    void *ctx;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct rpc_conn *conn; /* the subscribed connection, one reference; watcher thread only */
    int conn_closed;       /* set by closed_cb for conn */
    struct queued *q_head, **q_tail; /* notifications, in arrival order */
    unsigned live;                   /* readers that may still call back */
    int stopping;
    pthread_t thread;

    uint64_t gen; /* newest generation passed on (watcher thread only) */
    int gone;     /* the volume was reported not served, and not served again since */
};

static void notify_cb(struct rpc_conn *c, struct rpc_frame *f, void *ctx)
{
    struct cl_volwatch *w = ctx;
    struct queued *q = NULL;
    if (f->hdr.opcode == RPC_OP_MGMT_GETVOL)
        q = malloc(sizeof(*q));
    if (!q) {
        rpc_frame_free(f);
        return;
    }
    q->f = f;
    q->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (c == w->conn) {
        *w->q_tail = q;
        w->q_tail = &q->next;
        q = NULL;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    if (q) { /* from a connection already given up */
        rpc_frame_free(q->f);
        free(q);
    }
}

static void closed_cb(struct rpc_conn *c, int reason, void *ctx)
{
    struct cl_volwatch *w = ctx;
    pthread_mutex_lock(&w->lock);
    if (c == w->conn) {
        w->conn_closed = reason ? reason : -ECONNRESET;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    /* The last touch of w: cl_volwatch_stop waits for it. */
    __atomic_sub_fetch(&w->live, 1, __ATOMIC_RELEASE);
}

static const struct rpc_conn_ops watch_ops = {.notify_cb = notify_cb, .closed_cb = closed_cb};

static void peer_name(const struct cl_volwatch *w, char *out, size_t len)
{
    net_format_addr(&w->servers[w->cur], out, len);
}

/* A layout (reply or notification) of the started volume. */
static void pass_layout(struct cl_volwatch *w, const struct cl_volinfo *v, const char *peer)
{
    /* GEN 0: a server that sends no generation; pass it (the callback diffs). */
    if (v->gen && v->gen <= w->gen) {
        log_debug("volume %s: generation %llu from %s is not newer than %llu", w->volume,
                  (unsigned long long)v->gen, peer, (unsigned long long)w->gen);
        return;
    }
    log_debug("volume %s: generation %llu from %s", w->volume, (unsigned long long)v->gen, peer);
    if (v->gen)
        w->gen = v->gen;
    w->gone = 0;
    w->changed_cb(v, w->ctx);
}

static void pass_gone(struct cl_volwatch *w, uint64_t gen, const char *text)
{
    if (gen && gen <= w->gen)
        return;
    if (gen)
        w->gen = gen;
    if (!w->gone && w->gone_cb)
        w->gone_cb(text, w->ctx);
    w->gone = 1;
}

static void handle_notification(struct cl_volwatch *w, struct rpc_frame *f)
{
    char peer[NET_HOST_MAX + 16], text[256];
    peer_name(w, peer, sizeof(peer));
    const struct rpc_msg *m = &f->msg;
    if (rpc_has(m, RPC_T_TEXT) && m->n_brick == 0) {
        copy_text(f, text, sizeof(text));
        pass_gone(w, rpc_has(m, RPC_T_GEN) ? m->gen : 0, text);
        return;
    }
    struct cl_volinfo v;
    if (cl_volinfo_parse(f, &v) < 0) {
        log_warn("cairnd at %s sent a malformed layout of volume %s; ignored", peer, w->volume);
        return;
    }
    if (strcmp(v.name, w->volume) == 0)
        pass_layout(w, &v, peer);
    cl_volinfo_free(&v);
}

/* Connects to the current server and subscribes; returns 0 with w->conn set,
 * or -errno (*answered when the server itself refused). */
static int try_connect(struct cl_volwatch *w, int *answered, char *err, size_t errlen)
{
    char peer[NET_HOST_MAX + 16];
    peer_name(w, peer, sizeof(peer));
    *answered = 0;
    char why[256];
    int rc = 0;
    struct rpc_conn *c = cl_mgmt_dial(&w->servers[w->cur], w->timeout_ms, &watch_ops, w, peer, &rc,
                                      why, sizeof(why));
    if (!c) {
        snprintf(err, errlen, "cannot connect to cairnd at %s: %.180s", peer, why);
        return rc;
    }
    pthread_mutex_lock(&w->lock);
    int stopping = w->stopping;
    if (!stopping) { /* from here on cl_volwatch_stop can close c */
        w->conn = c;
        w->conn_closed = 0;
    }
    pthread_mutex_unlock(&w->lock);
    if (stopping) {
        rpc_conn_close(c, -ENOTCONN);
        rpc_conn_put(c);
        snprintf(err, errlen, "stopping");
        return -ECANCELED;
    }
    __atomic_add_fetch(&w->live, 1, __ATOMIC_RELAXED);
    rc = rpc_conn_start(c);
    if (rc < 0) {
        __atomic_sub_fetch(&w->live, 1, __ATOMIC_RELAXED);
        snprintf(err, errlen, "cannot start a connection thread: %s", strerror(-rc));
        goto fail;
    }
    struct cl_volinfo v;
    rc = getvol(c, peer, w->volume, w->subdir, w->timeout_ms, &v, answered, err, errlen);
    if (rc < 0)
        goto fail;
    log_info("management connection to cairnd at %s (volume %s, generation %llu)", peer, w->volume,
             (unsigned long long)v.gen);
    pass_layout(w, &v, peer);
    cl_volinfo_free(&v);
    return 0;
fail:
    pthread_mutex_lock(&w->lock);
    w->conn = NULL;
    pthread_mutex_unlock(&w->lock);
    rpc_conn_close(c, -ENOTCONN);
    rpc_conn_put(c);
    return rc;
}

/* Waits on the condition for up to ms; returns with the lock held. */
static void wait_ms(struct cl_volwatch *w, uint64_t ms)
{
    struct timespec ts;
    net_deadline(&ts, CLOCK_MONOTONIC, ms);
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
}

/* Serves the subscribed connection until it closes or the watcher stops. */
static void report_answered_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    (void)arg, (void)status, (void)reply, (void)take; /* nothing to do: the next one follows */
}

/* The client's counters to cairnd (report_cb), when due. */
static void report(struct cl_volwatch *w, struct rpc_conn *c, uint64_t *last)
{
    uint64_t now = net_now_ms();
    if (!w->report_cb || (*last && now - *last < CL_REPORT_MS))
        return;
    *last = now;
    struct rpc_buf body;
    rpc_buf_init(&body);
    w->report_cb(&body, w->ctx);
    if (!body.err)
        rpc_conn_call(c, RPC_OP_MGMT_CLIENT_STATS, &body, report_answered_cb, NULL);
    rpc_buf_free(&body);
}

static void serve(struct cl_volwatch *w)
{
    uint64_t reported = 0;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping && !w->conn_closed) {
        struct queued *q = w->q_head;
        if (q) {
            w->q_head = q->next;
            if (!w->q_head)
                w->q_tail = &w->q_head;
            pthread_mutex_unlock(&w->lock);
            handle_notification(w, q->f);
            rpc_frame_free(q->f);
            free(q);
            pthread_mutex_lock(&w->lock);
            continue;
        }
        struct rpc_conn *c = w->conn;
        pthread_mutex_unlock(&w->lock);
        /* cairnd answers a ping (even with ENOSYS); one silent for the
         * timeout is hung or unreachable: move on. */
        rpc_conn_tick(c, net_now_ms(), IDLE_PING_MS, (uint64_t)w->timeout_ms);
        report(w, c, &reported);
        pthread_mutex_lock(&w->lock);
        if (!w->stopping && !w->conn_closed && !w->q_head)
            wait_ms(w, 1000);
    }
    int reason = w->conn_closed;
    struct rpc_conn *c = w->conn;
    w->conn = NULL;
    /* Notifications of the old connection are dropped: the next GETVOL
     * brings the current layout anyway. */
    struct queued *q = w->q_head;
    w->q_head = NULL;
    w->q_tail = &w->q_head;
    int stopping = w->stopping;
    pthread_mutex_unlock(&w->lock);
    while (q) {
        struct queued *n = q->next;
        rpc_frame_free(q->f);
        free(q);
        q = n;
    }
    if (!stopping) {
        char peer[NET_HOST_MAX + 16];
        peer_name(w, peer, sizeof(peer));
        log_warn("lost the management connection to cairnd at %s (%s); reconnecting", peer,
                 strerror(-reason));
    }
    rpc_conn_close(c, -ENOTCONN);
    rpc_conn_put(c);
}

static void *watch_thread(void *arg)
{
    struct cl_volwatch *w = arg;
    uint64_t backoff = BACKOFF_MIN_MS;
    int failed = 0;      /* servers tried in a row without success */
    unsigned warned = 0; /* servers whose failure this outage was logged as a warning */
    char err[512];
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int stopping = w->stopping;
        pthread_mutex_unlock(&w->lock);
        if (stopping)
            break;
        int answered;
        int rc = try_connect(w, &answered, err, sizeof(err));
        if (rc == 0) {
            backoff = BACKOFF_MIN_MS;
            failed = 0;
            warned = 0;
            serve(w);
            /* Let a restarting server come back before moving on. */
            pthread_mutex_lock(&w->lock);
            if (!w->stopping)
                wait_ms(w, BACKOFF_MIN_MS);
            pthread_mutex_unlock(&w->lock);
            continue;
        }
        if (answered && (rc == -ESRCH || rc == -ENOENT))
            pass_gone(w, 0, err);
        pthread_mutex_lock(&w->lock);
        stopping = w->stopping;
        pthread_mutex_unlock(&w->lock);
        if (rc == -ECANCELED || stopping)
            continue; /* the loop ends; an unmount is no outage */
        if (!(warned & (1u << w->cur)))
            log_warn("%s", err);
        else
            log_debug("%s", err);
        warned |= 1u << w->cur;
        failed++;
        w->cur = (w->cur + 1) % w->n_servers;
        if (failed < w->n_servers && !answered)
            continue; /* an unreachable server: try the next one at once */
        failed = 0;
        pthread_mutex_lock(&w->lock);
        if (!w->stopping)
            wait_ms(w, backoff);
        pthread_mutex_unlock(&w->lock);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
    return NULL;
}

struct cl_volwatch *cl_volwatch_start(const struct cl_volwatch_params *p)
{
    if (p->n_servers < 1 || p->n_servers > CL_MAX_MGMT_SERVERS || !p->changed_cb)
        return NULL;
    struct cl_volwatch *w = calloc(1, sizeof(*w));
    if (!w || !(w->volume = strdup(p->volume)) || (p->subdir && !(w->subdir = strdup(p->subdir)))) {
        if (w)
            free(w->volume);
        free(w);
        log_error("out of memory starting the management connection");
        return NULL;
    }
    memcpy(w->servers, p->servers, sizeof(*p->servers) * (size_t)p->n_servers);
    w->n_servers = p->n_servers;
    w->cur = p->first >= 0 && p->first < p->n_servers ? p->first : 0;
    w->timeout_ms = p->timeout_ms > 0 ? p->timeout_ms : 10000;
    w->changed_cb = p->changed_cb;
    w->gone_cb = p->gone_cb;
    w->report_cb = p->report_cb;
    w->ctx = p->ctx;
    w->gen = p->gen;
    w->q_tail = &w->q_head;
    pthread_mutex_init(&w->lock, NULL);
    net_cond_init_mono(&w->cond);
    if (pthread_create(&w->thread, NULL, watch_thread, w) != 0) {
        log_error("cannot start the management connection thread");
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        free(w->volume);
        free(w->subdir);
        free(w);
        return NULL;
    }
    return w;
}

void cl_volwatch_stop(struct cl_volwatch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    struct rpc_conn *c = w->conn;
    if (c)
        rpc_conn_get(c);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    /* Unblocks a GETVOL in progress; serve() then closes and drops it. */
    if (c) {
        rpc_conn_close(c, -ENOTCONN);
        rpc_conn_put(c);
    }
    pthread_join(w->thread, NULL);
    while (__atomic_load_n(&w->live, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w->volume);
    free(w->subdir);
    free(w);
}
