/* Pure decisions of self-heal (heal.h): the good copy, split-brain policies,
 * and which blocks a range heal copies. */
#include <errno.h>
#include <string.h>

#include "heal.h"

int cl_heal_policy_parse(const char *s)
{
    static const char *const names[] = {"none", "size", "mtime", "ctime", "majority"};
    for (int i = 0; s && i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -EINVAL;
}

uint32_t cl_heal_sources(uint32_t have, uint32_t accused, uint32_t data)
{
    return have & ~accused & data;
}

static int time_cmp(int64_t a, uint32_t ans, int64_t b, uint32_t bns)
{
    if (a != b)
        return a < b ? -1 : 1;
    return ans < bns ? -1 : ans > bns;
}

/* The child with the unique greatest key among cand, -1 on a tie. */
static int unique_max(int n, uint32_t cand, const struct cl_heal_copy *c, enum cl_heal_policy p)
{
    int best = -1, tie = 0;
    for (int i = 0; i < n; i++) {
        if (!(cand >> i & 1))
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        int d;
        if (p == CL_HEAL_POL_SIZE)
            d = c[i].size < c[best].size ? -1 : c[i].size > c[best].size;
        else if (p == CL_HEAL_POL_MTIME)
            d = time_cmp(c[i].mtime, c[i].mtime_ns, c[best].mtime, c[best].mtime_ns);
        else
            d = time_cmp(c[i].ctime, c[i].ctime_ns, c[best].ctime, c[best].ctime_ns);
        if (d > 0)
            best = i, tie = 0;
        else if (d == 0)
            tie = 1;
    }
    return tie ? -1 : best;
}

int cl_heal_policy_pick(int n, uint32_t cand, const struct cl_heal_copy *c, enum cl_heal_policy p)
{
    if (n <= 0 || n > 32 || !cand)
        return -1;
    switch (p) {
    case CL_HEAL_POL_SIZE:
    case CL_HEAL_POL_MTIME:
    case CL_HEAL_POL_CTIME:
        return unique_max(n, cand, c, p);
    case CL_HEAL_POL_MAJORITY:
        for (int i = 0; i < n; i++) {
            if (!(cand >> i & 1))
                continue;
            int same = 0;
            for (int j = 0; j < n; j++)
                if ((cand >> j & 1) && c[j].size == c[i].size && c[j].mtime == c[i].mtime &&
                    c[j].mtime_ns == c[i].mtime_ns)
                    same++;
            if (2 * same > n)
                return i;
        }
        return -1;
    default:
        return -1;
    }
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int cl_heal_diff_sums(const uint8_t *src, size_t src_len, const uint8_t *dst, size_t dst_len,
                      uint64_t *out, size_t max)
{
    if (src_len % 8 || dst_len % 8 || (src_len && !src) || (dst_len && !dst))
        return -EPROTO;
    size_t ns = src_len / 8, nd = dst_len / 8;
    if (ns > max || nd > max)
        return -EPROTO;
    memset(out, 0, ((max + 63) / 64) * sizeof(*out));
    int count = 0;
    for (size_t i = 0; i < ns; i++)
        if (i >= nd || get_u64(src + 8 * i) != get_u64(dst + 8 * i)) {
            out[i / 64] |= 1ull << (i % 64);
            count++;
        }
    return count;
}
