/* The distribute layer: one namespace over N subvolumes (replica sets or
 * single bricks). See docs/replication.md, "Distribute".
 *
 * A file lives on the subvolume whose hash range, in its parent directory's
 * layout, holds the hash of its name. Directories exist on every subvolume.
 * A file renamed out of its range keeps its data where it was and gets a
 * link-to file (mode ---------T, size 0, xattr trusted.cairn.linkto) under
 * the new name on the hashed subvolume.
 *
 * Ownership: the layer owns neither its children nor their lifetime;
 * its stop() ends its worker threads (layer.h: a tree is stopped before any
 * of it is destroyed). */
#ifndef CAIRN_CLIENT_DISTRIBUTE_H
#define CAIRN_CLIENT_DISTRIBUTE_H

#include <stddef.h>
#include <stdint.h>

#include "layer.h"

#define CL_DHT_MAX 64
/* xattr names (docs/brick-format.md); renaming them orphans existing volumes */
#define CL_DHT_XATTR_LAYOUT "trusted.cairn.layout"
#define CL_DHT_XATTR_LINKTO "trusted.cairn.linkto"
#define CL_DHT_LAYOUT_VERSION 1u
#define CL_DHT_LAYOUT_MAXLEN (8 + 8 * CL_DHT_MAX)

/* Subvolume i owns the names whose hash h has start <= h <= end; an entry
 * with start > end owns nothing. */
struct cl_dht_range {
    uint32_t start, end;
};
struct cl_dht_layout {
    int n;
    struct cl_dht_range r[CL_DHT_MAX];
};

/* The 32-bit hash of a name (FNV-1a with a final avalanche). Pure. */
uint32_t cl_dht_hash(const char *name, size_t len);
/* The layout mkdir writes: 2^32 split in n equal consecutive ranges. */
void cl_dht_layout_default(int n, struct cl_dht_layout *l);
/* Wire form of the xattr: u32 version (1), u32 n, then n x (u32 start,
 * u32 end), little-endian. Returns the length written (out needs
 * CL_DHT_LAYOUT_MAXLEN). */
size_t cl_dht_layout_encode(const struct cl_dht_layout *l, uint8_t *out);
/* Decodes and checks a layout for a volume of n subvolumes: the version, the
 * count (must be n), and that the non-empty ranges cover 0..2^32-1 exactly
 * once. 0 or -EPROTO. Pure. */
int cl_dht_layout_decode(const uint8_t *p, size_t len, int n, struct cl_dht_layout *l);
/* The subvolume owning hash h; -1 if none (cannot happen for a decoded or
 * default layout). Pure. */
int cl_dht_layout_pick(const struct cl_dht_layout *l, uint32_t h);

/* The subvolume a link-to value names (decimal index, "0".."n-1"), or
 * -EPROTO. Pure. */
int cl_dht_linkto_parse(const uint8_t *p, size_t len, int n);

/* Readdir cookies. A merged listing's cookie names (subvolume, brick cookie).
 * Direct form (bit 61 clear): brick_cookie << bits | subvol, when the brick
 * cookie fits in 61 - bits bits; bits = the width of n - 1 (at least 1).
 * Otherwise the layer hands out bit 61 | a generation << 32 | a slot of
 * its cookie map (dht_cookies.c), which every handle of the layer reads the
 * same way. Both stay below 2^62, so the FUSE bridge can shift them.
 * Cookie 0 is the start of subvolume 0. */
#define CL_DHT_COOKIE_MAPPED (1ull << 61)
/* The cookie of the listing's last entry: the end, as a brick's end marker
 * on ext4 (2^63 - 1); never decoded, the FUSE bridge answers it. */
#define CL_DHT_COOKIE_END ((1ull << 63) - 1)
int cl_dht_cookie_bits(int n);
/* 0 and the cookie, or -ERANGE when the brick cookie does not fit. */
int cl_dht_cookie_pack(uint64_t brick_cookie, int subvol, int bits, uint64_t *out);
/* 0: direct (subvol, brick cookie); 1: mapped (*brick_cookie = slot);
 * -EINVAL: subvol out of range or bits above 61 set. */
int cl_dht_cookie_unpack(uint64_t cookie, int bits, int n, int *subvol, uint64_t *brick_cookie);

/* The map of mapped cookies: one slot per distinct (subvolume, brick
 * cookie), at most max (then it starts over, and older cookies no longer
 * decode). Thread-safe. new: NULL on ENOMEM or a max of 0 or above 2^32. */
