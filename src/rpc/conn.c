/* Connections carrying Cairn frames (conn.h): the reader thread that
 * decodes frames and routes replies to their calls, sending with corking,
 * and the two-step teardown of a reference-counted connection. */
#include "conn.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "tls.h"

#define PENDING_BUCKETS 256
/* The reader's receive buffer: one read() usually brings a whole frame (and
 * any frames queued behind it) instead of one for the header and one for the
 * body. Larger bodies are read straight into their own allocation. */
#define RX_BUF 65536
/* Replies the reader thread makes while more frames wait in its receive
 * buffer (a server answering a burst of pipelined requests inline) are
 * gathered and sent together: with the next frame that goes out, when the
 * gathered bytes would pass TX_GATHER, or before the reader waits for
 * input. One sendmsg, and one wake-up of the peer's reader, per burst
 * instead of per reply. Replies with larger bodies go at once. */
#define TX_GATHER 16384
#define TX_GATHER_BODY 2048
/* Requests a thread sends while corked (rpc_cork) are gathered the same
 * way, up to TX_CORK bytes per connection and bodies of TX_CORK_BODY, and
 * go out at rpc_uncork: a burst of written-back files is one sendmsg per
 * brick, and one wake-up of its reader, instead of one per file. At most
 * CORK_CONNS connections per thread; requests on others go at once. */
#define TX_CORK (256 * 1024)
#define TX_CORK_BODY (64 * 1024)
#define CORK_CONNS 16

struct pending {
    struct pending *next;
    uint64_t reqid;
    rpc_reply_cb cb;
    void *arg;
};

struct rpc_conn {
    int fd;
    int refs;
    int closed;
    int close_reason;
    const struct rpc_conn_ops *ops;
    void *ctx;
    char peer[128];
    pthread_t reader;
    int reader_started;
    pthread_mutex_t send_lock; /* serializes frames on the socket */
    pthread_mutex_t lock;      /* pending table, refs, state */
    struct pending *pending[PENDING_BUCKETS];
    unsigned n_pending;
    uint64_t next_reqid;
    uint64_t last_rx_ms;
    uint8_t *rx;           /* receive buffer, the reader thread's alone */
    size_t rx_pos, rx_len; /* unconsumed bytes are rx[rx_pos, rx_len) */
    uint8_t *tx;           /* gathered frames, under send_lock */
    size_t tx_cap;
    size_t tx_len;                  /* written under send_lock; read racily by the reader */
    int tx_reply;                   /* a gathered reply among them: the reader flushes (same) */
    uint64_t rx_bytes, tx_bytes;    /* read from and written to the socket (atomic) */
    struct rpc_tls *tls;            /* every byte goes through it when set (tls.h) */
    struct rpc_tls_ctx *tls_server; /* the reader accepts TLS with it first */
    char tls_hint[200];             /* said to a client that came without TLS */
    char why[256];                  /* why the connection failed, when known */
};

/* Reader threads running in the process (rpc_conn_wait_readers). */
static int live_readers;

/* The connection whose reader thread this is. */
static _Thread_local struct rpc_conn *reading;

/* This thread's cork: whether on, and the connections holding its
 * gathered requests (a reference each). */
static _Thread_local int corked;
static _Thread_local struct rpc_conn *cork_conns[CORK_CONNS];
static _Thread_local int n_cork_conns;

void rpc_frame_free(struct rpc_frame *f)
{
    if (!f)
        return;
    free(f->body);
    free(f);
}

struct rpc_conn *rpc_conn_new(int fd, const struct rpc_conn_ops *ops, void *ctx, const char *peer)
{
    struct rpc_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->refs = 1;
    c->ops = ops;
    c->ctx = ctx;
    c->next_reqid = 1;
    c->last_rx_ms = net_now_ms();
    snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "?");
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void rpc_conn_get(struct rpc_conn *c)
{
    pthread_mutex_lock(&c->lock);
    c->refs++;
    pthread_mutex_unlock(&c->lock);
}

