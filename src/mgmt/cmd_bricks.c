/* volume replace-brick, reset-brick, add-brick and remove-brick: a volume's
 * bricks change while it is in use (docs/elastic.md). Each command checks the new
 * bricks (their servers check the directories), commits the new brick list
 * as one entry (MGMT_E_VOL_BRICKS: every server swaps the list, the new
 * bricks' owners prepare them as copies to fill), then, on a started
 * volume, starts the new bricks as `volume start force` would: their ports
 * are named in a status entry, so the layout every client fetches names
 * them. Mounted clients adopt the list (client/stack.c); heal fills the new
 * copies, which accuse themselves until it has. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "elastic.h"
#include "pool.h"

/* Prints GlusterFS's failure line and returns 1. */
static int failed(FILE *out, const char *verb, const char *fmt, const char *why)
{
    fprintf(out, "volume %s: failed: ", verb);
    fprintf(out, fmt, why);
    fputc('\n', out);
    return 1;
}

/* Checks brick arg as a new copy on its server (mode: MGMT_CHECK_FILL or
 * MGMT_CHECK_RESET); fills b's host and path. 0, or -errno with err. */
static int check_new(struct mgmt *m, const char *volname, const char *arg, int mode,
                     struct mgmt_brick *b, char *err, size_t errlen)
{
    memset(b, 0, sizeof(*b));
    if (mgmt_brick_split(arg, b) < 0) {
        snprintf(err, errlen, "wrong brick type: %s, use <HOSTNAME>:<export-dir-abs-path>", arg);
        return -EINVAL;
    }
    int local = mgmt_host_is_local(m, b->host);
    struct mgmt_peer *owner = m->n_peers ? mgmt_peer_for_host(m, b->host) : NULL;
    if (local < 0 && !owner) {
        snprintf(err, errlen, "Host %s cannot be resolved", b->host);
        return -EINVAL;
    }
    if (local <= 0 && !owner) {
        snprintf(err, errlen, "Host %s is not in 'Peer in Cluster' state", b->host);
        return -EINVAL;
    }
    char *paths[1] = {b->path};
    char uuid[GFID_STRLEN] = "";
    if (owner)
        snprintf(uuid, sizeof(uuid), "%s", owner->uuid);
    char why[1024];
    int rc =
        mgmt_owner_check_bricks(m, owner ? uuid : NULL, volname, mode, 1, paths, why, sizeof(why));
    if (rc < 0)
        snprintf(err, errlen, "%s: %s", b->host, why);
    return rc;
}

/* Commits nv as volume name's brick list, then, when start is set, starts
 * its new bricks if the volume is started. 0, or -errno with err. */
static int commit_list(struct mgmt *m, struct mgmt_vol *nv, int start, char *err, size_t errlen)
{
    char name[MGMT_VOLNAME_MAX + 1];
    snprintf(name, sizeof(name), "%s", nv->name);
    char *text = mgmt_vol_format(nv);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct rpc_buf e;
    rpc_buf_init(&e);
    rpc_put_u64(&e, RPC_T_OP, MGMT_E_VOL_BRICKS);
    rpc_put_str(&e, RPC_T_NAME, nv->name);
    rpc_put_str(&e, RPC_T_ID, nv->id);
    rpc_put_str(&e, RPC_T_DATA, text);
    free(text);
    int rc = mgmt_commit(m, &e, err, errlen);
    rpc_buf_free(&e);
    if (rc < 0)
        return rc;
    struct mgmt_vol *v = mgmt_vol_find(m, name);
    if (!start || !v || v->status != MGMT_VOL_STARTED)
        return 0;
    /* As `volume start force`: a server that is down (the one whose brick
     * was replaced, often) starts its bricks when it is back. */
    rpc_buf_init(&e);
    rpc_put_u64(&e, RPC_T_OP, MGMT_E_VOL_STATUS);
    rpc_put_str(&e, RPC_T_NAME, v->name);
    rpc_put_str(&e, RPC_T_ID, v->id);
    if ((rc = mgmt_prepare_start_entry(m, name, 1, &e, err, errlen)) == 0) {
        rpc_put_u64(&e, RPC_T_MODE, MGMT_VOL_STARTED);
        rc = mgmt_commit(m, &e, err, errlen);
    }
    rpc_buf_free(&e);
    if (rc == 0 && mgmt_owners_sync(m, name, m->gen, 1, err, errlen) < 0)
        log_warn("volume %s: new bricks committed, but: %s", name, err);
    return rc;
}

