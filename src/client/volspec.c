/* Parsing "HOST[:PORT]:/VOLNAME" and lists of backup servers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../lib/options.h"
#include "volspec.h"

int cl_volspec_parse(const char *spec, struct net_addr *server, char *volume, size_t vollen,
                     const char **why)
{
    return cl_volspec_parse_dir(spec, server, volume, vollen, NULL, 0, why);
}

/* The directory after the volume name, "" or "/a/b[/]", into subdir: "/"
 * or "/a/b" (trailing slashes dropped). */
static int parse_subdir(const char *d, char *subdir, size_t sublen, const char **why)
{
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        n--;
    if (n == 0 || (n == 1 && d[0] == '/')) {
        snprintf(subdir, sublen, "/");
        return 0;
    }
    if (why)
        *why = "bad directory";
    if (n >= sublen || !opt_dir_valid(d, n))
        return -EINVAL;
    memcpy(subdir, d, n);
    subdir[n] = 0;
    return 0;
}

int cl_volspec_parse_dir(const char *spec, struct net_addr *server, char *volume, size_t vollen,
                         char *subdir, size_t sublen, const char **why)
{
    const char *sep = spec ? strstr(spec, ":/") : NULL;
    if (why)
        *why = subdir ? "not HOST[:PORT]:/VOLNAME[/DIR]" : "not HOST[:PORT]:/VOLNAME";
    if (!sep || sep == spec || !sep[2] || sep[2] == '/')
        return -EINVAL;
    const char *dir = strchr(sep + 2, '/');
    size_t vl = dir ? (size_t)(dir - (sep + 2)) : strlen(sep + 2);
    if ((dir && !subdir) || vl >= vollen)
        return -EINVAL;
    if (subdir && parse_subdir(dir ? dir : "", subdir, sublen, why) < 0)
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
    memcpy(volume, sep + 2, vl);
    volume[vl] = 0;
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
