/* TLS sessions for connections (tls.h) on nonblocking sockets.
 *
 * An SSL object must not be used by two threads at once, yet a connection
 * has a reader thread and senders on any thread. So every SSL call is made
 * under the session's lock on a nonblocking socket, and a thread that must
 * wait for the socket waits in poll() without the lock: the reader blocked
 * for input never holds back a sender, and the other way round. */
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "../lib/net.h"

/* Writes are gathered up to one TLS record's worth, so a frame's header and
 * a small body go out as one record, not two. */
#define TX_STAGE 16384
/* Records are sent, and read, this many bytes at a time: a 1 MiB frame is
 * 64 records, and one system call per record cost as much CPU as the
 * encryption (docs/security.md, "What TLS costs"). */
#define TLS_IO_BUFFER (128 * 1024)

struct rpc_tls_ctx {
    SSL_CTX *ssl;
    int server;
    int refs;
};

struct rpc_tls {
    struct rpc_tls_ctx *x;
    SSL *ssl;
    int fd;
    int confirmed; /* client: the server sent a session ticket (it took our certificate) */
    int buffered;  /* records are written to a buffer BIO: flush after each frame */
    pthread_mutex_t lock;
    char peer_name[256];
    char err[256];
};

static void set_err(char *err, size_t errlen, const char *fmt, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, what);
}

/* OpenSSL's reason for the oldest queued error, the queue emptied. */
static void ssl_reason(char *out, size_t len)
{
    unsigned long e = ERR_get_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(out, len, "%s", r ? r : "unknown TLS error");
    ERR_clear_error();
}

static int tls_ktls_flags(void)
{
#ifdef SSL_OP_ENABLE_KTLS
    return 1;
#else
    return 0;
#endif
}

/* Client side: a NewSessionTicket from the server arrives once it has
 * checked our certificate. The session itself is not kept. */
static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    struct rpc_tls *t = SSL_get_app_data(ssl);
    if (t)
        t->confirmed = 1;
    return 0;
}

static int load_crl(X509_STORE *st, const char *crl, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(crl, &sb) < 0) {
        set_err(err, errlen, "cannot read the CRL %s", crl);
        return -errno;
    }
    if (S_ISDIR(sb.st_mode)) {
        X509_LOOKUP *lk = X509_STORE_add_lookup(st, X509_LOOKUP_hash_dir());
        if (!lk || !X509_LOOKUP_add_dir(lk, crl, X509_FILETYPE_PEM)) {
            set_err(err, errlen, "cannot use the CRL directory %s", crl);
            return -EINVAL;
        }
    } else {
        X509_LOOKUP *lk = X509_STORE_add_lookup(st, X509_LOOKUP_file());
        if (!lk || X509_load_crl_file(lk, crl, X509_FILETYPE_PEM) <= 0) {
            set_err(err, errlen, "cannot load the CRL %s (PEM expected)", crl);
            return -EINVAL;
        }
    }
    X509_STORE_set_flags(st, X509_V_FLAG_CRL_CHECK);
    return 0;
}

struct rpc_tls_ctx *rpc_tls_ctx_new(const struct rpc_tls_conf *conf, int server, char *err,
                                    size_t errlen)
{
    const char *key = conf && conf->key && *conf->key ? conf->key : RPC_TLS_KEY;
    const char *cert = conf && conf->cert && *conf->cert ? conf->cert : RPC_TLS_CERT;
    const char *ca = conf && conf->ca && *conf->ca ? conf->ca : RPC_TLS_CA;
    struct rpc_tls_ctx *x = calloc(1, sizeof(*x));
    SSL_CTX *s = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!x || !s) {
        set_err(err, errlen, "%s", "out of memory");
        goto fail;
    }
    SSL_CTX_set_min_proto_version(s, TLS1_3_VERSION);
    long opts = SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION;
#ifdef SSL_OP_ENABLE_KTLS
    opts |= SSL_OP_ENABLE_KTLS;
