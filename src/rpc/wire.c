/* The wire format (wire.h, docs/protocol.md): frame headers with their
 * CRC-32C, and the TLV body encoder and decoder. */
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rpc_hdr_encode(const struct rpc_hdr *h, uint8_t out[RPC_HDR_LEN])
{
    rpc_le32(out, h->magic);
    rpc_le16(out + 4, h->version);
    out[6] = h->kind;
    out[7] = h->flags;
    rpc_le16(out + 8, h->opcode);
    rpc_le16(out + 10, h->reserved);
    rpc_le64(out + 12, h->reqid);
    rpc_le32(out + 20, h->body_len);
    rpc_le32(out + 24, h->body_crc);
    rpc_le32(out + 28, (uint32_t)h->status);
}

int rpc_hdr_decode(const uint8_t *buf, size_t len, struct rpc_hdr *h, const char **why)
{
    *why = NULL;
    if (len < RPC_HDR_LEN) {
        *why = "truncated header";
        return -EPROTO;
    }
    h->magic = rpc_get32(buf);
    h->version = rpc_get16(buf + 4);
    h->kind = buf[6];
    h->flags = buf[7];
    h->opcode = rpc_get16(buf + 8);
    h->reserved = rpc_get16(buf + 10);
    h->reqid = rpc_get64(buf + 12);
    h->body_len = rpc_get32(buf + 20);
    h->body_crc = rpc_get32(buf + 24);
    h->status = (int32_t)rpc_get32(buf + 28);
    if (h->magic != RPC_MAGIC)
        *why = "bad magic";
    else if (h->version != RPC_VERSION)
        *why = "unsupported protocol version";
    else if (h->kind < RPC_KIND_REQUEST || h->kind > RPC_KIND_NOTIFY)
        *why = "unknown frame kind";
    else if (h->reserved != 0 || h->flags != 0)
        *why = "reserved header bits set";
    else if (h->status > 0 || h->status < -4095)
        *why = "status out of range";
    else if (h->body_len > RPC_MAX_BODY) {
        *why = "oversized frame";
        return -EMSGSIZE;
    }
    return *why ? -EPROTO : 0;
}

/* CRC-32C (Castagnoli), table driven; the table is built once. */
static uint32_t crc_table[8][256];
static int crc_ready;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC_HW 1
/* The SSE4.2 crc32 instruction computes CRC-32C itself: 8 bytes per
 * instruction, several times the table's speed. Every frame body is
 * checksummed once by the sender and once by the receiver, so for large
 * writes and reads this is most of the codec's CPU. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

static int crc_hw_ok = -1; /* -1: not asked yet */
#endif

uint32_t rpc_crc32c_table(uint32_t crc, const void *buf, size_t len)
{
    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
        crc_init();
    const uint8_t *p = buf;
    crc = ~crc;
    while (len >= 8) {
        uint32_t lo = crc ^ rpc_get32(p);
        uint32_t hi = rpc_get32(p + 4);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^
              crc_table[2][(hi >> 8) & 0xff] ^ crc_table[1][(hi >> 16) & 0xff] ^
              crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

uint32_t rpc_crc32c(uint32_t crc, const void *buf, size_t len)
{
#ifdef CRC_HW
    int hw = __atomic_load_n(&crc_hw_ok, __ATOMIC_RELAXED);
    if (hw < 0) {
        __builtin_cpu_init();
        hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&crc_hw_ok, hw, __ATOMIC_RELAXED);
    }
    if (hw)
        return crc_hw(crc, buf, len);
#endif
    return rpc_crc32c_table(crc, buf, len);
}

void rpc_buf_init(struct rpc_buf *b)
{
    memset(b, 0, sizeof(*b));
}

void rpc_buf_free(struct rpc_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void rpc_buf_reset(struct rpc_buf *b)
{
    b->len = 0;
    b->err = 0;
}

uint8_t *rpc_buf_grow(struct rpc_buf *b, size_t len)
{
    if (b->err)
        return NULL;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len)
            cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->err = -ENOMEM;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += len;
    return p;
}

void rpc_buf_put(struct rpc_buf *b, const void *p, size_t len)
{
    uint8_t *d = rpc_buf_grow(b, len);
    if (d && len)
        memcpy(d, p, len);
}

static uint8_t *put_head(struct rpc_buf *b, uint16_t tag, uint32_t len)
{
    uint8_t *d = rpc_buf_grow(b, 6 + (size_t)len);
    if (!d)
        return NULL;
    rpc_le16(d, tag);
    rpc_le32(d + 2, len);
    return d + 6;
}

void rpc_put_u64(struct rpc_buf *b, uint16_t tag, uint64_t v)
{
    uint8_t *d = put_head(b, tag, 8);
    if (d)
        rpc_le64(d, v);
}

void rpc_put_i64(struct rpc_buf *b, uint16_t tag, int64_t v)
{
    rpc_put_u64(b, tag, (uint64_t)v);
}

void rpc_put_bytes(struct rpc_buf *b, uint16_t tag, const void *p, size_t len)
{
    uint8_t *d = put_head(b, tag, (uint32_t)len);
    if (d && len)
        memcpy(d, p, len);
}

void rpc_put_str(struct rpc_buf *b, uint16_t tag, const char *s)
{
    rpc_put_bytes(b, tag, s, strlen(s));
}

size_t rpc_put_begin(struct rpc_buf *b, uint16_t tag)
{
    put_head(b, tag, 0);
    return b->len;
}

void rpc_put_end(struct rpc_buf *b, size_t mark)
{
    if (!b->err)
        rpc_le32(b->data + mark - 4, (uint32_t)(b->len - mark));
}

void rpc_iter_init(struct rpc_iter *it, const uint8_t *p, size_t len)
{
    it->p = p;
    it->end = len ? p + len : p;
}

int rpc_iter_next(struct rpc_iter *it, struct rpc_field *f)
{
    size_t left = (size_t)(it->end - it->p);
    if (left == 0)
        return 0;
    if (left < 6)
        return -EPROTO;
    f->tag = rpc_get16(it->p);
    f->len = rpc_get32(it->p + 2);
    if (f->len > left - 6)
        return -EPROTO;
    f->val = it->p + 6;
    it->p += 6 + (size_t)f->len;
    return 1;
}

int rpc_field_u64(const struct rpc_field *f, uint64_t *v)
{
    switch (f->len) {
    case 1:
        *v = f->val[0];
        return 0;
    case 2:
        *v = rpc_get16(f->val);
        return 0;
    case 4:
        *v = rpc_get32(f->val);
        return 0;
    case 8:
        *v = rpc_get64(f->val);
        return 0;
    default:
        return -EPROTO;
    }
}
