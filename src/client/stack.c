/* Building the client stack of a volume from its list of layers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "../rpc/tls.h"
#include "client.h"
#include "disperse.h"
#include "distribute.h"
#include "replicate.h"
#include "shard.h"

/* How often a replicate layer looks for heals to do while a child has been
 * down (ms). */
#define REPL_HEAL_INTERVAL_MS 2000

/* What a level's constructor gets. */
struct stack_build {
    const struct cl_volinfo *v;
    const struct cl_stack_params *sp;
    int set;                 /* bricks per set */
    int n_sets;              /* sets in the volume */
    int ping_ms;             /* the protocol clients' ping timeout */
    struct rpc_tls_ctx *tls; /* client.ssl: the protocol clients' TLS */
};

/* How many layers of the level below one layer of a level sits on. */
enum stack_span {
    SPAN_BRICK,  /* one layer per brick, over none */
    SPAN_SET,    /* one per replica set, over the set's layers */
    SPAN_VOLUME, /* one for the volume, over every layer below */
};

/* One level of the stack. used() says whether the volume has it; a level
 * it does not have passes the layers below up unchanged. make() returns the
 * new layer over children[0..n) (index: which brick or set), or NULL (out of
 * memory; the children are then still the caller's). */
struct stack_level {
    const char *name;
    enum stack_span span;
    int (*used)(const struct stack_build *b);
    struct cl_layer *(*make)(const struct stack_build *b, int index, struct cl_layer **children,
                             int n);
};

static int always(const struct stack_build *b)
{
    (void)b;
    return 1;
}

static struct cl_layer *make_proto(const struct stack_build *b, int index,
                                   struct cl_layer **children, int n)
{
    (void)children;
    (void)n;
    const struct cl_brickinfo *br = &b->v->bricks[index];
    struct cl_proto_params pp = {
        .addr = br->addr,
        .volume = b->v->name,
        .brick_path = br->path,
        .subdir = b->sp ? b->sp->subdir : NULL,
        .ping_timeout_ms = b->ping_ms,
        .recall = b->sp ? b->sp->recall : NULL,
        .recall_ctx = b->sp ? b->sp->recall_ctx : NULL,
        .tls = b->tls,
    };
    return cl_proto_new(&pp);
}

static int replicated(const struct stack_build *b)
{
    return b->set > 1 && !b->v->redundancy;
}

static int dispersed(const struct stack_build *b)
{
    return b->set > 1 && b->v->redundancy > 0;
}

static struct cl_layer *make_disp(const struct stack_build *b, int index,
                                  struct cl_layer **children, int n)
{
    (void)index;
    return cl_disp_new(children, n - b->v->redundancy, b->v->redundancy, b->v->name);
}

static struct cl_layer *make_repl(const struct stack_build *b, int index,
                                  struct cl_layer **children, int n)
{
    (void)index;
    return cl_repl_new(children, n, b->v->arbiter, b->v->name, REPL_HEAL_INTERVAL_MS);
}

/* A volume with a placement has the layer even with one set: it gains
 * sets live (cl_stack_adopt). */
static int distributed(const struct stack_build *b)
{
    return b->n_sets > 1 || b->v->place;
}

static struct cl_layer *make_dht(const struct stack_build *b, int index, struct cl_layer **children,
                                 int n)
{
    (void)index;
    if (b->v->place)
        return cl_dht_new_placed(children, n, b->v->name, b->v->place, b->v->place_prev);
    return cl_dht_new(children, n, b->v->name);
}

/* Always there, so sharded files stay readable when features.shard is
 * turned off, and turning it on reaches a running mount (reconfigure). */
static struct cl_layer *make_shard(const struct stack_build *b, int index,
                                   struct cl_layer **children, int n)
{
    (void)index;
    (void)n;
    return cl_shard_new(children[0], b->v->name);
}

/* The stack, bottom to top. A new kind of layer is a new row: disperse
 * beside replicate (chosen by used()), shard and the caches above
 * distribute. */
static const struct stack_level levels[] = {
    {"protocol", SPAN_BRICK, always, make_proto},
    {"replicate", SPAN_SET, replicated, make_repl},
    {"disperse", SPAN_SET, dispersed, make_disp},
    {"distribute", SPAN_VOLUME, distributed, make_dht},
    {"shard", SPAN_VOLUME, always, make_shard},
};

static void destroy_layers(struct cl_layer **l, int n)
{
    for (int i = 0; i < n; i++)
        cl_layer_destroy_tree(l[i]);
}

int cl_stack_effective_options(const struct opt_set *vol, int ping_timeout_ms, struct opt_set *out)
{
    int rc = opt_set_copy(out, vol);
    if (rc == 0 && ping_timeout_ms > 0) {
        char v[32];
        snprintf(v, sizeof(v), "%d", ping_timeout_ms < 1000 ? 1 : ping_timeout_ms / 1000);
        if ((rc = opt_set_put(out, "network.ping-timeout", v)) < 0)
            opt_set_free(out);
    }
    return rc;
}