void rpc_conn_put(struct rpc_conn *c)
{
    pthread_mutex_lock(&c->lock);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (!last)
        return;
    rpc_tls_free(c->tls);
    rpc_tls_ctx_put(c->tls_server);
    close(c->fd);
    free(c->rx);
    free(c->tx);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void rpc_conn_close(struct rpc_conn *c, int reason)
{
    pthread_mutex_lock(&c->lock);
    if (!c->closed) {
        c->closed = 1;
        c->close_reason = reason ? reason : -ENOTCONN;
        shutdown(c->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&c->lock);
}

int rpc_conn_is_open(struct rpc_conn *c)
{
    pthread_mutex_lock(&c->lock);
    int open = !c->closed;
    pthread_mutex_unlock(&c->lock);
    return open;
}

const char *rpc_conn_peer(struct rpc_conn *c)
{
    return c->peer;
}

void rpc_conn_bytes(struct rpc_conn *c, uint64_t *rx, uint64_t *tx)
{
    *rx = __atomic_load_n(&c->rx_bytes, __ATOMIC_RELAXED);
    *tx = __atomic_load_n(&c->tx_bytes, __ATOMIC_RELAXED);
}

void *rpc_conn_ctx(struct rpc_conn *c)
{
    return c->ctx;
}

/* Writes every byte of v[0..niov) (advancing v); under send_lock. */
static int send_all(struct rpc_conn *c, struct iovec *v, int niov)
{
    if (c->tls) {
        size_t total = 0;
        for (int i = 0; i < niov; i++)
            total += v[i].iov_len;
        int rc = rpc_tls_writev(c->tls, v, niov);
        if (rc == 0)
            __atomic_add_fetch(&c->tx_bytes, (uint64_t)total, __ATOMIC_RELAXED);
        return rc;
    }
    while (niov > 0) {
        struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)niov};
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        __atomic_add_fetch(&c->tx_bytes, (uint64_t)n, __ATOMIC_RELAXED);
        size_t done = (size_t)n;
        while (niov > 0 && done >= v->iov_len) {
            done -= v->iov_len;
            v++;
            niov--;
        }
        if (niov > 0) {
            v->iov_base = (char *)v->iov_base + done;
            v->iov_len -= done;
        }
    }
    return 0;
}

/* Whether c may hold this thread's corked requests (it is taken into the
 * thread's list). Under send_lock. */
static int cork_takes(struct rpc_conn *c)
{
    for (int i = 0; i < n_cork_conns; i++)
        if (cork_conns[i] == c)
            return 1;
    if (n_cork_conns == CORK_CONNS)
        return 0;
    rpc_conn_get(c);
    cork_conns[n_cork_conns++] = c;
    return 1;
}

/* Keeps the frame hdr + body back to go with a later one: a reply the
 * reader makes with more input waiting (TX_GATHER), or a request of a
 * corked thread (TX_CORK); 1 when kept. Under send_lock. */
static int gather(struct rpc_conn *c, uint8_t kind, const uint8_t *hdr, const void *body,
                  size_t len)
{
    size_t limit;
    if (kind == RPC_KIND_REPLY && reading == c && c->rx_pos != c->rx_len && len <= TX_GATHER_BODY)
        limit = TX_GATHER;
    else if (kind == RPC_KIND_REQUEST && corked && len <= TX_CORK_BODY)
        limit = TX_CORK;
    else
        return 0;
    size_t need = c->tx_len + RPC_HDR_LEN + len;
    if (need > limit)
        return 0;
    if (need > c->tx_cap) {
        size_t cap = c->tx_cap ? c->tx_cap : TX_GATHER;
        while (cap < need)
            cap *= 2;
        uint8_t *tx = realloc(c->tx, cap);
        if (!tx)
            return 0;
        c->tx = tx;
        c->tx_cap = cap;
    }
    if (kind == RPC_KIND_REQUEST && !cork_takes(c))
        return 0;
    if (kind == RPC_KIND_REPLY)
        __atomic_store_n(&c->tx_reply, 1, __ATOMIC_RELAXED);
    memcpy(c->tx + c->tx_len, hdr, RPC_HDR_LEN);
    if (len)
        memcpy(c->tx + c->tx_len + RPC_HDR_LEN, body, len);
    __atomic_store_n(&c->tx_len, c->tx_len + RPC_HDR_LEN + len, __ATOMIC_RELAXED);
    return 1;
}

