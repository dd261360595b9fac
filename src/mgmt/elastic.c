/* Elastic volumes: the new brick list of a volume whose bricks change while
 * it is in use (replace-brick, reset-brick, add-brick raising the replica
 * count; docs/elastic.md). Pure functions over the volume record: no I/O,
 * no state, unit-tested in tests/unit/test_mgmt_elastic.c. The commands
 * (cmd_bricks.c) check the new bricks' directories and commit the list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/distribute.h"
#include "elastic.h"

struct mgmt_vol *mgmt_vol_dup(const struct mgmt_vol *v)
{
    char *text = mgmt_vol_format(v);
    struct mgmt_vol *out = NULL;
    char err[256];
    if (text && mgmt_vol_parse(text, strlen(text), &out, err, sizeof(err)) < 0)
        out = NULL;
    free(text);
    if (out) {
        out->status = v->status;
        out->gen = v->gen;
    }
    return out;
}

int mgmt_elastic_find(const struct mgmt_vol *v, const char *host, const char *path)
{
    for (int i = 0; i < v->n_bricks; i++)
        if (strcmp(v->bricks[i].host, host) == 0 && strcmp(v->bricks[i].path, path) == 0)
            return i;
    return -1;
}

int mgmt_elastic_member(const struct mgmt_vol *v, int i)
{
    return v->replica > 1 ? i % v->replica : 0;
}

int mgmt_elastic_is_new(const struct mgmt_vol *old, const struct mgmt_brick *b)
{
    for (int i = 0; i < old->n_bricks; i++)
        if (strcmp(old->bricks[i].id, b->id) == 0)
            return 0;
    return 1;
}

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return code;                                                                               \
    } while (0)

/* Whether host:path is a brick of any volume (in) or the new list. */
static const char *taken_by(const struct mgmt_vol *vols, const char *host, const char *path)
{
    for (const struct mgmt_vol *o = vols; o; o = o->next)
        if (mgmt_elastic_find(o, host, path) >= 0)
            return o->name;
    return NULL;
}

int mgmt_elastic_replace(const struct mgmt_vol *vols, const struct mgmt_vol *v,
                         const char *old_host, const char *old_path, const struct mgmt_brick *nb,
                         int *index, char *err, size_t errlen)
{
    int i = mgmt_elastic_find(v, old_host, old_path);
    if (i < 0)
        FAIL(-ENOENT, "brick: %s:%s does not exist in volume: %s", old_host, old_path, v->name);
    if (v->replica < 2)
        FAIL(-EINVAL,
             "replace-brick commit force on a distribute volume (%s) would lose the brick's "
             "files: there is no other copy to heal the new brick from. Add a copy first "
             "(volume add-brick %s replica 2 BRICK...), then replace the brick",
             v->name, v->name);
    if (taken_by(vols, nb->host, nb->path) || mgmt_elastic_find(v, nb->host, nb->path) >= 0)
        FAIL(-EEXIST,
             "Brick: %s:%s not available. Brick may be containing or be contained by an "
             "existing brick.",
             nb->host, nb->path);
    *index = i;
    return 0;
}

/* Refuses new bricks that are in a volume already (or inside one) or
 * named twice. 0 or -EEXIST with err. */
static int check_new_bricks(const struct mgmt_vol *vols, const struct mgmt_brick *nb, int n,
                            char *err, size_t errlen)
{
    for (int k = 0; k < n; k++) {
        if (taken_by(vols, nb[k].host, nb[k].path))
            FAIL(-EEXIST,
                 "Brick: %s:%s not available. Brick may be containing or be contained by an "
                 "existing brick.",
                 nb[k].host, nb[k].path);
        for (int j = 0; j < k; j++)
            if (strcmp(nb[j].host, nb[k].host) == 0 && strcmp(nb[j].path, nb[k].path) == 0)
                FAIL(-EEXIST, "Found duplicate exports %s:%s", nb[k].host, nb[k].path);
    }
    return 0;
}

int mgmt_elastic_raise(const struct mgmt_vol *vols, const struct mgmt_vol *v, int replica,
                       int arbiter, const struct mgmt_brick *nb, int n, struct mgmt_brick **out,
                       int *n_out, char *err, size_t errlen)
{
    int cur = v->replica > 1 ? v->replica : 1;
    int sets = v->n_bricks / cur;
    if (replica < 0)
        FAIL(-EINVAL,
             "Adding bricks without raising the replica count adds distribute sets, which "
             "needs a rebalance to move files onto them: not supported yet. To add copies, "
             "give the new count: volume add-brick %s replica %d BRICK...",
             v->name, cur + 1);
    if (replica <= cur)
        FAIL(-EINVAL,
             "Volume %s has replica count %d: add-brick can only raise it (the given replica "
             "count %d is not above it)",
             v->name, cur, replica);
    if (v->arbiter)
        FAIL(-EINVAL, "Volume %s already has an arbiter: its replica count cannot be raised",
             v->name);
    if (arbiter && (cur != 2 || replica != 3))
        FAIL(-EINVAL, "For arbiter configuration, replica count must be 3 (2 data bricks and "
                      "1 arbiter): add an arbiter to a replica 2 volume");
    if (replica > 16)
        FAIL(-EINVAL, "replica count must be a number from 2 to 16");
    int per = replica - cur;
    if (n != sets * per)
        FAIL(-EINVAL, "Incorrect number of bricks supplied %d with count %d", n, replica);
    int rc = check_new_bricks(vols, nb, n, err, errlen);
    if (rc < 0)
        return rc;
    struct mgmt_brick *b = calloc((size_t)(sets * replica), sizeof(*b));
    if (!b)
        FAIL(-ENOMEM, "out of memory");
    /* Set s keeps its members 0..cur-1 and gains the new bricks
     * s*per .. s*per+per-1 after them (an arbiter last, as in a create). */
    for (int s = 0; s < sets; s++) {
        for (int j = 0; j < cur; j++)
            b[s * replica + j] = v->bricks[s * cur + j];
        for (int j = 0; j < per; j++)
            b[s * replica + cur + j] = nb[s * per + j];
    }
    *out = b;
    *n_out = sets * replica;
    return 0;
}

