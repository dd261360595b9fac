/* One TCP connection carrying Cairn frames in both directions, multiplexed by
 * request id. A reader thread per connection decodes frames; requests and
 * notifications go to the owner's callbacks, replies to the callback given
 * with the call. Sends may come from any thread.
 *
 * Ownership: a connection is reference counted. rpc_conn_new returns one
 * reference, owned by the caller; the reader thread holds its own while it
 * runs. rpc_conn_close shuts the socket down: the reader thread then fails
 * every pending call with the close reason (-ENOTCONN unless given) and calls
 * closed_cb once. The memory goes away with the last rpc_conn_put. */
#ifndef CAIRN_RPC_CONN_H
#define CAIRN_RPC_CONN_H

#include <stdint.h>

#include "../lib/net.h"
#include "msg.h"
#include "wire.h"

struct rpc_conn;
struct rpc_tls;
struct rpc_tls_ctx;

/* A received frame. The body is heap memory owned by the frame; msg points
 * into it. Free with rpc_frame_free. */
struct rpc_frame {
    struct rpc_hdr hdr;
    uint8_t *body;
    struct rpc_msg msg;
};
void rpc_frame_free(struct rpc_frame *f);

/* status is the reply's status (0 or -errno from the peer), or a transport
 * error (-ENOTCONN, -ETIMEDOUT) in which case reply is NULL. The reply frame
 * is only valid during the call unless the callback takes it by setting
 * *take to 1 (then it must rpc_frame_free it). */
typedef void (*rpc_reply_cb)(void *arg, int status, struct rpc_frame *reply, int *take);

struct rpc_conn_ops {
    /* A request arrived (server side). The callee owns the frame and answers
     * with rpc_conn_reply, from any thread, exactly once. */
    void (*request_cb)(struct rpc_conn *c, struct rpc_frame *f, void *ctx);
    /* A notification arrived (client side); the callee owns the frame. */
    void (*notify_cb)(struct rpc_conn *c, struct rpc_frame *f, void *ctx);
    /* The connection is gone; reason is 0 for an orderly EOF or -errno. */
    void (*closed_cb)(struct rpc_conn *c, int reason, void *ctx);
};

/* Wraps a connected socket (takes ownership of fd). peer names the other
 * side in log lines. Returns NULL on ENOMEM (fd is closed). */
struct rpc_conn *rpc_conn_new(int fd, const struct rpc_conn_ops *ops, void *ctx, const char *peer);
/* Connects to a, with a TLS handshake as client when tls is set (tls.h),
 * and wraps the socket; the connection is not started. NULL on failure
 * with -errno in *err and the reason in why (the TLS verdict: a refused
 * certificate, a server without TLS, ...). */
struct rpc_conn *rpc_conn_dial(const struct net_addr *a, int timeout_ms, struct rpc_tls_ctx *tls,
                               const struct rpc_conn_ops *ops, void *ctx, const char *peer,
                               int *err, char *why, size_t whylen);
/* Before rpc_conn_start only. set_tls: the bytes go through the session
 * t (the connection owns it from now on). require_tls (a server): the
 * reader makes the TLS handshake with x first; a client that speaks plain
 * frames gets its first request answered with -EPROTONOSUPPORT and hint,
 * and is closed. */
void rpc_conn_set_tls(struct rpc_conn *c, struct rpc_tls *t);
void rpc_conn_require_tls(struct rpc_conn *c, struct rpc_tls_ctx *x, const char *hint);
/* The common name in the peer's certificate; NULL without TLS (or before
 * a server's handshake). Valid as long as the connection. */
const char *rpc_conn_tls_name(const struct rpc_conn *c);
/* rpc_tls_ktls of the session; 0 without TLS. */
int rpc_conn_tls_ktls(struct rpc_conn *c);
/* Why the connection failed when the transport knows more than an errno
 * (a TLS alert); "" otherwise. */
const char *rpc_conn_error(const struct rpc_conn *c);
/* Waits up to timeout_ms until no reader thread of this process runs (all
 * connections closed and released): for a short-lived program's exit. */
void rpc_conn_wait_readers(int timeout_ms);
/* Starts the reader thread; 0 or -errno. */
int rpc_conn_start(struct rpc_conn *c);
void rpc_conn_get(struct rpc_conn *c);
void rpc_conn_put(struct rpc_conn *c);
void rpc_conn_close(struct rpc_conn *c, int reason);
int rpc_conn_is_open(struct rpc_conn *c);
const char *rpc_conn_peer(struct rpc_conn *c);
/* Bytes read from and written to the socket so far. */
void rpc_conn_bytes(struct rpc_conn *c, uint64_t *rx, uint64_t *tx);
void *rpc_conn_ctx(struct rpc_conn *c);

/* Sends a request; cb runs on the reader thread when the reply arrives, or
 * with a transport error. Returns 0, or -ENOTCONN when closed (cb not
 * called). body may be NULL for an empty body. cb may run before this
 * returns and may drop the caller's reference: c stays valid until then. */
int rpc_conn_call(struct rpc_conn *c, uint16_t op, const struct rpc_buf *body, rpc_reply_cb cb,
                  void *arg);
/* Blocking call. On success *reply (if not NULL) receives the reply frame,
 * which the caller frees. Returns the reply status or a transport error;
 * -ETIMEDOUT after timeout_ms (0 = wait forever) also closes nothing. */
int rpc_conn_call_sync(struct rpc_conn *c, uint16_t op, const struct rpc_buf *body,
                       struct rpc_frame **reply, int timeout_ms);
int rpc_conn_reply(struct rpc_conn *c, uint64_t reqid, uint16_t op, int status,
                   const struct rpc_buf *body);
int rpc_conn_notify(struct rpc_conn *c, uint16_t op, const struct rpc_buf *body);

/* Corking: requests this thread sends from rpc_cork() on are held back
 * and sent together, one sendmsg per connection, at rpc_uncork() (or
 * earlier, when anything else goes out on that connection, or past a
 * size bound). A corked thread must not wait for a reply to one of them:
 * every blocking wait in the client calls rpc_cork_flush() first, which
 * sends them and stays corked. */
void rpc_cork(void);
void rpc_cork_flush(void);
void rpc_uncork(void);

/* Whether received bytes wait behind the frame being handled (more requests
 * already queued). Only for callbacks running on c's reader thread, e.g. a
 * server deciding to answer a cheap request inline rather than hand it to
 * another thread. */
int rpc_conn_rx_pending(const struct rpc_conn *c);

/* Liveness, called periodically by the owner: sends a PING when nothing was
 * received for idle_ms, and closes the connection with -ETIMEDOUT when calls
 * are pending and nothing was received for timeout_ms. */
void rpc_conn_tick(struct rpc_conn *c, uint64_t now_ms, uint64_t idle_ms, uint64_t timeout_ms);

/* Reads and validates one frame from a buffer: the pure decoding step the
 * reader thread uses, exposed for fuzzing. Returns the number of bytes the
 * frame occupied, 0 if more input is needed, or -EPROTO/-EMSGSIZE with *why
 * set. On success *f owns a copy of the body. */
long rpc_frame_parse(const uint8_t *buf, size_t len, struct rpc_frame *f, const char **why);

#endif
