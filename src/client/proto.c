/* The protocol client layer: one brick connection, reconnected in the
 * background, with liveness checks so a dead or stopped brick costs one
 * timeout instead of a hang. See client.h for the contract. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../rpc/opinfo.h"
#include "../rpc/tls.h"
#include "client.h"

/* FH tagging: low 40 bits the brick's handle, high 24 bits the connection
 * generation. A brick handle that does not fit is refused (-EOVERFLOW). */
#define FH_BITS 40
#define FH_MASK ((1ull << FH_BITS) - 1)
#define GEN_MASK ((1ull << (64 - FH_BITS)) - 1)

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000

struct waiter {
    struct waiter *next;
    struct cl_op *op;
    uint64_t deadline_ms;
};

struct proto {
    struct cl_layer layer;
    struct net_addr addr;
    char peer[NET_HOST_MAX + 16];
    char *volume, *brick_path;
    char *subdir; /* NULL: the whole volume */
    int ping_ms;  /* written under lock (reconfigure); read atomically without it */
    cl_recall_fn recall;
    void *recall_ctx;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct rpc_conn *conn; /* NULL while disconnected; one reference held */
    struct rpc_conn *hs;   /* connection being handshaken; one reference held */
    uint64_t hs_deadline_ms;
    uint64_t attempts; /* connection attempts finished, for cl_proto_new */
    uint64_t gen;      /* generation of conn (read by reply callbacks) */
    struct waiter *wait_head, **wait_tail;
    unsigned inflight; /* calls sent and not answered, on any connection */
    unsigned live;     /* connections whose reader may still call closed_cb */
    int stopping;
    int thread_started;
    pthread_t thread;
    uint64_t backoff_ms, next_try_ms, last_ping_ms;
    uint64_t target_gen; /* counts retargets (cl_proto_retarget) */
    /* The members of its replica set the brick holds marks against (its
     * last word, kept while disconnected), and that word's number on the
     * current connection. Atomic. */
    uint32_t accused;
    uint64_t accused_gen;
    /* brick paths before a retarget: log lines of other threads may still
     * hold them, so they are freed with the layer */
    char **retired;
    int n_retired;
    struct rpc_tls_ctx *tls; /* client.ssl: one reference; NULL for plain TCP */
    char last_why[256];      /* the last connection failure logged, not repeated */
};

static void closed_cb(struct rpc_conn *c, int reason, void *ctx)
{
    struct proto *p = ctx;
    pthread_mutex_lock(&p->lock);
    int was_current = p->conn == c;
    if (was_current) {
        p->conn = NULL;
        rpc_conn_put(c);
        log_warn("disconnected from brick %s:%s (%s)", p->peer, p->brick_path,
                 reason ? strerror(-reason) : "closed by the brick");
    }
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    /* The brick dropped this connection's leases with it. */
    if (was_current && p->recall)
        p->recall(p->recall_ctx, &p->layer, NULL, NULL);
    /* The last touch of p: proto_destroy waits for this. */
    __atomic_sub_fetch(&p->live, 1, __ATOMIC_RELEASE);
}

static void lease_return_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    (void)arg;
    (void)status;
    (void)reply;
    (void)take;
}

void cl_proto_lease_return(struct cl_layer *l, const char *path)
{
    struct proto *p = l->priv;
    pthread_mutex_lock(&p->lock);
    struct rpc_conn *c = p->conn;
    if (c)
        rpc_conn_get(c);
    pthread_mutex_unlock(&p->lock);
    if (!c)
        return; /* the brick dropped the lease with the connection */
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_str(&b, RPC_T_PATH, path);
    if (rpc_conn_call(c, RPC_OP_LEASE_RETURN, &b, lease_return_cb, NULL) < 0)
        log_debug("lease return of %s to %s not sent", path, p->peer);
    rpc_buf_free(&b);
    rpc_conn_put(c);
}

/* The brick's accusations as of its number gen on connection c (not
 * applied when c is no longer the one being made or used, or when a later
 * word arrived first). */
static void set_accused(struct proto *p, struct rpc_conn *c, uint32_t mask, uint64_t gen)
{
    pthread_mutex_lock(&p->lock);
    if ((c == p->conn || c == p->hs) && gen >= p->accused_gen) {
        uint32_t old = __atomic_exchange_n(&p->accused, mask, __ATOMIC_ACQ_REL);
        p->accused_gen = gen;
        if (old != mask)
            log_info("brick %s:%s holds marks against replica(s) 0x%x of its set%s", p->peer,
                     p->brick_path, mask, mask ? ": not read from until healed" : "");
    }
    pthread_mutex_unlock(&p->lock);
}

