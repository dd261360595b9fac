/* Parsing "HOST[:PORT]:/VOLNAME" and lists of backup servers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "volspec.h"

int cl_volspec_parse(const char *spec, struct net_addr *server, char *volume, size_t vollen,
                     const char **why)
{
    const char *sep = spec ? strstr(spec, ":/") : NULL;
    if (why)
        *why = "not HOST[:PORT]:/VOLNAME";
    if (!sep || sep == spec || !sep[2] || strchr(sep + 2, '/') || strlen(sep + 2) >= vollen)
        return -EINVAL;
    char host[NET_HOST_MAX + 16];
    size_t hl = (size_t)(sep - spec);
    if (why)
        *why = "bad server address";
    if (hl >= sizeof(host))
        return -EINVAL;
    memcpy(host, spec, hl);
    host[hl] = 0;
    if (net_parse_addr(host, CAIRN_MGMT_PORT, server) < 0)
        return -EINVAL;
    strcpy(volume, sep + 2);
    if (why)
        *why = NULL;
    return 0;
}

int cl_servers_parse(const char *list, struct net_addr *out, int max, int *n)
{
    const char *s = list;
    *n = 0;
    while (s && *s) {
        const char *end = *s == '[' ? strchr(s, ']') : s + strcspn(s, ":");
        if (!end)
            return -EINVAL;
        if (*s == '[')
            end++;
        if (end == s || *n == max)
            return -EINVAL;
        const char *port = NULL;
        size_t hl = (size_t)(end - s), pl = 0;
        const char *next = end;
        if (*next == ':') {
            next++;
            size_t dl = strspn(next, "0123456789");
            if (dl > 0 && (next[dl] == ':' || next[dl] == 0)) {
                port = next;
                pl = dl;
                next += dl;
                if (*next == ':')
                    next++;
            }
        }
        char one[NET_HOST_MAX + 16];
        if (hl + pl + 2 > sizeof(one))
            return -EINVAL;
        snprintf(one, sizeof(one), "%.*s%s%.*s", (int)hl, s, port ? ":" : "", (int)pl,
                 port ? port : "");
        if (net_parse_addr(one, CAIRN_MGMT_PORT, &out[*n]) < 0)
            return -EINVAL;
        (*n)++;
        s = next;
    }
    return *n > 0 ? 0 : -EINVAL;
}
