/* The distribute layer's pure parts: the name hash, layouts (default,
 * encoding, validation, picking), link-to values and readdir cookies. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../src/client/distribute.h"
#include "check.h"

static void test_hash(void)
{
    /* stable across releases: names placed by an old client must be found */
    CHECK_EQ(cl_dht_hash("", 0), cl_dht_hash("", 0));
    CHECK(cl_dht_hash("a", 1) != cl_dht_hash("b", 1));
    CHECK(cl_dht_hash("file1", 5) != cl_dht_hash("file2", 5));
    /* only the given length counts */
    CHECK_EQ(cl_dht_hash("abcdef", 3), cl_dht_hash("abc", 3));
}

static void test_default_layout(void)
{
    for (int n = 1; n <= CL_DHT_MAX; n++) {
        struct cl_dht_layout l, back;
        cl_dht_layout_default(n, &l);
        CHECK_EQ(l.n, n);
        CHECK_EQ(l.r[0].start, 0u);
        CHECK_EQ(l.r[n - 1].end, UINT32_MAX);
        uint8_t buf[CL_DHT_LAYOUT_MAXLEN];
        size_t len = cl_dht_layout_encode(&l, buf);
        CHECK_EQ(len, 8 + 8 * (size_t)n);
        CHECK_EQ(cl_dht_layout_decode(buf, len, n, &back), 0);
        CHECK(!memcmp(l.r, back.r, sizeof(l.r[0]) * (size_t)n));
        /* a layout for another number of subvolumes is refused */
        if (n > 1)
            CHECK_EQ(cl_dht_layout_decode(buf, len, n - 1, &back), -EPROTO);
        /* every boundary lands in exactly one range */
        for (int i = 0; i < n; i++) {
            CHECK_EQ(cl_dht_layout_pick(&l, l.r[i].start), i);
            CHECK_EQ(cl_dht_layout_pick(&l, l.r[i].end), i);
        }
    }
}

static void test_spread(void)
{
    /* 3000 names over 3 and 6 subvolumes: each gets a fair share */
    for (int n = 3; n <= 6; n += 3) {
        struct cl_dht_layout l;
        cl_dht_layout_default(n, &l);
        int count[6] = {0};
        char name[32];
        for (int i = 0; i < 3000; i++) {
            int len = snprintf(name, sizeof(name), "file%d", i);
            int s = cl_dht_layout_pick(&l, cl_dht_hash(name, (size_t)len));
            CHECK(s >= 0 && s < n);
            if (s >= 0 && s < n)
                count[s]++;
        }
        for (int s = 0; s < n; s++)
            CHECK(count[s] > 3000 / n * 7 / 10 && count[s] < 3000 / n * 13 / 10);
    }
}

static void test_bad_layouts(void)
{
    struct cl_dht_layout l;
    cl_dht_layout_default(3, &l);
    uint8_t buf[CL_DHT_LAYOUT_MAXLEN];
    size_t len = cl_dht_layout_encode(&l, buf);
    struct cl_dht_layout out;
    CHECK_EQ(cl_dht_layout_decode(buf, len - 1, 3, &out), -EPROTO); /* truncated */
    CHECK_EQ(cl_dht_layout_decode(buf, 0, 3, &out), -EPROTO);
    buf[0] = 2; /* unknown version */
    CHECK_EQ(cl_dht_layout_decode(buf, len, 3, &out), -EPROTO);
    buf[0] = 1;
    /* a hole: subvolume 1 ends one short */
    struct cl_dht_layout h = l;
    h.r[1].end--;
    len = cl_dht_layout_encode(&h, buf);
    CHECK_EQ(cl_dht_layout_decode(buf, len, 3, &out), -EPROTO);
    /* an overlap */
    h = l;
    h.r[1].end++;
    len = cl_dht_layout_encode(&h, buf);
    CHECK_EQ(cl_dht_layout_decode(buf, len, 3, &out), -EPROTO);
    /* a subvolume with no range (start > end) is fine if the rest tiles */
    h = l;
    h.r[0].end = l.r[1].end;
    h.r[1].start = 1;
    h.r[1].end = 0;
    len = cl_dht_layout_encode(&h, buf);
    CHECK_EQ(cl_dht_layout_decode(buf, len, 3, &out), 0);
    CHECK_EQ(cl_dht_layout_pick(&out, l.r[1].start), 0);
    CHECK_EQ(cl_dht_layout_pick(&out, UINT32_MAX), 2);
    /* nobody owns anything */
    for (int i = 0; i < 3; i++) {
        h.r[i].start = 1;
        h.r[i].end = 0;
    }
    len = cl_dht_layout_encode(&h, buf);
    CHECK_EQ(cl_dht_layout_decode(buf, len, 3, &out), -EPROTO);
}

static void test_linkto(void)
{
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"0", 1, 3), 0);
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"2", 1, 3), 2);
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"3", 1, 3), -EPROTO);
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"12", 2, 13), 12);
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"01", 2, 3), -EPROTO);
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"-1", 2, 3), -EPROTO);
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"", 0, 3), -EPROTO);
    CHECK_EQ(cl_dht_linkto_parse((const uint8_t *)"1000", 4, 64), -EPROTO);
}