/* A copy of v with *list (n bricks; taken, *list set to NULL) as its
 * bricks, or NULL with err. */
static struct mgmt_vol *with_bricks(const struct mgmt_vol *v, struct mgmt_brick **list, int n,
                                    char *err, size_t errlen)
{
    struct mgmt_vol *nv = mgmt_vol_dup(v);
    if (!nv) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    free(nv->bricks);
    nv->bricks = *list;
    nv->n_bricks = n;
    *list = NULL;
    return nv;
}

/* Commits v with *list (n bricks; taken, *list set to NULL) as its new
 * shape: replica (0: none) and arbiter. start as commit_list's. 0 or
 * -errno with err. */
static int commit_shape(struct mgmt *m, const struct mgmt_vol *v, struct mgmt_brick **list, int n,
                        int replica, int arbiter, int start, char *err, size_t errlen)
{
    struct mgmt_vol *nv = with_bricks(v, list, n, err, errlen);
    if (!nv)
        return -ENOMEM;
    nv->replica = replica;
    nv->arbiter = arbiter;
    int rc = commit_list(m, nv, start, err, errlen);
    mgmt_vol_free(nv);
    return rc;
}

/* Commits v with *list (n bricks; taken) as its bricks and *place (taken)
 * as its placement, the one before kept as the previous placement until a
 * rebalance moved the files; starts the new bricks. 0 or -errno with err. */
static int commit_sets(struct mgmt *m, const struct mgmt_vol *v, struct mgmt_brick **list, int n,
                       struct cl_place **place, char *err, size_t errlen)
{
    struct mgmt_vol *nv = with_bricks(v, list, n, err, errlen);
    if (!nv)
        return -ENOMEM;
    free(nv->place_prev);
    nv->place_prev = nv->place;
    nv->place = *place;
    *place = NULL;
    int rc = commit_list(m, nv, 1, err, errlen);
    mgmt_vol_free(nv);
    return rc;
}

/* volume replace-brick VOL OLD NEW commit force */
static int replace_brick(struct mgmt *m, int argc, char **argv, FILE *out)
{
    const char *verb = "replace-brick";
    char err[2 * PATH_MAX + 1024];
    if (argc != 7 || strcmp(argv[5], "commit") != 0 || strcmp(argv[6], "force") != 0)
        return argc == 6 && strcmp(argv[5], "commit") == 0
                   ? failed(out, verb, "%s",
                            "replace-brick commit: only 'commit force' is supported (the new "
                            "brick is filled by heal)")
                   : 2;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        snprintf(err, sizeof(err), "Volume %s does not exist", argv[2]);
        return failed(out, verb, "%s", err);
    }
    struct mgmt_brick old, nb;
    int index;
    if (mgmt_brick_split(argv[3], &old) < 0) {
        snprintf(err, sizeof(err), "wrong brick type: %s, use <HOSTNAME>:<export-dir-abs-path>",
                 argv[3]);
        return failed(out, verb, "%s", err);
    }
    memset(&nb, 0, sizeof(nb));
    if (mgmt_brick_split(argv[4], &nb) < 0) {
        snprintf(err, sizeof(err), "wrong brick type: %s, use <HOSTNAME>:<export-dir-abs-path>",
                 argv[4]);
        return failed(out, verb, "%s", err);
    }
    if (mgmt_elastic_replace(m->vols, v, old.host, old.path, &nb, &index, err, sizeof(err)) < 0)
        return failed(out, verb, "%s", err);
    if (check_new(m, v->name, argv[4], MGMT_CHECK_FILL, &nb, err, sizeof(err)) < 0)
        return failed(out, verb, "%s", err);
    if (!(v = mgmt_vol_find(m, argv[2]))) /* the lock was let go meanwhile */
        return failed(out, verb, "Volume %s does not exist", argv[2]);
    struct mgmt_vol *nv = mgmt_vol_dup(v);
    if (!nv)
        return failed(out, verb, "%s", "out of memory");
    if (index >= nv->n_bricks ||
        mgmt_elastic_find(nv, old.host, old.path) != index) { /* changed meanwhile */
        mgmt_vol_free(nv);
        return failed(out, verb, "%s", "the volume's bricks changed meanwhile; try again");
    }
    struct mgmt_brick *b = &nv->bricks[index];
    snprintf(b->host, sizeof(b->host), "%s", nb.host);
    snprintf(b->path, sizeof(b->path), "%s", nb.path);
    b->port = 0;
    gfid_t g;
    gfid_generate(&g);
    gfid_format(&g, b->id);
    if (strcmp(nv->reset_id, v->bricks[index].id) == 0)
        nv->reset_id[0] = 0;
    int rc = commit_list(m, nv, 1, err, sizeof(err));
    mgmt_vol_free(nv);
    if (rc < 0)
        return failed(out, verb, "%s", err);
    log_info("volume %s: brick %s replaced by %s", argv[2], argv[3], argv[4]);
    fprintf(out,
            "volume replace-brick: success: replace-brick commit force operation successful\n");
    return 0;
}

