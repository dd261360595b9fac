/* Distribute's volume-wide placement (dht_place.c): keys, picking by
 * rendezvous hashing, what moves when a set is added or drained, weights,
 * and the wire form with its checks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/distribute.h"
#include "check.h"

#define KEYS 20000

static const uint8_t DIR_A[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t DIR_B[16] = {16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};

static uint64_t key_of(int i)
{
    char name[32];
    int len = snprintf(name, sizeof(name), "file%d", i);
    return cl_place_key(i % 2 ? DIR_A : DIR_B, name, (size_t)len);
}

static struct cl_place *place_new(int n)
{
    struct cl_place *p = calloc(1, sizeof(*p));
    for (int s = 0; p && s < n; s++)
        CHECK_EQ(cl_place_add(p, (uint64_t)(100 + s), 1, CL_PLACE_ACTIVE), s);
    return p;
}

static void test_keys(void)
{
    /* stable: a name placed by one client is found by every other */
    CHECK_EQ(cl_place_key(DIR_A, "x", 1), cl_place_key(DIR_A, "x", 1));
    /* the directory counts: equal names in two directories land apart */
    CHECK(cl_place_key(DIR_A, "index.html", 10) != cl_place_key(DIR_B, "index.html", 10));
    CHECK(cl_place_key(DIR_A, "a", 1) != cl_place_key(DIR_A, "b", 1));
    CHECK_EQ(cl_place_key(DIR_A, "abcdef", 3), cl_place_key(DIR_A, "abc", 3));
}

static void test_pick_add_drain(void)
{
    struct cl_place *p = place_new(5);
    static int before[KEYS], per[6];
    for (int i = 0; i < KEYS; i++) {
        before[i] = cl_place_pick(p, key_of(i));
        CHECK(before[i] >= 0 && before[i] < 5);
        per[before[i]]++;
    }
    for (int s = 0; s < 5; s++) /* 4000 each, give or take chance */
        CHECK(per[s] > 3600 && per[s] < 4400);
    /* a sixth set takes about a sixth, from every set, and nothing moves
     * between the five */
    CHECK_EQ(cl_place_add(p, 200, 1, CL_PLACE_ACTIVE), 5);
    int moved = 0, astray = 0;
    for (int i = 0; i < KEYS; i++) {
        int now = cl_place_pick(p, key_of(i));
        moved += now != before[i];
        astray += now != before[i] && now != 5;
    }
    CHECK_EQ(astray, 0);
    CHECK(moved > KEYS / 6 - 400 && moved < KEYS / 6 + 400);
    /* draining the new set puts everything back where it was */
    p->set[5].state = CL_PLACE_DRAINING;
    int back = 0;
    for (int i = 0; i < KEYS; i++)
        back += cl_place_pick(p, key_of(i)) == before[i];
    CHECK_EQ(back, KEYS);
    /* draining an old set moves its files only */
    p->set[2].state = CL_PLACE_DRAINING;
    for (int i = 0; i < KEYS; i++) {
        int now = cl_place_pick(p, key_of(i));
        CHECK(now != 2 && now < 5);
        if (before[i] != 2)
            CHECK_EQ(now, before[i]);
    }
    /* the order of the sets in the object does not matter, their ids do */
    struct cl_place *q = calloc(1, sizeof(*q));
    for (int s = 4; s >= 0; s--)
        cl_place_add(q, (uint64_t)(100 + s), 1, CL_PLACE_ACTIVE);
    for (int i = 0; i < KEYS; i += 7)
        CHECK_EQ(q->set[cl_place_pick(q, key_of(i))].id, 100 + (uint64_t)before[i]);
    /* no active set: no place */
    for (int s = 0; s < 6; s++)
        p->set[s].state = CL_PLACE_DRAINING;
    CHECK_EQ(cl_place_pick(p, key_of(1)), -1);
    free(q);
    free(p);
}

static void test_weights(void)
{
    struct cl_place *p = calloc(1, sizeof(*p));
    cl_place_add(p, 7, 3, CL_PLACE_ACTIVE);
    cl_place_add(p, 9, 1, CL_PLACE_ACTIVE);
    int first = 0;
    for (int i = 0; i < KEYS; i++)
        first += cl_place_pick(p, key_of(i)) == 0;
    CHECK(first > KEYS * 3 / 4 - 400 && first < KEYS * 3 / 4 + 400);
    free(p);
}

