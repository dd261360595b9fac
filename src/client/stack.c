/* Building and running the client stack. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../lib/log.h"
#include "client.h"

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
    if (v->n_bricks != 1) {
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
    struct cl_proto_params pp = {
        .addr = v->bricks[0].addr,
        .volume = v->name,
        .brick_path = v->bricks[0].path,
        .ping_timeout_ms = ping_ms,
    };
    struct cl_layer *l = cl_proto_new(&pp);
    if (!l) {
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
    for (int i = 0; i < top->n_children; i++)
        cl_stack_destroy(top->children[i]);
    top->destroy(top);
}
