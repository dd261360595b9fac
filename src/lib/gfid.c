/* Object ids (gfid.h): making, parsing and formatting GFIDs. */
#include "gfid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

void gfid_generate(gfid_t *g)
{
    size_t got = 0;
    while (got < GFID_LEN) {
        ssize_t n = getrandom(g->b + got, GFID_LEN - got, 0);
        if (n > 0)
            got += (size_t)n;
    }
    g->b[6] = (uint8_t)((g->b[6] & 0x0f) | 0x40); /* version 4 */
    g->b[8] = (uint8_t)((g->b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

void gfid_root(gfid_t *g)
{
    memset(g, 0, sizeof(*g));
    g->b[15] = 1;
}

bool gfid_is_null(const gfid_t *g)
{
    for (int i = 0; i < GFID_LEN; i++)
        if (g->b[i])
            return false;
    return true;
}

bool gfid_equal(const gfid_t *a, const gfid_t *b)
{
    return memcmp(a->b, b->b, GFID_LEN) == 0;
}

void gfid_format(const gfid_t *g, char out[GFID_STRLEN])
{
    static const char hex[] = "0123456789abcdef";
    int o = 0;
    for (int i = 0; i < GFID_LEN; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[g->b[i] >> 4];
        out[o++] = hex[g->b[i] & 15];
    }
    out[o] = 0;
}

int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int gfid_parse(const char *s, gfid_t *g)
{
    if (strlen(s) != GFID_STRLEN - 1)
        return -EINVAL;
    int b = 0;
    for (int i = 0; i < GFID_STRLEN - 1;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return -EINVAL;
            i++;
            continue;
        }
        int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        g->b[b++] = (uint8_t)(hi << 4 | lo);
        i += 2;
    }
    return 0;
}

uint64_t gfid_ino(const gfid_t *g)
{
    uint64_t a, b;
    memcpy(&a, g->b, 8);
    memcpy(&b, g->b + 8, 8);
    uint64_t ino = a ^ b;
    gfid_t root;
    gfid_root(&root);
    if (gfid_equal(g, &root))
        return 1; /* FUSE's root node id */
    return ino > 1 ? ino : ino + 2;
}
