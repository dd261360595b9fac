/* The pool's Raft transport: libraft's TCP one, each connection
 * authenticated first (raft_auth.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "../lib/log.h"
#include "pool_auth.h"
#include "raft_auth.h"

struct raft_auth {
    struct raft_uv_transport outer; /* what raft_uv uses */
    struct raft_uv_transport inner; /* libraft's TCP transport */
    uv_loop_t *loop;
    raft_uv_accept_cb accept_cb;
    raft_uv_transport_close_cb close_cb;
    struct hs *pending; /* handshakes not yet freed */
    int n_pending;
    int connecting; /* inner connects not yet called back */
    int closing, inner_closed;
};

/* One connection's handshake: one read or write at a time, in order. */
enum hs_step {
    H_WRITE_HELLO,
    H_READ_ANSWER,
    H_WRITE_PROOF,
    H_READ_HELLO,
    H_WRITE_ANSWER,
    H_READ_PROOF
};

struct hs {
    struct hs *next, *prev;
    struct raft_auth *ra;
    int connector;
    enum hs_step step;
    uv_stream_t *stream; /* NULL once handed to raft or closed */
    uv_timer_t timer;
    uv_write_t write;
    int handles;      /* handles of ours still open (stream while ours, timer) */
    int done, status; /* status: given to a connect request when it failed */
    struct pool_auth auth;
    uint8_t in[POOL_ANSWER_LEN], out[POOL_ANSWER_LEN];
    size_t need, got;
    /* connector */
    struct raft_uv_connect inner_req;
    struct raft_uv_connect *req;
    /* acceptor: libraft's handshake, passed on */
    raft_id id;
    char address[128];
    char peer[INET6_ADDRSTRLEN + 8];
};

static struct raft_auth *of_outer(struct raft_uv_transport *t)
{
    return (struct raft_auth *)((char *)t - offsetof(struct raft_auth, outer));
}

static struct raft_auth *of_inner(struct raft_uv_transport *t)
{
    return (struct raft_auth *)((char *)t - offsetof(struct raft_auth, inner));
}

static void maybe_closed(struct raft_auth *ra)
{
    if (ra->closing && ra->inner_closed && !ra->pending && !ra->connecting && ra->close_cb) {
        raft_uv_transport_close_cb cb = ra->close_cb;
        ra->close_cb = NULL;
        cb(&ra->outer);
    }
}

static void hs_free(struct hs *h)
{
    struct raft_auth *ra = h->ra;
    if (h->prev)
        h->prev->next = h->next;
    else
        ra->pending = h->next;
    if (h->next)
        h->next->prev = h->prev;
    ra->n_pending--;
    /* a connect that failed is told once our handles are gone */
    if (h->connector && h->status)
        h->req->cb(h->req, NULL, h->status);
    pool_auth_clear(&h->auth);
    free(h);
    maybe_closed(ra);
}

/* A stream libraft allocated, closed before any handshake of ours. */
static void free_handle_cb(uv_handle_t *handle)
{
    raft_free(handle);
}

static void handle_closed_cb(uv_handle_t *handle)
{
    struct hs *h = handle->data;
    if (handle != (uv_handle_t *)&h->timer)
        raft_free(handle); /* the stream libraft allocated */
    if (--h->handles == 0)
        hs_free(h);
}

/* Ends the handshake: the stream goes to raft (status 0) or is closed. */
static void finish(struct hs *h, int status)
{
    if (h->done)
        return;
    h->done = 1;
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, handle_closed_cb);
    uv_stream_t *s = h->stream;
    h->stream = NULL;
    if (status == 0) {
        uv_read_stop(s);
        s->data = NULL;
        h->handles--; /* the stream is raft's now */
        if (h->connector)
            h->req->cb(h->req, s, 0);
        else
            h->ra->accept_cb(&h->ra->outer, h->id, h->address, s);
        return;
    }
    h->status = status;
    uv_close((uv_handle_t *)s, handle_closed_cb);
}

static void refuse(struct hs *h, const char *why)
{
    if (h->connector)
        log_warn("pool: raft connection to %s refused: %s", h->peer, why);
    else
        log_warn("pool: refusing a raft connection from %s (raft id %llx): %s", h->peer,
                 (unsigned long long)h->id, why);
    finish(h, RAFT_NOCONNECTION);
}

static void timeout_cb(uv_timer_t *t)
{
    refuse(t->data, "no pool handshake in time");
}

static void step(struct hs *h);

