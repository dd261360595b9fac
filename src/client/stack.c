/* Building and running the client stack. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "client.h"
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

int cl_stack_build(const struct cl_volinfo *v, const struct cl_stack_params *sp,
                   struct cl_layer **out, char *err, size_t errlen)
{
    int set = v->replica > 1 ? v->replica : 1;
    if (v->n_bricks != set) {
        snprintf(err, errlen,
                 "volume %s has %d bricks; this client serves single-brick volumes only "
                 "(distribute is not implemented yet)",
                 v->name, v->n_bricks);
        return -ENOTSUP;
    }
    int ping_ms = sp && sp->ping_timeout_ms > 0
                      ? sp->ping_timeout_ms
                      : (int)(opt_int(&v->opts, "network.ping-timeout") * 1000);
    if (ping_ms <= 0)
        ping_ms = CL_DEFAULT_PING_TIMEOUT_MS;
    struct cl_layer *ch[CL_REPL_MAX];
    for (int i = 0; i < set; i++) {
        struct cl_proto_params pp = {
            .addr = v->bricks[i].addr,
            .volume = v->name,
            .brick_path = v->bricks[i].path,
            .ping_timeout_ms = ping_ms,
            .recall = sp ? sp->recall : NULL,
            .recall_ctx = sp ? sp->recall_ctx : NULL,
        };
        ch[i] = cl_proto_new(&pp);
        if (!ch[i]) {
            while (i-- > 0)
                ch[i]->destroy(ch[i]);
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
    }
    if (set == 1) {
        *out = ch[0];
        return 0;
    }
    struct cl_layer *l = cl_repl_new(ch, set, v->arbiter, v->name, REPL_HEAL_INTERVAL_MS);
    if (!l) {
        for (int i = 0; i < set; i++)
            ch[i]->destroy(ch[i]);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
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
    for (int i = 0; i < top->n_children; i++)
        cl_stack_destroy(top->children[i]);
    top->destroy(top);
}
