/* The brick server: accept loop, per-connection state, the handshake, the
 * hand-over of requests to the worker pool, and the watch over a disk that
 * stalls. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/options.h"
#include "../rpc/opinfo.h"
#include "../rpc/tls.h"
#include "server.h"

struct conn_node {
    struct conn_node *next;
    struct brick_conn *bc;
};

struct brick_server {
    struct brick *b;
    int listen_fd;
    uint16_t port;
    struct brick_pool *pool;
    pthread_t accept_thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct conn_node *conns;
    int n_conns;
    int stopping;
    pthread_t watch_thread;
    uint64_t stalled_since; /* the disk stalls since then (watch_main); 0: it does not */
};

struct job {
    struct brick_server *s;
    struct brick_conn *bc;
    struct rpc_frame *f;
};

/* Requests up to this much data run on the reader thread (see request_cb). */
#define INLINE_IO (128u << 10)

static void exec_frame(struct brick *b, struct brick_conn *bc, struct rpc_frame *f)
{
    struct rpc_buf out;
    rpc_buf_init(&out);
    struct brick_req r = {.b = b,
                          .bc = bc,
                          .opcode = f->hdr.opcode,
                          .reqid = f->hdr.reqid,
                          .in = &f->msg,
                          .out = &out};
    int rc = brick_exec(&r);
    if (rc != BRICK_DEFERRED)
        brick_send_reply(bc, r.opcode, r.reqid, rc, &out, r.text);
    rpc_buf_free(&out);
    rpc_frame_free(f);
}

static void run_job(void *arg)
{
    struct job *j = arg;
    exec_frame(j->s->b, j->bc, j->f);
    brick_conn_put(j->bc);
    free(j);
}

/* Whether a request may run on the connection's reader thread. Handing a
 * request to a worker costs a thread wake-up (tens of microseconds on this
 * kind of machine, more than the request's own work), so short requests run
 * where they arrived when nothing is queued behind them. Whatever may take
 * long (fsync, fallocate, big reads and writes, compounds, anything not
 * RPC_OPF_QUICK) goes to the pool, so the reader keeps answering pings and a
 * pipelining client keeps its parallelism. Lock waits never block: they are
 * deferred.
 *
 * A small MAKE_FILE runs here even with more requests buffered behind it:
 * a client writing back a tree sends them in bursts into one directory,
 * where pool workers only take turns on the directory's lock and wake each
 * other; made one after another by this thread they cost less (cp -a of
 * 5,000 files 8-13% faster on ext4 and XFS bricks, docs/notes/performance-notes.md
 * round seven). Removals measured slower that way on ext4 and stay in the
 * pool. */
static int runs_inline(const struct rpc_frame *f)
{
    switch (f->hdr.opcode) {
    case RPC_OP_READ:
        return f->msg.size <= INLINE_IO;
    case RPC_OP_WRITE:
    case RPC_OP_MAKE_FILE:
        return f->hdr.body_len <= INLINE_IO;
    default:
        return rpc_op_is(f->hdr.opcode, RPC_OPF_QUICK);
    }
}

static int stall_ms(struct brick *b)
{
    return __atomic_load_n(&b->stall_ms, __ATOMIC_RELAXED);
}

static int same_str(const struct rpc_bytes *a, const char *s)
{
    return a->len == strlen(s) && !memcmp(a->p, s, a->len);
}

/* The directory a handshake asks for, as the connection will hold it:
 * "/" when it names none. */
static int same_subdir(const struct brick_conn *bc, const char *dir)
{
    return !strcmp(bc->subdir ? bc->subdir : "/", dir ? dir : "/");
}