static void write_cb(uv_write_t *w, int status)
{
    struct hs *h = w->data;
    if (h->done)
        return;
    if (status < 0) {
        refuse(h, uv_strerror(status));
        return;
    }
    if (h->step == H_WRITE_PROOF) { /* the connector is done */
        finish(h, 0);
        return;
    }
    h->step++;
    step(h);
}

static void alloc_cb(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    struct hs *h = handle->data;
    /* exactly what is missing: the bytes after it are raft's */
    buf->base = (char *)h->in + h->got;
    buf->len = h->need - h->got;
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct hs *h = s->data;
    if (h->done || nread == 0)
        return;
    if (nread < 0) {
        refuse(h, nread == UV_EOF ? "closed during the pool handshake" : uv_strerror((int)nread));
        return;
    }
    h->got += (size_t)nread;
    if (h->got < h->need)
        return;
    uv_read_stop(s);
    int rc;
    switch (h->step) {
    case H_READ_ANSWER:
        rc = pool_auth_answered(&h->auth, h->in, h->got, h->out);
        if (rc < 0) {
            refuse(h, rc == -EACCES ? "the server does not know this pool's secret"
                                    : "malformed pool handshake");
            return;
        }
        break;
    case H_READ_HELLO: {
        uint8_t key[POOL_SECRET_LEN];
        rc = pool_secret_get(key);
        if (rc == 0)
            rc = pool_auth_accept(&h->auth, key, h->in, h->got, h->out);
        OPENSSL_cleanse(key, sizeof(key));
        if (rc < 0) {
            refuse(h, "it did not start with the pool handshake (not a server of this pool, "
                      "or one without the pool secret)");
            return;
        }
        break;
    }
    default: /* H_READ_PROOF */
        if (pool_auth_proved(&h->auth, h->in, h->got) < 0) {
            refuse(h, "it does not know this pool's secret");
            return;
        }
        finish(h, 0);
        return;
    }
    h->step++;
    step(h);
}

static void start_read(struct hs *h, size_t need)
{
    h->need = need;
    h->got = 0;
    int rc = uv_read_start(h->stream, alloc_cb, read_cb);
    if (rc < 0)
        refuse(h, uv_strerror(rc));
}

static void start_write(struct hs *h, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)h->out, (unsigned)len);
    h->write.data = h;
    int rc = uv_write(&h->write, h->stream, &b, 1, write_cb);
    if (rc < 0)
        refuse(h, uv_strerror(rc));
}

static void step(struct hs *h)
{
    switch (h->step) {
    case H_WRITE_HELLO:
        start_write(h, POOL_HELLO_LEN);
        break;
    case H_READ_ANSWER:
        start_read(h, POOL_ANSWER_LEN);
        break;
    case H_WRITE_PROOF:
        start_write(h, POOL_PROOF_LEN);
        break;
    case H_READ_HELLO:
        start_read(h, POOL_HELLO_LEN);
        break;
    case H_WRITE_ANSWER:
        start_write(h, POOL_ANSWER_LEN);
        break;
    case H_READ_PROOF:
        start_read(h, POOL_PROOF_LEN);
        break;
    }
}

static struct hs *hs_new(struct raft_auth *ra, uv_stream_t *s, int connector)
{
    struct hs *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->ra = ra;
    h->connector = connector;
    h->stream = s;
    s->data = h;
    uv_timer_init(ra->loop, &h->timer);
    h->timer.data = h;
    h->handles = 2;
    h->next = ra->pending;
    if (ra->pending)
        ra->pending->prev = h;
    ra->pending = h;
    ra->n_pending++;
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    snprintf(h->peer, sizeof(h->peer), "?");
    if (uv_tcp_getpeername((uv_tcp_t *)s, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET)
            uv_ip4_name((struct sockaddr_in *)&ss, h->peer, sizeof(h->peer));
        else if (ss.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&ss, h->peer, sizeof(h->peer));
    }
    uv_timer_start(&h->timer, timeout_cb, RAFT_AUTH_TIMEOUT_MS, 0);
    return h;
}

/* ---- the transport's calls ---- */

static int t_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    struct raft_auth *ra = of_outer(t);
    int rc = ra->inner.init(&ra->inner, id, address);
    if (rc)
        memcpy(t->errmsg, ra->inner.errmsg, sizeof(t->errmsg));
    return rc;
}