static int send_frame(struct rpc_conn *c, uint8_t kind, uint16_t op, uint64_t reqid, int status,
                      const struct rpc_buf *body)
{
    struct rpc_hdr h = {
        .magic = RPC_MAGIC,
        .version = RPC_VERSION,
        .kind = kind,
        .opcode = op,
        .reqid = reqid,
        .body_len = body ? (uint32_t)body->len : 0,
        .body_crc = body && body->len ? rpc_crc32c(0, body->data, body->len) : 0,
        .status = status,
    };
    if (body && body->err)
        return body->err;
    if (body && body->len > RPC_MAX_BODY)
        return -EMSGSIZE;
    uint8_t hdr[RPC_HDR_LEN];
    rpc_hdr_encode(&h, hdr);
    const void *data = body ? body->data : NULL;
    pthread_mutex_lock(&c->send_lock);
    if (gather(c, kind, hdr, data, h.body_len)) {
        pthread_mutex_unlock(&c->send_lock);
        return 0;
    }
    /* What was gathered goes first: frames keep the order they were made. */
    struct iovec iov[3] = {{c->tx, c->tx_len}, {hdr, RPC_HDR_LEN}, {(void *)data, h.body_len}};
    struct iovec *v = c->tx_len ? iov : iov + 1;
    int niov = (int)(iov + (h.body_len ? 3 : 2) - v);
    int rc = send_all(c, v, niov);
    __atomic_store_n(&c->tx_len, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->tx_reply, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&c->send_lock);
    if (rc < 0)
        rpc_conn_close(c, -ENOTCONN);
    return rc < 0 ? -ENOTCONN : 0;
}

/* Sends the gathered frames: a corked thread at rpc_uncork, the reader
 * before it waits for input when a reply it gathered is among them (not
 * for corked requests alone: those wait for their thread). */
static void flush_gathered(struct rpc_conn *c, int replies_only)
{
    if (!__atomic_load_n(&c->tx_len, __ATOMIC_RELAXED) ||
        (replies_only && !__atomic_load_n(&c->tx_reply, __ATOMIC_RELAXED)))
        return;
    pthread_mutex_lock(&c->send_lock);
    struct iovec iov = {c->tx, c->tx_len};
    int rc = c->tx_len ? send_all(c, &iov, 1) : 0;
    __atomic_store_n(&c->tx_len, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->tx_reply, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&c->send_lock);
    if (rc < 0)
        rpc_conn_close(c, -ENOTCONN);
}

void rpc_cork(void)
{
    corked = 1;
}

void rpc_cork_flush(void)
{
    for (int i = 0; i < n_cork_conns; i++) {
        flush_gathered(cork_conns[i], 0);
        rpc_conn_put(cork_conns[i]);
    }
    n_cork_conns = 0;
}

void rpc_uncork(void)
{
    corked = 0;
    rpc_cork_flush();
}

