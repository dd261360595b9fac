/* Fuzz target: the text parsers clients and the CLI feed user input to:
 * HOST[:PORT] addresses and GFID strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/gfid.h"
#include "../../src/lib/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    struct net_addr a;
    if (net_parse_addr(s, 24810, &a) == 0) {
        char out[NET_HOST_MAX + 16];
        net_format_addr(&a, out, sizeof(out));
        struct net_addr b;
        if (net_parse_addr(out, 1, &b) != 0 || strcmp(a.host, b.host) != 0 || a.port != b.port)
            abort();
    }
    gfid_t g;
    if (gfid_parse(s, &g) == 0) {
        char out[GFID_STRLEN];
        gfid_format(&g, out);
        gfid_t h;
        if (gfid_parse(out, &h) != 0 || !gfid_equal(&g, &h))
            abort();
    }
    free(s);
    return 0;
}