/* volume reset-brick VOL BRICK start | VOL BRICK BRICK commit [force] */
static int reset_brick(struct mgmt *m, int argc, char **argv, FILE *out)
{
    const char *verb = "reset-brick";
    char err[2 * PATH_MAX + 1024];
    int start = argc == 5 && strcmp(argv[4], "start") == 0;
    int commit = (argc == 6 || argc == 7) && strcmp(argv[5], "commit") == 0 &&
                 (argc == 6 || strcmp(argv[6], "force") == 0);
    if (!start && !commit)
        return 2;
    int force = argc == 7;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        snprintf(err, sizeof(err), "Volume %s does not exist", argv[2]);
        return failed(out, verb, "%s", err);
    }
    struct mgmt_brick src, dst;
    if (mgmt_brick_split(argv[3], &src) < 0) {
        snprintf(err, sizeof(err), "wrong brick type: %s, use <HOSTNAME>:<export-dir-abs-path>",
                 argv[3]);
        return failed(out, verb, "%s", err);
    }
    int index = mgmt_elastic_find(v, src.host, src.path);
    if (index < 0) {
        snprintf(err, sizeof(err), "brick: %s:%s does not exist in volume: %s", src.host, src.path,
                 v->name);
        return failed(out, verb, "%s", err);
    }
    if (v->replica < 2)
        return failed(out, verb, "%s",
                      "reset-brick on a distribute volume would lose the brick's files: there "
                      "is no other copy to heal it from");
    if (commit) {
        if (mgmt_brick_split(argv[4], &dst) < 0 || strcmp(dst.host, src.host) != 0 ||
            strcmp(dst.path, src.path) != 0)
            return failed(out, verb, "%s",
                          "When destination brick is new, please use gluster volume "
                          "replace-brick <volname> <src-brick> <dst-brick> commit force");
        if (strcmp(v->reset_id, v->bricks[index].id) != 0)
            return failed(out, verb, "%s",
                          "reset-brick start operation has not been executed on this brick: run "
                          "volume reset-brick VOLNAME BRICK start first");
        if (check_new(m, v->name, argv[4], MGMT_CHECK_RESET, &dst, err, sizeof(err)) < 0)
            return failed(out, verb, "%s", err);
        (void)force; /* the directory is checked alike: empty, its marker aside */
    } else if (v->reset_id[0]) {
        int busy = strcmp(v->reset_id, v->bricks[index].id) == 0;
        return failed(out, verb, "%s",
                      busy ? "reset-brick start was already run on this brick: commit it"
                           : "another brick of the volume is being reset: commit it first");
    }
    if (!(v = mgmt_vol_find(m, argv[2])) || mgmt_elastic_find(v, src.host, src.path) != index)
        return failed(out, verb, "%s", "the volume's bricks changed meanwhile; try again");
    struct mgmt_vol *nv = mgmt_vol_dup(v);
    if (!nv)
        return failed(out, verb, "%s", "out of memory");
    if (start) {
        snprintf(nv->reset_id, sizeof(nv->reset_id), "%s", v->bricks[index].id);
    } else {
        /* the same directory as a new brick: another id, so every server
         * and client sees a new copy there */
        gfid_t g;
        gfid_generate(&g);
        gfid_format(&g, nv->bricks[index].id);
        nv->bricks[index].port = 0;
        nv->reset_id[0] = 0;
    }
    int rc = commit_list(m, nv, 1, err, sizeof(err));
    mgmt_vol_free(nv);
    if (rc < 0)
        return failed(out, verb, "%s", err);
    log_info("volume %s: reset-brick %s %s", argv[2], argv[3], start ? "start" : "commit");
    fprintf(out, "volume reset-brick: success: reset-brick %s operation successful\n",
            start   ? "start"
            : force ? "commit force"
                    : "commit");
    return 0;
}