int rpc_conn_call(struct rpc_conn *c, uint16_t op, const struct rpc_buf *body, rpc_reply_cb cb,
                  void *arg)
{
    struct pending *p = malloc(sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->cb = cb;
    p->arg = arg;
    pthread_mutex_lock(&c->lock);
    if (c->closed) {
        pthread_mutex_unlock(&c->lock);
        free(p);
        return -ENOTCONN;
    }
    p->reqid = c->next_reqid++;
    if (c->n_pending == 0)
        c->last_rx_ms = net_now_ms(); /* the timeout counts from the first pending call */
    struct pending **b = &c->pending[p->reqid % PENDING_BUCKETS];
    p->next = *b;
    *b = p;
    c->n_pending++;
    uint64_t reqid = p->reqid;
    /* Once p is in the table the reader may answer or fail it, and cb may
     * drop the caller's reference to c (a failed handshake does): this
     * one keeps c alive until the frame is sent. */
    c->refs++;
    pthread_mutex_unlock(&c->lock);
    /* On a send failure the connection is closed and the reader fails p. */
    send_frame(c, RPC_KIND_REQUEST, op, reqid, 0, body);
    rpc_conn_put(c);
    return 0;
}

int rpc_conn_reply(struct rpc_conn *c, uint64_t reqid, uint16_t op, int status,
                   const struct rpc_buf *body)
{
    return send_frame(c, RPC_KIND_REPLY, op, reqid, status, body);
}

int rpc_conn_notify(struct rpc_conn *c, uint16_t op, const struct rpc_buf *body)
{
    return send_frame(c, RPC_KIND_NOTIFY, op, 0, 0, body);
}

struct sync_call {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, status, abandoned;
    struct rpc_frame *reply;
};

static void sync_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    struct sync_call *s = arg;
    pthread_mutex_lock(&s->lock);
    if (s->abandoned) {
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        free(s);
        return;
    }
    s->status = status;
    s->reply = reply;
    if (reply)
        *take = 1;
    s->done = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int rpc_conn_call_sync(struct rpc_conn *c, uint16_t op, const struct rpc_buf *body,
                       struct rpc_frame **reply, int timeout_ms)
{
    struct sync_call *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    int rc = rpc_conn_call(c, op, body, sync_cb, s);
    rpc_cork_flush();
    if (rc < 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        free(s);
        return rc;
    }
    struct timespec deadline;
    net_deadline(&deadline, CLOCK_REALTIME, timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    pthread_mutex_lock(&s->lock);
    while (!s->done) {
        if (timeout_ms <= 0)
            pthread_cond_wait(&s->cond, &s->lock);
        else if (pthread_cond_timedwait(&s->cond, &s->lock, &deadline) == ETIMEDOUT)
            break;
    }
    if (!s->done) {
        /* The callback frees the state when the reply finally comes. */
        s->abandoned = 1;
        pthread_mutex_unlock(&s->lock);
        return -ETIMEDOUT;
    }
    pthread_mutex_unlock(&s->lock);
    rc = s->status;
    if (reply)
        *reply = s->reply;
    else
        rpc_frame_free(s->reply);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    return rc;
}

void rpc_conn_tick(struct rpc_conn *c, uint64_t now_ms, uint64_t idle_ms, uint64_t timeout_ms)
{
    pthread_mutex_lock(&c->lock);
    int closed = c->closed;
    uint64_t since = now_ms > c->last_rx_ms ? now_ms - c->last_rx_ms : 0;
    unsigned pending = c->n_pending;
    pthread_mutex_unlock(&c->lock);
    if (closed)
        return;
    if (pending && timeout_ms && since >= timeout_ms) {
        log_warn("no answer from %s for %llu ms with %u calls pending: disconnecting", c->peer,
                 (unsigned long long)since, pending);
        rpc_conn_close(c, -ETIMEDOUT);
        return;
    }
    if (since >= idle_ms && pending == 0)
        rpc_conn_call(c, RPC_OP_PING, NULL, NULL, NULL);
}

long rpc_frame_parse(const uint8_t *buf, size_t len, struct rpc_frame *f, const char **why)
{
    int rc = rpc_hdr_decode(buf, len, &f->hdr, why);
    if (rc == -EPROTO && len < RPC_HDR_LEN)
        return 0;
    if (rc < 0)
        return rc;
    if (len - RPC_HDR_LEN < f->hdr.body_len)
        return 0;
    const uint8_t *body = buf + RPC_HDR_LEN;
    if (rpc_crc32c(0, body, f->hdr.body_len) != f->hdr.body_crc) {
        *why = "body checksum mismatch";
        return -EPROTO;
    }
    f->body = malloc(f->hdr.body_len ? f->hdr.body_len : 1);
    if (!f->body) {
        *why = "out of memory";
        return -ENOMEM;
    }
    memcpy(f->body, body, f->hdr.body_len);
    rc = rpc_msg_decode(f->body, f->hdr.body_len, &f->msg, why);
    if (rc < 0) {
        free(f->body);
        f->body = NULL;
        return rc;
    }
    return (long)(RPC_HDR_LEN + f->hdr.body_len);
}

static struct pending *take_pending(struct rpc_conn *c, uint64_t reqid)
{
    pthread_mutex_lock(&c->lock);
    struct pending **pp = &c->pending[reqid % PENDING_BUCKETS], *p;
    for (; (p = *pp); pp = &p->next)
        if (p->reqid == reqid) {
            *pp = p->next;
            c->n_pending--;
            break;
        }
    pthread_mutex_unlock(&c->lock);
    return p;
}

static void fail_all_pending(struct rpc_conn *c, int reason)
{
    for (;;) {
        struct pending *p = NULL;
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < PENDING_BUCKETS && !p; i++)
            if ((p = c->pending[i])) {
                c->pending[i] = p->next;
                c->n_pending--;
            }
        pthread_mutex_unlock(&c->lock);
        if (!p)
            return;
        int take = 0;
        if (p->cb)
            p->cb(p->arg, reason, NULL, &take);
        free(p);
    }
}

/* One read() into the receive buffer: 0, or -errno (-ECONNRESET at EOF). */
static int rx_fill(struct rpc_conn *c)
{
    if (c->rx_pos == c->rx_len) {
        c->rx_pos = c->rx_len = 0;
    } else if (c->rx_pos > 0 && RX_BUF - c->rx_len < RPC_HDR_LEN) {
        memmove(c->rx, c->rx + c->rx_pos, c->rx_len - c->rx_pos);
        c->rx_len -= c->rx_pos;
        c->rx_pos = 0;
    }
    flush_gathered(c, 1);
    for (;;) {
        ssize_t n = c->tls ? rpc_tls_read(c->tls, c->rx + c->rx_len, RX_BUF - c->rx_len)
                           : read(c->fd, c->rx + c->rx_len, RX_BUF - c->rx_len);
        if (n < 0 && c->tls) {
            if (n == -EPROTO)
                snprintf(c->why, sizeof(c->why), "TLS: %s", rpc_tls_error(c->tls));
            return n == -ECONNRESET ? -ECONNRESET : (int)n;
        }
        if (n > 0) {
            c->rx_len += (size_t)n;
            __atomic_add_fetch(&c->rx_bytes, (uint64_t)n, __ATOMIC_RELAXED);
            return 0;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno != EINTR)
            return -errno;
    }
}

/* Reads exactly len bytes past the receive buffer: 0 or -errno
 * (-ECONNRESET at the end). */
static int read_all(struct rpc_conn *c, uint8_t *buf, size_t len)
{
    if (!c->tls)
        return net_read_all(c->fd, buf, len);
    while (len > 0) {
        ssize_t n = rpc_tls_read(c->tls, buf, len);
        if (n < 0) {
            if (n == -EPROTO)
                snprintf(c->why, sizeof(c->why), "TLS: %s", rpc_tls_error(c->tls));
            return (int)n;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one frame from the socket; returns 0, or -errno / -EPROTO with why. */
static int read_frame(struct rpc_conn *c, struct rpc_frame *f, const char **why)
{
    int rc;
    *why = NULL;
    while (c->rx_len - c->rx_pos < RPC_HDR_LEN)
        if ((rc = rx_fill(c)) < 0)
            return rc;
    rc = rpc_hdr_decode(c->rx + c->rx_pos, RPC_HDR_LEN, &f->hdr, why);
    if (rc < 0)
        return rc;
    c->rx_pos += RPC_HDR_LEN;
    size_t len = f->hdr.body_len;
    f->body = malloc(len ? len : 1);
    if (!f->body) {
        *why = "out of memory";
        return -ENOMEM;
    }
    size_t have = c->rx_len - c->rx_pos;
    if (have >= len) {
        memcpy(f->body, c->rx + c->rx_pos, len);
        c->rx_pos += len;
    } else {
        memcpy(f->body, c->rx + c->rx_pos, have);
        c->rx_pos = c->rx_len = 0;
        flush_gathered(c, 1);
        rc = read_all(c, f->body + have, len - have);
        if (rc < 0) {
            *why = "connection lost inside a frame";
            return rc;
        }
        __atomic_add_fetch(&c->rx_bytes, (uint64_t)(len - have), __ATOMIC_RELAXED);
    }
    if (rpc_crc32c(0, f->body, len) != f->hdr.body_crc) {
        *why = "body checksum mismatch";
        return -EPROTO;
    }
    return rpc_msg_decode(f->body, len, &f->msg, why);
}

void rpc_conn_set_tls(struct rpc_conn *c, struct rpc_tls *t)
{
    c->tls = t;
}

void rpc_conn_require_tls(struct rpc_conn *c, struct rpc_tls_ctx *x, const char *hint)
{
    rpc_tls_ctx_get(x);
    c->tls_server = x;
    snprintf(c->tls_hint, sizeof(c->tls_hint), "%s", hint ? hint : "TLS is required");
}

const char *rpc_conn_tls_name(const struct rpc_conn *c)
{
    return c->tls ? rpc_tls_peer_name(c->tls) : NULL;
}

int rpc_conn_tls_ktls(struct rpc_conn *c)
{
    return c->tls ? rpc_tls_ktls(c->tls) : 0;
}

const char *rpc_conn_error(const struct rpc_conn *c)
{
    return c->why;
}

struct rpc_conn *rpc_conn_dial(const struct net_addr *a, int timeout_ms, struct rpc_tls_ctx *tls,
                               const struct rpc_conn_ops *ops, void *ctx, const char *peer,
                               int *err, char *why, size_t whylen)
{
    int fd = net_connect(a, timeout_ms);
    if (fd < 0) {
        *err = fd;
        snprintf(why, whylen, "%s", strerror(-fd));
        return NULL;
    }
    struct rpc_tls *t = NULL;
    if (tls) {
        int rc = rpc_tls_connect(tls, fd, timeout_ms > 0 ? timeout_ms : RPC_TLS_HANDSHAKE_MS, &t,
                                 why, whylen);
        if (rc < 0) {
            close(fd);
            *err = rc;
            return NULL;
        }
    }
    struct rpc_conn *c = rpc_conn_new(fd, ops, ctx, peer);
    if (!c) {
        rpc_tls_free(t);
        *err = -ENOMEM;
        snprintf(why, whylen, "%s", strerror(ENOMEM));
        return NULL;
    }
    c->tls = t;
    return c;
}

int rpc_conn_rx_pending(const struct rpc_conn *c)
{
    return c->rx_pos < c->rx_len;
}

/* Before closing a connection refused during its first exchange: what the
 * peer sent and we did not read would make the close a reset, which can
 * destroy our last words (the TLS alert, the answer saying why) before the
 * peer reads them. So stop sending, and read what comes for a moment. */
static void linger_close(struct rpc_conn *c)
{
    shutdown(c->fd, SHUT_WR);
    uint64_t end = net_now_ms() + 500;
    uint8_t junk[4096];
    for (;;) {
        uint64_t now = net_now_ms();
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
            return;
        ssize_t n = recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return;
    }
}

/* A server's first step on a connection that must use TLS: a client that
 * speaks plain frames gets one answer saying TLS is required, else the TLS
 * handshake. 0, or -errno with the connection to be closed. */
static int server_tls_start(struct rpc_conn *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    uint8_t first;
    int n;
    while ((n = poll(&p, 1, RPC_TLS_HANDSHAKE_MS)) < 0 && errno == EINTR)
        ;
    if (n == 0) {
        log_warn("no TLS handshake from %s within %d ms: closing", c->peer, RPC_TLS_HANDSHAKE_MS);
        return -ETIMEDOUT;
    }
    ssize_t got = recv(c->fd, &first, 1, MSG_PEEK);
    if (got <= 0)
        return -ECONNRESET; /* a port check, or a peer gone at once */
    char err[256];
    if (first != RPC_TLS_RECORD_HANDSHAKE) {
        /* Plain frames: answer the first request with the reason. */
        struct timeval tv = {.tv_sec = 2};
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        struct rpc_frame f = {0};
        const char *why = NULL;
        log_warn("refusing %s: it connected without TLS, which this port requires", c->peer);
        if (read_frame(c, &f, &why) == 0 && f.hdr.kind == RPC_KIND_REQUEST) {
            struct rpc_buf b;
            rpc_buf_init(&b);
            rpc_put_str(&b, RPC_T_TEXT, c->tls_hint);
            rpc_conn_reply(c, f.hdr.reqid, f.hdr.opcode, -EPROTONOSUPPORT, &b);
            rpc_buf_free(&b);
        }
        free(f.body);
        linger_close(c);
        return -EPROTONOSUPPORT;
    }
    int rc = rpc_tls_accept(c->tls_server, c->fd, RPC_TLS_HANDSHAKE_MS, &c->tls, err, sizeof(err));
    if (rc < 0) {
        log_warn("TLS handshake with %s failed: %s", c->peer, err);
        linger_close(c);
        return rc;
    }
    log_debug("TLS with %s (certificate of %s)%s", c->peer, rpc_tls_peer_name(c->tls),
              rpc_tls_ktls(c->tls) ? ", kernel TLS" : "");
    return 0;
}

static void *reader_main(void *arg)
{
    struct rpc_conn *c = arg;
    int reason = 0;
    reading = c;
    if (!c->rx && !(c->rx = malloc(RX_BUF))) {
        log_error("out of memory starting a reader for %s", c->peer);
        reason = -ENOMEM;
        goto out;
    }
    if (c->tls_server && !c->tls && (reason = server_tls_start(c)) < 0)
        goto out;
    for (;;) {
        struct rpc_frame *f = calloc(1, sizeof(*f));
        const char *why = NULL;
        int rc = f ? read_frame(c, f, &why) : -ENOMEM;
        if (rc < 0) {
            rpc_frame_free(f);
            pthread_mutex_lock(&c->lock);
            int was_closed = c->closed;
            pthread_mutex_unlock(&c->lock);
            if (why && !strcmp(why, "bad magic") && c->rx_pos < c->rx_len &&
                c->rx[c->rx_pos] == RPC_TLS_RECORD_HANDSHAKE && !c->tls)
                log_warn("closing connection from %s: it speaks TLS, which is off on this port",
                         c->peer);
            else if (why)
                log_warn("closing connection from %s: %s", c->peer, why);
            else if (*c->why && !was_closed)
                log_warn("connection with %s lost: %s", c->peer, c->why);
            else if (!was_closed && rc != -ECONNRESET)
                log_info("connection with %s lost: %s", c->peer, strerror(-rc));
            reason = rc == -ECONNRESET ? 0 : rc;
            break;
        }
        pthread_mutex_lock(&c->lock);
        c->last_rx_ms = net_now_ms();
        pthread_mutex_unlock(&c->lock);
        switch (f->hdr.kind) {
        case RPC_KIND_REQUEST:
            if (f->hdr.opcode == RPC_OP_PING) {
                rpc_conn_reply(c, f->hdr.reqid, RPC_OP_PING, 0, NULL);
                rpc_frame_free(f);
            } else if (c->ops && c->ops->request_cb) {
                c->ops->request_cb(c, f, c->ctx);
            } else {
                rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, -ENOSYS, NULL);
                rpc_frame_free(f);
            }
            break;
        case RPC_KIND_REPLY: {
            struct pending *p = take_pending(c, f->hdr.reqid);
            int take = 0;
            if (!p)
                log_debug("reply to unknown request %llu from %s", (unsigned long long)f->hdr.reqid,
                          c->peer);
            else if (p->cb)
                p->cb(p->arg, f->hdr.status, f, &take);
            free(p);
            if (!take)
                rpc_frame_free(f);
            break;
        }
        case RPC_KIND_NOTIFY:
            if (c->ops && c->ops->notify_cb)
                c->ops->notify_cb(c, f, c->ctx);
            else
                rpc_frame_free(f);
            break;
        }
    }
out:
    rpc_conn_close(c, reason ? reason : -ENOTCONN);
    pthread_mutex_lock(&c->lock);
    int close_reason = c->close_reason;
    pthread_mutex_unlock(&c->lock);
    fail_all_pending(c, close_reason == -ETIMEDOUT ? -ETIMEDOUT : -ENOTCONN);
    if (c->ops && c->ops->closed_cb)
        c->ops->closed_cb(c, reason, c->ctx);
    rpc_conn_put(c);
    __atomic_sub_fetch(&live_readers, 1, __ATOMIC_RELEASE);
    return NULL;
}

void rpc_conn_wait_readers(int timeout_ms)
{
    uint64_t end = net_now_ms() + (uint64_t)timeout_ms;
    while (__atomic_load_n(&live_readers, __ATOMIC_ACQUIRE) > 0 && net_now_ms() < end) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

int rpc_conn_start(struct rpc_conn *c)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rpc_conn_get(c);
    /* Nothing of c may be touched once the thread runs: it can finish and
     * drop the last reference before pthread_create returns. */
    c->reader_started = 1;
    __atomic_add_fetch(&live_readers, 1, __ATOMIC_RELAXED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, reader_main, c);
    pthread_attr_destroy(&attr);
    if (rc) {
        __atomic_sub_fetch(&live_readers, 1, __ATOMIC_RELAXED);
        c->reader_started = 0;
        rpc_conn_put(c);
        return -rc;
    }
    return 0;
}