#endif
    SSL_CTX_set_options(s, opts);
    SSL_CTX_set_mode(s, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* Read as many records as have arrived in one read(): the reader loop
     * calls rpc_tls_read again before it waits for the socket, so records
     * buffered here are never left waiting. */
    SSL_CTX_set_read_ahead(s, 1);
    SSL_CTX_set_default_read_buffer_len(s, TLS_IO_BUFFER);
    if (conf && conf->ciphers && *conf->ciphers && !SSL_CTX_set_ciphersuites(s, conf->ciphers)) {
        set_err(err, errlen, "no usable TLS 1.3 cipher suite in ssl.cipher-list '%s'",
                conf->ciphers);
        goto fail;
    }
    if (SSL_CTX_use_certificate_chain_file(s, cert) != 1) {
        char r[128];
        ssl_reason(r, sizeof(r));
        if (err && errlen)
            snprintf(err, errlen, "cannot load the certificate %s: %s", cert, r);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(s, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(s) != 1) {
        char r[128];
        ssl_reason(r, sizeof(r));
        if (err && errlen)
            snprintf(err, errlen, "cannot load the private key %s: %s", key, r);
        goto fail;
    }
    if (SSL_CTX_load_verify_locations(s, ca, NULL) != 1) {
        char r[128];
        ssl_reason(r, sizeof(r));
        if (err && errlen)
            snprintf(err, errlen, "cannot load the CA certificates %s: %s", ca, r);
        goto fail;
    }
    if (conf && conf->crl && *conf->crl &&
        load_crl(SSL_CTX_get_cert_store(s), conf->crl, err, errlen) < 0)
        goto fail;
    /* Both sides prove who they are: a server refuses a client without a
     * certificate from the CA. */
    SSL_CTX_set_verify(s, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
    SSL_CTX_set_verify_depth(s, conf && conf->depth > 0 ? conf->depth : RPC_TLS_DEPTH);
    if (server) {
        /* One ticket, sent once the client's certificate passed: what the
         * client waits for (rpc_tls_connect). Resumption is not used. */
        SSL_CTX_set_num_tickets(s, 1);
        SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_OFF);
    } else {
        SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(s, new_session_cb);
    }
    x->ssl = s;
    x->server = server;
    x->refs = 1;
    return x;
fail:
    SSL_CTX_free(s);
    free(x);
    ERR_clear_error();
    return NULL;
}

void rpc_tls_ctx_get(struct rpc_tls_ctx *x)
{
    __atomic_add_fetch(&x->refs, 1, __ATOMIC_ACQ_REL);
}

void rpc_tls_ctx_put(struct rpc_tls_ctx *x)
{
    if (!x || __atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    SSL_CTX_free(x->ssl);
    free(x);
}

/* Waits for the socket; timeout_ms < 0 waits forever. 0, or -ETIMEDOUT. */
static int wait_fd(int fd, short ev, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    for (;;) {
        int n = poll(&p, 1, timeout_ms);
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

/* Why a handshake failed, for err: the certificate check's verdict when
 * that is what failed, else OpenSSL's reason (an alert the peer sent). */
static void handshake_reason(struct rpc_tls *t, int ssl_err, char *out, size_t len)
{
    long v = SSL_get_verify_result(t->ssl);
    unsigned long e = ERR_peek_error();
    if (v != X509_V_OK && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
        snprintf(out, len, "the peer's certificate was refused: %s",
                 X509_verify_cert_error_string(v));
        ERR_clear_error();
    } else if (ssl_err == SSL_ERROR_SYSCALL || ssl_err == SSL_ERROR_ZERO_RETURN || !e) {
        snprintf(out, len,
                 "the peer closed the connection during the TLS handshake "
                 "(no TLS on its side, or it refused this one)");
        ERR_clear_error();
    } else {
        char r[160];
        ssl_reason(r, sizeof(r));
        if (strstr(r, "alert"))
            snprintf(out, len, "the peer refused the TLS handshake: %s", r);
        else
            snprintf(out, len, "TLS handshake failed: %s", r);
    }
}

static void peer_name(struct rpc_tls *t)
{
    X509 *pc = SSL_get0_peer_certificate(t->ssl);
    t->peer_name[0] = 0;
    if (pc && X509_NAME_get_text_by_NID(X509_get_subject_name(pc), NID_commonName, t->peer_name,
                                        sizeof(t->peer_name)) < 0)
        t->peer_name[0] = 0;
}

/* After the handshake: records go to a buffer that rpc_tls_writev flushes
 * once per frame, instead of one write() per record. Not when the kernel
 * took over the sending (kernel TLS): it gathers records itself. */
static void buffer_writes(struct rpc_tls *t)
{
    BIO *sock = SSL_get_wbio(t->ssl);
    if (!sock || BIO_get_ktls_send(sock))
        return;
    BIO *buf = BIO_new(BIO_f_buffer());
    if (!buf || BIO_set_write_buffer_size(buf, TLS_IO_BUFFER) <= 0 || !BIO_up_ref(sock)) {
        BIO_free(buf);
        return; /* unbuffered still works */
    }
    BIO_push(buf, sock);
    SSL_set0_wbio(t->ssl, buf);
    t->buffered = 1;
}

static int handshake(struct rpc_tls_ctx *x, int fd, int timeout_ms, struct rpc_tls **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    struct rpc_tls *t = calloc(1, sizeof(*t));
    if (!t) {
        set_err(err, errlen, "%s", "out of memory");
        return -ENOMEM;
    }
    t->fd = fd;
    t->x = x;
    rpc_tls_ctx_get(x);
    pthread_mutex_init(&t->lock, NULL);
    int rc = -EPROTO;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        rc = -errno;
        set_err(err, errlen, "%s", strerror(-rc));
        goto fail;
    }
    if (!(t->ssl = SSL_new(x->ssl)) || !SSL_set_fd(t->ssl, fd)) {
        rc = -ENOMEM;
        set_err(err, errlen, "%s", "out of memory");
        goto fail;
    }
    SSL_set_app_data(t->ssl, t);
    uint64_t end = net_now_ms() + (uint64_t)timeout_ms;
    ERR_clear_error();
    for (;;) {
        int r = x->server ? SSL_accept(t->ssl) : SSL_connect(t->ssl);
        int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
        if (r == 1 && (x->server || t->confirmed))
            break;
        if (r == 1) {
            /* TLS 1.3: the client is done before the server has checked
             * its certificate. Wait for the server's verdict: its ticket,
             * or its alert. */
            unsigned char b;
            size_t n;
            r = SSL_peek_ex(t->ssl, &b, 1, &n);
            if (r == 1 || t->confirmed)
                break;
            e = SSL_get_error(t->ssl, r);
        }
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            if (err && errlen)
                handshake_reason(t, e, err, errlen);
            rc = e == SSL_ERROR_SYSCALL && errno ? -errno : -EPROTO;
            if (rc == -EPIPE || rc == -ECONNRESET)
                rc = -EPROTO;
            goto fail;
        }
        uint64_t now = net_now_ms();
        int left = now < end ? (int)(end - now) : 0;
        if ((rc = wait_fd(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, left)) < 0) {
            if (rc == -ETIMEDOUT)
                set_err(err, errlen, "%s", "the TLS handshake timed out");
            else
                set_err(err, errlen, "%s", strerror(-rc));
            goto fail;
        }
    }
    peer_name(t);
    buffer_writes(t);
    *out = t;
    return 0;
fail:
    ERR_clear_error();
    t->fd = -1; /* the caller's */
    rpc_tls_free(t);
    return rc;
}

int rpc_tls_connect(struct rpc_tls_ctx *x, int fd, int timeout_ms, struct rpc_tls **out, char *err,
                    size_t errlen)
{
    return handshake(x, fd, timeout_ms, out, err, errlen);
}

int rpc_tls_accept(struct rpc_tls_ctx *x, int fd, int timeout_ms, struct rpc_tls **out, char *err,
                   size_t errlen)
{
    return handshake(x, fd, timeout_ms, out, err, errlen);
}

/* After a failed SSL call (under the lock): what to do. 1: wait for ev and
 * retry; else -errno, the reason kept in t->err. */
static int after_error(struct rpc_tls *t, int r, short *ev)
{
    int e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        *ev = POLLIN;
        return 1;
    case SSL_ERROR_WANT_WRITE:
        *ev = POLLOUT;
        return 1;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return -ECONNRESET;
    case SSL_ERROR_SYSCALL: {
        int en = errno;
        ERR_clear_error();
        return en ? -en : -ECONNRESET;
    }
    default:
        ssl_reason(t->err, sizeof(t->err));
        return -EPROTO;
    }
}

ssize_t rpc_tls_read(struct rpc_tls *t, void *buf, size_t len)
{
    for (;;) {
        size_t n = 0;
        short ev = 0;
        pthread_mutex_lock(&t->lock);
        int r = SSL_read_ex(t->ssl, buf, len, &n);
        int rc = r == 1 ? 0 : after_error(t, r, &ev);
        pthread_mutex_unlock(&t->lock);
        if (r == 1)
            return (ssize_t)n;
        if (rc < 0)
            return rc;
        if ((rc = wait_fd(t->fd, ev, -1)) < 0)
            return rc;
    }
}

static int write_buf(struct rpc_tls *t, const uint8_t *p, size_t len)
{
    while (len > 0) {
        size_t n = 0;
        short ev = 0;
        pthread_mutex_lock(&t->lock);
        int r = SSL_write_ex(t->ssl, p, len, &n);
        int rc = r == 1 ? 0 : after_error(t, r, &ev);
        pthread_mutex_unlock(&t->lock);
        if (r == 1) {
            p += n;
            len -= n;
            continue;
        }
        if (rc < 0)
            return rc == -ECONNRESET ? -EPIPE : rc;
        /* A write that wants input (never in TLS 1.3 after the
         * handshake) retries after a while rather than racing the reader. */
        if ((rc = wait_fd(t->fd, ev, ev == POLLIN ? 10 : -1)) < 0 && rc != -ETIMEDOUT)
            return rc;
    }
    return 0;
}

/* Sends what the buffer BIO holds. */
static int flush_buf(struct rpc_tls *t)
{
    for (;;) {
        pthread_mutex_lock(&t->lock);
        BIO *w = SSL_get_wbio(t->ssl);
        int r = BIO_flush(w);
        int retry = r <= 0 && BIO_should_retry(w);
        int en = errno;
        pthread_mutex_unlock(&t->lock);
        if (r > 0)
            return 0;
        if (!retry) {
            ERR_clear_error();
            return en == ECONNRESET || !en ? -EPIPE : -en;
        }
        int rc = wait_fd(t->fd, POLLOUT, -1);
        if (rc < 0)
            return rc;
    }
}

int rpc_tls_writev(struct rpc_tls *t, const struct iovec *v, int niov)
{
    uint8_t stage[TX_STAGE];
    size_t staged = 0;
    int rc = 0;
    for (int i = 0; i < niov && rc == 0; i++) {
        const uint8_t *p = v[i].iov_base;
        size_t len = v[i].iov_len;
        if (staged + len <= sizeof(stage)) {
            memcpy(stage + staged, p, len);
            staged += len;
            continue;
        }
        /* Fill the record being gathered, then send whole records. */
        size_t fill = sizeof(stage) - staged;
        memcpy(stage + staged, p, fill);
        if ((rc = write_buf(t, stage, sizeof(stage))) < 0)
            break;
        p += fill;
        len -= fill;
        staged = 0;
        size_t whole = len - len % sizeof(stage);
        if (whole && (rc = write_buf(t, p, whole)) < 0)
            break;
        memcpy(stage, p + whole, len - whole);
        staged = len - whole;
    }
    if (rc == 0 && staged)
        rc = write_buf(t, stage, staged);
    if (rc == 0 && t->buffered)
        rc = flush_buf(t);
    return rc;
}

int rpc_tls_pending(struct rpc_tls *t)
{
    pthread_mutex_lock(&t->lock);
    int n = SSL_pending(t->ssl);
    pthread_mutex_unlock(&t->lock);
    return n > 0;
}

const char *rpc_tls_error(struct rpc_tls *t)
{
    return t->err;
}

const char *rpc_tls_peer_name(const struct rpc_tls *t)
{
    return t->peer_name;
}

int rpc_tls_ktls(struct rpc_tls *t)
{
    if (!tls_ktls_flags())
        return 0;
    int k = 0;
    pthread_mutex_lock(&t->lock);
    if (BIO_get_ktls_send(SSL_get_wbio(t->ssl)))
        k |= 1;
    if (BIO_get_ktls_recv(SSL_get_rbio(t->ssl)))
        k |= 2;
    pthread_mutex_unlock(&t->lock);
    return k;
}

void rpc_tls_free(struct rpc_tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    rpc_tls_ctx_put(t->x);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int rpc_tls_name_allowed(const char *list, const char *name)
{
    if (!list || !*list)
        return 1; /* the option's default, "*" */
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *end = e;
        while (end > p && end[-1] == ' ')
            end--;
        if (end > p) {
            char pat[256];
            size_t n = (size_t)(end - p) < sizeof(pat) - 1 ? (size_t)(end - p) : sizeof(pat) - 1;
            memcpy(pat, p, n);
            pat[n] = 0;
            if (fnmatch(pat, name, 0) == 0)
                return 1;
        }
        p = e;
    }
    return 0;
}
