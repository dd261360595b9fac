/* Distribute: volume-wide placement by rendezvous hashing (the pure part;
 * distribute.h documents it, docs/notes/2026-12-07-placement.md says why and what it moves). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "distribute.h"

/* The 64-bit finalizer of a well-mixed hash: every input bit reaches every
 * output bit. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

uint64_t cl_place_key(const uint8_t parent[16], const char *name, size_t len)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a, 64 bits, then mixed */
    for (int i = 0; i < 16; i++)
        h = (h ^ parent[i]) * 1099511628211ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)name[i]) * 1099511628211ull;
    return mix64(h);
}

/* Set s's draw for key: uniform over 64 bits, independent across sets. */
static uint64_t draw(uint64_t key, uint64_t id)
{
    return mix64(key ^ (id * 0x9e3779b97f4a7c15ull));
}

int cl_place_pick(const struct cl_place *p, uint64_t key)
{
    int best = -1, equal = 1;
    uint32_t w0 = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->set[i].state != CL_PLACE_ACTIVE)
            continue;
        if (!w0)
            w0 = p->set[i].weight;
        else if (p->set[i].weight != w0)
            equal = 0;
    }
    if (equal) {
        /* Equal weights: the highest draw wins. */
        uint64_t top = 0;
        for (int i = 0; i < p->n; i++) {
            if (p->set[i].state != CL_PLACE_ACTIVE)
                continue;
            uint64_t d = draw(key, p->set[i].id);
            if (best < 0 || d > top)
                best = i, top = d;
        }
        return best;
    }
    /* Weighted: the lowest -ln(u)/w wins, which a set of weight w does in
     * w / (sum of weights) of the draws. */
    double top = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->set[i].state != CL_PLACE_ACTIVE)
            continue;
        double u = ((double)(draw(key, p->set[i].id) >> 11) + 0.5) * 0x1p-53;
        double s = -log(u) / (double)p->set[i].weight;
        if (best < 0 || s < top)
            best = i, top = s;
    }
    return best;
}

int cl_place_find(const struct cl_place *p, uint64_t id)
{
    for (int i = 0; i < p->n; i++)
        if (p->set[i].id == id)
            return i;
    return -1;
}

int cl_place_add(struct cl_place *p, uint64_t id, uint32_t weight, int state)
{
    if (p->n >= CL_PLACE_MAX)
        return -E2BIG;
    if (id == 0 || weight < 1 || weight > CL_PLACE_WEIGHT_MAX ||
        (state != CL_PLACE_ACTIVE && state != CL_PLACE_DRAINING) || cl_place_find(p, id) >= 0)
        return -EINVAL;
    p->set[p->n].id = id;
    p->set[p->n].weight = weight;
    p->set[p->n].state = (uint32_t)state;
    p->n++;
    p->gen++;
    return p->n - 1;
}

static void put32(uint8_t *o, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        o[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *o, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        o[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

size_t cl_place_encoded_len(const struct cl_place *p)
{
    return 16 + 16 * (size_t)p->n;
}

size_t cl_place_encode(const struct cl_place *p, uint8_t *out)
{
    put32(out, CL_PLACE_VERSION);
    put32(out + 4, (uint32_t)p->n);
    put64(out + 8, p->gen);
    for (int i = 0; i < p->n; i++) {
        uint8_t *e = out + 16 + 16 * i;
        put64(e, p->set[i].id);
        put32(e + 8, p->set[i].weight);
        put32(e + 12, p->set[i].state);
    }
    return cl_place_encoded_len(p);
}

int cl_place_decode(const uint8_t *in, size_t len, struct cl_place *p)
{
    if (len < 16 || get32(in) != CL_PLACE_VERSION)
        return -EPROTO;
    uint32_t n = get32(in + 4);
    if (n > CL_PLACE_MAX || len != 16 + 16 * (size_t)n)
        return -EPROTO;
    p->n = 0;
    int active = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = in + 16 + 16 * i;
        uint32_t state = get32(e + 12);
        if (cl_place_add(p, get64(e), get32(e + 8), (int)state) < 0)
            return -EPROTO;
        active += state == CL_PLACE_ACTIVE;
    }
    if (!active)
        return -EPROTO;
    p->gen = get64(in + 8);
    return 0;
}
