/* The Raft transport of a pool: libraft's TCP transport with the pool's
 * challenge-response (pool_auth.h) on every connection before libraft sees
 * it.
 *
 * libraft's transport connects, writes its own short handshake (protocol,
 * raft id, address) and hands the stream to raft; the acceptor reads that
 * handshake and hands the stream on. This wrapper takes the stream at that
 * point, runs hello / answer / proof on it (raw bytes, exact-length reads,
 * so no byte of Raft's is consumed) and only then gives it to raft. A peer
 * that fails (wrong secret, no handshake, garbage, silence for
 * RAFT_AUTH_TIMEOUT_MS) is closed and logged; raft never sees it.
 *
 * A server without a secret (a pool made before secrets, docs/security.md)
 * passes connections through unauthenticated, as before.
 *
 * Everything runs on the Raft thread's loop. */
#ifndef CAIRN_MGMT_RAFT_AUTH_H
#define CAIRN_MGMT_RAFT_AUTH_H

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#define RAFT_AUTH_TIMEOUT_MS 5000
/* Handshakes under way at most; further connections are closed at once. */
#define RAFT_AUTH_PENDING_MAX 64

struct raft_auth;
/* A new transport on loop; NULL when out of memory. */
struct raft_auth *raft_auth_new(uv_loop_t *loop);
/* What raft_uv_init takes. Valid until raft_auth_free. */
struct raft_uv_transport *raft_auth_transport(struct raft_auth *ra);
/* Frees it: after raft_uv_init failed, or once raft_uv has closed it. */
void raft_auth_free(struct raft_auth *ra);

#endif