static void inner_accept_cb(struct raft_uv_transport *t, raft_id id, const char *address,
                            uv_stream_t *s)
{
    struct raft_auth *ra = of_inner(t);
    uint8_t key[POOL_SECRET_LEN];
    if (pool_secret_get(key) < 0) { /* a pool without a secret */
        ra->accept_cb(&ra->outer, id, address, s);
        return;
    }
    OPENSSL_cleanse(key, sizeof(key));
    /* Strangers could otherwise hold any number of handshakes open for
     * RAFT_AUTH_TIMEOUT_MS each. */
    struct hs *h = ra->n_pending < RAFT_AUTH_PENDING_MAX ? hs_new(ra, s, 0) : NULL;
    if (!h) {
        if (ra->n_pending >= RAFT_AUTH_PENDING_MAX)
            log_warn("pool: refusing a raft connection (raft id %llx): %d handshakes already "
                     "under way",
                     (unsigned long long)id, ra->n_pending);
        uv_close((uv_handle_t *)s, free_handle_cb);
        return;
    }
    h->id = id;
    snprintf(h->address, sizeof(h->address), "%s", address);
    h->step = H_READ_HELLO;
    step(h);
}

static int t_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    struct raft_auth *ra = of_outer(t);
    ra->accept_cb = cb;
    int rc = ra->inner.listen(&ra->inner, inner_accept_cb);
    if (rc)
        memcpy(t->errmsg, ra->inner.errmsg, sizeof(t->errmsg));
    return rc;
}

static void inner_connect_cb(struct raft_uv_connect *ireq, uv_stream_t *s, int status)
{
    struct hs *h = ireq->data;
    struct raft_auth *ra = h->ra;
    ra->connecting--;
    uint8_t key[POOL_SECRET_LEN];
    if (status == 0 && ra->closing) {
        uv_close((uv_handle_t *)s, free_handle_cb);
        s = NULL;
        status = RAFT_CANCELED;
    }
    if (status != 0 || pool_secret_get(key) < 0) {
        struct raft_uv_connect *req = h->req;
        free(h);
        req->cb(req, s, status); /* failed, or a pool without a secret */
        maybe_closed(ra);
        return;
    }
    struct raft_uv_connect *req = h->req;
    struct hs *n = hs_new(ra, s, 1);
    if (!n || pool_auth_connect(&n->auth, key, n->out) < 0) {
        OPENSSL_cleanse(key, sizeof(key));
        free(h);
        if (n) {
            n->req = req;
            finish(n, RAFT_NOMEM);
        } else {
            uv_close((uv_handle_t *)s, free_handle_cb);
            req->cb(req, NULL, RAFT_NOMEM);
        }
        return;
    }
    OPENSSL_cleanse(key, sizeof(key));
    snprintf(n->peer, sizeof(n->peer), "%s", h->peer);
    free(h);
    n->req = req;
    n->step = H_WRITE_HELLO;
    step(n);
}

static int t_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                     const char *address, raft_uv_connect_cb cb)
{
    struct raft_auth *ra = of_outer(t);
    /* a placeholder until the inner connect calls back: it holds raft's
     * request and, for the log, the address */
    struct hs *h = calloc(1, sizeof(*h));
    if (!h)
        return RAFT_NOMEM;
    h->ra = ra;
    h->req = req;
    req->cb = cb;
    snprintf(h->peer, sizeof(h->peer), "%.*s", (int)sizeof(h->peer) - 1, address);
    h->inner_req.data = h;
    int rc = ra->inner.connect(&ra->inner, &h->inner_req, id, address, inner_connect_cb);
    if (rc) {
        memcpy(t->errmsg, ra->inner.errmsg, sizeof(t->errmsg));
        free(h);
        return rc;
    }
    ra->connecting++;
    return 0;
}

static void inner_closed_cb(struct raft_uv_transport *t)
{
    struct raft_auth *ra = of_inner(t);
    ra->inner_closed = 1;
    maybe_closed(ra);
}

static void t_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    struct raft_auth *ra = of_outer(t);
    ra->closing = 1;
    ra->close_cb = cb;
    for (struct hs *h = ra->pending; h; h = h->next)
        finish(h, RAFT_CANCELED);
    ra->inner.close(&ra->inner, inner_closed_cb);
}

struct raft_auth *raft_auth_new(uv_loop_t *loop)
{
    struct raft_auth *ra = calloc(1, sizeof(*ra));
    if (!ra)
        return NULL;
    if (raft_uv_tcp_init(&ra->inner, loop) != 0) {
        free(ra);
        return NULL;
    }
    ra->loop = loop;
    ra->outer.init = t_init;
    ra->outer.listen = t_listen;
    ra->outer.connect = t_connect;
    ra->outer.close = t_close;
    return ra;
}

struct raft_uv_transport *raft_auth_transport(struct raft_auth *ra)
{
    return &ra->outer;
}

void raft_auth_free(struct raft_auth *ra)
{
    if (!ra)
        return;
    raft_uv_tcp_close(&ra->inner);
    free(ra);
}
