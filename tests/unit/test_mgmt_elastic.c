/* Elastic volumes, the pure parts: the checks and new brick lists of
 * replace-brick, add-brick and remove-brick (src/mgmt/elastic.c), the volume record's
 * reset-brick line, and which brick changes a running client stack can
 * adopt (src/client/stack.c cl_stack_adoptable). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/client.h"
#include "../../src/client/distribute.h"
#include "../../src/mgmt/elastic.h"
#include "../../src/mgmt/pool.h"
#include "../../src/rpc/conn.h"
#include "check.h"

/* A volume of n bricks h<i>:/b/<name><i>, replica r. */
static struct mgmt_vol *make_vol(const char *name, int n, int r, int arbiter)
{
    struct mgmt_vol *v = calloc(1, sizeof(*v));
    gfid_t g;
    snprintf(v->name, sizeof(v->name), "%s", name);
    gfid_generate(&g);
    gfid_format(&g, v->id);
    v->status = MGMT_VOL_STARTED;
    v->replica = r;
    v->arbiter = arbiter;
    v->n_bricks = n;
    v->bricks = calloc((size_t)n, sizeof(*v->bricks));
    for (int i = 0; i < n; i++) {
        gfid_generate(&g);
        gfid_format(&g, v->bricks[i].id);
        snprintf(v->bricks[i].host, sizeof(v->bricks[i].host), "h%d", i);
        snprintf(v->bricks[i].path, sizeof(v->bricks[i].path), "/b/%s%d", name, i);
    }
    return v;
}

static struct mgmt_brick brick(const char *host, const char *path)
{
    struct mgmt_brick b;
    memset(&b, 0, sizeof(b));
    snprintf(b.host, sizeof(b.host), "%s", host);
    snprintf(b.path, sizeof(b.path), "%s", path);
    return b;
}

static void test_replace(void)
{
    struct mgmt_vol *v = make_vol("r", 3, 3, 0), *d = make_vol("d", 2, 0, 0);
    v->next = d;
    char err[512];
    int i = -1;
    struct mgmt_brick nb = brick("h9", "/b/new");
    CHECK_EQ(mgmt_elastic_replace(v, v, "h1", "/b/r1", &nb, &i, err, sizeof(err)), 0);
    CHECK_EQ(i, 1);
    CHECK_EQ(mgmt_elastic_replace(v, v, "h1", "/b/nope", &nb, &i, err, sizeof(err)), -ENOENT);
    CHECK_STR(err, "brick: h1:/b/nope does not exist in volume: r");
    /* a brick of this volume, or of another */
    nb = brick("h2", "/b/r2");
    CHECK_EQ(mgmt_elastic_replace(v, v, "h1", "/b/r1", &nb, &i, err, sizeof(err)), -EEXIST);
    CHECK(strstr(err, "Brick may be containing or be contained by an existing brick") != NULL);
    nb = brick("h0", "/b/d0");
    CHECK_EQ(mgmt_elastic_replace(v, v, "h1", "/b/r1", &nb, &i, err, sizeof(err)), -EEXIST);
    /* a distribute volume has no copy to fill the new brick from */
    nb = brick("h9", "/b/new");
    CHECK_EQ(mgmt_elastic_replace(v, d, "h0", "/b/d0", &nb, &i, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "no other copy") != NULL);
    v->next = NULL;
    mgmt_vol_free(v);
    mgmt_vol_free(d);
}