static void seen_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    (void)arg;
    (void)status;
    (void)reply;
    (void)take;
}

/* A notification from the brick: lease recalls, accusations. */
static void notify_cb(struct rpc_conn *c, struct rpc_frame *f, void *ctx)
{
    struct proto *p = ctx;
    char path[PATH_MAX], name[NAME_MAX + 1] = "";
    if (f->hdr.opcode == RPC_OP_ACCUSED && rpc_has(&f->msg, RPC_T_PENDING) &&
        rpc_has(&f->msg, RPC_T_GEN)) {
        /* Stored before it is confirmed: the brick answers the change that
         * caused it only then, so no read of ours after that change's
         * return goes to an accused copy. */
        set_accused(p, c, (uint32_t)f->msg.pending, f->msg.gen);
        struct rpc_buf b;
        rpc_buf_init(&b);
        rpc_put_u64(&b, RPC_T_GEN, f->msg.gen);
        if (rpc_conn_call(c, RPC_OP_ACCUSED_SEEN, &b, seen_cb, NULL) < 0)
            log_debug("accusation notice of brick %s not confirmed", p->peer);
        rpc_buf_free(&b);
    } else if (f->hdr.opcode == RPC_OP_LEASE_RECALL && rpc_has(&f->msg, RPC_T_PATH) &&
               f->msg.path.len < sizeof(path)) {
        rpc_bytes_str(&f->msg.path, path, sizeof(path));
        if (rpc_has(&f->msg, RPC_T_NAME))
            rpc_bytes_str(&f->msg.name, name, sizeof(name));
        if (p->recall)
            p->recall(p->recall_ctx, &p->layer, path, name);
        else
            cl_proto_lease_return(&p->layer, path);
    } else {
        log_debug("unexpected notification %s from brick %s", rpc_op_name(f->hdr.opcode), p->peer);
    }
    rpc_frame_free(f);
}

static const struct rpc_conn_ops conn_ops = {.closed_cb = closed_cb, .notify_cb = notify_cb};

static int op_has_fh(const struct cl_op *op)
{
    return rpc_has(&op->args, RPC_T_FH);
}

/* Per-call state, so the reply can be tagged with its connection's
 * generation and the in-flight count kept. */
struct call {
    struct proto *p;
    struct cl_op *op;
    uint64_t gen;
};

static void call_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    struct call *k = arg;
    struct proto *p = k->p;
    struct cl_op *op = k->op;
    uint64_t gen = k->gen;
    free(k);
    __atomic_sub_fetch(&p->inflight, 1, __ATOMIC_RELAXED);
    op->rounds = 1; /* counters (layer.h) */
    if (reply)
        *take = 1;
    if (status == 0 && reply && rpc_op_is(op->args.op, RPC_OPF_OPEN)) {
        if (!rpc_has(&reply->msg, RPC_T_FH)) {
            status = -EPROTO;
        } else if (reply->msg.fh > FH_MASK) {
            log_error("brick %s returned handle %llu, too large to tag", p->peer,
                      (unsigned long long)reply->msg.fh);
            status = -EOVERFLOW;
        } else {
            reply->msg.fh |= (gen & GEN_MASK) << FH_BITS;
        }
    }
    cl_op_complete(op, status, reply);
}

/* Sends op on conn (a reference the caller holds). Returns 0 when the op is
 * on its way (its completion will come from the connection), or -ENOTCONN
 * when the connection is already closed (op not completed). */
static int send_op(struct proto *p, struct rpc_conn *conn, uint64_t gen, struct cl_op *op)
{
    struct rpc_msg m = op->args;
    if (op_has_fh(op)) {
        uint64_t fgen = op->args.fh >> FH_BITS;
        if (fgen != (gen & GEN_MASK)) {
            int stale_close = rpc_op_is(op->args.op, RPC_OPF_RELEASE);
            cl_op_complete(op, stale_close ? 0 : -EIO, NULL);
            return 0;
        }
        m.fh = op->args.fh & FH_MASK;
    }
    struct call *k = malloc(sizeof(*k));
    if (!k) {
        cl_op_complete(op, -ENOMEM, NULL);
        return 0;
    }
    k->p = p;
    k->op = op;
    k->gen = gen;
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_msg_encode(&m, &b);
    if (b.err) {
        rpc_buf_free(&b);
        free(k);
        cl_op_complete(op, -ENOMEM, NULL);
        return 0;
    }
    __atomic_add_fetch(&p->inflight, 1, __ATOMIC_RELAXED);
    int rc = rpc_conn_call(conn, (uint16_t)op->args.op, &b, call_cb, k);
    rpc_buf_free(&b);
    if (rc < 0) {
        __atomic_sub_fetch(&p->inflight, 1, __ATOMIC_RELAXED);
        free(k);
        if (rc == -ENOTCONN)
            return rc;
        cl_op_complete(op, rc, NULL);
    }
    return 0;
}