static void handshake(struct brick_server *s, struct brick_conn *bc, struct rpc_frame *f)
{
    struct brick *b = s->b;
    const struct rpc_msg *m = &f->msg;
    char text[PATH_MAX + 256] = "";
    char *dir = NULL; /* the directory the connection is confined to */
    int rc = 0;
    if (!rpc_has(m, RPC_T_NAME) || !same_str(&m->name, b->volume)) {
        rc = -ENOENT;
        snprintf(text, sizeof(text), "this brick serves volume %s, not the one asked for",
                 b->volume);
    } else if (rpc_has(m, RPC_T_PATH) && !same_str(&m->path, b->path)) {
        rc = -ENOENT;
        snprintf(text, sizeof(text), "this brick of volume %s is %s, not the path asked for",
                 b->volume, b->path);
    } else if (rpc_has(m, RPC_T_SUBDIR)) {
        rc = brick_confine_open(b, &m->subdir, &dir, text, sizeof(text));
    }
    if (rc == 0) {
        pthread_mutex_lock(&b->opt_lock);
        int allowed = opt_addr_allowed_dir(b->auth_allow, b->auth_reject, dir, bc->addr);
        pthread_mutex_unlock(&b->opt_lock);
        const char *cn = bc->rc ? rpc_conn_tls_name(bc->rc) : NULL;
        if (allowed && cn) {
            pthread_mutex_lock(&b->opt_lock);
            int named = rpc_tls_name_allowed(b->ssl_allow, cn);
            pthread_mutex_unlock(&b->opt_lock);
            if (!named) {
                rc = -EACCES;
                snprintf(text, sizeof(text),
                         "certificate name %s is not allowed to use volume %s (auth.ssl-allow)", cn,
                         b->volume);
            }
        }
        if (!allowed) {
            rc = -EACCES;
            if (dir)
                snprintf(text, sizeof(text),
                         "address %s is not allowed to mount directory %s of volume %s", bc->addr,
                         dir, b->volume);
            else
                snprintf(text, sizeof(text), "address %s is not allowed to use volume %s", bc->addr,
                         b->volume);
        }
    }
    pthread_mutex_lock(&bc->lock);
    if (rc == 0 && bc->handshaken && !same_subdir(bc, dir)) {
        rc = -EINVAL; /* its requests were checked against the first one */
        snprintf(text, sizeof(text), "a connection stays in the directory it was opened for (%s)",
                 bc->subdir ? bc->subdir : "/");
    }
    pthread_mutex_unlock(&bc->lock);
    pthread_mutex_lock(&s->lock);
    uint64_t stalled = s->stalled_since;
    pthread_mutex_unlock(&s->lock);
    if (rc == 0 && stalled) {
        rc = -EIO; /* the disk stalls: watch_main */
        snprintf(text, sizeof(text),
                 "this brick's disk stalls (a request has run for over %llu ms): try again later",
                 (unsigned long long)(net_now_ms() - stalled + (uint64_t)stall_ms(b)));
    }
    struct rpc_buf out;
    rpc_buf_init(&out);
    if (rc == 0) {
        pthread_mutex_lock(&bc->lock);
        if (!bc->handshaken) {
            bc->subdir = dir;
            dir = NULL;
        }
        bc->handshaken = 1;
        pthread_mutex_unlock(&bc->lock);
        rpc_put_u64(&out, RPC_T_FEATURES, BRICK_FEATURES);
        rpc_put_str(&out, RPC_T_ID, b->id);
        uint64_t gen;
        uint32_t accused = brick_accused_subscribe(
            bc, rpc_has(m, RPC_T_FEATURES) && (m->features & RPC_FEATURE_ACCUSED), &gen);
        rpc_put_u64(&out, RPC_T_PENDING, accused);
        rpc_put_u64(&out, RPC_T_GEN, gen);
        log_debug("handshake from %s%s%s", bc->peer, bc->subdir ? " for directory " : "",
                  bc->subdir ? bc->subdir : "");
    } else if (rc == -EIO) {
        log_debug("refused handshake from %s: %s", bc->peer, text); /* the stall is logged */
    } else {
        log_warn("refused handshake from %s: %s", bc->peer, text);
    }
    brick_send_reply(bc, RPC_OP_HANDSHAKE, f->hdr.reqid, rc, &out, text);
    rpc_buf_free(&out);
    free(dir);
}