struct cl_dht_cookie_map;
struct cl_dht_cookie_map *cl_dht_cookie_map_new(size_t max);
void cl_dht_cookie_map_free(struct cl_dht_cookie_map *m);
/* 0 and the mapped cookie of (subvol, brick cookie), or -ENOMEM. */
int cl_dht_cookie_map_put(struct cl_dht_cookie_map *m, int subvol, uint64_t brick_cookie,
                          uint64_t *out);
/* 0 and what a mapped cookie names, or -EINVAL (not one of this map's, or
 * of an older generation). */
int cl_dht_cookie_map_get(struct cl_dht_cookie_map *m, uint64_t cookie, int *subvol,
                          uint64_t *brick_cookie);

/* Volume-wide placement (docs/notes/2026-12-07-placement.md): one versioned object for the
 * whole volume, not a layout per directory. A file's place is decided by
 * rendezvous hashing: each set draws a number from (the key of the file,
 * the set's id), and the active set with the best draw holds the file
 * (weighted: a set of weight w wins w / (sum of weights) of the keys).
 * Adding a set moves only the files the new set wins (1/(N+1) of them with
 * equal weights), and none between the sets already there; draining a set
 * moves only its files, each to the set that would have won without it.
 * The placement of the files of volumes created with cluster.placement
 * rendezvous (cl_dht_new_placed); volumes of ranges keep their layouts. */
#define CL_PLACE_VERSION 1
#define CL_PLACE_MAX 1024           /* sets */
#define CL_PLACE_WEIGHT_MAX 1000000 /* a set's weight: 1..this (say, GiB of its bricks) */
enum { CL_PLACE_ACTIVE = 1, CL_PLACE_DRAINING = 2 };
struct cl_place_set {
    uint64_t id;     /* never 0; never reused within a volume */
    uint32_t weight; /* 1..CL_PLACE_WEIGHT_MAX */
    uint32_t state;  /* CL_PLACE_ACTIVE: takes files; DRAINING: being removed, takes none */
};
struct cl_place {
    uint64_t gen; /* one more at each change */
    int n;
    struct cl_place_set set[CL_PLACE_MAX];
};
/* The key of name (len bytes) in the directory whose gfid is parent: a
 * well-mixed 64-bit hash of both, so equal names in different directories
 * land apart and a directory's rename moves nothing. Pure. */
uint64_t cl_place_key(const uint8_t parent[16], const char *name, size_t len);
/* The index of the set holding key: the best draw among the active sets;
 * -1 when none is active. Pure. */
int cl_place_pick(const struct cl_place *p, uint64_t key);
/* The index of the set with this id, or -1. Pure. */
int cl_place_find(const struct cl_place *p, uint64_t id);
/* Appends a set (and counts a change): its index, -EINVAL (id 0 or taken,
 * weight or state out of range) or -E2BIG (CL_PLACE_MAX sets). */
int cl_place_add(struct cl_place *p, uint64_t id, uint32_t weight, int state);
/* Wire form: u32 version (1), u32 n, u64 gen, then n x (u64 id, u32
 * weight, u32 state), little-endian. encode writes encoded_len bytes. */
size_t cl_place_encoded_len(const struct cl_place *p);
size_t cl_place_encode(const struct cl_place *p, uint8_t *out);
/* Decodes and checks (version, length, each set as cl_place_add checks it,
 * at least one active set). 0 or -EPROTO. Pure. */
int cl_place_decode(const uint8_t *in, size_t len, struct cl_place *p);

/* Creates the layer over children[0..n) (2 <= n <= CL_DHT_MAX). NULL on
 * ENOMEM / bad n. */
struct cl_layer *cl_dht_new(struct cl_layer **children, int n, const char *volume);
/* The layer of a volume with a placement (docs/elastic.md, "Growing by
 * whole sets"): place names one set per child, in order (1 <= n); prev
 * (may be NULL) is the placement before it, while files may still be where
 * it put them. Names go where place puts them, and are looked up there,
 * then where prev put them. Both are copied. NULL on ENOMEM / a placement
 * that does not match n. */
struct cl_layer *cl_dht_new_placed(struct cl_layer **children, int n, const char *volume,
                                   const struct cl_place *place, const struct cl_place *prev);
/* A new set, the layer's child n (add-brick of whole sets), while in use:
 * 0, -ENOTSUP (a volume of ranges) or -ENOSPC (CL_DHT_MAX). The layer owns
 * it from then on. */
int cl_dht_add_child(struct cl_layer *l, struct cl_layer *child);
/* The new placement (and previous one, may be NULL), copied: 0, -ENOTSUP
 * (a volume of ranges), -EINVAL (more sets than children) or -ENOMEM. */
int cl_dht_set_place(struct cl_layer *l, const struct cl_place *place, const struct cl_place *prev);

#endif