static int enqueue_waiter(struct proto *p, struct cl_op *op)
{
    struct waiter *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->op = op;
    w->next = NULL;
    w->deadline_ms = net_now_ms() + (uint64_t)p->ping_ms;
    *p->wait_tail = w;
    p->wait_tail = &w->next;
    pthread_cond_broadcast(&p->cond);
    return 0;
}

static void proto_submit(struct cl_layer *self, struct cl_op *op)
{
    struct proto *p = self->priv;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        struct rpc_conn *c = p->conn;
        uint64_t gen = p->gen;
        if (!c || p->stopping) {
            int rc = p->stopping ? -ENOTCONN : enqueue_waiter(p, op);
            pthread_mutex_unlock(&p->lock);
            if (rc < 0)
                cl_op_complete(op, rc, NULL);
            return;
        }
        rpc_conn_get(c);
        pthread_mutex_unlock(&p->lock);
        int rc = send_op(p, c, gen, op);
        if (rc == -ENOTCONN) {
            /* Closed under us: make sure the layer knows, then wait. */
            pthread_mutex_lock(&p->lock);
            if (p->conn == c) {
                p->conn = NULL;
                rpc_conn_put(c);
            }
            pthread_mutex_unlock(&p->lock);
            rpc_conn_put(c);
            continue;
        }
        rpc_conn_put(c);
        return;
    }
}

static void schedule_retry(struct proto *p)
{
    uint64_t now = net_now_ms();
    p->next_try_ms = now + p->backoff_ms;
    p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
    p->attempts++;
    pthread_cond_broadcast(&p->cond);
}

static void connected(struct proto *p, struct rpc_conn *c);

/* Closes and lets go of a connection the caller held a reference on
 * (NULL: nothing). */
static void drop_conn(struct rpc_conn *c)
{
    if (c) {
        rpc_conn_close(c, -ENOTCONN);
        rpc_conn_put(c);
    }
}

struct hs_call {
    struct proto *p;
    struct rpc_conn *c;
};

/* The handshake's answer, on the new connection's reader thread. */
static void hs_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    struct hs_call *k = arg;
    struct proto *p = k->p;
    struct rpc_conn *c = k->c;
    free(k);
    pthread_mutex_lock(&p->lock);
    int current = p->hs == c;
    if (!current || p->stopping || status < 0) {
        if (current) {
            p->hs = NULL;
            char text[256] = "";
            if (reply && rpc_has(&reply->msg, RPC_T_TEXT))
                rpc_bytes_str(&reply->msg.text, text, sizeof(text));
            log_warn("handshake with brick %s:%s failed: %s%s%s", p->peer, p->brick_path,
                     strerror(-status), *text ? ": " : "", text);
            schedule_retry(p);
        }
        pthread_mutex_unlock(&p->lock);
        rpc_conn_close(c, -ENOTCONN);
        if (current)
            rpc_conn_put(c);
        return;
    }
    p->backoff_ms = BACKOFF_MIN_MS;
    pthread_mutex_unlock(&p->lock);
    if (reply)
        set_accused(p, c, rpc_has(&reply->msg, RPC_T_PENDING) ? (uint32_t)reply->msg.pending : 0,
                    rpc_has(&reply->msg, RPC_T_GEN) ? reply->msg.gen : 0);
    connected(p, c); /* takes over the reference */
}

/* Connects and starts the handshake; called by the connection thread without
 * the lock. The answer arrives in hs_cb. */