/* MGMT_RECONF from cairnd: only a peer on this host may change options. */
static void reconf(struct brick_server *s, struct brick_conn *bc, struct rpc_frame *f)
{
    if (!bc->local_peer) {
        brick_send_reply(bc, RPC_OP_MGMT_RECONF, f->hdr.reqid, -EACCES, NULL,
                         "options are only taken from this host");
        return;
    }
    struct rpc_iter it;
    struct rpc_field fld;
    rpc_iter_init(&it, f->body, f->hdr.body_len);
    while (rpc_iter_next(&it, &fld) > 0) {
        struct rpc_msg o;
        char name[128], value[4096];
        if (fld.tag != RPC_T_OPTION || rpc_msg_decode(fld.val, fld.len, &o, NULL) < 0 ||
            !rpc_has(&o, RPC_T_NAME) || !rpc_has(&o, RPC_T_DATA) ||
            rpc_bytes_str(&o.name, name, sizeof(name)) < 0 ||
            rpc_bytes_str(&o.data, value, sizeof(value)) < 0 || memchr(o.data.p, 0, o.data.len))
            continue;
        brick_set_option(s->b, name, value);
    }
    /* once every option is in: auth.allow and auth.reject change together */
    brick_close_unallowed(s->b);
    brick_send_reply(bc, RPC_OP_MGMT_RECONF, f->hdr.reqid, 0, NULL, NULL);
}

/* A request that waited for another client's exclusive lease (lease.c). */
static void run_parked(struct brick *b, struct brick_conn *bc, struct rpc_frame *f)
{
    struct brick_server *s = bc->owner;
    if (brick_lease_admit(b, bc, f)) { /* held again, by another lease */
        brick_conn_put(bc);
        return;
    }
    struct job *j = malloc(sizeof(*j));
    int rc = -ENOMEM;
    if (j) {
        j->s = s;
        j->bc = bc; /* takes over the reference */
        j->f = f;
        if ((rc = brick_pool_submit(s->pool, run_job, j)) == 0)
            return;
        free(j);
    }
    brick_send_reply(bc, f->hdr.opcode, f->hdr.reqid, rc, NULL, NULL);
    rpc_frame_free(f);
    brick_conn_put(bc);
}

static void request_cb(struct rpc_conn *c, struct rpc_frame *f, void *ctx)
{
    struct brick_conn *bc = ctx;
    struct brick_server *s = bc->owner;
    uint16_t op = f->hdr.opcode;
    if (op == RPC_OP_HANDSHAKE) {
        handshake(s, bc, f);
        rpc_frame_free(f);
        return;
    }
    if (op == RPC_OP_MGMT_RECONF) {
        reconf(s, bc, f);
        rpc_frame_free(f);
        return;
    }
    pthread_mutex_lock(&bc->lock);
    int ok = bc->handshaken;
    const char *dir = bc->subdir; /* fixed once handshaken */
    pthread_mutex_unlock(&bc->lock);
    /* cairnd on this host reads the counters (STATS) without joining the
     * volume: auth.allow, which governs clients, must not hide them. */
    if (!ok && !(op == RPC_OP_STATS && bc->local_peer)) {
        brick_send_reply(bc, op, f->hdr.reqid, -EACCES, NULL, "handshake first");
        rpc_frame_free(f);
        return;
    }
    int crc = dir ? brick_confine_frame(dir, f) : 0;
    if (crc < 0) {
        log_debug("%s from %s refused: %s (confined to %s)", rpc_op_name(op), bc->peer,
                  strerror(-crc), dir);
        brick_send_reply(bc, op, f->hdr.reqid, crc, NULL,
                         crc == -EBUSY ? "the root of a directory mount stays in place" : NULL);
        rpc_frame_free(f);
        return;
    }
    if (op == RPC_OP_COMPOUND || rpc_op_is(op, RPC_OPF_CHANGE))
        brick_spare_busy(s->b); /* not idle: no spares made ahead now */
    if (brick_lease_admit(s->b, bc, f))
        return; /* runs once another client's exclusive lease is returned */
    if (runs_inline(f) && (!rpc_conn_rx_pending(c) || f->hdr.opcode == RPC_OP_MAKE_FILE)) {
        exec_frame(s->b, bc, f);
        return;
    }
    struct job *j = malloc(sizeof(*j));
    int rc = -ENOMEM;
    if (j) {
        j->s = s;
        j->bc = bc;
        j->f = f;
        brick_conn_get(bc);
        if ((rc = brick_pool_submit(s->pool, run_job, j)) == 0)
            return;
        brick_conn_put(bc);
        free(j);
    }
    brick_send_reply(bc, op, f->hdr.reqid, rc, NULL, NULL);
    rpc_frame_free(f);
}