/* volume add-brick VOL [replica N [arbiter 1]] BRICK... [force] */
static int add_brick(struct mgmt *m, int argc, char **argv, FILE *out)
{
    const char *verb = "add-brick";
    char err[2 * PATH_MAX + 1024];
    int first = 3, last = argc, replica = -1, arbiter = 0;
    if (argc < 4)
        return 2;
    if (strcmp(argv[last - 1], "force") == 0)
        last--;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        snprintf(err, sizeof(err), "Volume %s does not exist", argv[2]);
        return failed(out, verb, "%s", err);
    }
    if (v->redundancy)
        return failed(out, verb, "%s",
                      "dispersed volumes do not grow yet (docs/disperse.md): create a new volume");
    if (first < last && strcmp(argv[first], "replica") == 0) {
        char *end;
        long n = first + 1 < last ? strtol(argv[first + 1], &end, 10) : 0;
        if (first + 1 >= last || *end || end == argv[first + 1] || n < 1 || n > 16)
            return failed(out, verb, "%s", "replica count must be a number from 2 to 16");
        replica = (int)n;
        first += 2;
        if (first < last && strcmp(argv[first], "arbiter") == 0) {
            if (first + 1 >= last || strcmp(argv[first + 1], "1") != 0)
                return failed(out, verb, "%s", "arbiter count must be 1");
            arbiter = 1;
            first += 2;
        }
    }
    if (first >= last)
        return 2;
    int n = last - first;
    struct mgmt_brick *nb = calloc((size_t)n, sizeof(*nb)), *list = NULL;
    int n_list = 0, rc;
    if (!nb)
        return failed(out, verb, "%s", "out of memory");
    for (int i = 0; i < n; i++)
        if (mgmt_brick_split(argv[first + i], &nb[i]) < 0) {
            snprintf(err, sizeof(err), "wrong brick type: %s, use <HOSTNAME>:<export-dir-abs-path>",
                     argv[first + i]);
            goto fail;
        }
    int cur = v->replica > 1 ? v->replica : 1;
    /* Without a replica count (or, on a volume with a placement, with the
     * current one): whole new sets (elastic.c refuses volumes of ranges). */
    int grow = replica < 0 || (replica == cur && !arbiter && v->place);
    struct cl_place *place = NULL;
    if ((grow ? mgmt_elastic_grow(m->vols, v, nb, n, &list, &n_list, &place, err, sizeof(err))
              : mgmt_elastic_raise(m->vols, v, replica, arbiter, nb, n, &list, &n_list, err,
                                   sizeof(err))) < 0)
        goto fail;
    free(list);
    free(place);
    list = NULL;
    place = NULL;
    for (int i = 0; i < n; i++)
        if (check_new(m, argv[2], argv[first + i], MGMT_CHECK_FILL, &nb[i], err, sizeof(err)) < 0)
            goto fail;
    for (int i = 0; i < n; i++) {
        gfid_t g;
        gfid_generate(&g);
        gfid_format(&g, nb[i].id);
    }
    /* again: the lock was let go while the servers checked */
    if (!(v = mgmt_vol_find(m, argv[2]))) {
        snprintf(err, sizeof(err), "Volume %s does not exist", argv[2]);
        goto fail;
    }
    if (grow) {
        if (mgmt_elastic_grow(m->vols, v, nb, n, &list, &n_list, &place, err, sizeof(err)) < 0 ||
            (rc = commit_sets(m, v, &list, n_list, &place, err, sizeof(err))) < 0)
            goto fail;
        free(nb);
        log_info("volume %s: %d new distribute sets; rebalance to move files onto them", argv[2],
                 n / cur);
        fprintf(out, "volume add-brick: success\n");
        return 0;
    }
    if (mgmt_elastic_raise(m->vols, v, replica, arbiter, nb, n, &list, &n_list, err, sizeof(err)) <
        0)
        goto fail;
    if ((rc = commit_shape(m, v, &list, n_list, replica, arbiter, 1, err, sizeof(err))) < 0)
        goto fail;
    free(nb);
    log_info("volume %s: replica count raised to %d%s", argv[2], replica,
             arbiter ? " (with an arbiter)" : "");
    fprintf(out, "volume add-brick: success\n");
    return 0;
