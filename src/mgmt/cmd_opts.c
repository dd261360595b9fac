/* volume set, get and reset. A change is validated in full, written to the
 * store, and only then made visible; live options are pushed to the running
 * bricks, others apply when the volume's bricks restart. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "mgmt.h"

/* Copies an option set (for rollback). */
static int opts_copy(const struct opt_set *from, struct opt_set *to)
{
    memset(to, 0, sizeof(*to));
    for (size_t i = 0; i < from->n; i++)
        if (opt_set_put(to, from->kv[i].name, from->kv[i].value) < 0) {
            opt_set_free(to);
            return -ENOMEM;
        }
    return 0;
}

/* Makes new the volume's options if the store takes them; on failure keeps
 * the old ones. Frees whichever set is not kept. */
static int commit(struct mgmt *m, struct mgmt_vol *v, struct opt_set *new, int live_changed,
                  const char *what, FILE *out)
{
    struct opt_set old = v->opts;
    v->opts = *new;
    int rc = mgmt_vol_save(m->workdir, v);
    if (rc < 0) {
        v->opts = old;
        opt_set_free(new);
        fprintf(out, "%s: failed: cannot write the volume store: %s\n", what, strerror(-rc));
        return 1;
    }
    opt_set_free(&old);
    if (live_changed && v->status == MGMT_VOL_STARTED)
        mgmt_bricks_reconfigure(m, v);
    return 0;
}

int mgmt_cmd_set(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc < 5 || (argc - 3) % 2 != 0)
        return 2;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "volume set: failed: Volume %s does not exist\n", argv[2]);
        return 1;
    }
    struct opt_set next;
    if (opts_copy(&v->opts, &next) < 0) {
        fprintf(out, "volume set: failed: out of memory\n");
        return 1;
    }
    int live = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
        char norm[1024], err[512];
        if (opt_validate(argv[i], argv[i + 1], norm, sizeof(norm), err, sizeof(err)) < 0) {
            fprintf(out, "volume set: failed: %s\n", err);
            opt_set_free(&next);
            return 1;
        }
        if (opt_set_put(&next, argv[i], norm) < 0) {
            fprintf(out, "volume set: failed: out of memory\n");
            opt_set_free(&next);
            return 1;
        }
        live |= opt_find(argv[i])->live;
        log_info("volume %s: %s set to %s", v->name, argv[i], norm);
    }
    if (commit(m, v, &next, live, "volume set", out))
        return 1;
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
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "volume reset: failed: Volume %s does not exist\n", argv[2]);
        return 1;
    }
    struct opt_set next = {0};
    int live = 0;
    if (strcmp(key, "all") == 0) {
        for (size_t i = 0; i < v->opts.n; i++) {
            const struct opt_def *d = opt_find(v->opts.kv[i].name);
            live |= d && d->live;
        }
    } else {
        const struct opt_def *d = opt_find(key);
        if (!d) {
            fprintf(out, "volume reset: failed: option : %s does not exist\n", key);
            return 1;
        }
        if (opts_copy(&v->opts, &next) < 0 || opt_set_put(&next, key, NULL) < 0) {
            opt_set_free(&next);
            fprintf(out, "volume reset: failed: out of memory\n");
            return 1;
        }
        live = d->live;
    }
    if (commit(m, v, &next, live, "volume reset", out))
        return 1;
    log_info("volume %s: reset %s", v->name, key);
    fprintf(out, "volume reset: success: reset volume successful\n");
    return 0;
}

int mgmt_cmd_get(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc != 4)
        return 2;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "volume get option: failed: Volume %s does not exist\n", argv[2]);
        return 1;
    }
    const char *key = argv[3];
    if (strcmp(key, "all") != 0 && !opt_find(key)) {
        fprintf(out, "volume get option: failed: option : %s does not exist\n", key);
        return 1;
    }
    fprintf(out, "%-40s%-40s\n", "Option", "Value");
    fprintf(out, "%-40s%-40s\n", "------", "-----");
    for (const struct opt_def *d = opt_table; d->name; d++)
        if (strcmp(key, "all") == 0 || strcmp(key, d->name) == 0) {
            const char *val = opt_value(&v->opts, d->name);
            fprintf(out, "%-40s%s%s\n", d->name, *val ? val : "(empty)",
                    opt_set_get(&v->opts, d->name) ? "" : " (DEFAULT)");
        }
    return 0;
}
