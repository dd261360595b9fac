/* The disperse layer: one disperse set of k + m protocol children, each
 * holding one fragment of every file (ec_codec.h has the code and the
 * layout; docs/disperse.md the design).
 *
 * The set's fan-out, open handles, quorum and marks are a replicate layer
 * of the layer's own (its only child), with its quorum pinned to k: a
 * namespace change goes to every fragment brick as replicate sends it to
 * every copy, and a data change gives every child its own fragment
 * (cl_repl_change_each). Reads of a file's data come from k readable
 * fragments (up, accused by no brick), the data fragments first, and
 * decode only when one of those is missing.
 *
 * Every fragment file has the file's real size as its own size: the
 * fragment's bytes sit at its start and everything past them, up to that
 * size, is zero (cl_disp_frag_used). So LOOKUP, GETATTR and READDIR
 * answered by any fragment brick report the real size with no change.
 *
 * Changes of a file's data (WRITE, SETATTR of the size, FALLOCATE) run one
 * at a time per file in a client, as read-modify-write of the stripes they
 * touch. Ownership as layer.h. */
#ifndef CAIRN_CLIENT_DISPERSE_H
#define CAIRN_CLIENT_DISPERSE_H

#include <stddef.h>
#include <stdint.h>

#include "layer.h"

/* Bytes per chunk: a stripe is k chunks. Wire-visible in effect: every
 * fragment file on the bricks is laid out with it, so changing it makes
 * the files already written unreadable. */
#define CL_DISP_CHUNK 512

/* The bytes at the start of fragment j (0 <= j < k data, k <= j redundancy)
 * of a file of size bytes that may be non-zero: whole chunks for every
 * stripe but the last, and of the last stripe the part of chunk j holding
 * data (a redundancy chunk: as much as chunk 0, the longest). Never more
 * than size. Pure. */
uint64_t cl_disp_frag_used(int k, size_t chunk, int j, uint64_t size);

/* What a write of [off, off + len) must read first: the stripes [s0, s1)
 * it touches, and whether its first (head) and last (tail) stripe are
 * partly outside it, so their other bytes must be read to re-encode them
 * (tail is 0 when the last stripe is the first and head already reads it).
 * Pure. */
struct cl_disp_span {
    uint64_t s0, s1;
    int head, tail;
};
struct cl_disp_span cl_disp_span(int k, size_t chunk, uint64_t off, uint64_t len);

/* Creates the layer over children[0..k+m) (protocol layers; taken over by
 * the set layer made inside). NULL on ENOMEM or a code cl_ec_new refuses. */
struct cl_layer *cl_disp_new(struct cl_layer **children, int k, int m, const char *volume);

#endif