static void start_connect(struct proto *p)
{
    int ping_ms = __atomic_load_n(&p->ping_ms, __ATOMIC_RELAXED);
    int tmo = ping_ms < 5000 ? ping_ms : 5000;
    pthread_mutex_lock(&p->lock); /* cl_proto_retarget changes them */
    struct net_addr addr = p->addr;
    const char *brick_path = p->brick_path;
    uint64_t target_gen = p->target_gen;
    pthread_mutex_unlock(&p->lock);
    struct hs_call *k = NULL;
    int err = 0;
    char why[256];
    struct rpc_conn *c =
        rpc_conn_dial(&addr, tmo, p->tls, &conn_ops, p, p->peer, &err, why, sizeof(why));
    if (!c) {
        if (p->tls && err != -ECONNREFUSED && err != -ETIMEDOUT && err != -EHOSTUNREACH &&
            strcmp(why, p->last_why)) {
            log_warn("TLS with brick %s:%s failed: %s", p->peer, brick_path, why);
            snprintf(p->last_why, sizeof(p->last_why), "%s", why);
        } else {
            log_debug("connecting to brick %s: %s", p->peer, why);
        }
        goto fail;
    }
    p->last_why[0] = 0;
    __atomic_add_fetch(&p->live, 1, __ATOMIC_RELAXED);
    if (rpc_conn_start(c) < 0) {
        __atomic_sub_fetch(&p->live, 1, __ATOMIC_RELAXED);
        goto fail;
    }
    if (!(k = malloc(sizeof(*k))))
        goto fail;
    k->p = p;
    k->c = c;
    pthread_mutex_lock(&p->lock);
    if (p->target_gen != target_gen) { /* retargeted meanwhile: connect anew */
        pthread_mutex_unlock(&p->lock);
        goto fail;
    }
    p->hs = c;          /* the reference from rpc_conn_new */
    p->accused_gen = 0; /* the brick numbers its words per process */
    p->hs_deadline_ms = net_now_ms() + (uint64_t)p->ping_ms;
    pthread_mutex_unlock(&p->lock);
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_str(&b, RPC_T_NAME, p->volume);
    rpc_put_str(&b, RPC_T_PATH, brick_path);
    if (p->subdir)
        rpc_put_str(&b, RPC_T_SUBDIR, p->subdir);
    rpc_put_u64(&b, RPC_T_FEATURES, RPC_FEATURE_ACCUSED);
    int rc = rpc_conn_call(c, RPC_OP_HANDSHAKE, &b, hs_cb, k);
    rpc_buf_free(&b);
    if (rc < 0) {
        free(k);
        pthread_mutex_lock(&p->lock);
        int current = p->hs == c;
        if (current) {
            p->hs = NULL;
            schedule_retry(p);
        }
        pthread_mutex_unlock(&p->lock);
        rpc_conn_close(c, -ENOTCONN);
        if (current)
            rpc_conn_put(c);
    }
    return;
fail:
    free(k);
    if (c) {
        rpc_conn_close(c, -ENOTCONN);
        rpc_conn_put(c);
    }
    pthread_mutex_lock(&p->lock);
    schedule_retry(p);
    pthread_mutex_unlock(&p->lock);
}

/* Takes the expired waiters (or all of them when all is set) off the queue,
 * under the lock; the caller fails them outside it. */
static struct waiter *take_waiters(struct proto *p, uint64_t now, int all)
{
    struct waiter *out = NULL, **op = &out, **pp = &p->wait_head;
    while (*pp) {
        struct waiter *w = *pp;
        if (all || w->deadline_ms <= now) {
            *pp = w->next;
            w->next = NULL;
            *op = w;
            op = &w->next;
        } else {
            pp = &w->next;
        }
    }
    p->wait_tail = pp;
    return out;
}

static void fail_waiters(struct waiter *w, int status)
{
    while (w) {
        struct waiter *n = w->next;
        cl_op_complete(w->op, status, NULL);
        free(w);
        w = n;
    }
}

static void connected(struct proto *p, struct rpc_conn *c)
{
    pthread_mutex_lock(&p->lock);
    p->conn = c;
    p->hs = NULL;
    p->gen++;
    p->attempts++;
    pthread_cond_broadcast(&p->cond);
    uint64_t gen = p->gen;
    struct waiter *w = take_waiters(p, 0, 1);
    rpc_conn_get(c);
    pthread_mutex_unlock(&p->lock);
    log_info("connected to brick %s:%s (connection %llu)", p->peer, p->brick_path,
             (unsigned long long)gen);
    while (w) {
        struct waiter *n = w->next;
        if (send_op(p, c, gen, w->op) == -ENOTCONN)
            cl_op_complete(w->op, -ENOTCONN, NULL);
        free(w);
        w = n;
    }
    rpc_conn_put(c);
}