static void test_add_refusals(void)
{
    struct cl_place *p = calloc(1, sizeof(*p));
    CHECK_EQ(cl_place_add(p, 0, 1, CL_PLACE_ACTIVE), -EINVAL);
    CHECK_EQ(cl_place_add(p, 1, 0, CL_PLACE_ACTIVE), -EINVAL);
    CHECK_EQ(cl_place_add(p, 1, CL_PLACE_WEIGHT_MAX + 1, CL_PLACE_ACTIVE), -EINVAL);
    CHECK_EQ(cl_place_add(p, 1, 1, 3), -EINVAL);
    CHECK_EQ(cl_place_add(p, 1, 1, CL_PLACE_ACTIVE), 0);
    CHECK_EQ(cl_place_add(p, 1, 1, CL_PLACE_ACTIVE), -EINVAL); /* id taken */
    CHECK_EQ(p->gen, 1u);
    for (int i = 1; i < CL_PLACE_MAX; i++)
        cl_place_add(p, (uint64_t)i + 1, 1, CL_PLACE_ACTIVE);
    CHECK_EQ(p->n, CL_PLACE_MAX);
    CHECK_EQ(cl_place_add(p, 99999, 1, CL_PLACE_ACTIVE), -E2BIG);
    CHECK_EQ(cl_place_find(p, 500), 499);
    CHECK_EQ(cl_place_find(p, 99999), -1);
    free(p);
}

static void put32(uint8_t *o, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        o[i] = (uint8_t)(v >> (8 * i));
}

static void test_wire(void)
{
    struct cl_place *p = place_new(3), *q = calloc(1, sizeof(*q));
    p->set[1].state = CL_PLACE_DRAINING;
    p->set[2].weight = 5;
    p->gen = 42;
    uint8_t buf[16 + 16 * 4];
    size_t len = cl_place_encode(p, buf);
    CHECK_EQ(len, 16 + 16 * 3);
    CHECK_EQ(cl_place_encoded_len(p), len);
    CHECK_EQ(cl_place_decode(buf, len, q), 0);
    CHECK_EQ(q->gen, 42u);
    CHECK_EQ(q->n, 3);
    CHECK(!memcmp(p->set, q->set, sizeof(p->set[0]) * 3));
    /* every malformed form is refused */
    CHECK_EQ(cl_place_decode(buf, len - 1, q), -EPROTO);
    CHECK_EQ(cl_place_decode(buf, 15, q), -EPROTO);
    uint8_t bad[sizeof(buf)];
    memcpy(bad, buf, len);
    put32(bad, 2); /* version */
    CHECK_EQ(cl_place_decode(bad, len, q), -EPROTO);
    memcpy(bad, buf, len);
    put32(bad + 4, CL_PLACE_MAX + 1); /* count */
    CHECK_EQ(cl_place_decode(bad, len, q), -EPROTO);
    memcpy(bad, buf, len);
    memcpy(bad + 32, bad + 16, 8); /* a repeated id */
    CHECK_EQ(cl_place_decode(bad, len, q), -EPROTO);
    memcpy(bad, buf, len);
    put32(bad + 16 + 8, 0); /* weight 0 */
    CHECK_EQ(cl_place_decode(bad, len, q), -EPROTO);
    memcpy(bad, buf, len);
    put32(bad + 16 + 12, 9); /* state */
    CHECK_EQ(cl_place_decode(bad, len, q), -EPROTO);
    memcpy(bad, buf, len);
    put32(bad + 16 + 12, CL_PLACE_DRAINING);
    put32(bad + 48 + 12, CL_PLACE_DRAINING); /* no active set left */
    CHECK_EQ(cl_place_decode(bad, len, q), -EPROTO);
    free(q);
    free(p);
}

int main(void)
{
    test_keys();
    test_pick_add_drain();
    test_weights();
    test_add_refusals();
    test_wire();
    return check_summary("test_client_place");
}
