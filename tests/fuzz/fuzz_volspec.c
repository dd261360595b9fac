/* Fuzz target: how users name a volume and its backup servers
 * ("HOST[:PORT]:/VOLNAME", "HOST[:PORT]:HOST[:PORT]..."), parsed by the
 * FUSE client and libcairn (src/client/volspec.c). What parses must hold
 * what the header promises. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/volspec.h"

#define MAX_SERVERS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    struct net_addr a;
    char vol[64];
    const char *why = NULL;
    if (cl_volspec_parse(s, &a, vol, sizeof(vol), &why) == 0) {
        if (!vol[0] || strchr(vol, '/') || strlen(vol) >= sizeof(vol) || !a.host[0])
            abort();
    } else if (!why) {
        abort();
    }
    struct net_addr list[MAX_SERVERS];
    int n = -1;
    if (cl_servers_parse(s, list, MAX_SERVERS, &n) == 0) {
        if (n < 1 || n > MAX_SERVERS)
            abort();
        for (int i = 0; i < n; i++)
            if (!list[i].host[0])
                abort();
    }
    free(s);
    return 0;
}
