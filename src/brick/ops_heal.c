/* CHECKSUM (op 73): per-block checksums of a range of an open file, so a heal
 * copies only the blocks that differ (docs/replication.md, "Range heal").
 *
 * Request: FH (a handle open for reading), OFFSET (a multiple of the block
 * size), SIZE (bytes of the range, capped at BRICK_SUM_MAX_RANGE), FLAGS (the
 * block size: a power of two from 4 KiB to 4 MiB; 0 means 128 KiB).
 * Reply: DATA, one u64 little-endian checksum per block of the range that
 * lies before end of file (the last one may cover a short block), and SIZE,
 * the file's size. Changing the hash changes nothing on disk, but both ends
 * of a heal must run the same version of it: a brick from another release
 * would make every block look different (correct, only slower). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brick.h"

#define VFS (r->b->vfs)
#define SUM_DEFAULT_BLOCK (128u << 10)
#define SUM_MIN_BLOCK (4u << 10)
#define SUM_MAX_BLOCK (4u << 20)
/* Bounds the disk work of one request (a worker is busy while it reads). */
#define BRICK_SUM_MAX_RANGE (16u << 20)

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

/* A 64-bit hash of one block: four independent multiply-rotate lanes over
 * 8-byte words, folded and avalanched. Not cryptographic: replicas are not
 * adversaries; a collision (2^-64 per block) would leave one block unhealed. */
uint64_t brick_block_sum(const uint8_t *p, size_t len)
{
    const uint64_t k1 = 0x9E3779B185EBCA87ull, k2 = 0xC2B2AE3D27D4EB4Full;
    uint64_t h[4] = {k1, k2, k1 ^ len, k2 + len};
    size_t i = 0;
    for (; i + 32 <= len; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * l, 8);
            h[l] = rotl(h[l] + w * k2, 31) * k1;
        }
    uint64_t x = rotl(h[0], 1) + rotl(h[1], 7) + rotl(h[2], 12) + rotl(h[3], 18) + len;
    for (; i < len; i++)
        x = (x ^ p[i]) * 0x100000001B3ull;
    x ^= x >> 33;
    x *= k2;
    x ^= x >> 29;
    x *= 0x165667B19E3779F9ull;
    x ^= x >> 32;
    return x;
}

int brick_op_checksum(struct brick_req *r)
{
    if (!rpc_has(r->in, RPC_T_FH))
        return -EBADF;
    uint64_t block = rpc_has(r->in, RPC_T_FLAGS) && r->in->flags ? r->in->flags : SUM_DEFAULT_BLOCK;
    if (block < SUM_MIN_BLOCK || block > SUM_MAX_BLOCK || (block & (block - 1))) {
        snprintf(r->text, sizeof(r->text), "block size %llu is not a power of two in 4K-4M",
                 (unsigned long long)block);
        return -EINVAL;
    }
    uint64_t off = r->in->offset, size = r->in->size;
    if (off > INT64_MAX || off % block)
        return -EINVAL;
    if (size > BRICK_SUM_MAX_RANGE)
        size = BRICK_SUM_MAX_RANGE;
    struct brick_fh *fh;
    int rc = brick_fh_get(r->bc, r->in->fh, 0, &fh);
    if (rc < 0)
        return rc;
    struct stat st;
    uint8_t *buf = NULL;
    if ((rc = VFS->fstatat(fh->fd, "", &st)) < 0)
        goto out;
    uint64_t fsize = (uint64_t)st.st_size;
    uint64_t end = off + size < fsize ? off + size : fsize;
    uint64_t n = end > off ? (end - off + block - 1) / block : 0;
    if (!(buf = malloc(block))) {
        rc = -ENOMEM;
        goto out;
    }
    size_t mark = rpc_put_begin(r->out, RPC_T_DATA);
    uint8_t *sums = rpc_buf_grow(r->out, n * 8);
    if (!sums && n) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t at = off + i * block, want = end - at < block ? end - at : block, got = 0;
        while (got < want) {
            long k = VFS->pread(fh->fd, buf + got, want - got, (off_t)(at + got));
            if (k == -EINTR)
                continue;
            if (k < 0) {
                rc = (int)k;
                goto out;
            }
            if (k == 0)
                break; /* truncated meanwhile: hash what is there */
            got += (uint64_t)k;
        }
        uint64_t s = brick_block_sum(buf, got);
        for (int b = 0; b < 8; b++)
            sums[i * 8 + (uint64_t)b] = (uint8_t)(s >> (8 * b));
    }
    r->out->len = mark + n * 8;
    rpc_put_end(r->out, mark);
    rpc_put_u64(r->out, RPC_T_SIZE, fsize);
out:
    free(buf);
    brick_fh_put(r->bc, fh);
    return rc;
}