static void *proto_thread(void *arg)
{
    struct proto *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        uint64_t now = net_now_ms();
        struct rpc_conn *c = p->conn;
        if (!c && !p->hs && now >= p->next_try_ms) {
            pthread_mutex_unlock(&p->lock);
            start_connect(p);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        if (p->hs && now >= p->hs_deadline_ms) {
            /* Silent brick: give up on this attempt; hs_cb cleans up. */
            struct rpc_conn *h = p->hs;
            int ping_ms = p->ping_ms;
            rpc_conn_get(h);
            pthread_mutex_unlock(&p->lock);
            log_warn("no handshake answer from brick %s in %d ms", p->peer, ping_ms);
            rpc_conn_close(h, -ETIMEDOUT);
            rpc_conn_put(h);
            pthread_mutex_lock(&p->lock);
        }
        if (c) {
            rpc_conn_get(c);
            uint64_t timeout = (uint64_t)p->ping_ms, idle = timeout / 3;
            int ping =
                __atomic_load_n(&p->inflight, __ATOMIC_RELAXED) && now - p->last_ping_ms >= idle;
            if (ping)
                p->last_ping_ms = now;
            pthread_mutex_unlock(&p->lock);
            /* rpc_conn_tick pings only an idle connection; a call that
             * legitimately waits long (a blocked SETLKW) must not look like
             * a dead brick, so keep pinging while calls are pending: a live
             * brick answers pings from its reader thread. */
            if (ping)
                rpc_conn_call(c, RPC_OP_PING, NULL, NULL, NULL);
            rpc_conn_tick(c, now, idle, timeout);
            rpc_conn_put(c);
            pthread_mutex_lock(&p->lock);
        }
        struct waiter *expired = take_waiters(p, now, 0);
        if (expired) {
            pthread_mutex_unlock(&p->lock);
            fail_waiters(expired, -ENOTCONN);
            pthread_mutex_lock(&p->lock);
        }
        /* Sleep until the next tick, a reconnect attempt, or a wake-up. */
        uint64_t sleep_ms = 250;
        if (!p->conn && !p->hs && p->next_try_ms > now && p->next_try_ms - now < sleep_ms)
            sleep_ms = p->next_try_ms - now;
        if (!p->conn && !p->hs && p->next_try_ms <= now)
            continue;
        struct timespec ts;
        net_deadline(&ts, CLOCK_MONOTONIC, sleep_ms);
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* network.ping-timeout, live: the connection thread uses the new value from
 * its next tick (liveness checks, reconnect waits, handshakes); operations
 * already waiting for a connection keep the deadline they got. */
static void proto_reconfigure(struct cl_layer *self, const struct opt_set *opts)
{
    struct proto *p = self->priv;
    int64_t sec = opt_int(opts, "network.ping-timeout");
    if (sec <= 0 || sec > 86400)
        return;
    int ms = (int)sec * 1000;
    pthread_mutex_lock(&p->lock);
    int old = p->ping_ms;
    __atomic_store_n(&p->ping_ms, ms, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (old != ms)
        log_debug("brick %s:%s: ping timeout %d ms (was %d ms)", p->peer, p->brick_path, ms, old);
}

void cl_proto_shutdown(struct cl_layer *self)
{
    struct proto *p = self->priv;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    struct rpc_conn *c = p->conn, *h = p->hs;
    p->conn = NULL;
    p->hs = NULL;
    struct waiter *w = take_waiters(p, 0, 1);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    fail_waiters(w, -ENOTCONN);
    if (p->thread_started)
        pthread_join(p->thread, NULL);
    p->thread_started = 0;
    drop_conn(c);
    drop_conn(h);
}

static void proto_destroy(struct cl_layer *self)
{
    struct proto *p = self->priv;
    cl_proto_shutdown(self);
    /* In-flight calls and connection readers reference p; closing made
     * the readers fail the calls and exit, which takes moments. */
    while (__atomic_load_n(&p->inflight, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&p->live, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->volume);
    free(p->brick_path);
    for (int i = 0; i < p->n_retired; i++)
        free(p->retired[i]);
    free(p->retired);
    free(p->subdir);
    rpc_tls_ctx_put(p->tls);
    free(p);
}

struct cl_layer *cl_proto_new(const struct cl_proto_params *params)
{
    struct proto *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->addr = params->addr;
    net_format_addr(&p->addr, p->peer, sizeof(p->peer));
    p->volume = strdup(params->volume ? params->volume : "");
    p->brick_path = strdup(params->brick_path ? params->brick_path : "");
    p->subdir = params->subdir && strcmp(params->subdir, "/") ? strdup(params->subdir) : NULL;
    if (!p->volume || !p->brick_path ||
        (params->subdir && strcmp(params->subdir, "/") && !p->subdir)) {
        free(p->volume);
        free(p->brick_path);
        free(p->subdir);
        free(p);
        return NULL;
    }
    p->ping_ms = params->ping_timeout_ms > 0 ? params->ping_timeout_ms : CL_DEFAULT_PING_TIMEOUT_MS;
    p->recall = params->recall;
    p->recall_ctx = params->recall_ctx;
    if ((p->tls = params->tls))
        rpc_tls_ctx_get(p->tls);
    pthread_mutex_init(&p->lock, NULL);
    net_cond_init_mono(&p->cond);
    p->wait_tail = &p->wait_head;
    p->backoff_ms = BACKOFF_MIN_MS;
    p->layer.name = "protocol/client";
    p->layer.submit = proto_submit;
    p->layer.reconfigure = proto_reconfigure;
    p->layer.destroy = proto_destroy;
    p->layer.priv = p;

    if (pthread_create(&p->thread, NULL, proto_thread, p) != 0) {
        log_error("cannot start the connection thread for brick %s", p->peer);
        proto_destroy(&p->layer);
        return NULL;
    }
    p->thread_started = 1;
    /* Wait for the first attempt so a mount starts connected when it can. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += p->ping_ms / 1000 + 1;
    pthread_mutex_lock(&p->lock);
    while (!p->conn && p->attempts == 0)
        if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
            break;
    if (!p->conn)
        log_warn("brick %s:%s is not reachable yet; will keep trying", p->peer, p->brick_path);
    pthread_mutex_unlock(&p->lock);
    return &p->layer;
}

int cl_proto_connected(struct cl_layer *l)
{
    struct proto *p = l->priv;
    pthread_mutex_lock(&p->lock);
    int r = p->conn != NULL;
    pthread_mutex_unlock(&p->lock);
    return r;
}

uint64_t cl_proto_generation(struct cl_layer *l)
{
    struct proto *p = l->priv;
    pthread_mutex_lock(&p->lock);
    uint64_t g = p->gen;
    pthread_mutex_unlock(&p->lock);
    return g;
}

uint32_t cl_proto_accused(struct cl_layer *l)
{
    struct proto *p = l->priv;
    return __atomic_load_n(&p->accused, __ATOMIC_ACQUIRE);
}

void cl_proto_describe(struct cl_layer *l, char *out, size_t len)
{
    struct proto *p = l->priv;
    snprintf(out, len, "%s:%s", p->peer, p->brick_path);
}

int cl_proto_retarget(struct cl_layer *l, const struct net_addr *addr, const char *brick_path)
{
    struct proto *p = l->priv;
    char *path = strdup(brick_path);
    pthread_mutex_lock(&p->lock);
    char **r = path ? realloc(p->retired, (size_t)(p->n_retired + 1) * sizeof(*r)) : NULL;
    if (!r) {
        pthread_mutex_unlock(&p->lock);
        free(path);
        return -ENOMEM;
    }
    p->retired = r;
    p->retired[p->n_retired++] = p->brick_path;
    char old[NET_HOST_MAX + 16];
    snprintf(old, sizeof(old), "%s", p->peer);
    const char *old_path = p->brick_path;
    p->brick_path = path;
    p->addr = *addr;
    net_format_addr(&p->addr, p->peer, sizeof(p->peer));
    p->target_gen++;
    /* The old brick's word on accusations says nothing of the new one,
     * whose handshake brings its own. */
    __atomic_store_n(&p->accused, 0, __ATOMIC_RELEASE);
    p->accused_gen = 0;
    struct rpc_conn *c = p->conn, *h = p->hs;
    if (c)
        rpc_conn_get(c);
    if (h)
        rpc_conn_get(h);
    p->backoff_ms = BACKOFF_MIN_MS;
    p->next_try_ms = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    log_info("brick %s:%s is now %s:%s", old, old_path, p->peer, path);
    /* Closing makes closed_cb drop them; the thread then connects to the
     * new brick. Handles of the old connection fail with EIO, as after
     * any reconnect. */
    drop_conn(c);
    drop_conn(h);
    return 0;
}
