/* Fuzz target: features.quota-limits (lib/quota.c) and the sizes and
 * paths `volume quota` takes. A list that parses must print back to a
 * list that parses to the same limits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/quota.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    struct quota_limits q, again;
    char err[128];
    if (quota_limits_parse(s, &q, err, sizeof(err)) == 0) {
        char *back = quota_limits_format(&q);
        if (!back || quota_limits_parse(back, &again, err, sizeof(err)) != 0 || again.n != q.n)
            abort();
        for (int i = 0; i < q.n; i++)
            if (strcmp(q.l[i].path, again.l[i].path) || q.l[i].hard != again.l[i].hard ||
                q.l[i].soft != again.l[i].soft || q.l[i].objects != again.l[i].objects ||
                q.l[i].obj_soft != again.l[i].obj_soft)
                abort();
        quota_limits_free(&again);
        free(back);
        quota_limits_free(&q);
    }
    int64_t v;
    if (quota_parse_size(s, &v) == 0 && v <= 0)
        abort();
    char path[4096];
    if (quota_path_norm(s, path, sizeof(path)) == 0 && path[0] != '/')
        abort();
    free(s);
    return 0;
}
