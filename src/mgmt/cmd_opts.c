/* volume set, get and reset. A change is validated in full, then committed
 * as one entry (pool.h): on every server at once or on none. Live options
 * are pushed to the running bricks and to subscribed clients; others apply
 * when the volume's bricks restart. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../lib/log.h"
#include "pool.h"

/* Option profiles for `volume set NAME group G`: GlusterFS's group names,
 * holding only options of the registry that serve the workload. A group
 * never trades coherence for speed: what it caches longer, it caches under
 * leases, whose recalls keep every other client's view current
 * (docs/consistency.md). */
struct group {
    const char *name;
    const char *const *kv; /* name, value, ..., NULL */
};
static const char *const group_virt[] = {
    /* VM images: few, large, long-open files; clients must notice a dead
     * brick quickly. */
    "network.ping-timeout", "20", "performance.io-thread-count", "32", NULL};
static const char *const group_metadata_cache[] = {
    /* long kernel caching of names and attributes, dropped by recalls
     * (GlusterFS pairs its md-cache timeout with cache invalidation alike) */
    "client.leases", "on", "client.lease-cache-timeout", "600", NULL};
static const char *const group_nl_cache[] = {
    /* names found missing answered from leased listings, for as long as
     * the metadata cache (GlusterFS's group caches negative lookups 600 s
     * with cache invalidation) */
    "client.leases", "on", "client.lease-cache-timeout", "600", NULL};
static const char *const group_db_workload[] = {
    /* databases cache for themselves and sync what they write: no read
     * ahead or write-behind of their own files, O_DIRECT that waits for
     * the bricks, more disk threads (GlusterFS's group turns its client
     * caches off likewise) */
    "performance.read-ahead",
    "off",
    "performance.write-behind",
    "off",
    "performance.strict-o-direct",
    "on",
    "performance.io-thread-count",
    "32",
    NULL};
static const char *const group_small_file[] = {
    /* many small files: more disk threads, lookups cached under leases */
    "performance.io-thread-count", "32", "client.leases", "on", NULL};
static const struct group groups[] = {
    {"virt", group_virt},
    /* VM images on a distributed volume: what Cairn has of it is virt's
     * (sharding is not there yet) */
    {"distributed-virt", group_virt},
    {"metadata-cache", group_metadata_cache},
    {"nl-cache", group_nl_cache},
    {"db-workload", group_db_workload},
    {"small-file", group_small_file},
    {NULL, NULL},
};

static void put_option(struct rpc_buf *e, const char *name, const char *value)
{
    size_t mark = rpc_put_begin(e, RPC_T_OPTION);
    rpc_put_str(e, RPC_T_NAME, name);
    if (value)
        rpc_put_str(e, RPC_T_DATA, value);
    rpc_put_end(e, mark);
}

static void opts_entry(struct rpc_buf *e, const struct mgmt_vol *v, int reset_all)
{
    rpc_buf_init(e);
    rpc_put_u64(e, RPC_T_OP, MGMT_E_VOL_OPTS);
    rpc_put_str(e, RPC_T_NAME, v->name);
    rpc_put_str(e, RPC_T_ID, v->id);
    if (reset_all)
        rpc_put_u64(e, RPC_T_FLAGS, 1);
}

/* Commits e (freeing it); prints the failure. 0 or 1. */
static int commit(struct mgmt *m, struct rpc_buf *e, const char *what, FILE *out)
{
    char err[512];
    int rc = mgmt_commit(m, e, err, sizeof(err));
    rpc_buf_free(e);
    if (rc < 0) {
        fprintf(out, "%s: failed: %s\n", what, err);
        return 1;
    }
    return 0;
}

/* Validates one pair into norm (and *name, the name to store it under);
 * on failure prints its line. 0 or 1. */
static int check_pair(const char *key, const char *value, const char **name, char *norm,
                      size_t normlen, FILE *out)
{
    char err[1024], resolved[1024];
    *name = opt_canonical(key);
    if (opt_find(key) && (strcmp(*name, "auth.allow") == 0 || strcmp(*name, "auth.reject") == 0)) {
        if (mgmt_resolve_addr_list(*name, value, resolved, sizeof(resolved), err, sizeof(err)) <
            0) {
            fprintf(out, "volume set: failed: %s\n", err);
            return 1;
        }
        value = resolved;
    }
    if (opt_validate(key, value, norm, normlen, err, sizeof(err)) < 0) {
        fprintf(out, "volume set: failed: %s\n", err);
        return 1;
    }
    return 0;
}

