/* The disperse layer's arithmetic (disperse_layout.c) against brute force
 * over the layout of ec_codec.h, and volume create's dispersed shapes
 * (mgmt_disperse_shape) as GlusterFS checks and completes them. */
#include <stdio.h>
#include <string.h>

#include "../../src/client/disperse.h"
#include "../../src/mgmt/mgmt.h"
#include "check.h"

/* Bytes of chunk j in a file of size bytes, counted byte by byte. */
static uint64_t brute_used(int k, size_t chunk, int j, uint64_t size)
{
    uint64_t sw = (uint64_t)k * chunk, last = 0;
    if (j >= k) /* a redundancy chunk is as long as the longest data chunk */
        j = 0;
    for (uint64_t b = 0; b < size; b++)
        if ((b % sw) / chunk == (uint64_t)j)
            last = (b / sw) * chunk + (b % chunk) + 1; /* its place in fragment j */
    return last;
}

static void test_frag_used(void)
{
    static const int ks[] = {2, 3, 4, 8};
    static const size_t chunks[] = {512, 16};
    int bad = 0;
    for (size_t ci = 0; ci < 2; ci++)
        for (size_t ki = 0; ki < 4; ki++) {
            int k = ks[ki];
            size_t c = chunks[ci];
            uint64_t sw = (uint64_t)k * c;
            for (uint64_t size = 0; size <= 3 * sw + 2; size += (c == 16 ? 1 : 7))
                for (int j = 0; j < k + 2; j++) {
                    uint64_t got = cl_disp_frag_used(k, c, j, size);
                    if (got != brute_used(k, c, j, size) || got > size) {
                        if (bad++ < 5)
                            fprintf(stderr, "k %d chunk %zu j %d size %llu: %llu\n", k, c, j,
                                    (unsigned long long)size, (unsigned long long)got);
                    }
                }
        }
    CHECK_EQ(bad, 0);
    /* the sizes the system test writes, 2 + 1 */
    CHECK_EQ(cl_disp_frag_used(2, 512, 0, 1), 1);
    CHECK_EQ(cl_disp_frag_used(2, 512, 1, 1), 0);
    CHECK_EQ(cl_disp_frag_used(2, 512, 2, 1), 1);
    CHECK_EQ(cl_disp_frag_used(2, 512, 1, 1025), 512);
    CHECK_EQ(cl_disp_frag_used(2, 512, 0, 1025), 513);
    CHECK_EQ(cl_disp_frag_used(2, 512, 2, 1025), 513);
    CHECK_EQ(cl_disp_frag_used(2, 512, 1, (1 << 20) + 3), 1 << 19);
}

static void test_span(void)
{
    int bad = 0;
    for (int k = 2; k <= 4; k++) {
        uint64_t sw = (uint64_t)k * 512;
        for (uint64_t off = 0; off < 3 * sw; off += 97)
            for (uint64_t len = 0; len < 3 * sw; len += 89) {
                struct cl_disp_span s = cl_disp_span(k, 512, off, len);
                uint64_t end = off + len;
                int head = len && off % sw;
                int tail = len && end % sw && !(head && (end - 1) / sw == off / sw);
                uint64_t s0 = off / sw, s1 = len ? (end + sw - 1) / sw : s0;
                if (s.s0 != s0 || s.s1 != s1 || s.head != head || s.tail != tail)
                    bad++;
                /* the stripes cover the write, and no more than needed */
                if (len && (s.s0 * sw > off || s.s1 * sw < end || (s.s1 - 1) * sw >= end))
                    bad++;
            }
    }
    CHECK_EQ(bad, 0);
    struct cl_disp_span s = cl_disp_span(2, 512, 1024, 4096); /* whole stripes: no read */
    CHECK(!s.head && !s.tail && s.s0 == 1 && s.s1 == 5);
    s = cl_disp_span(2, 512, 3, 10); /* inside one stripe: read once */
    CHECK(s.head && !s.tail && s.s0 == 0 && s.s1 == 1);
    s = cl_disp_span(3, 512, 1536, 100); /* starts aligned, ends inside */
    CHECK(!s.head && s.tail);
}

static int shape(int n, int k, int m, int bricks, int *red, char *note, char *err)
{
    struct mgmt_shape_args a = {n, k, m};
    return mgmt_disperse_shape(&a, bricks, red, note, 256, err, 256);
}

static void test_shapes(void)
{
    char note[256], err[256];
    int red = -1;
    CHECK_EQ(shape(3, -1, 1, 3, &red, note, err), 3);
    CHECK_EQ(red, 1);
    CHECK_EQ(shape(3, -1, 1, 6, &red, note, err), 3); /* 2 x (2 + 1) */
    CHECK_EQ(shape(-1, 2, 1, 6, &red, note, err), 3); /* disperse-data 2 redundancy 1 */
    CHECK_EQ(red, 1);
    CHECK_EQ(shape(-1, 4, -1, 6, &red, note, err), 6); /* disperse-data alone: one set */
    CHECK_EQ(red, 2);
    /* disperse N alone: GlusterFS's optimal redundancy */
    CHECK_EQ(shape(3, -1, -1, 3, &red, note, err), 3);
    CHECK(red == 1 && note[0] == 0);
    CHECK_EQ(shape(6, -1, -1, 6, &red, note, err), 6);
    CHECK(red == 2 && strstr(note, "optimal redundancy for this configuration is 2"));
    CHECK_EQ(shape(10, -1, -1, 10, &red, note, err), 10);
    CHECK_EQ(red, 2);
    CHECK_EQ(shape(4, -1, -1, 4, &red, note, err), 4); /* none optimal: 1, said so */
    CHECK(red == 1 && strstr(note, "isn't an optimal redundancy"));
    CHECK_EQ(shape(0, -1, -1, 5, &red, note, err), 5); /* "disperse" alone: every brick */
    CHECK_EQ(red, 1);
    /* refusals */
    CHECK_EQ(shape(4, -1, 2, 4, &red, note, err), -1);
    CHECK(strstr(err, "redundancy must be less than 2 for a disperse 4 volume") != NULL);
    CHECK_EQ(shape(3, -1, 1, 4, &red, note, err), -1);
    CHECK(strstr(err, "Incorrect number of bricks supplied 4 with count 3") != NULL);
    CHECK_EQ(shape(2, -1, -1, 2, &red, note, err), -1);
    CHECK(strstr(err, "greater than 2") != NULL);
    CHECK_EQ(shape(3, -1, 0, 3, &red, note, err), -1);
    CHECK(strstr(err, "greater than 0") != NULL);
    CHECK_EQ(shape(3, 3, 1, 3, &red, note, err), -1);
    CHECK(strstr(err, "is not disperse-data 3 plus redundancy 1") != NULL);
    CHECK_EQ(shape(-1, -1, 1, 3, &red, note, err), -1);
    CHECK_EQ(shape(17, -1, 1, 17, &red, note, err), -1);
}

int main(void)
{
    test_frag_used();
    test_span();
    test_shapes();
    return check_summary("test_client_disperse");
}