/* Builds one level over below[0..*n), replacing them with its layers. */
static int build_level(const struct stack_level *lv, const struct stack_build *b,
                       const struct opt_set *opts, struct cl_layer **below, int *n)
{
    if (!lv->used(b))
        return 0;
    int made = lv->span == SPAN_BRICK ? b->v->n_bricks : lv->span == SPAN_SET ? b->n_sets : 1;
    int per = lv->span == SPAN_BRICK ? 0 : lv->span == SPAN_SET ? b->set : *n;
    struct cl_layer *out[CL_DHT_MAX * CL_REPL_MAX];
    for (int i = 0; i < made; i++) {
        out[i] = lv->make(b, i, per ? below + i * per : NULL, per);
        if (!out[i]) {
            log_error("volume %s: cannot make the %s layer: out of memory", b->v->name, lv->name);
            destroy_layers(out, i); /* with the children they took over */
            destroy_layers(below + i * per, *n - i * per);
            *n = 0;
            return -ENOMEM;
        }
        if (out[i]->reconfigure)
            out[i]->reconfigure(out[i], opts);
    }
    memcpy(below, out, (size_t)made * sizeof(*out));
    *n = made;
    return 0;
}

int cl_stack_build(const struct cl_volinfo *v, const struct cl_stack_params *sp,
                   struct cl_layer **out, char *err, size_t errlen)
{
    struct stack_build b = {.v = v, .sp = sp};
    b.set = v->replica > 1 ? v->replica : 1;
    b.n_sets = v->n_bricks / b.set;
    if (b.n_sets < 1 || b.n_sets * b.set != v->n_bricks || b.n_sets > CL_DHT_MAX ||
        b.set > CL_REPL_MAX) {
        snprintf(err, errlen, "volume %s: %d bricks do not make 1 to %d sets of %d", v->name,
                 v->n_bricks, CL_DHT_MAX, b.set);
        return -ENOTSUP;
    }
    b.ping_ms = sp && sp->ping_timeout_ms > 0
                    ? sp->ping_timeout_ms
                    : (int)(opt_int(&v->opts, "network.ping-timeout") * 1000);
    if (b.ping_ms <= 0)
        b.ping_ms = CL_DEFAULT_PING_TIMEOUT_MS;
    int rc = cl_tls_ctx(&v->opts, 0, &b.tls, err, errlen);
    if (rc < 0)
        return rc;
    struct opt_set opts;
    if (cl_stack_effective_options(&v->opts, sp ? sp->ping_timeout_ms : 0, &opts) < 0) {
        rpc_tls_ctx_put(b.tls);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct cl_layer *layers[CL_DHT_MAX * CL_REPL_MAX];
    int n = 0;
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]) && rc == 0; i++)
        rc = build_level(&levels[i], &b, &opts, layers, &n);
    opt_set_free(&opts);
    rpc_tls_ctx_put(b.tls); /* the protocol clients hold their own references */
    if (rc < 0) {
        destroy_layers(layers, n);
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    *out = layers[0];
    return 0;
}

void cl_stack_destroy(struct cl_layer *top)
{
    cl_layer_destroy_tree(top);
}

static int same_brick(const struct cl_brickinfo *a, const struct cl_brickinfo *b)
{
    return strcmp(a->addr.host, b->addr.host) == 0 && a->addr.port == b->addr.port &&
           strcmp(a->path, b->path) == 0 && strcmp(a->id, b->id) == 0;
}

int cl_stack_adoptable(const struct cl_volinfo *old, const struct cl_volinfo *nv, char *why,
                       size_t len)
{
    int so = old->replica > 1 ? old->replica : 1, sn = nv->replica > 1 ? nv->replica : 1;
    int sets = old->n_bricks / so;
    if ((old->redundancy || nv->redundancy) &&
        (old->redundancy != nv->redundancy || so != sn || old->n_bricks != nv->n_bricks)) {
        snprintf(why, len, "a dispersed volume's sets change shape only by a rebuild");
        return 0;
    }
    if (!old->place != !nv->place) {
        snprintf(why, len, "the volume's placement changed kind");
        return 0;
    }
    /* A volume with a placement gains whole sets of its shape (add-brick;
     * the sets it had keep their bricks, as below). */
    int grows = nv->place && sn == so && nv->n_bricks % sn == 0 && nv->n_bricks / sn > sets &&
                nv->n_bricks / sn <= CL_DHT_MAX;
    if ((nv->n_bricks / sn != sets || nv->n_bricks % sn) && !grows) {
        snprintf(why, len, "%d distribute sets now, %d before: that takes a rebalance",
                 nv->n_bricks / sn, sets);
        return 0;
    }
    if (sn < so) {
        /* remove-brick: each set keeps its first sn members, in place (a
         * running replicate layer drops its last member only) */
        int kept = sn == so - 1 && !nv->arbiter && sn >= 1;
        for (int s = 0; s < sets && kept; s++)
            for (int j = 0; j < sn && kept; j++)
                kept = same_brick(&old->bricks[s * so + j], &nv->bricks[s * sn + j]);
        if (!kept)
            snprintf(why, len,
                     "replica sets of %d%s, %d%s before, not by the removal of their "
                     "last members",
                     sn, nv->arbiter ? " (arbiter)" : "", so, old->arbiter ? " (arbiter)" : "");
        return kept;
    }
    if ((sn > so && so == 1) || sn > CL_REPL_MAX || (old->arbiter && (!nv->arbiter || sn != so)) ||
        (nv->arbiter && !old->arbiter && sn == so)) {
        snprintf(why, len, "replica sets of %d%s, %d%s before", sn, nv->arbiter ? " (arbiter)" : "",
                 so, old->arbiter ? " (arbiter)" : "");
        return 0;
    }
    return 1;
}