/* ---- a disk that stalls ----
 *
 * Pings are answered by the connections' reader threads, so a brick whose
 * disk work blocks still looks alive to its clients, and their requests
 * on it would wait as long as the disk does. Instead, once a request has
 * run for network.ping-timeout the brick takes itself out of service: it
 * closes every connection (clients then go on without it, as without a
 * brick stopped with SIGSTOP, and mark it for heal) and answers handshakes
 * with EIO, until every request that was running then has ended. So a
 * late completion happens before any client is back, and the heal that
 * follows sees it (its handle's dirty mark, brick_version_conn_gone,
 * written when the connection is released after it). docs/replication.md,
 * Failures. */

#define WATCH_MS 200

static void watch_once(struct brick_server *s)
{
    uint64_t since = 0;
    uint16_t op = 0;
    char peer[96] = "";
    int any = brick_oldest_request(s->b, &since, &op, peer, sizeof(peer));
    uint64_t now = net_now_ms(); /* after: since <= now */
    int limit = stall_ms(s->b);
    pthread_mutex_lock(&s->lock);
    if (!s->stalled_since && any && now - since >= (uint64_t)limit) {
        s->stalled_since = now;
        log_warn("a %s from %s has run for %llu ms (network.ping-timeout %d s): the disk "
                 "stalls; closing every connection and refusing new ones until it completes",
                 rpc_op_name(op), peer, (unsigned long long)(now - since), limit / 1000);
        for (struct conn_node *n = s->conns; n; n = n->next)
            rpc_conn_close(n->bc->rc, -EIO);
    } else if (s->stalled_since && (!any || since >= s->stalled_since)) {
        log_warn("the disk completed what it held after %llu ms: serving clients again",
                 (unsigned long long)(now - s->stalled_since + (uint64_t)limit));
        s->stalled_since = 0;
    }
    pthread_mutex_unlock(&s->lock);
}

static void *watch_main(void *arg)
{
    struct brick_server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->lock);
        watch_once(s);
        pthread_mutex_lock(&s->lock);
        struct timespec until;
        net_deadline(&until, CLOCK_REALTIME, WATCH_MS);
        if (!s->stopping)
            pthread_cond_timedwait(&s->cond, &s->lock, &until);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void conn_remove(struct brick_server *s, struct brick_conn *bc)
{
    pthread_mutex_lock(&s->lock);
    for (struct conn_node **pp = &s->conns; *pp; pp = &(*pp)->next) {
        if ((*pp)->bc == bc) {
            struct conn_node *n = *pp;
            *pp = n->next;
            free(n);
            s->n_conns--;
            break;
        }
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void closed_cb(struct rpc_conn *c, int reason, void *ctx)
{
    struct brick_conn *bc = ctx;
    (void)c;
    log_debug("connection from %s closed%s%s", bc->peer, reason ? ": " : "",
              reason ? strerror(-reason) : "");
    brick_conn_shutdown(bc);
    conn_remove(bc->owner, bc);
    brick_conn_put(bc); /* the server's reference */
}

static const struct rpc_conn_ops conn_ops = {.request_cb = request_cb, .closed_cb = closed_cb};

/* Numeric form of an address, IPv4-mapped IPv6 shown as IPv4. */
static void addr_str(const struct sockaddr_storage *ss, char *out, size_t len, uint16_t *port)
{
    *port = 0;
    snprintf(out, len, "?");
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)len);
        *port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ss;
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
            inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], out, (socklen_t)len);
        else
            inet_ntop(AF_INET6, &a->sin6_addr, out, (socklen_t)len);
        *port = ntohs(a->sin6_port);
    }
}

static int is_loopback(const char *a)
{
    return !strncmp(a, "127.", 4) || !strcmp(a, "::1");
}

