/* The shard layer (features.shard; docs/shard.md).
 *
 * A file created while sharding is on is stored as blocks of its block
 * size (features.shard-block-size when it was made): block 0 is the file
 * itself (the base file), block n >= 1 is the file /.shard/GFID.n of the
 * volume, which distribute places like any other file. A block never
 * written has no shard file (it reads as zeros). The base file carries
 * CL_SHARD_XATTR (the block size, the whole file's size and the blocks
 * its shards take) and the sticky bit, which lets a listing or a lookup
 * tell a file that may be sharded from one that is not without reading an
 * xattr; the sticky bit never shows through the layer.
 *
 * The layer sits above distribute (or whatever the top of the volume is)
 * and is always in the stack, so files stay readable when the option is
 * turned off; with no sharded file in sight it forwards every operation.
 *
 * Ownership: the layer owns neither its child nor its lifetime; stop()
 * ends its worker threads (layer.h). */
#ifndef CAIRN_CLIENT_SHARD_H
#define CAIRN_CLIENT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "../lib/gfid.h"
#include "layer.h"

/* Wire-visible names and layout (docs/shard.md): renaming them strands
 * existing sharded files. */
#define CL_SHARD_XATTR "trusted.cairn.shard"
#define CL_SHARD_DIR "/.shard"
#define CL_SHARD_DIR_NAME ".shard"
#define CL_SHARD_VERSION 1u
/* u32 version, u32 flags (0), u64 block size, u64 size, u64 shard blocks
 * (512-byte units the shard files take, the base file's not included),
 * little-endian. */
#define CL_SHARD_XATTR_LEN 32
/* features.shard-block-size's range: GlusterFS's minimum. */
#define CL_SHARD_BLOCK_MIN (4ull << 20)

struct cl_shard_meta {
    uint64_t block_size, size, shard_blocks;
};

void cl_shard_meta_encode(const struct cl_shard_meta *m, uint8_t out[CL_SHARD_XATTR_LEN]);
/* 0, or -EPROTO for a value of another length or version or a block size
 * below CL_SHARD_BLOCK_MIN. Pure. */
int cl_shard_meta_decode(const uint8_t *p, size_t len, struct cl_shard_meta *m);

/* The part of [off, off + len) in the block holding off: *block its
 * number, *inner where it starts in the block; returns its length (at
 * least 1 when len is). Pure. */
uint64_t cl_shard_piece(uint64_t off, uint64_t len, uint64_t bs, uint64_t *block, uint64_t *inner);
/* How many blocks a file of size bytes spans (0 for an empty one). Pure. */
uint64_t cl_shard_blocks_of(uint64_t size, uint64_t bs);
/* The volume path of block n >= 1 of the file g: "/.shard/GFID.n". */
void cl_shard_path(const gfid_t *g, uint64_t n, char *out, size_t len);
/* Whether path is /.shard or below it (hidden from the layer's users). */
int cl_shard_hidden(const char *path, size_t len);

/* Creates the layer over child. NULL on ENOMEM. */
struct cl_layer *cl_shard_new(struct cl_layer *child, const char *volume);

#endif