static void test_raise(void)
{
    struct mgmt_vol *v = make_vol("x", 4, 2, 0);
    char err[512];
    struct mgmt_brick nb[2] = {brick("h8", "/b/n0"), brick("h9", "/b/n1")}, *out = NULL;
    int n = 0;
    /* 2 x 2 -> 2 x 3: set s gains nb[s] as its third member */
    CHECK_EQ(mgmt_elastic_raise(v, v, 3, 0, nb, 2, &out, &n, err, sizeof(err)), 0);
    CHECK_EQ(n, 6);
    if (out && n == 6) {
        CHECK_STR(out[0].path, "/b/x0");
        CHECK_STR(out[1].path, "/b/x1");
        CHECK_STR(out[2].path, "/b/n0");
        CHECK_STR(out[3].path, "/b/x2");
        CHECK_STR(out[4].path, "/b/x3");
        CHECK_STR(out[5].path, "/b/n1");
    }
    free(out);
    out = NULL;
    /* an arbiter for each set */
    CHECK_EQ(mgmt_elastic_raise(v, v, 3, 1, nb, 2, &out, &n, err, sizeof(err)), 0);
    free(out);
    out = NULL;
    /* refusals, with GlusterFS's words where it has them */
    CHECK_EQ(mgmt_elastic_raise(v, v, 3, 0, nb, 1, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK_STR(err, "Incorrect number of bricks supplied 1 with count 3");
    CHECK_EQ(mgmt_elastic_raise(v, v, 2, 0, nb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "can only raise it") != NULL);
    CHECK_EQ(mgmt_elastic_raise(v, v, 1, 0, nb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK_EQ(mgmt_elastic_raise(v, v, -1, 0, nb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "rebalance") != NULL);
    CHECK_EQ(mgmt_elastic_raise(v, v, 4, 1, nb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "arbiter") != NULL);
    struct mgmt_brick dup[2] = {brick("h8", "/b/n0"), brick("h8", "/b/n0")};
    CHECK_EQ(mgmt_elastic_raise(v, v, 3, 0, dup, 2, &out, &n, err, sizeof(err)), -EEXIST);
    struct mgmt_brick taken[2] = {brick("h8", "/b/n0"), brick("h3", "/b/x3")};
    CHECK_EQ(mgmt_elastic_raise(v, v, 3, 0, taken, 2, &out, &n, err, sizeof(err)), -EEXIST);
    CHECK(out == NULL);
    /* a volume with an arbiter keeps its count */
    struct mgmt_vol *a = make_vol("a", 3, 3, 1);
    struct mgmt_brick one = brick("h8", "/b/n0");
    CHECK_EQ(mgmt_elastic_raise(a, a, 4, 0, &one, 1, &out, &n, err, sizeof(err)), -EINVAL);
    /* distribute 1 x 1 -> replica 2 */
    struct mgmt_vol *d = make_vol("d", 1, 0, 0);
    CHECK_EQ(mgmt_elastic_raise(d, d, 2, 0, &one, 1, &out, &n, err, sizeof(err)), 0);
    CHECK_EQ(n, 2);
    free(out);
    mgmt_vol_free(a);
    mgmt_vol_free(d);
    mgmt_vol_free(v);
}

static void test_members_and_record(void)
{
    struct mgmt_vol *v = make_vol("m", 6, 3, 0), *w = NULL;
    CHECK_EQ(mgmt_elastic_member(v, 0), 0);
    CHECK_EQ(mgmt_elastic_member(v, 4), 1);
    CHECK_EQ(mgmt_elastic_member(v, 5), 2);
    CHECK(!mgmt_elastic_is_new(v, &v->bricks[3]));
    struct mgmt_brick b = brick("h", "/x");
    snprintf(b.id, sizeof(b.id), "%s", v->id);
    CHECK(mgmt_elastic_is_new(v, &b));
    /* the reset-brick line survives the store */
    snprintf(v->reset_id, sizeof(v->reset_id), "%s", v->bricks[2].id);
    w = mgmt_vol_dup(v);
    CHECK(w != NULL);
    if (w) {
        CHECK_STR(w->reset_id, v->bricks[2].id);
        CHECK_EQ(w->status, MGMT_VOL_STARTED);
        CHECK_EQ(mgmt_elastic_find(w, "h4", "/b/m4"), 4);
        CHECK_EQ(mgmt_elastic_find(w, "h4", "/b/m5"), -1);
    }
    mgmt_vol_free(w);
    mgmt_vol_free(v);
}

/* cl_volinfo of n bricks, replica r (bricks share one array of names). */
static struct cl_volinfo info(int n, int r, int arbiter, struct cl_brickinfo *b)
{
    struct cl_volinfo v = {.bricks = b, .n_bricks = n, .replica = r, .arbiter = arbiter};
    return v;
}

static void test_adoptable(void)
{
    struct cl_brickinfo b[12];
    memset(b, 0, sizeof(b));
    for (int i = 0; i < 12; i++)
        b[i].path = b[i].id = "/b"; /* one brick everywhere: nothing replaced */
    char why[256];
    struct cl_volinfo r2 = info(2, 2, 0, b), r3 = info(3, 3, 0, b), a3 = info(3, 3, 1, b);
    struct cl_volinfo d2 = info(2, 1, 0, b), r22 = info(4, 2, 0, b), r23 = info(6, 3, 0, b);
    CHECK(cl_stack_adoptable(&r3, &r3, why, sizeof(why)));   /* a brick replaced */
    CHECK(cl_stack_adoptable(&r2, &r3, why, sizeof(why)));   /* a copy added */
    CHECK(cl_stack_adoptable(&r2, &a3, why, sizeof(why)));   /* an arbiter added */
    CHECK(cl_stack_adoptable(&r22, &r23, why, sizeof(why))); /* each set a copy */
    CHECK(cl_stack_adoptable(&r3, &r2, why, sizeof(why)));   /* the last copy removed */
    CHECK(cl_stack_adoptable(&a3, &r2, why, sizeof(why)));   /* the arbiter removed */
    struct cl_volinfo d1 = info(1, 1, 0, b);
    CHECK(cl_stack_adoptable(&r2, &d1, why, sizeof(why)));  /* 2 -> 1 */
    CHECK(!cl_stack_adoptable(&r3, &d1, why, sizeof(why))); /* 3 -> 1 */
    /* a copy other than the last removed: the members after it move */
    struct cl_brickinfo o[3], nb[2];
    char *paths[3] = {"/b0", "/b1", "/b2"};
    memset(o, 0, sizeof(o));
    for (int i = 0; i < 3; i++)
        o[i].path = o[i].id = paths[i];
    nb[0] = o[1];
    nb[1] = o[2];
    struct cl_volinfo o3 = info(3, 3, 0, o), n2 = info(2, 2, 0, nb);
    CHECK(!cl_stack_adoptable(&o3, &n2, why, sizeof(why)));
    CHECK(strstr(why, "last members") != NULL);
    nb[0] = o[0];
    nb[1] = o[1];
    CHECK(cl_stack_adoptable(&o3, &n2, why, sizeof(why)));
    CHECK(!cl_stack_adoptable(&r3, &a3, why, sizeof(why))); /* a copy made an arbiter */
    CHECK(!cl_stack_adoptable(&a3, &r3, why, sizeof(why)));
    CHECK(!cl_stack_adoptable(&r2, &r22, why, sizeof(why))); /* a set added: rebalance */
    CHECK(strstr(why, "rebalance") != NULL);
    CHECK(!cl_stack_adoptable(&d2, &r22, why, sizeof(why))); /* no replicate layer to grow */
}

static void test_lower(void)
{
    struct mgmt_vol *v = make_vol("y", 6, 3, 0);
    char err[512];
    struct mgmt_brick rb[2] = {brick("h1", "/b/y1"), brick("h5", "/b/y5")}, *out = NULL;
    int n = 0;
    /* 2 x 3 -> 2 x 2: the others keep their order */
    CHECK_EQ(mgmt_elastic_lower(v, 2, rb, 2, &out, &n, err, sizeof(err)), 0);
    CHECK_EQ(n, 4);
    if (out && n == 4) {
        CHECK_STR(out[0].path, "/b/y0");
        CHECK_STR(out[1].path, "/b/y2");
        CHECK_STR(out[2].path, "/b/y3");
        CHECK_STR(out[3].path, "/b/y4");
        CHECK_STR(out[1].id, v->bricks[2].id);
    }
    free(out);
    out = NULL;
    /* refusals */
    CHECK_EQ(mgmt_elastic_lower(v, -1, rb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "rebalance") != NULL);
    CHECK_EQ(mgmt_elastic_lower(v, 3, rb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "can only lower it") != NULL);
    CHECK_EQ(mgmt_elastic_lower(v, 4, rb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK_EQ(mgmt_elastic_lower(v, 0, rb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK_EQ(mgmt_elastic_lower(v, 1, rb, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "one at a time") != NULL);
    CHECK_EQ(mgmt_elastic_lower(v, 2, rb, 1, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "Incorrect number of bricks supplied 1 with count 2") != NULL);
    struct mgmt_brick same[2] = {brick("h1", "/b/y1"), brick("h2", "/b/y2")};
    CHECK_EQ(mgmt_elastic_lower(v, 2, same, 2, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "same replica set") != NULL);
    struct mgmt_brick twice[2] = {brick("h1", "/b/y1"), brick("h1", "/b/y1")};
    CHECK_EQ(mgmt_elastic_lower(v, 2, twice, 2, &out, &n, err, sizeof(err)), -EINVAL);
    struct mgmt_brick none[2] = {brick("h1", "/b/y1"), brick("h9", "/b/y5")};
    CHECK_EQ(mgmt_elastic_lower(v, 2, none, 2, &out, &n, err, sizeof(err)), -ENOENT);
    CHECK_STR(err, "Incorrect brick h9:/b/y5 for volume y");
    CHECK(out == NULL);
    /* 2 + arbiter -> 2: only the arbiter goes */
    struct mgmt_vol *a = make_vol("a", 3, 3, 1);
    struct mgmt_brick arb = brick("h2", "/b/a2"), data = brick("h0", "/b/a0");
    CHECK_EQ(mgmt_elastic_lower(a, 2, &data, 1, &out, &n, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "only the arbiters") != NULL);
    CHECK_EQ(mgmt_elastic_lower(a, 2, &arb, 1, &out, &n, err, sizeof(err)), 0);
    CHECK_EQ(n, 2);
    free(out);
    out = NULL;
    /* 2 -> 1, and a distribute volume has nothing to lower */
    struct mgmt_vol *r = make_vol("r", 2, 2, 0), *d = make_vol("d", 2, 0, 0);
    struct mgmt_brick first = brick("h0", "/b/r0");
    CHECK_EQ(mgmt_elastic_lower(r, 1, &first, 1, &out, &n, err, sizeof(err)), 0);
    CHECK_EQ(n, 1);
    if (out && n == 1)
        CHECK_STR(out[0].path, "/b/r1");
    free(out);
    out = NULL;
    struct mgmt_brick d0 = brick("h0", "/b/d0");
    CHECK_EQ(mgmt_elastic_lower(d, 1, &d0, 1, &out, &n, err, sizeof(err)), -EINVAL);
    mgmt_vol_free(a);
    mgmt_vol_free(r);
    mgmt_vol_free(d);
    mgmt_vol_free(v);
}

/* Growing by whole sets: the placement in the volume record, the new
 * brick list and placement of add-brick, GETVOL's placement as a client
 * reads it, and the stack's adoption of new sets. */
static void test_grow(void)
{
    struct mgmt_vol *v = make_vol("g", 2, 2, 0), *nb = make_vol("n", 4, 2, 0),
                    *rv = make_vol("r", 2, 2, 0);
    struct mgmt_brick *list = NULL;
    struct cl_place *place = NULL;
    int n = 0;
    char err[512];
    /* a volume of ranges: refused */
    CHECK_EQ(mgmt_elastic_grow(NULL, rv, nb->bricks, 2, &list, &n, &place, err, sizeof(err)),
             -EINVAL);
    CHECK(strstr(err, "hash ranges") != NULL);
    v->place = mgmt_place_new(1);
    CHECK(v->place != NULL);
    CHECK_EQ(mgmt_elastic_grow(NULL, v, nb->bricks, 3, &list, &n, &place, err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(mgmt_elastic_grow(NULL, v, nb->bricks, 4, &list, &n, &place, err, sizeof(err)), 0);
    CHECK_EQ(n, 6);
    CHECK_EQ(place->n, 3);
    CHECK_EQ(place->gen, 2);
    CHECK_EQ(place->set[1].id, 2);
    CHECK_EQ(place->set[2].id, 3);
    CHECK(strcmp(list[2].path, nb->bricks[0].path) == 0);
    /* the record keeps both placements */
    struct mgmt_vol *g = mgmt_vol_dup(v);
    free(g->bricks);
    g->bricks = list;
    g->n_bricks = n;
    g->place_prev = g->place;
    g->place = place;
    char *text = mgmt_vol_format(g);
    CHECK(strstr(text, "placement=2 1:1:active 2:1:active 3:1:active\n") != NULL);
    CHECK(strstr(text, "placement-prev=1 1:1:active\n") != NULL);
    struct mgmt_vol *back = NULL;
    CHECK_EQ(mgmt_vol_parse(text, strlen(text), &back, err, sizeof(err)), 0);
    CHECK(back && back->place && back->place_prev && back->place->n == 3 && back->place->gen == 2 &&
          back->place_prev->n == 1 && back->place_prev->gen == 1);
    free(text);
    /* a pending rebalance: no second growth */
    CHECK_EQ(mgmt_elastic_grow(NULL, back, nb->bricks, 2, &list, &n, &place, err, sizeof(err)),
             -EBUSY);
    /* GETVOL as a client reads it */
    for (int i = 0; i < back->n_bricks; i++)
        back->bricks[i].port = (uint16_t)(1000 + i);
    struct rpc_buf b;
    rpc_buf_init(&b);
    mgmt_layout_body(back, &b);
    struct rpc_frame f = {0};
    f.body = b.data;
    f.hdr.body_len = (uint32_t)b.len;
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &f.msg, NULL), 0);
    struct cl_volinfo ci, old;
    CHECK_EQ(cl_volinfo_parse(&f, &ci), 0);
    CHECK(ci.place && ci.place_prev && ci.place->n == 3 && ci.place->gen == 2 &&
          ci.place_prev->n == 1);
    /* a stack of one set adopts two more */
    memset(&old, 0, sizeof(old));
    CHECK_EQ(cl_volinfo_take_bricks(&old, &ci), 0);
    old.n_bricks = 2;
    free(old.place);
    old.place = old.place_prev;
    old.place_prev = NULL;
    char why[256] = "";
    CHECK(cl_stack_adoptable(&old, &ci, why, sizeof(why)));
    if (why[0])
        fprintf(stderr, "why: %s\n", why);
    CHECK(!cl_volinfo_same_bricks(&old, &ci));
    old.n_bricks = 6;
    cl_volinfo_free(&old);
    cl_volinfo_free(&ci);
    rpc_buf_free(&b);
    mgmt_vol_free(back);
    mgmt_vol_free(g);
    mgmt_vol_free(v);
    mgmt_vol_free(nb);
    mgmt_vol_free(rv);
}

int main(void)
{
    test_grow();
    test_replace();
    test_raise();
    test_members_and_record();
    test_adoptable();
    test_lower();
    return check_summary("test_mgmt_elastic");
}
