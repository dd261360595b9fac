/* features.quota-limits: parsing and printing (quota.h). */
#include "quota.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void quota_limits_free(struct quota_limits *q)
{
    for (int i = 0; i < q->n; i++)
        free(q->l[i].path);
    free(q->l);
    q->l = NULL;
    q->n = 0;
}

int quota_path_norm(const char *in, char *out, size_t outlen)
{
    size_t len = strlen(in);
    if (len == 0 || in[0] != '/' || len >= 4096 || len >= outlen)
        return -EINVAL;
    while (len > 1 && in[len - 1] == '/')
        len--;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)in[i] < 0x20 || in[i] == ';' || in[i] == 0x7f)
            return -EINVAL;
    if (len > 1) {
        /* every component non-empty and neither "." nor ".." */
        const char *p = in + 1, *end = in + len;
        while (p <= end) {
            const char *s = memchr(p, '/', (size_t)(end - p));
            if (!s)
                s = end;
            size_t n = (size_t)(s - p);
            if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                return -EINVAL;
            p = s + 1;
        }
    }
    memcpy(out, in, len);
    out[len] = 0;
    return 0;
}

int quota_path_under(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    if (n == 1)
        return path[0] == '/';
    return strncmp(dir, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

static int num(const char **p, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(*p, &end, 10);
    if (end == *p || errno || v < 0 || *end != ':')
        return -EINVAL;
    *out = v;
    *p = end + 1;
    return 0;
}

int quota_limits_parse(const char *s, struct quota_limits *out, char *err, size_t errlen)
{
    out->n = 0;
    out->l = NULL;
    const char *p = s;
    while (*p) {
        const char *semi = strchr(p, ';');
        size_t len = semi ? (size_t)(semi - p) : strlen(p);
        char entry[4200];
        if (len >= sizeof(entry))
            goto bad;
        memcpy(entry, p, len);
        entry[len] = 0;
        p += len + (semi ? 1 : 0);
        if (len == 0)
            continue;
        const char *q = entry;
        int64_t v[4];
        for (int i = 0; i < 4; i++)
            if (num(&q, &v[i]) < 0)
                goto bad;
        char path[4096];
        if (v[1] > 100 || v[3] > 100 || quota_path_norm(q, path, sizeof(path)) < 0 ||
            strcmp(path, q) != 0 || out->n >= QUOTA_LIMITS_MAX || quota_limits_find(out, path))
            goto bad;
        struct quota_limit *l = realloc(out->l, sizeof(*l) * (size_t)(out->n + 1));
        if (!l) {
            quota_limits_free(out);
            return -ENOMEM;
        }
        out->l = l;
        l = &out->l[out->n];
        if (!(l->path = strdup(path))) {
            quota_limits_free(out);
            return -ENOMEM;
        }
        out->n++;
        l->hard = v[0];
        l->soft = (int)v[1];
        l->objects = v[2];
        l->obj_soft = (int)v[3];
    }
    return 0;
bad:
    snprintf(err, errlen, "not a list of quota limits (HARD:SOFT:OBJECTS:OBJSOFT:PATH;...)");
    quota_limits_free(out);
    return -EINVAL;
}

char *quota_limits_format(const struct quota_limits *q)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < q->n; i++)
        fprintf(f, "%s%" PRId64 ":%d:%" PRId64 ":%d:%s", i ? ";" : "", q->l[i].hard, q->l[i].soft,
                q->l[i].objects, q->l[i].obj_soft, q->l[i].path);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

struct quota_limit *quota_limits_find(const struct quota_limits *q, const char *path)
{
    for (int i = 0; i < q->n; i++)
        if (strcmp(q->l[i].path, path) == 0)
            return &q->l[i];
    return NULL;
}

int quota_parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    if (!((*s >= '0' && *s <= '9') || *s == '.'))
        return -EINVAL; /* no sign, space, "nan" or "inf" */
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v <= 0)
        return -EINVAL;
    static const char *const units[] = {"", "K", "M", "G", "T", "P"};
    double mult = 0;
    for (int i = 0; i < 6; i++) {
        char a[4], b[4];
        snprintf(a, sizeof(a), "%sB", units[i]);
        snprintf(b, sizeof(b), "%s", units[i]);
        if (!strcasecmp(end, a) || !strcasecmp(end, b) || (i == 0 && !strcasecmp(end, "bytes"))) {
            mult = (double)(1ull << (10 * i));
            break;
        }
    }
    if (mult == 0)
        return -EINVAL;
    v *= mult;
    if (v < 1 || v > 9.0e18)
        return -EINVAL;
    *out = (int64_t)v;
    return 0;
}

void quota_format_size(int64_t bytes, char *out, size_t outlen)
{
    static const char *const units[] = {"KB", "MB", "GB", "TB", "PB"};
    if (bytes < 1024) {
        snprintf(out, outlen, "%" PRId64 "Bytes", bytes);
        return;
    }
    double v = (double)bytes / 1024;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, outlen, "%.1f%s", v, units[i]);
}
