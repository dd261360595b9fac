/* Disperse's erasure code: a systematic Reed-Solomon code over GF(2^8) of k
 * data fragments and m redundancy fragments, with Intel ISA-L doing the
 * arithmetic (ec_codec.c).
 *
 * Layout. A file is cut in stripes of k chunks of `chunk` bytes; fragment j
 * (one per brick of the set, 0 <= j < k + m) holds, stripe after stripe,
 * chunk j of each stripe for j < k (a plain copy: the code is systematic)
 * and the redundancy chunk j - k for j >= k. So stripe s of a file is at
 * bytes [s * k * chunk, (s + 1) * k * chunk) of the file, and at bytes
 * [s * chunk, (s + 1) * chunk) of every fragment.
 *
 * Any k fragments give back the data. Reading with every data fragment
 * present decodes nothing (it interleaves copies); only a read missing a
 * data fragment, or a heal, runs the decode. The generator is a Cauchy
 * matrix, so every choice of k fragments works.
 *
 * A cl_ec is immutable after cl_ec_new and may be shared between threads. */
#ifndef CAIRN_CLIENT_EC_CODEC_H
#define CAIRN_CLIENT_EC_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define CL_EC_MAX 32 /* fragments in a set, k + m */

struct cl_ec;

/* A code of k data and m redundancy fragments: 1 <= m < k, k + m <=
 * CL_EC_MAX (GlusterFS's rule: redundancy below half the set). NULL and
 * errno EINVAL or ENOMEM. */
struct cl_ec *cl_ec_new(int k, int m);
void cl_ec_free(struct cl_ec *ec);
int cl_ec_data(const struct cl_ec *ec);       /* k */
int cl_ec_redundancy(const struct cl_ec *ec); /* m */

/* Cuts stripes whole stripes of in (stripes * k * chunk bytes) into the
 * k + m fragments frag[j] (each stripes * chunk bytes). */
void cl_ec_encode(const struct cl_ec *ec, size_t chunk, size_t stripes, const uint8_t *in,
                  uint8_t *const *frag);

/* The data of stripes stripes from the fragments present (bit j of present:
 * frag[j] holds fragment j's stripes * chunk bytes; others are not read)
 * into out (stripes * k * chunk bytes). 0, or -EIO when fewer than k are
 * present. Decodes only when a data fragment is missing. */
int cl_ec_decode(const struct cl_ec *ec, size_t chunk, size_t stripes, uint32_t present,
                 const uint8_t *const *frag, uint8_t *out);

/* Heal: rebuilds the fragments in want (bits not in present) into frag[j]
 * from those present. 0, -EIO (fewer than k present) or -EINVAL (want
 * overlaps present or names no fragment of the set). */
int cl_ec_rebuild(const struct cl_ec *ec, size_t chunk, size_t stripes, uint32_t present,
                  uint32_t want, uint8_t *const *frag);

#endif
