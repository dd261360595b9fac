/* Distribute: the pure parts (name hash, layouts, link-to values, readdir
 * cookies). distribute.h documents them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "distribute.h"

uint32_t cl_dht_hash(const char *name, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)name[i]) * 16777619u;
    /* FNV-1a alone leaves close names close in the top bits, which pick the
     * range: mix every bit into every other. */
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

void cl_dht_layout_default(int n, struct cl_dht_layout *l)
{
    memset(l, 0, sizeof(*l));
    l->n = n;
    uint64_t chunk = (1ull << 32) / (uint64_t)n;
    for (int i = 0; i < n; i++) {
        l->r[i].start = (uint32_t)(chunk * (uint64_t)i);
        l->r[i].end = i == n - 1 ? UINT32_MAX : (uint32_t)(chunk * (uint64_t)(i + 1) - 1);
    }
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t cl_dht_layout_encode(const struct cl_dht_layout *l, uint8_t *out)
{
    put32(out, CL_DHT_LAYOUT_VERSION);
    put32(out + 4, (uint32_t)l->n);
    for (int i = 0; i < l->n; i++) {
        put32(out + 8 + 8 * i, l->r[i].start);
        put32(out + 12 + 8 * i, l->r[i].end);
    }
    return 8 + 8 * (size_t)l->n;
}

static int cmp_range(const void *a, const void *b)
{
    const struct cl_dht_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

int cl_dht_layout_decode(const uint8_t *p, size_t len, int n, struct cl_dht_layout *l)
{
    if (n < 1 || n > CL_DHT_MAX || len < 8 || get32(p) != CL_DHT_LAYOUT_VERSION ||
        get32(p + 4) != (uint32_t)n || len != 8 + 8 * (size_t)n)
        return -EPROTO;
    memset(l, 0, sizeof(*l));
    l->n = n;
    struct cl_dht_range sorted[CL_DHT_MAX];
    int k = 0;
    for (int i = 0; i < n; i++) {
        l->r[i].start = get32(p + 8 + 8 * i);
        l->r[i].end = get32(p + 12 + 8 * i);
        if (l->r[i].start <= l->r[i].end)
            sorted[k++] = l->r[i];
    }
    qsort(sorted, (size_t)k, sizeof(sorted[0]), cmp_range);
    /* The non-empty ranges must tile 0..2^32-1: no hole, no overlap. */
    uint64_t next = 0;
    for (int i = 0; i < k; i++) {
        if (sorted[i].start != next)
            return -EPROTO;
        next = (uint64_t)sorted[i].end + 1;
    }
    return next == (1ull << 32) ? 0 : -EPROTO;
}

int cl_dht_layout_pick(const struct cl_dht_layout *l, uint32_t h)
{
    for (int i = 0; i < l->n; i++)
        if (l->r[i].start <= l->r[i].end && l->r[i].start <= h && h <= l->r[i].end)
            return i;
    return -1;
}

int cl_dht_linkto_parse(const uint8_t *p, size_t len, int n)
{
    if (len == 0 || len > 3)
        return -EPROTO;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9' || (i == 0 && p[i] == '0' && len > 1))
            return -EPROTO;
        v = v * 10 + (p[i] - '0');
    }
    return v < n ? v : -EPROTO;
}

int cl_dht_cookie_bits(int n)
{
    int bits = 1;
    while ((1 << bits) < n)
        bits++;
    return bits;
}

int cl_dht_cookie_pack(uint64_t brick_cookie, int subvol, int bits, uint64_t *out)
{
    if (brick_cookie >= 1ull << (61 - bits))
        return -ERANGE;
    *out = brick_cookie << bits | (uint64_t)subvol;
    return 0;
}

int cl_dht_cookie_unpack(uint64_t cookie, int bits, int n, int *subvol, uint64_t *brick_cookie)
{
    if (cookie >> 62)
        return -EINVAL;
    if (cookie & CL_DHT_COOKIE_MAPPED) {
        *brick_cookie = cookie & (CL_DHT_COOKIE_MAPPED - 1);
        *subvol = -1;
        return 1;
    }
    int s = (int)(cookie & ((1ull << bits) - 1));
    if (s >= n)
        return -EINVAL;
    *subvol = s;
    *brick_cookie = cookie >> bits;
    return 0;
}
