/* What every layer of the client stack shares: running an operation
 * synchronously, and walking a tree of layers to reconfigure or tear it
 * down (layer.h). */
#include <pthread.h>

#include "layer.h"

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

void cl_layer_reconfigure_all(struct cl_layer *top, const struct opt_set *opts)
{
    if (!top)
        return;
    for (int i = 0; i < top->n_children; i++)
        cl_layer_reconfigure_all(top->children[i], opts);
    if (top->reconfigure)
        top->reconfigure(top, opts);
}

static void stop_tree(struct cl_layer *top)
{
    if (top->stop)
        top->stop(top);
    for (int i = 0; i < top->n_children; i++)
        stop_tree(top->children[i]);
}

static void destroy_tree(struct cl_layer *top)
{
    for (int i = 0; i < top->n_children; i++)
        destroy_tree(top->children[i]);
    top->destroy(top);
}

void cl_layer_destroy_tree(struct cl_layer *top)
{
    if (!top)
        return;
    stop_tree(top);
    destroy_tree(top);
}