/* `volume set all NAME VALUE ...`: options of the whole pool. */
static int set_all(struct mgmt *m, int argc, char **argv, FILE *out)
{
    struct rpc_buf e;
    int bad = 0;
    rpc_buf_init(&e);
    rpc_put_u64(&e, RPC_T_OP, MGMT_E_POOL_OPTS);
    for (int i = 3; i + 1 < argc; i += 2) {
        char norm[1024];
        const char *name;
        const struct opt_def *d = opt_find(argv[i]);
        if (d && !d->pool) {
            fprintf(out,
                    "volume set: failed: Not a valid option for all volumes: %s (set it per "
                    "volume)\n",
                    argv[i]);
            bad = 1;
            continue;
        }
        if (check_pair(argv[i], argv[i + 1], &name, norm, sizeof(norm), out)) {
            bad = 1;
            continue;
        }
        put_option(&e, name, norm);
    }
    if (bad) {
        rpc_buf_free(&e);
        return 1;
    }
    if (commit(m, &e, "volume set", out))
        return 1;
    fprintf(out, "volume set: success\n");
    return 0;
}

/* cluster.quorum-count against the volume (1 to its replica count), and a
 * fixed quorum-type with a count, once every pair of the command is known;
 * 0 or 1 with the line printed. */
static int check_quorum(const struct mgmt_vol *v, int argc, char **argv, FILE *out)
{
    const char *type = opt_value(&v->opts, "cluster.quorum-type");
    const char *count = opt_value(&v->opts, "cluster.quorum-count");
    int set_type = 0, set_count = 0;
    for (int i = 3; i + 1 < argc; i += 2)
        if (strcmp(opt_canonical(argv[i]), "cluster.quorum-type") == 0) {
            type = argv[i + 1];
            set_type = 1;
        } else if (strcmp(opt_canonical(argv[i]), "cluster.quorum-count") == 0) {
            count = argv[i + 1];
            set_count = 1;
        }
    int replica = v->replica > 1 ? v->replica : 1;
    long c = strtol(count, NULL, 10);
    if (set_count && (c < 1 || c > replica)) {
        fprintf(out,
                "volume set: failed: %s is not a valid cluster.quorum-count for volume %s: it "
                "must be 1 to its replica count, %d\n",
                count, v->name, replica);
        return 1;
    }
    if (set_type && strcasecmp(type, "fixed") == 0 && c < 1) {
        fprintf(out,
                "volume set: failed: cluster.quorum-type fixed needs cluster.quorum-count (1 to "
                "%d): set both, e.g. `volume set %s cluster.quorum-type fixed "
                "cluster.quorum-count %d`\n",
                replica, v->name, replica / 2 + 1);
        return 1;
    }
    return 0;
}

int mgmt_cmd_set(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc < 5 || (argc - 3) % 2 != 0)
        return 2;
    if (strcmp(argv[2], "all") == 0)
        return set_all(m, argc, argv, out);
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "volume set: failed: Volume %s does not exist\n", argv[2]);
        return 1;
    }
    /* Every pair is checked and every bad one reported, one line each, before
     * anything is set: a pasted list of twenty options with two wrong says
     * both at once, and sets none. */
    struct rpc_buf e;
    int bad = 0;
    opts_entry(&e, v, 0);
    for (int i = 3; i + 1 < argc; i += 2) {
        /* room for features.quota-limits' list */
        char norm[16384], err[512];
        if (strcmp(argv[i], "group") == 0) {
            const struct group *g = groups;
            while (g->name && strcmp(g->name, argv[i + 1]) != 0)
                g++;
            if (!g->name) {
                fprintf(out,
                        "volume set: failed: Unable to open file '%s'. Error: No such file or "
                        "directory (groups: virt, distributed-virt, metadata-cache, nl-cache, "
                        "db-workload, small-file)\n",
                        argv[i + 1]);
                bad = 1;
                continue;
            }
            for (int k = 0; g->kv[k]; k += 2) {
                if (opt_validate(g->kv[k], g->kv[k + 1], norm, sizeof(norm), err, sizeof(err)) <
                    0) {
                    fprintf(out, "volume set: failed: group %s: %s\n", g->name, err);
                    bad = 1;
                    continue;
                }
                put_option(&e, g->kv[k], norm);
            }
            continue;
        }
        const char *name;
        const struct opt_def *d = opt_find(argv[i]);
        if (d && d->pool) {
            fprintf(out,
                    "volume set: failed: Not a valid option for single volume: %s is set for the "
                    "whole pool (volume set all %s VALUE)\n",
                    argv[i], d->name);
            bad = 1;
            continue;
        }
        if (check_pair(argv[i], argv[i + 1], &name, norm, sizeof(norm), out)) {
            bad = 1;
            continue;
        }
        put_option(&e, name, norm);
    }
    if (!bad)
        bad = check_quorum(v, argc, argv, out);
    if (bad) {
        rpc_buf_free(&e);
        return 1;
    }
    if (commit(m, &e, "volume set", out))
        return 1;
    for (int i = 3; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "group") == 0)
            log_info("volume %s: option group %s", v->name, argv[i + 1]);
        else
            log_info("volume %s: %s set to %s", v->name, argv[i], argv[i + 1]);
    fprintf(out, "volume set: success\n");
    return 0;
}