/* The distribute layer of the stack, or NULL. */
static struct cl_layer *dht_layer(struct cl_layer *top)
{
    while (!strcmp(top->name, "features/shard"))
        top = top->children[0]; /* volume-wide layers above the sets' */
    return strcmp(top->name, "distribute") == 0 ? top : NULL;
}

/* The layer serving set s: the top itself for one set, else a child of
 * distribute. */
static struct cl_layer *set_layer(struct cl_layer *top, int sets, int s)
{
    struct cl_layer *d = dht_layer(top);
    (void)sets;
    if (d)
        return d->children[s];
    while (!strcmp(top->name, "features/shard"))
        top = top->children[0];
    return top;
}

int cl_stack_adopt(struct cl_layer *top, const struct cl_volinfo *old, const struct cl_volinfo *nv,
                   const struct cl_stack_params *sp, char *err, size_t errlen)
{
    if (!cl_stack_adoptable(old, nv, err, errlen))
        return -ENOTSUP;
    int so = old->replica > 1 ? old->replica : 1, sn = nv->replica > 1 ? nv->replica : 1;
    int sets = old->n_bricks / so;
    struct stack_build b = {.v = nv, .sp = sp, .set = sn, .n_sets = sets};
    b.ping_ms = sp && sp->ping_timeout_ms > 0
                    ? sp->ping_timeout_ms
                    : (int)(opt_int(&nv->opts, "network.ping-timeout") * 1000);
    if (b.ping_ms <= 0)
        b.ping_ms = CL_DEFAULT_PING_TIMEOUT_MS;
    struct opt_set opts;
    if (cl_stack_effective_options(&nv->opts, sp ? sp->ping_timeout_ms : 0, &opts) < 0) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    for (int s = 0; s < sets && rc == 0; s++) {
        struct cl_layer *set = set_layer(top, sets, s);
        if (sn < so) { /* the set's last member leaves (cl_stack_adoptable) */
            if ((rc = cl_repl_remove_child(set, so - 1)) == 0 && set->reconfigure)
                set->reconfigure(set, &opts); /* the quorum counts the members left */
            continue;
        }
        for (int j = 0; j < so && rc == 0; j++) {
            const struct cl_brickinfo *o = &old->bricks[s * so + j], *n = &nv->bricks[s * sn + j];
            /* a disperse layer's members are those of its set layer */
            struct cl_layer *members = nv->redundancy ? set->children[0] : set;
            if (!same_brick(o, n))
                rc = cl_proto_retarget(so > 1 ? members->children[j] : set, &n->addr, n->path);
        }
        for (int j = so; j < sn && rc == 0; j++) {
            struct cl_layer *child = make_proto(&b, s * sn + j, NULL, 0);
            if (!child) {
                rc = -ENOMEM;
                break;
            }
            if (child->reconfigure)
                child->reconfigure(child, &opts);
            if ((rc = cl_repl_add_child(set, child, nv->arbiter && j == sn - 1)) < 0)
                cl_layer_destroy_tree(child);
        }
        if (rc == 0 && sn > so && set->reconfigure)
            set->reconfigure(set, &opts); /* the quorum counts the new members */
    }
    /* New sets (add-brick on a volume with a placement): each made as at
     * build, handed to distribute, and only then the placement that sends
     * names there. */
    struct cl_layer *dht = nv->place ? dht_layer(top) : NULL;
    for (int s = sets; rc == 0 && dht && s < nv->n_bricks / sn; s++) {
        struct cl_layer *members[CL_REPL_MAX], *set = NULL;
        int made = 0;
        for (; made < sn; made++) {
            if (!(members[made] = make_proto(&b, s * sn + made, NULL, 0)))
                break;
            if (members[made]->reconfigure)
                members[made]->reconfigure(members[made], &opts);
        }
        if (made == sn)
            set = sn > 1 ? make_repl(&b, s, members, sn) : members[0];
        if (!set) {
            destroy_layers(members, made);
            rc = -ENOMEM;
            break;
        }
        if (set != members[0] && set->reconfigure)
            set->reconfigure(set, &opts);
        if ((rc = cl_dht_add_child(dht, set)) < 0)
            cl_layer_destroy_tree(set);
    }
    if (rc == 0 && dht)
        rc = cl_dht_set_place(dht, nv->place, nv->place_prev);
    opt_set_free(&opts);
    if (rc < 0)
        snprintf(err, errlen, "%s", strerror(-rc));
    return rc;
}