static void accept_one(struct brick_server *s, int fd)
{
    struct sockaddr_storage peer, local;
    socklen_t pl = sizeof(peer), ll = sizeof(local);
    char paddr[64], laddr[64], name[96];
    uint16_t pport = 0, lport = 0;
    memset(&peer, 0, sizeof(peer));
    memset(&local, 0, sizeof(local));
    getpeername(fd, (struct sockaddr *)&peer, &pl);
    getsockname(fd, (struct sockaddr *)&local, &ll);
    addr_str(&peer, paddr, sizeof(paddr), &pport);
    addr_str(&local, laddr, sizeof(laddr), &lport);
    snprintf(name, sizeof(name), "%s:%u", paddr, pport);
    net_tune(fd);
    struct brick_conn *bc = brick_conn_new(s->b, NULL, name);
    struct conn_node *n = malloc(sizeof(*n));
    if (!bc || !n) {
        log_error("out of memory accepting a connection from %s", name);
        close(fd);
        free(n);
        if (bc)
            brick_conn_put(bc);
        return;
    }
    snprintf(bc->addr, sizeof(bc->addr), "%s", paddr);
    bc->local_peer = is_loopback(paddr) || !strcmp(paddr, laddr);
    bc->owner = s;
    struct rpc_conn *rc = rpc_conn_new(fd, &conn_ops, bc, name);
    if (!rc) {
        free(n);
        brick_conn_put(bc);
        return;
    }
    bc->rc = rc; /* takes over rpc_conn_new's reference */
    if (s->b->tls) {
        char hint[200];
        snprintf(hint, sizeof(hint),
                 "this brick of volume %s requires TLS (server.ssl is on): the client needs "
                 "client.ssl on",
                 s->b->volume);
        rpc_conn_require_tls(rc, s->b->tls, hint);
    }
    n->bc = bc;
    pthread_mutex_lock(&s->lock);
    n->next = s->conns;
    s->conns = n;
    s->n_conns++;
    pthread_mutex_unlock(&s->lock);
    log_debug("connection from %s", name);
    if (rpc_conn_start(rc) < 0) {
        log_error("cannot start a reader for %s", name);
        rpc_conn_close(rc, -ENOMEM);
        conn_remove(s, bc);
        brick_conn_put(bc);
    }
}

static void *accept_main(void *arg)
{
    struct brick_server *s = arg;
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        pthread_mutex_lock(&s->lock);
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        if (stopping) {
            if (fd >= 0)
                close(fd);
            break;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            log_warn("accept on the brick socket: %s", strerror(errno));
            usleep(100 * 1000); /* EMFILE and the like: do not spin */
            continue;
        }
        accept_one(s, fd);
    }
    return NULL;
}

int brick_server_start(struct brick *b, const struct net_addr *addr, int threads,
                       struct brick_server **out)
{
    struct brick_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->b = b;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    int rc = net_listen(addr, 128);
    if (rc < 0)
        goto fail;
    s->listen_fd = rc;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char tmp[64];
    if (getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        addr_str(&ss, tmp, sizeof(tmp), &s->port);
    if ((rc = brick_pool_start(&s->pool, threads)) < 0)
        goto fail_fd;
    brick_lease_set_runner(b, run_parked);
    if ((rc = -pthread_create(&s->watch_thread, NULL, watch_main, s)) < 0)
        goto fail_pool;
    if ((rc = -pthread_create(&s->accept_thread, NULL, accept_main, s)) < 0)
        goto fail_watch;
    *out = s;
    return 0;
fail_watch:
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->watch_thread, NULL);
fail_pool:
    brick_lease_set_runner(b, NULL);
    brick_pool_stop(s->pool);
fail_fd:
    close(s->listen_fd);
fail:
    free(s);
    return rc;
}

uint16_t brick_server_port(const struct brick_server *s)
{
    return s->port;
}

void brick_server_stop(struct brick_server *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    shutdown(s->listen_fd, SHUT_RDWR); /* wakes accept() */
    pthread_join(s->accept_thread, NULL);
    pthread_join(s->watch_thread, NULL);
    close(s->listen_fd);
    pthread_mutex_lock(&s->lock);
    for (struct conn_node *n = s->conns; n; n = n->next)
        rpc_conn_close(n->bc->rc, -ESHUTDOWN);
    /* Reader threads call closed_cb, which takes each off the list. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (s->n_conns > 0)
        if (pthread_cond_timedwait(&s->cond, &s->lock, &until) != 0)
            break;
    int left = s->n_conns;
    pthread_mutex_unlock(&s->lock);
    brick_lease_set_runner(s->b, NULL);
    brick_pool_stop(s->pool);
    if (left > 0) {
        /* Their reader threads still point at s: leave it to process exit. */
        log_warn("%d connections did not close in time", left);
        return;
    }
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}