int mgmt_cmd_reset(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc < 3 || argc > 5)
        return 2;
    const char *key = argc >= 4 ? argv[3] : "all";
    if (argc == 5 && strcmp(argv[4], "force") != 0)
        return 2;
    if (strcmp(argv[2], "all") == 0) {
        const struct opt_def *d = opt_find(key);
        if (!d || !d->pool) {
            fprintf(out, "volume reset: failed: `volume reset all` takes an option of the whole "
                         "pool (cluster.server-quorum-ratio)\n");
            return 1;
        }
        struct rpc_buf e;
        rpc_buf_init(&e);
        rpc_put_u64(&e, RPC_T_OP, MGMT_E_POOL_OPTS);
        put_option(&e, d->name, NULL);
        if (commit(m, &e, "volume reset", out))
            return 1;
        fprintf(out, "volume reset: success: reset volume successful\n");
        return 0;
    }
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "volume reset: failed: Volume %s does not exist\n", argv[2]);
        return 1;
    }
    struct rpc_buf e;
    if (strcmp(key, "all") == 0) {
        opts_entry(&e, v, 1);
    } else {
        if (!opt_find(key)) {
            fprintf(out, "volume reset: failed: option : %s does not exist\n", key);
            return 1;
        }
        opts_entry(&e, v, 0);
        put_option(&e, opt_canonical(key), NULL);
    }
    if (commit(m, &e, "volume reset", out))
        return 1;
    log_info("volume %s: reset %s", argv[2], key);
    fprintf(out, "volume reset: success: reset volume successful\n");
    return 0;
}

int mgmt_cmd_get(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc != 4)
        return 2;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v && strcmp(argv[2], "all") == 0) {
        /* the pool's own options */
        fprintf(out, "%-40s%-40s\n%-40s%-40s\n", "Option", "Value", "------", "-----");
        for (const struct opt_def *d = opt_table; d->name; d++)
            if (d->pool &&
                (strcmp(argv[3], "all") == 0 || strcmp(opt_canonical(argv[3]), d->name) == 0)) {
                const char *val = opt_set_get(&m->pool_opts, d->name);
                fprintf(out, "%-40s%s\n", d->name, val ? val : "(empty: more than half) (DEFAULT)");
            }
        return 0;
    }
    if (!v) {
        fprintf(out, "volume get option: failed: Volume %s does not exist\n", argv[2]);
        return 1;
    }
    const char *key = argv[3];
    if (strcmp(key, "all") != 0 && !opt_find(key)) {
        fprintf(out, "volume get option: failed: option : %s does not exist\n", key);
        return 1;
    }
    /* The name column fits the longest name, with a space after it. */
    int w = 40;
    for (const struct opt_def *d = opt_table; d->name; d++)
        if ((int)strlen(d->name) + 1 > w)
            w = (int)strlen(d->name) + 1;
    const char *want = opt_canonical(key);
    fprintf(out, "%-*s%-40s\n", w, "Option", "Value");
    fprintf(out, "%-*s%-40s\n", w, "------", "-----");
    for (const struct opt_def *d = opt_table; d->name; d++)
        if (strcmp(key, "all") == 0 || strcmp(want, d->name) == 0) {
            const char *val = opt_value(&v->opts, d->name);
            fprintf(out, "%-*s%s%s", w, d->name, *val ? val : "(empty)",
                    opt_set_get(&v->opts, d->name) ? "" : " (DEFAULT)");
            if (d->no_effect)
                fprintf(out, " (no effect in Cairn: %s)", d->help);
            fputc('\n', out);
        }
    /* the administrator's own user.* keys, as set */
    for (size_t i = 0; i < v->opts.n; i++) {
        const char *name = v->opts.kv[i].name;
        if (strncmp(name, "user.", 5) == 0 && (strcmp(key, "all") == 0 || strcmp(key, name) == 0))
            fprintf(out, "%-*s%s\n", w, name,
                    *v->opts.kv[i].value ? v->opts.kv[i].value : "(empty)");
    }
    if (strncmp(key, "user.", 5) == 0 && !opt_set_get(&v->opts, key))
        fprintf(out, "%-*s(empty) (DEFAULT)\n", w, key);
    return 0;
}
