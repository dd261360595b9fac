/* volume start, stop and delete. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/log.h"
#include "pool.h"

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
int mgmt_check_brick_dir(const struct mgmt_vol *v, const struct mgmt_brick *b, char *err,
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

/* An entry naming volume v (kind, NAME, ID). */
static void vol_entry(struct rpc_buf *e, enum mgmt_entry_kind kind, const struct mgmt_vol *v)
{
    rpc_buf_init(e);
    rpc_put_u64(e, RPC_T_OP, kind);
    rpc_put_str(e, RPC_T_NAME, v->name);
    rpc_put_str(e, RPC_T_ID, v->id);
}

/* Commits status st for volume name; 0 or -errno with err. */
static int set_status(struct mgmt *m, const char *name, enum mgmt_vol_status st, struct rpc_buf *e,
                      char *err, size_t errlen)
{
    rpc_put_u64(e, RPC_T_MODE, st);
    int rc = mgmt_commit(m, e, err, errlen);
    rpc_buf_free(e);
    return rc;
}

int mgmt_cmd_start(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int force, rc;
    char err[2 * PATH_MAX + 512], name[MGMT_VOLNAME_MAX + 1];
    struct rpc_buf e;
    struct mgmt_vol *v = target(m, argc, argv, out, &force, &rc);
    if (!v)
        return rc;
    snprintf(name, sizeof(name), "%s", v->name);
    if (v->status == MGMT_VOL_STARTED && !force) {
        fprintf(out, "volume start: %s: failed: Volume %s already started\n", name, name);
        return 1;
    }
    enum mgmt_vol_status old = v->status;
    /* Every owner checks its bricks and names their ports first; the start
     * then commits everywhere at once, and each owner spawns its bricks. */
    vol_entry(&e, MGMT_E_VOL_STATUS, v);
    if ((rc = mgmt_prepare_start_entry(m, name, force, &e, err, sizeof(err))) < 0) {
        rpc_buf_free(&e);
        fprintf(out, "volume start: %s: failed: %s\n", name, err);
        return 1;
    }
    if ((rc = set_status(m, name, MGMT_VOL_STARTED, &e, err, sizeof(err))) < 0) {
        fprintf(out, "volume start: %s: failed: %s\n", name, err);
        return 1;
    }
    uint64_t gen = m->gen;
    if ((rc = mgmt_owners_sync(m, name, gen, force, err, sizeof(err))) < 0 && !force) {
        char why[256];
        if ((v = mgmt_vol_find(m, name)) && old != MGMT_VOL_STARTED) {
            vol_entry(&e, MGMT_E_VOL_STATUS, v);
            if (set_status(m, name, old, &e, why, sizeof(why)) == 0)
                mgmt_owners_sync(m, name, m->gen, 1, why, sizeof(why));
        }
        fprintf(out, "volume start: %s: failed: %s\n", name, err);
        return 1;
    }
    log_info("started volume %s", name);
    fprintf(out, "volume start: %s: success\n", name);
    return 0;
}

int mgmt_cmd_stop(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int force, rc;
    char err[1024], name[MGMT_VOLNAME_MAX + 1];
    struct rpc_buf e;
    struct mgmt_vol *v = target(m, argc, argv, out, &force, &rc);
    if (!v)
        return rc;
    snprintf(name, sizeof(name), "%s", v->name);
    if (v->status != MGMT_VOL_STARTED && !force) {
        fprintf(out, "volume stop: %s: failed: Volume %s is not in the started state\n", name,
                name);
        return 1;
    }
    /* Committed first: no server restarts the bricks of a volume being
     * stopped, even if this one dies in the middle. */
    vol_entry(&e, MGMT_E_VOL_STATUS, v);
    if ((rc = set_status(m, name, MGMT_VOL_STOPPED, &e, err, sizeof(err))) < 0) {
        fprintf(out, "volume stop: %s: failed: %s\n", name, err);
        return 1;
    }
    if (mgmt_owners_sync(m, name, m->gen, force, err, sizeof(err)) < 0)
        log_warn("volume %s stopped, but: %s", name, err);
    log_info("stopped volume %s", name);
    fprintf(out, "volume stop: %s: success\n", name);
    return 0;
}

int mgmt_cmd_delete(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int force, rc;
    char err[1024], name[MGMT_VOLNAME_MAX + 1];
    if (argc != 3)
        return 2;
    struct mgmt_vol *v = target(m, argc, argv, out, &force, &rc);
    if (!v)
        return rc;
    snprintf(name, sizeof(name), "%s", v->name);
    if (v->status == MGMT_VOL_STARTED) {
        fprintf(out,
                "volume delete: %s: failed: Volume %s has been started.Volume needs to be "
                "stopped before deletion.\n",
                name, name);
        return 1;
    }
    struct rpc_buf e;
    vol_entry(&e, MGMT_E_VOL_DELETE, v);
    rc = mgmt_commit(m, &e, err, sizeof(err));
    rpc_buf_free(&e);
    if (rc < 0) {
        fprintf(out, "volume delete: %s: failed: %s\n", name, err);
        return 1;
    }
    fprintf(out, "volume delete: %s: success\n", name);
    return 0;
}