fail:
    free(list);
    free(place);
    free(nb);
    return failed(out, verb, "%s", err);
}

/* volume remove-brick VOL replica N BRICK... force: every replica set loses
 * one member. That no removed brick holds the only good copy of anything
 * (the set's heal info is clean, the bricks that stay are up) is checked by
 * the CLI, a client of the bricks (src/cli/shrink.c), before it asks; the
 * removed bricks are stopped by their servers (apply_bricks) and their
 * directories left as they are. */
static int remove_brick(struct mgmt *m, int argc, char **argv, FILE *out)
{
    const char *verb = "remove-brick commit force";
    char err[2 * PATH_MAX + 1024];
    int first = 3, last = argc - 1, replica = -1;
    if (argc < 4)
        return 2;
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        snprintf(err, sizeof(err), "Volume %s does not exist", argv[2]);
        return failed(out, verb, "%s", err);
    }
    if (v->redundancy)
        return failed(out, verb, "%s", "dispersed volumes do not shrink yet (docs/disperse.md)");
    if (strcmp(argv[last], "force") != 0)
        return failed(out, verb, "%s",
                      "only 'force' is supported (volume remove-brick VOL replica N BRICK... "
                      "force): it lowers the replica count and moves no files; start, commit "
                      "and status belong to removing whole sets, which needs a rebalance: not "
                      "supported yet");
    if (first < last && strcmp(argv[first], "replica") == 0) {
        char *end;
        long n = first + 1 < last ? strtol(argv[first + 1], &end, 10) : 0;
        if (first + 1 >= last || *end || end == argv[first + 1] || n < 1 || n > 16)
            return failed(out, verb, "%s", "replica count must be a number from 1 to 16");
        replica = (int)n;
        first += 2;
    }
    if (first >= last)
        return 2;
    int n = last - first;
    struct mgmt_brick *rb = calloc((size_t)n, sizeof(*rb)), *list = NULL;
    int n_list = 0;
    if (!rb)
        return failed(out, verb, "%s", "out of memory");
    for (int i = 0; i < n; i++)
        if (mgmt_brick_split(argv[first + i], &rb[i]) < 0) {
            snprintf(err, sizeof(err), "wrong brick type: %s, use <HOSTNAME>:<export-dir-abs-path>",
                     argv[first + i]);
            goto fail;
        }
    if (mgmt_elastic_lower(v, replica, rb, n, &list, &n_list, err, sizeof(err)) < 0)
        goto fail;
    /* nothing new to start */
    if (commit_shape(m, v, &list, n_list, replica > 1 ? replica : 0, 0, 0, err, sizeof(err)) < 0)
        goto fail;
    log_info("volume %s: replica count lowered to %d", argv[2], replica);
    fprintf(out, "volume %s: success\n", verb);
    fprintf(out, "Stopped and left out of the volume, their files left on disk as they are:");
    for (int i = 0; i < n; i++)
        fprintf(out, " %s:%s", rb[i].host, rb[i].path);
    fputc('\n', out);
    free(rb);
    return 0;
fail:
    free(list);
    free(rb);
    return failed(out, verb, "%s", err);
}

int mgmt_cmd_bricks(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (strcmp(argv[1], "remove-brick") == 0)
        return remove_brick(m, argc, argv, out);
    if (strcmp(argv[1], "replace-brick") == 0)
        return replace_brick(m, argc, argv, out);
    if (strcmp(argv[1], "reset-brick") == 0)
        return reset_brick(m, argc, argv, out);
    return add_brick(m, argc, argv, out);
}
