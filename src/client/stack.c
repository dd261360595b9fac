/* Building and running the client stack. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "client.h"
#include "distribute.h"
#include "replicate.h"

/* How often a replicate layer looks for heals to do while a child has been
 * down (ms). */
#define REPL_HEAL_INTERVAL_MS 2000

struct run_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    cl_done_cb done_cb;
    void *ctx;
};

static void run_done_cb(struct cl_op *op)
{
    struct run_wait *w = op->ctx;
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int cl_op_run(struct cl_layer *l, struct cl_op *op)
{
    struct run_wait w = {.done_cb = op->done, .ctx = op->ctx};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    op->done = run_done_cb;
    op->ctx = &w;
    cl_submit(l, op);
    rpc_cork_flush(); /* what this thread held back goes before it waits */
    pthread_mutex_lock(&w.lock);
    while (!w.done)
        pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
    op->done = w.done_cb;
    op->ctx = w.ctx;
    return op->status;
}

static void destroy_layers(struct cl_layer **l, int n)
{
    for (int i = 0; i < n; i++)
        cl_stack_destroy(l[i]);
}

/* One subvolume: set s's protocol clients, under a replicate layer when the
 * set has more than one brick. */
static struct cl_layer *build_set(const struct cl_volinfo *v, int s, int set, int ping_ms,
                                  const struct cl_stack_params *sp)
{
    struct cl_layer *ch[CL_REPL_MAX];
    for (int i = 0; i < set; i++) {
        const struct cl_brickinfo *b = &v->bricks[s * set + i];
        struct cl_proto_params pp = {
            .addr = b->addr,
            .volume = v->name,
            .brick_path = b->path,
            .ping_timeout_ms = ping_ms,
            .recall = sp ? sp->recall : NULL,
            .recall_ctx = sp ? sp->recall_ctx : NULL,
        };
        ch[i] = cl_proto_new(&pp);
        if (!ch[i]) {
            destroy_layers(ch, i);
            return NULL;
        }
    }
    if (set == 1)
        return ch[0];
    struct cl_layer *l = cl_repl_new(ch, set, v->arbiter, v->name, REPL_HEAL_INTERVAL_MS);
    if (!l)
        destroy_layers(ch, set);
    return l;
}

int cl_stack_build(const struct cl_volinfo *v, const struct cl_stack_params *sp,
                   struct cl_layer **out, char *err, size_t errlen)
{
    int set = v->replica > 1 ? v->replica : 1;
    int n_sets = set > 0 ? v->n_bricks / set : 0;
    if (n_sets < 1 || n_sets * set != v->n_bricks || n_sets > CL_DHT_MAX) {
        snprintf(err, errlen, "volume %s: %d bricks do not make 1 to %d sets of %d", v->name,
                 v->n_bricks, CL_DHT_MAX, set);
        return -ENOTSUP;
    }
    int ping_ms = sp && sp->ping_timeout_ms > 0
                      ? sp->ping_timeout_ms
                      : (int)(opt_int(&v->opts, "network.ping-timeout") * 1000);
    if (ping_ms <= 0)
        ping_ms = CL_DEFAULT_PING_TIMEOUT_MS;
    struct cl_layer *subs[CL_DHT_MAX];
    for (int s = 0; s < n_sets; s++) {
        if (!(subs[s] = build_set(v, s, set, ping_ms, sp))) {
            destroy_layers(subs, s);
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
    }
    if (n_sets == 1) {
        *out = subs[0];
        return 0;
    }
    struct cl_layer *l = cl_dht_new(subs, n_sets, v->name);
    if (!l) {
        destroy_layers(subs, n_sets);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    l->reconfigure(l, &v->opts); /* its options (cluster.min-free-disk) */
    *out = l;
    return 0;
}

void cl_stack_destroy(struct cl_layer *top)
{
    if (!top)
        return;
    /* The replicate layer's heal thread uses the children: stop it first. */
    if (top->name && strcmp(top->name, "replicate") == 0)
        cl_repl_stop(top);
    /* The distribute layer's workers use the children too. */
    if (top->name && strcmp(top->name, "distribute") == 0)
        cl_dht_stop(top);
    for (int i = 0; i < top->n_children; i++)
        cl_stack_destroy(top->children[i]);
    top->destroy(top);
}