int mgmt_elastic_grow(const struct mgmt_vol *vols, const struct mgmt_vol *v,
                      const struct mgmt_brick *nb, int n, struct mgmt_brick **out, int *n_out,
                      struct cl_place **place, char *err, size_t errlen)
{
    int set = v->replica > 1 ? v->replica : 1;
    if (!v->place)
        FAIL(-EINVAL,
             "Volume %s places files by hash ranges (it was made with cluster.placement "
             "ranges): adding distribute sets to it needs a rebalance of every directory's "
             "layout, which Cairn does not do. Add copies with add-brick %s replica %d "
             "BRICK..., or make a volume with cluster.placement rendezvous",
             v->name, v->name, set + 1);
    if (v->place_prev)
        FAIL(-EBUSY,
             "Volume %s: files may still be where the placement before the last add-brick put "
             "them, until a rebalance has moved them (not built yet): one growth at a time",
             v->name);
    if (n <= 0 || n % set)
        FAIL(-EINVAL,
             "Incorrect number of bricks supplied %d for volume %s: a multiple of its replica "
             "count %d (whole sets)",
             n, v->name, set);
    int rc = check_new_bricks(vols, nb, n, err, errlen);
    if (rc < 0)
        return rc;
    rc = mgmt_place_grow(v->place, n / set, place);
    if (rc == -E2BIG)
        FAIL(rc, "Volume %s would have more than %d distribute sets", v->name, CL_DHT_MAX);
    if (rc < 0)
        FAIL(rc, "out of memory");
    struct mgmt_brick *b = calloc((size_t)(v->n_bricks + n), sizeof(*b));
    if (!b) {
        free(*place);
        *place = NULL;
        FAIL(-ENOMEM, "out of memory");
    }
    memcpy(b, v->bricks, (size_t)v->n_bricks * sizeof(*b));
    memcpy(b + v->n_bricks, nb, (size_t)n * sizeof(*b));
    *out = b;
    *n_out = v->n_bricks + n;
    return 0;
}

int mgmt_elastic_lower(const struct mgmt_vol *v, int replica, const struct mgmt_brick *rb, int n,
                       struct mgmt_brick **out, int *n_out, char *err, size_t errlen)
{
    int cur = v->replica > 1 ? v->replica : 1;
    int sets = v->n_bricks / cur;
    if (replica < 0)
        FAIL(-EINVAL,
             "Removing bricks without lowering the replica count removes distribute sets, "
             "whose files would have to move to the other sets first (a rebalance): not "
             "supported yet. To remove copies, give the new count: volume remove-brick %s "
             "replica %d BRICK... force",
             v->name, cur > 1 ? cur - 1 : 1);
    if (replica < 1)
        FAIL(-EINVAL, "replica count must be a number from 1 to 16");
    if (replica >= cur)
        FAIL(-EINVAL,
             "Volume %s has replica count %d: remove-brick can only lower it (the given replica "
             "count %d is not below it)",
             v->name, cur, replica);
    if (replica != cur - 1)
        FAIL(-EINVAL,
             "Volume %s has replica count %d: remove-brick lowers it by one at a time (replica "
             "%d)",
             v->name, cur, cur - 1);
    if (n != sets)
        FAIL(-EINVAL,
             "Incorrect number of bricks supplied %d with count %d: one brick of each of the %d "
             "replica sets",
             n, replica, sets);
    /* gone[s]: the brick set s loses */
    int *gone = malloc((size_t)sets * sizeof(*gone));
    struct mgmt_brick *b = calloc((size_t)(sets * replica), sizeof(*b));
    if (!gone || !b) {
        free(gone);
        free(b);
        FAIL(-ENOMEM, "out of memory");
    }
    for (int s = 0; s < sets; s++)
        gone[s] = -1;
    for (int k = 0; k < n; k++) {
        int i = mgmt_elastic_find(v, rb[k].host, rb[k].path), s = i / cur;
        if (i < 0)
            snprintf(err, errlen, "Incorrect brick %s:%s for volume %s", rb[k].host, rb[k].path,
                     v->name);
        else if (gone[s] >= 0)
            snprintf(err, errlen,
                     "Bricks %s:%s and %s:%s are of the same replica set: remove one brick of "
                     "each set",
                     v->bricks[gone[s]].host, v->bricks[gone[s]].path, rb[k].host, rb[k].path);
        else if (v->arbiter && i % cur != cur - 1)
            snprintf(err, errlen,
                     "Brick %s:%s is a data brick of a set with an arbiter: only the arbiters can "
                     "be removed (replica %d)",
                     rb[k].host, rb[k].path, cur - 1);
        if (i < 0 || gone[s] >= 0 || (v->arbiter && i % cur != cur - 1)) {
            free(gone);
            free(b);
            return i < 0 ? -ENOENT : -EINVAL;
        }
        gone[s] = i;
    }
    int m = 0;
    for (int i = 0; i < v->n_bricks; i++)
        if (gone[i / cur] != i)
            b[m++] = v->bricks[i];
    free(gone);
    *out = b;
    *n_out = m;
    return 0;
}
