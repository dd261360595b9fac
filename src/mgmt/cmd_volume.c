/* volume start, stop and delete. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/log.h"
#include "mgmt.h"

/* Parses "volume WORD NAME [force]"; returns the volume, or NULL after
 * printing the failure (with *rc set to the exit status). */
static struct mgmt_vol *target(struct mgmt *m, int argc, char **argv, FILE *out, int *force,
                               int *rc)
{
    *rc = 2;
    *force = 0;
    if (argc < 3 || argc > 4)
        return NULL;
    if (argc == 4) {
        if (strcmp(argv[3], "force") != 0)
            return NULL;
        *force = 1;
    }
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    *rc = 1;
    if (!v)
        fprintf(out, "volume %s: %s: failed: Volume %s does not exist\n", argv[1], argv[2],
                argv[2]);
    return v;
}

/* A brick may only start where `volume create` left its marker: if the
 * brick's file system is not mounted, the empty mount point lacks it. */
static int check_brick_dir(const struct mgmt_vol *v, const struct mgmt_brick *b, char *err,
                           size_t errlen)
{
    struct stat st;
    char name[MGMT_VOLNAME_MAX + 1], id[64];
    if (stat(b->path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "Brick directory %s:%s is missing", b->host, b->path);
        return -ENOENT;
    }
    int rc = mgmt_brickinfo_read(b->path, name, sizeof(name), id, sizeof(id));
    if (rc < 0 || strcmp(id, v->id) != 0) {
        snprintf(err, errlen,
                 "Brick %s:%s does not carry the marker of volume %s (.cairn/brick.info): is its "
                 "file system mounted? Use 'force' to start anyway",
                 b->host, b->path, v->name);
        return -ENOENT;
    }
    return 0;
}

int mgmt_cmd_start(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int force, rc;
    char err[2 * PATH_MAX + 512];
    struct mgmt_vol *v = target(m, argc, argv, out, &force, &rc);
    if (!v)
        return rc;
    if (v->status == MGMT_VOL_STARTED && !force) {
        fprintf(out, "volume start: %s: failed: Volume %s already started\n", v->name, v->name);
        return 1;
    }
    for (int i = 0; i < v->n_bricks && !force; i++)
        if (check_brick_dir(v, &v->bricks[i], err, sizeof(err)) < 0) {
            fprintf(out, "volume start: %s: failed: %s\n", v->name, err);
            return 1;
        }
    enum mgmt_vol_status old = v->status;
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_brick *b = &v->bricks[i];
        b->backoff_ms = 0;
        b->retry_ms = 0;
        int src = mgmt_brick_spawn(m, v, b);
        if (src < 0 && !force) {
            char log[PATH_MAX + 64];
            mgmt_brick_log_path(m, b, log, sizeof(log));
            for (int j = 0; j < v->n_bricks; j++)
                if (old != MGMT_VOL_STARTED)
                    mgmt_brick_kill(m, &v->bricks[j]);
            if (src == -ENOENT)
                fprintf(out, "volume start: %s: failed: %s is missing or not executable\n", v->name,
                        m->brickd);
            else if (src == -EADDRINUSE)
                fprintf(out, "volume start: %s: failed: no free brick port in %u-%u\n", v->name,
                        m->port_min, m->port_max);
            else
                fprintf(out,
                        "volume start: %s: failed: Brick %s:%s did not start; see %s and the "
                        "cairnd log\n",
                        v->name, b->host, b->path, log);
            return 1;
        }
    }
    v->status = MGMT_VOL_STARTED;
    if ((rc = mgmt_vol_save(m->workdir, v)) < 0) {
        v->status = old;
        if (old != MGMT_VOL_STARTED)
            for (int i = 0; i < v->n_bricks; i++)
                mgmt_brick_kill(m, &v->bricks[i]);
        fprintf(out, "volume start: %s: failed: cannot write the volume store: %s\n", v->name,
                strerror(-rc));
        return 1;
    }
    log_info("started volume %s", v->name);
    fprintf(out, "volume start: %s: success\n", v->name);
    return 0;
}

int mgmt_cmd_stop(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int force, rc;
    struct mgmt_vol *v = target(m, argc, argv, out, &force, &rc);
    if (!v)
        return rc;
    if (v->status != MGMT_VOL_STARTED && !force) {
        fprintf(out, "volume stop: %s: failed: Volume %s is not in the started state\n", v->name,
                v->name);
        return 1;
    }
    enum mgmt_vol_status old = v->status;
    /* Saved first: if cairnd dies in the middle, it must not restart the
     * bricks of a volume being stopped. */
    v->status = MGMT_VOL_STOPPED;
    if ((rc = mgmt_vol_save(m->workdir, v)) < 0 && !force) {
        v->status = old;
        fprintf(out, "volume stop: %s: failed: cannot write the volume store: %s\n", v->name,
                strerror(-rc));
        return 1;
    }
    for (int i = 0; i < v->n_bricks; i++)
        mgmt_brick_kill(m, &v->bricks[i]);
    log_info("stopped volume %s", v->name);
    fprintf(out, "volume stop: %s: success\n", v->name);
    return 0;
}

int mgmt_cmd_delete(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int force, rc;
    if (argc != 3)
        return 2;
    struct mgmt_vol *v = target(m, argc, argv, out, &force, &rc);
    if (!v)
        return rc;
    if (v->status == MGMT_VOL_STARTED) {
        fprintf(out,
                "volume delete: %s: failed: Volume %s has been started.Volume needs to be "
                "stopped before deletion.\n",
                v->name, v->name);
        return 1;
    }
    if ((rc = mgmt_vol_remove(m->workdir, v->name)) < 0) {
        fprintf(out, "volume delete: %s: failed: cannot remove it from the volume store: %s\n",
                v->name, strerror(-rc));
        return 1;
    }
    for (int i = 0; i < v->n_bricks; i++)
        mgmt_brickinfo_remove(v->bricks[i].path, v->id);
    mgmt_vol_unlink(m, v);
    log_info("deleted volume %s (%s)", v->name, v->id);
    fprintf(out, "volume delete: %s: success\n", v->name);
    mgmt_vol_free(v);
    return 0;
}
