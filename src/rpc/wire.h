/* Cairn wire format: frame header and the TLV body codec (docs/protocol.md).
 *
 * Every value on the wire is little-endian. A frame is a 32-byte header
 * followed by body_len bytes of body. The header's layout and the magic are
 * the protocol's identity: changing either breaks every deployed peer, so a
 * change bumps RPC_VERSION and is negotiated in the handshake. */
#ifndef CAIRN_RPC_WIRE_H
#define CAIRN_RPC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RPC_MAGIC 0x4e524143u /* "CARN" read as little-endian bytes */
#define RPC_VERSION 1
#define RPC_HDR_LEN 32
/* Largest body a peer accepts: a 1 MiB write plus headroom, or a compound of
 * many small operations. Larger frames close the connection. */
#define RPC_MAX_BODY (8u << 20)

enum rpc_kind {
    RPC_KIND_REQUEST = 1,
    RPC_KIND_REPLY = 2,
    RPC_KIND_NOTIFY = 3, /* server-to-client: lease recall, invalidation */
};

struct rpc_hdr {
    uint32_t magic;
    uint16_t version;
    uint8_t kind;
    uint8_t flags;
    uint16_t opcode;
    uint16_t reserved;
    uint64_t reqid;
    uint32_t body_len;
    uint32_t body_crc; /* CRC-32C of the body */
    int32_t status;    /* replies: 0 or a negative errno; requests: 0 */
};

void rpc_hdr_encode(const struct rpc_hdr *h, uint8_t out[RPC_HDR_LEN]);
/* Decodes and validates a header: magic, version, kind, reserved bits, body
 * length. Returns 0 or -EPROTO / -EMSGSIZE; *why names the problem. */
int rpc_hdr_decode(const uint8_t *buf, size_t len, struct rpc_hdr *h, const char **why);

uint32_t rpc_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same by table, without the CPU's crc32 instruction (tests compare). */
uint32_t rpc_crc32c_table(uint32_t crc, const void *buf, size_t len);

/* ---- TLV body ----
 * A body is a sequence of fields: tag (u16), length (u32), value. Integers are
 * fixed-width little-endian values of length 1, 2, 4 or 8. */

struct rpc_buf {
    uint8_t *data;
    size_t len, cap;
    int err; /* sticky -ENOMEM */
};

void rpc_buf_init(struct rpc_buf *b);
void rpc_buf_free(struct rpc_buf *b);
void rpc_buf_reset(struct rpc_buf *b);
/* Appends raw bytes; reserves room; on allocation failure sets b->err. */
void rpc_buf_put(struct rpc_buf *b, const void *p, size_t len);
/* Reserves len bytes at the end and returns a pointer to them (NULL on
 * ENOMEM); the caller fills them. */
uint8_t *rpc_buf_grow(struct rpc_buf *b, size_t len);

void rpc_put_u64(struct rpc_buf *b, uint16_t tag, uint64_t v);
void rpc_put_i64(struct rpc_buf *b, uint16_t tag, int64_t v);
void rpc_put_bytes(struct rpc_buf *b, uint16_t tag, const void *p, size_t len);
void rpc_put_str(struct rpc_buf *b, uint16_t tag, const char *s); /* without NUL */
/* Nested fields: begin returns the offset to pass to end, which patches in the
 * length. */
size_t rpc_put_begin(struct rpc_buf *b, uint16_t tag);
void rpc_put_end(struct rpc_buf *b, size_t mark);

struct rpc_field {
    uint16_t tag;
    uint32_t len;
    const uint8_t *val;
};

struct rpc_iter {
    const uint8_t *p, *end;
};

void rpc_iter_init(struct rpc_iter *it, const uint8_t *p, size_t len);
/* Returns 1 and the next field, 0 at the end, -EPROTO on truncation. */
int rpc_iter_next(struct rpc_iter *it, struct rpc_field *f);
/* Integer value of a field; -EPROTO if its length is not 1, 2, 4 or 8. */
int rpc_field_u64(const struct rpc_field *f, uint64_t *v);

static inline void rpc_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void rpc_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void rpc_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t rpc_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t rpc_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rpc_get64(const uint8_t *p)
{
    return (uint64_t)rpc_get32(p) | (uint64_t)rpc_get32(p + 4) << 32;
}

#endif
