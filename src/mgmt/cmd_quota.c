/* volume quota NAME enable|disable|limit-usage|limit-objects|remove|
 * remove-objects|default-soft-limit|soft-timeout|hard-timeout: the parts of
 * `volume quota` that change the volume (docs/quota.md). Each is a change
 * of the features.quota* options, committed through `volume set` (one pool
 * entry, pushed live to the bricks); list and list-objects run in the CLI,
 * which asks the bricks for their counts (src/cli/quota.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/quota.h"
#include "mgmt.h"

#define FAIL "quota command failed : "

/* Runs `volume set NAME k1 v1 [k2 v2]` and says GlusterFS's success line. */
static int set(struct mgmt *m, struct mgmt_vol *v, const char *k1, const char *v1, const char *k2,
               const char *v2, FILE *out)
{
    char *args[] = {"volume", "set", v->name, (char *)k1, (char *)v1, (char *)k2, (char *)v2};
    char *text = NULL;
    size_t len = 0;
    FILE *tmp = open_memstream(&text, &len);
    if (!tmp) {
        fprintf(out, FAIL "out of memory\n");
        return 1;
    }
    int rc = mgmt_cmd_set(m, k2 ? 7 : 5, args, tmp);
    fclose(tmp);
    if (rc == 0)
        fprintf(out, "volume quota : success\n");
    else
        fprintf(out, FAIL "%s", text && *text ? text : "volume set failed\n");
    free(text);
    return rc ? 1 : 0;
}

/* The directory path of the volume exists on every brick of this server
 * that serves the volume (a directory is on every brick of it, whatever
 * the layout): 0, or 1 after saying why not. A server serving none of
 * the volume's bricks takes the path as given. */
static int check_dir(const struct mgmt_vol *v, const char *path, FILE *out)
{
    for (int i = 0; i < v->n_bricks; i++) {
        const struct mgmt_brick *b = &v->bricks[i];
        if (!b->local)
            continue;
        char full[PATH_MAX + 4096];
        snprintf(full, sizeof(full), "%s%s", b->path, strcmp(path, "/") ? path : "");
        struct stat st;
        if (lstat(full, &st) < 0) {
            fprintf(out,
                    FAIL "Failed to find directory %s on brick %s:%s. Reason : %s\nplease "
                         "enter the path relative to the volume\n",
                    path, b->host, b->path, strerror(errno));
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            fprintf(out, FAIL "%s is not a directory: quota limits apply to directories\n", path);
            return 1;
        }
    }
    return 0;
}

static int parse_percent(const char *s, int *out)
{
    char *end;
    long p = strtol(s, &end, 10);
    if (end == s || (*end && strcmp(end, "%")) || p < 1 || p > 100)
        return -EINVAL;
    *out = (int)p;
    return 0;
}

