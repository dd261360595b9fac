/* The pool secret and the challenge-response that proves knowledge of it
 * (docs/security.md, "The pool secret").
 *
 * A pool's servers share a secret of POOL_SECRET_LEN random bytes, made by
 * the first `peer probe` and handed to each server the pool takes in (in
 * the __join command). It is kept in DIR/raft/secret (hex, mode 0600),
 * which leaves with the rest of DIR/raft when the server leaves the pool,
 * and never in the volume files, the Raft log or the logs.
 *
 * Every cairnd-to-cairnd connection starts with the same exchange, whether
 * it carries Raft (raft_auth.c, raw bytes on the stream) or internal
 * commands (MGMT_POOL_HELLO / MGMT_POOL_PROVE, pool_rpc.c and server.c):
 *
 *   connector -> acceptor  hello:  "CRNA", u32 version, nonce Nc (40 bytes)
 *   acceptor  -> connector answer: nonce Ns, HMAC(secret, "acceptor"|Nc|Ns)
 *   connector -> acceptor  proof:  HMAC(secret, "connector"|Nc|Ns)
 *
 * HMAC-SHA256; the nonces are fresh random bytes on each side, so an old
 * answer or proof is worth nothing on a new connection, and the labels keep
 * one side's answer from serving as the other's. Both sides thus prove they
 * know the secret without sending it. The functions below are pure (no
 * I/O) so that the unit test and the fuzz target drive them directly. */
#ifndef CAIRN_MGMT_POOL_AUTH_H
#define CAIRN_MGMT_POOL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define POOL_SECRET_LEN 32
#define POOL_NONCE_LEN 32
#define POOL_PROOF_LEN 32
/* Sizes on the wire; changing them, the magic or the labels breaks pools
 * of mixed versions: bump POOL_AUTH_VERSION. */
#define POOL_AUTH_VERSION 1
#define POOL_HELLO_LEN (8 + POOL_NONCE_LEN)
#define POOL_ANSWER_LEN (POOL_NONCE_LEN + POOL_PROOF_LEN)

/* One side of one exchange; the caller owns it (on its stack or in its
 * connection). */
struct pool_auth {
    uint8_t key[POOL_SECRET_LEN];
    uint8_t nc[POOL_NONCE_LEN], ns[POOL_NONCE_LEN];
    int state; /* internal: which message is expected next */
};

/* Connector: a fresh nonce; writes the hello. 0 or -errno. */
int pool_auth_connect(struct pool_auth *a, const uint8_t key[POOL_SECRET_LEN],
                      uint8_t hello[POOL_HELLO_LEN]);
/* Connector: checks the acceptor's answer (len bytes) and writes the proof.
 * 0, -EPROTO (not an answer), -EACCES (the acceptor does not know the
 * secret). */
int pool_auth_answered(struct pool_auth *a, const uint8_t *answer, size_t len,
                       uint8_t proof[POOL_PROOF_LEN]);
/* Acceptor: reads the hello (len bytes), writes the answer. 0 or -EPROTO. */
int pool_auth_accept(struct pool_auth *a, const uint8_t key[POOL_SECRET_LEN], const uint8_t *hello,
                     size_t len, uint8_t answer[POOL_ANSWER_LEN]);
/* Acceptor: checks the connector's proof. 0, -EPROTO or -EACCES. */
int pool_auth_proved(struct pool_auth *a, const uint8_t *proof, size_t len);
/* Wipes the key and nonces. */
void pool_auth_clear(struct pool_auth *a);

/* ---- the secret of this process's pool ----
 * One per process (one cairnd); thread-safe. */

/* Reads workdir/raft/secret into memory: 0, -ENOENT (a pool made before
 * secrets: not authenticated) or another -errno (unreadable, malformed). */
int pool_secret_load(const char *workdir);
/* A new random secret, written to workdir/raft/secret and kept. 0 or -errno. */
int pool_secret_create(const char *workdir);
/* Writes the secret given as hex (from __join) and keeps it. 0 or -errno. */
int pool_secret_store_hex(const char *workdir, const char *hex);
/* Forgets the secret in memory (the file goes with DIR/raft). */
void pool_secret_forget(void);
/* Copies the secret: 0, or -ENOKEY when this server has none. */
int pool_secret_get(uint8_t out[POOL_SECRET_LEN]);
/* The secret as hex (2 * POOL_SECRET_LEN + 1 bytes): 0 or -ENOKEY. */
int pool_secret_hex(char *out, size_t len);

#endif
