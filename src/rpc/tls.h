/* TLS under Cairn's framing (OpenSSL 3, TLS 1.3 only). A connection that
 * uses it hands every byte it reads and writes to an rpc_tls instead of the
 * socket (conn.c); frames and messages are unchanged.
 *
 * Both sides present a certificate and check the other's: chain up to the
 * CA file, expiry, and revocation when a CRL is given. Kernel TLS
 * (SSL_OP_ENABLE_KTLS) is asked for and used when OpenSSL and the kernel
 * offer it; rpc_tls_ktls says whether it engaged.
 *
 * Ownership: a context is reference counted (rpc_tls_ctx_get/put); each
 * rpc_tls holds one on its context. An rpc_tls is owned by whoever made it
 * until it is given to a connection (rpc_conn_set_tls), which frees it. */
#ifndef CAIRN_RPC_TLS_H
#define CAIRN_RPC_TLS_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The documented default paths of the key, the certificate and the CA
 * certificates; cairnd, cairn-brickd, cairn-fuse and libcairn take options
 * overriding them. */
#define RPC_TLS_KEY "/etc/ssl/cairn.key"
#define RPC_TLS_CERT "/etc/ssl/cairn.pem"
#define RPC_TLS_CA "/etc/ssl/cairn.ca"

/* How long a handshake may take before the side waiting gives up. */
#define RPC_TLS_HANDSHAKE_MS 10000

struct rpc_tls_conf {
    const char *key, *cert, *ca; /* NULL: the defaults above */
    const char *crl;             /* a CRL file or a hashed directory; NULL/"": none */
    const char *ciphers;         /* TLS 1.3 suites, ':'-separated; NULL/"": OpenSSL's */
    int depth;                   /* most intermediate CAs in a chain; 0: RPC_TLS_DEPTH */
};
#define RPC_TLS_DEPTH 1

struct rpc_tls_ctx;
struct rpc_tls;

/* Loads key, certificate, CA and CRL. NULL on failure with the reason
 * (naming the file) in err. server chooses the side. */
struct rpc_tls_ctx *rpc_tls_ctx_new(const struct rpc_tls_conf *conf, int server, char *err,
                                    size_t errlen);
void rpc_tls_ctx_get(struct rpc_tls_ctx *x);
void rpc_tls_ctx_put(struct rpc_tls_ctx *x);

/* The handshake over a connected socket, as client or server; fd stays the
 * caller's (closed with the connection) and is made nonblocking. On
 * success *out is the session; else -errno with the reason in err
 * ("certificate verify failed: certificate has expired", "the server
 * closed the connection during the handshake", ...). The client waits
 * until the server has accepted its certificate too, so a refusal is
 * seen here and not on the first read. */
int rpc_tls_connect(struct rpc_tls_ctx *x, int fd, int timeout_ms, struct rpc_tls **out, char *err,
                    size_t errlen);
int rpc_tls_accept(struct rpc_tls_ctx *x, int fd, int timeout_ms, struct rpc_tls **out, char *err,
                   size_t errlen);

/* Blocking reads and writes; any thread may write while one reads.
 * rpc_tls_read returns bytes read (> 0), -ECONNRESET at the end, or
 * -errno (-EPROTO with the reason kept for rpc_tls_error).
 * rpc_tls_writev writes everything or returns -errno. */
ssize_t rpc_tls_read(struct rpc_tls *t, void *buf, size_t len);
int rpc_tls_writev(struct rpc_tls *t, const struct iovec *v, int niov);
/* Whether decrypted bytes wait in the session (read would not block). */
int rpc_tls_pending(struct rpc_tls *t);
/* The last error's reason ("" when none). */
const char *rpc_tls_error(struct rpc_tls *t);
/* The common name of the peer's certificate. */
const char *rpc_tls_peer_name(const struct rpc_tls *t);
/* Kernel TLS: bit 0 set when sends go through it, bit 1 for receives. */
int rpc_tls_ktls(struct rpc_tls *t);
void rpc_tls_free(struct rpc_tls *t);

/* Whether name matches one of the comma-separated globs of list
 * (auth.ssl-allow); "*" matches every name. */
int rpc_tls_name_allowed(const char *list, const char *name);

/* The first byte of a TLS handshake record: how a server tells a TLS
 * client from one speaking plain frames (whose magic starts otherwise). */
#define RPC_TLS_RECORD_HANDSHAKE 0x16

#endif