static void test_cookies(void)
{
    CHECK_EQ(cl_dht_cookie_bits(2), 1);
    CHECK_EQ(cl_dht_cookie_bits(3), 2);
    CHECK_EQ(cl_dht_cookie_bits(4), 2);
    CHECK_EQ(cl_dht_cookie_bits(5), 3);
    CHECK_EQ(cl_dht_cookie_bits(64), 6);
    int bits = cl_dht_cookie_bits(3), s;
    uint64_t c, bc;
    /* start of the listing is cookie 0 */
    CHECK_EQ(cl_dht_cookie_pack(0, 0, bits, &c), 0);
    CHECK_EQ(c, 0u);
    uint64_t samples[] = {1, 2, 12345, (1ull << 59) - 1};
    for (size_t k = 0; k < sizeof(samples) / sizeof(samples[0]); k++)
        for (int sv = 0; sv < 3; sv++) {
            CHECK_EQ(cl_dht_cookie_pack(samples[k], sv, bits, &c), 0);
            CHECK(c < CL_DHT_COOKIE_MAPPED);
            CHECK_EQ(cl_dht_cookie_unpack(c, bits, 3, &s, &bc), 0);
            CHECK_EQ(s, sv);
            CHECK_EQ(bc, samples[k]);
        }
    /* ext4-sized cookies do not fit: the layer maps them */
    CHECK_EQ(cl_dht_cookie_pack(1ull << 59, 0, bits, &c), -ERANGE);
    CHECK_EQ(cl_dht_cookie_pack((1ull << 63) - 1, 0, bits, &c), -ERANGE);
    CHECK_EQ(cl_dht_cookie_unpack(CL_DHT_COOKIE_MAPPED | 7, bits, 3, &s, &bc), 1);
    CHECK_EQ(bc, 7u);
    /* a subvolume index the volume does not have, or bits above 61 */
    CHECK_EQ(cl_dht_cookie_unpack(3, bits, 3, &s, &bc), -EINVAL);
    CHECK_EQ(cl_dht_cookie_unpack(1ull << 62, bits, 3, &s, &bc), -EINVAL);
}

/* Mapped cookies decode the same from any handle, one slot per distinct
 * (subvolume, brick cookie), and stop decoding once the map starts over. */
static void test_cookie_map(void)
{
    CHECK(cl_dht_cookie_map_new(0) == NULL);
    struct cl_dht_cookie_map *m = cl_dht_cookie_map_new(3000);
    CHECK(m != NULL);
    if (!m)
        return;
    uint64_t big = (1ull << 63) - 12345, c[2000], again;
    int s, bits = cl_dht_cookie_bits(3);
    for (int k = 0; k < 2000; k++) {
        CHECK_EQ(cl_dht_cookie_map_put(m, k % 3, big - (uint64_t)k, &c[k]), 0);
        CHECK(c[k] & CL_DHT_COOKIE_MAPPED);
        CHECK(c[k] >> 62 == 0);
        CHECK_EQ(cl_dht_cookie_unpack(c[k], bits, 3, &s, &again), 1);
    }
    for (int k = 0; k < 2000; k++) {
        uint64_t bc;
        CHECK_EQ(cl_dht_cookie_map_get(m, c[k], &s, &bc), 0);
        CHECK_EQ(s, k % 3);
        CHECK_EQ(bc, big - (uint64_t)k);
        /* the same pair again: the same cookie */
        CHECK_EQ(cl_dht_cookie_map_put(m, k % 3, big - (uint64_t)k, &again), 0);
        CHECK_EQ(again, c[k]);
    }
    /* the same brick cookie of another subvolume is another slot */
    CHECK_EQ(cl_dht_cookie_map_put(m, 2, big, &again), 0);
    CHECK(again != c[0]);
    /* not a mapped cookie, or a slot never handed out */
    uint64_t bc;
    CHECK_EQ(cl_dht_cookie_map_get(m, 12345, &s, &bc), -EINVAL);
    CHECK_EQ(cl_dht_cookie_map_get(m, CL_DHT_COOKIE_MAPPED | 2999, &s, &bc), -EINVAL);
    /* full: it starts over, and the older cookies no longer decode */
    for (int k = 0; k < 1500; k++)
        CHECK_EQ(cl_dht_cookie_map_put(m, 0, (uint64_t)k << 40, &again), 0);
    CHECK_EQ(cl_dht_cookie_map_get(m, c[0], &s, &bc), -EINVAL);
    CHECK_EQ(cl_dht_cookie_map_get(m, again, &s, &bc), 0);
    CHECK_EQ(bc, 1499ull << 40);
    cl_dht_cookie_map_free(m);
}

int main(void)
{
    test_hash();
    test_default_layout();
    test_spread();
    test_bad_layouts();
    test_linkto();
    test_cookies();
    test_cookie_map();
    return check_summary("test_client_dht");
}
