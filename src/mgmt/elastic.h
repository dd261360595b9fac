/* Elastic volumes: computing and checking a volume's new brick list
 * (elastic.c, pure; docs/elastic.md). Messages are GlusterFS's where it has
 * them; err gets the reason of a refusal. */
#ifndef CAIRN_MGMT_ELASTIC_H
#define CAIRN_MGMT_ELASTIC_H

#include <stddef.h>

#include "mgmt.h"

/* A copy of v (bricks, options, status, generation); NULL on ENOMEM. The
 * caller frees it with mgmt_vol_free. */
struct mgmt_vol *mgmt_vol_dup(const struct mgmt_vol *v);
/* Index of brick host:path in v, or -1. */
int mgmt_elastic_find(const struct mgmt_vol *v, const char *host, const char *path);
/* Brick i's place in its replica set (0 on a distribute volume). */
int mgmt_elastic_member(const struct mgmt_vol *v, int i);
/* Whether b (by id) is not one of old's bricks: a new copy to fill. */
int mgmt_elastic_is_new(const struct mgmt_vol *old, const struct mgmt_brick *b);
/* replace-brick: checks that old_host:old_path is a brick of v, that v has
 * copies to heal a new brick from, and that nb is no brick of any volume
 * of the list vols. 0 with *index the old brick's place, or -errno. */
int mgmt_elastic_replace(const struct mgmt_vol *vols, const struct mgmt_vol *v,
                         const char *old_host, const char *old_path, const struct mgmt_brick *nb,
                         int *index, char *err, size_t errlen);
/* add-brick replica N [arbiter 1]: the new list of v's bricks when every
 * set gains replica - current members, nb[0..n) in set order (replica < 0:
 * no replica given, refused: new distribute sets need a rebalance). 0 with
 * *out (malloc'd, n_out bricks), or -errno. */
int mgmt_elastic_raise(const struct mgmt_vol *vols, const struct mgmt_vol *v, int replica,
                       int arbiter, const struct mgmt_brick *nb, int n, struct mgmt_brick **out,
                       int *n_out, char *err, size_t errlen);
/* add-brick BRICK... of whole sets, on a volume with a placement
 * (docs/elastic.md, "Growing by whole sets"): n a multiple of the set
 * size, no brick taken, no rebalance of an earlier growth pending. 0 with
 * *out (malloc'd: v's bricks, then nb's, n_out) and *place (malloc'd: v's
 * placement with the new sets, generation + 1), or -errno. */
int mgmt_elastic_grow(const struct mgmt_vol *vols, const struct mgmt_vol *v,
                      const struct mgmt_brick *nb, int n, struct mgmt_brick **out, int *n_out,
                      struct cl_place **place, char *err, size_t errlen);
/* remove-brick replica N BRICK...: the new list of v's bricks when every
 * set loses exactly one member, rb[0..n) (replica < 0: no replica given,
 * refused: removing whole sets needs a rebalance). The bricks that stay
 * keep their order. On a volume with an arbiter only the arbiters may go
 * (the new volume has none). 0 with *out (malloc'd, n_out bricks), or
 * -errno. */
int mgmt_elastic_lower(const struct mgmt_vol *v, int replica, const struct mgmt_brick *rb, int n,
                       struct mgmt_brick **out, int *n_out, char *err, size_t errlen);
#endif
