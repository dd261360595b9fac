/* volume remove-brick VOL replica N BRICK... force, the CLI's part: before
 * cairnd is asked, the CLI, a client of the bricks (as for heal info),
 * makes sure that no brick to be removed holds the only good copy of
 * anything: in every replica set that loses a brick, each brick that stays
 * is up and no brick of the set has entries to heal (for an arbiter, the
 * data bricks). cairnd checks the rest (src/mgmt/elastic.c). A change
 * between this check and the commit is not seen: docs/elastic.md. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../client/heal.h"
#include "cli.h"

/* What the walk of one set found: the first child with entries, one of its
 * paths, and the first child that could not be read. */
struct scan {
    int child, dirty, down;
    unsigned entries;
    char path[PATH_MAX];
};

static void brick_cb(void *arg, int child)
{
    ((struct scan *)arg)->child = child;
}

static void entry_cb(void *arg, const char *gfid, const char *path, enum cl_heal_state st)
{
    struct scan *s = arg;
    (void)st;
    if (s->dirty < 0) {
        s->dirty = s->child;
        snprintf(s->path, sizeof(s->path), path ? "%s" : "<gfid:%s>", path ? path : gfid);
    }
}

static void brick_end_cb(void *arg, int child, int err, unsigned total, const unsigned count[3])
{
    struct scan *s = arg;
    (void)count;
    if (err < 0 && s->down < 0)
        s->down = child;
    if (total && s->dirty < 0) {
        s->dirty = child;
        snprintf(s->path, sizeof(s->path), "an entry");
    }
    s->entries += total;
}

/* Index in v of brick arg ("host:path"), or -1. */
static int find(const struct cl_volinfo *v, const char *arg)
{
    for (int i = 0; i < v->n_bricks; i++) {
        size_t h = strlen(v->bricks[i].addr.host);
        if (strncmp(arg, v->bricks[i].addr.host, h) == 0 && arg[h] == ':' &&
            strcmp(arg + h + 1, v->bricks[i].path) == 0)
            return i;
    }
    return -1;
}

/* Checks the set of brick gone (index in v): 0, or 1 with the reason in
 * err. */
static int check_set(const struct cl_volinfo *v, int gone, char *err, size_t errlen)
{
    int r = v->replica, first = gone - gone % r;
    /* an arbiter leaving: only the data bricks matter */
    int n = v->arbiter && gone % r == r - 1 ? r - 1 : r;
    struct cl_layer *ch[CL_REPL_MAX] = {0};
    struct scan s = {.child = -1, .dirty = -1, .down = -1};
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (!(ch[i] = cli_brick_connect(v, first + i))) {
            snprintf(err, errlen, "out of memory");
            rc = 1;
        }
    static const struct cl_heal_visitor visit = {brick_cb, entry_cb, brick_end_cb};
    if (rc == 0)
        cl_heal_walk(ch, n, v->arbiter && n == r, &visit, &s, NULL);
    for (int i = 0; i < n; i++)
        if (ch[i])
            cl_layer_destroy_tree(ch[i]);
    if (rc)
        return rc;
    const struct cl_brickinfo *g = &v->bricks[gone];
    if (s.down >= 0) {
        const struct cl_brickinfo *b = &v->bricks[first + s.down];
        snprintf(err, errlen,
                 "Brick %s:%s is not connected: %s. Nothing may be removed from its replica set "
                 "until every brick of it is up and heal info shows no entries for it",
                 b->addr.host, b->path,
                 first + s.down == gone
                     ? "its heal index cannot be read, so it may hold the only good copy of "
                       "files (bring it back and heal, or replace it with replace-brick)"
                     : "it would be left with fewer copies than it has now, one of them "
                       "perhaps the only good one");
        return 1;
    }
    if (s.dirty >= 0) {
        const struct cl_brickinfo *b = &v->bricks[first + s.dirty];
        snprintf(err, errlen,
                 "The replica set of %s:%s has %u entries to heal (%s on brick %s:%s): %s:%s may "
                 "hold the only good copy of them. Run `cairn volume heal %s` first, until "
                 "`cairn volume heal %s info` shows no entries",
                 g->addr.host, g->path, s.entries, s.path, b->addr.host, b->path, g->addr.host,
                 g->path, v->name, v->name);
        return 1;
    }
    return 0;
}

int cli_remove_brick_check(const struct net_addr *mgmt, int argc, char **argv, char *err,
                           size_t errlen)
{
    int first = 3, last = argc;
    if (argc < 6 || strcmp(argv[first], "replica") != 0)
        return 0; /* cairnd answers */
    first += 2;
    if (strcmp(argv[last - 1], "force") == 0)
        last--;
    struct cl_volinfo v;
    if (cl_volume_fetch(mgmt, argv[2], 10000, &v, err, errlen) < 0)
        return 0; /* cairnd says why (no such volume, not started) */
    int rc = 0;
    if (v.replica > 1)
        for (int k = first; k < last && rc == 0; k++) {
            int i = find(&v, argv[k]);
            if (i >= 0)
                rc = check_set(&v, i, err, errlen);
        }
    cl_volinfo_free(&v);
    return rc;
}
