/* Disperse's erasure code (ec_codec.c, on ISA-L): the systematic layout,
 * decoding and rebuilding from every choice of lost fragments up to the
 * redundancy, the refusals. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/ec_codec.h"
#include "check.h"

static uint64_t rng = 12345;

static uint8_t rand8(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(rng >> 56);
}

/* Every subset of lost fragments of size <= m (and some of size m + 1). */
static void check_code(int k, int m, size_t chunk, size_t stripes)
{
    struct cl_ec *ec = cl_ec_new(k, m);
    CHECK(ec != NULL);
    if (!ec)
        return;
    CHECK_EQ(cl_ec_data(ec), k);
    CHECK_EQ(cl_ec_redundancy(ec), m);
    int n = k + m;
    size_t flen = chunk * stripes, dlen = flen * (size_t)k;
    uint8_t *in = malloc(dlen), *out = malloc(dlen), *frag[CL_EC_MAX], *copy[CL_EC_MAX];
    for (size_t i = 0; i < dlen; i++)
        in[i] = rand8();
    for (int j = 0; j < n; j++) {
        frag[j] = malloc(flen);
        copy[j] = malloc(flen);
    }
    cl_ec_encode(ec, chunk, stripes, in, frag);
    /* systematic: data fragment j is chunk j of every stripe */
    int plain = 1;
    for (int j = 0; j < k; j++)
        for (size_t s = 0; s < stripes; s++)
            plain &= !memcmp(frag[j] + s * chunk, in + (s * (size_t)k + (size_t)j) * chunk, chunk);
    CHECK(plain);
    uint32_t all = (1u << n) - 1;
    int decoded = 0, rebuilt = 0, refused = 0;
    for (uint32_t lost = 0; lost <= all; lost++) {
        int nlost = __builtin_popcount(lost);
        if (nlost > m + 1)
            continue;
        uint32_t present = all & ~lost;
        memset(out, 0xee, dlen);
        int rc = cl_ec_decode(ec, chunk, stripes, present, (const uint8_t *const *)frag, out);
        if (nlost > m) {
            refused += rc == -EIO;
            continue;
        }
        decoded += rc == 0 && !memcmp(out, in, dlen);
        if (!lost)
            continue;
        /* heal: the lost fragments, rebuilt from the others, equal the
         * ones encoded */
        for (int j = 0; j < n; j++) {
            memcpy(copy[j], frag[j], flen);
            if (lost >> j & 1)
                memset(copy[j], 0x5a, flen);
        }
        rc = cl_ec_rebuild(ec, chunk, stripes, present, lost, copy);
        int same = rc == 0;
        for (int j = 0; j < n; j++)
            same &= !memcmp(copy[j], frag[j], flen);
        rebuilt += same;
    }
    /* sum over i <= m of C(n, i), and C(n, m + 1) refusals */
    int want_dec = 0, want_reb = 0, want_ref = 0;
    for (uint32_t lost = 0; lost <= all; lost++) {
        int c = __builtin_popcount(lost);
        want_dec += c <= m;
        want_reb += c >= 1 && c <= m;
        want_ref += c == m + 1;
    }
    CHECK_EQ(decoded, want_dec);
    CHECK_EQ(rebuilt, want_reb);
    CHECK_EQ(refused, want_ref);
    /* bad rebuild requests */
    CHECK_EQ(cl_ec_rebuild(ec, chunk, stripes, all, 1, copy), -EINVAL); /* want overlaps */
    CHECK_EQ(cl_ec_rebuild(ec, chunk, stripes, all & ~1u, 0, copy), -EINVAL);
    if (n < 32)
        CHECK_EQ(cl_ec_rebuild(ec, chunk, stripes, all & ~1u, 1u << n, copy), -EINVAL);
    for (int j = 0; j < n; j++) {
        free(frag[j]);
        free(copy[j]);
    }
    free(in);
    free(out);
    cl_ec_free(ec);
}

static void test_refused_codes(void)
{
    CHECK(cl_ec_new(2, 0) == NULL && errno == EINVAL);
    CHECK(cl_ec_new(2, 2) == NULL && errno == EINVAL); /* redundancy below half */
    CHECK(cl_ec_new(1, 1) == NULL && errno == EINVAL);
    CHECK(cl_ec_new(30, 3) == NULL && errno == EINVAL); /* 33 fragments */
    struct cl_ec *ec = cl_ec_new(29, 3);
    CHECK(ec != NULL);
    cl_ec_free(ec);
    cl_ec_free(NULL);
}

int main(void)
{
    check_code(2, 1, 512, 9);  /* GlusterFS's disperse 3 redundancy 1 */
    check_code(4, 2, 512, 3);  /* disperse 6 redundancy 2 */
    check_code(8, 3, 128, 2);  /* disperse 11 redundancy 3 */
    check_code(5, 4, 64, 1);   /* the largest redundancy for 9 */
    check_code(3, 1, 4096, 4); /* 4 KiB chunks */
    test_refused_codes();
    return check_summary("test_client_ec");
}