/* limit-usage, limit-objects, remove, remove-objects: a new limits value. */
static int change_limit(struct mgmt *m, struct mgmt_vol *v, int argc, char **argv, FILE *out)
{
    const char *what = argv[3];
    int objects = strstr(what, "objects") != NULL;
    int removing = strncmp(what, "remove", 6) == 0;
    if ((removing && argc != 5) || (!removing && argc != 6 && argc != 7))
        return 2;
    char path[4096];
    if (quota_path_norm(argv[4], path, sizeof(path)) < 0) {
        fprintf(out,
                FAIL "%s is not a path of the volume: it must start with '/' and have no "
                     "empty, '.' or '..' part, ';' or control character\n",
                argv[4]);
        return 1;
    }
    int64_t amount = 0;
    int soft = 0;
    if (!removing) {
        if (objects) {
            char *end;
            errno = 0;
            long long n = strtoll(argv[5], &end, 10);
            if (end == argv[5] || *end || errno || n <= 0) {
                fprintf(out,
                        FAIL "'%s' is not a number of objects: give a whole number "
                             "above 0\n",
                        argv[5]);
                return 1;
            }
            amount = n;
        } else if (quota_parse_size(argv[5], &amount) < 0) {
            fprintf(out,
                    FAIL "'%s' is not a size: please enter a correct value for size. "
                         "Acceptable suffixes are KB, MB, GB, TB or PB.\n",
                    argv[5]);
            return 1;
        }
        if (argc == 7 && parse_percent(argv[6], &soft) < 0) {
            fprintf(out, FAIL "'%s' is not a soft limit: give a percentage from 1 to 100\n",
                    argv[6]);
            return 1;
        }
        if (check_dir(v, path, out))
            return 1;
    }
    struct quota_limits q;
    char err[256];
    if (quota_limits_parse(opt_value(&v->opts, "features.quota-limits"), &q, err, sizeof(err)) <
        0) {
        fprintf(out, FAIL "%s\n", err);
        return 1;
    }
    struct quota_limit *l = quota_limits_find(&q, path);
    int rc = 1;
    if (removing) {
        if (!l || !(objects ? l->objects : l->hard)) {
            fprintf(out, FAIL "No %s limit is set on %s\n", objects ? "object" : "usage", path);
            goto out;
        }
        if (objects)
            l->objects = 0, l->obj_soft = 0;
        else
            l->hard = 0, l->soft = 0;
        if (!l->objects && !l->hard) {
            free(l->path);
            *l = q.l[--q.n];
        }
    } else {
        if (!l) {
            if (q.n >= QUOTA_LIMITS_MAX) {
                fprintf(out, FAIL "%s has %d limits already, the most it can have\n", v->name,
                        QUOTA_LIMITS_MAX);
                goto out;
            }
            struct quota_limit *nl = realloc(q.l, sizeof(*nl) * (size_t)(q.n + 1));
            if (!nl || !(nl[q.n].path = strdup(path))) {
                if (nl)
                    q.l = nl;
                fprintf(out, FAIL "out of memory\n");
                goto out;
            }
            q.l = nl;
            l = &q.l[q.n++];
            l->hard = l->objects = 0;
            l->soft = l->obj_soft = 0;
        }
        if (objects) {
            l->objects = amount;
            l->obj_soft = soft;
        } else {
            l->hard = amount;
            l->soft = soft;
        }
    }
    char *value = quota_limits_format(&q);
    if (!value) {
        fprintf(out, FAIL "out of memory\n");
        goto out;
    }
    rc = set(m, v, "features.quota-limits", value, NULL, NULL, out);
    free(value);
out:
    quota_limits_free(&q);
    return rc;
}

int mgmt_cmd_quota(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc < 4)
        return 2;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, FAIL "Volume %s does not exist\n", argv[2]);
        return 1;
    }
    const char *what = argv[3];
    int on = strcmp(opt_value(&v->opts, "features.quota"), "on") == 0;
    if (!strcmp(what, "enable") || !strcmp(what, "disable")) {
        if (argc != 4)
            return 2;
        int want = what[0] == 'e';
        if (want == on) {
            fprintf(out, FAIL "Quota is already %s\n", want ? "enabled" : "disabled");
            return 1;
        }
        /* Disabling forgets the limits, as GlusterFS does. */
        return want ? set(m, v, "features.quota", "on", NULL, NULL, out)
                    : set(m, v, "features.quota", "off", "features.quota-limits", "", out);
    }
    if (!strcmp(what, "list") || !strcmp(what, "list-objects")) {
        fprintf(out, FAIL "volume quota %s runs in the cairn command (it asks the bricks)\n", what);
        return 1;
    }
    int limit = !strcmp(what, "limit-usage") || !strcmp(what, "limit-objects") ||
                !strcmp(what, "remove") || !strcmp(what, "remove-objects");
    int knob = !strcmp(what, "default-soft-limit") || !strcmp(what, "soft-timeout") ||
               !strcmp(what, "hard-timeout");
    if (!limit && !knob) {
        fprintf(out, FAIL "unknown quota command '%s'\n", what);
        return 2;
    }
    if (!on) {
        fprintf(out, FAIL "Quota is disabled, please enable quota (volume quota %s enable)\n",
                v->name);
        return 1;
    }
    if (limit)
        return change_limit(m, v, argc, argv, out);
    if (argc != 5)
        return 2;
    char key[64], value[32];
    snprintf(key, sizeof(key), "features.%s", what);
    snprintf(value, sizeof(value), "%.30s", argv[4]);
    if (!strcmp(what, "default-soft-limit")) {
        int p;
        if (parse_percent(argv[4], &p) < 0) {
            fprintf(out, FAIL "'%s' is not a soft limit: give a percentage from 1 to 100\n",
                    argv[4]);
            return 1;
        }
        snprintf(value, sizeof(value), "%d", p);
    }
    return set(m, v, key, value, NULL, NULL, out);
}
