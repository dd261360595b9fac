/* The client stack: layers with one asynchronous operation interface.
 *
 * An operation (struct cl_op) carries its arguments as a struct rpc_msg
 * (args.op is the opcode; fields as docs/protocol.md lists per opcode) and
 * gets back a status and, on success, the reply frame. A layer's submit()
 * either answers the operation itself, or passes it (or several derived
 * operations) to the layers below, and calls cl_op_complete exactly once.
 * Layers compose top to bottom: distribute -> replicate -> protocol client,
 * built from the list in stack.c; the FUSE bridge issues operations to the
 * top (its caches and write-back are still inside src/fuse, not layers yet).
 * A layer with nothing to do for an opcode forwards it unchanged, which
 * costs one indirect call.
 *
 * Ownership: the issuer owns the cl_op and everything args points to until
 * done() runs; after done() the issuer frees the reply with cl_op_release.
 * done() may run on any thread, including inside submit(). */
#ifndef CAIRN_CLIENT_LAYER_H
#define CAIRN_CLIENT_LAYER_H

#include <errno.h>

#include "../rpc/conn.h"
#include "../lib/options.h"
#include "../rpc/msg.h"

struct cl_op;
typedef void (*cl_done_cb)(struct cl_op *op);

struct cl_op {
    struct rpc_msg args;
    int status;              /* 0 or -errno, set by cl_op_complete */
    struct rpc_frame *reply; /* decoded reply (reply->msg) when status == 0; else NULL */
    cl_done_cb done;
    void *ctx; /* the issuer's */
    /* Sequential network round trips the op cost, set before completion by
     * the layer that answers it: the protocol client sets 1 for a request
     * it sent; a layer answering from sub-operations sets the sum over its
     * sequential phases of each phase's maximum (a parallel fan-out to
     * three bricks is one round trip, a following MARK exchange a second);
     * a layer forwarding the op itself leaves it alone. 0: answered
     * without the network. Read by the counters (opstats.h). */
    uint32_t rounds;
    /* A READ of a window read ahead of the reader (src/fuse/readcache.c),
     * which any clean copy may answer: replicate sends it to a copy other
     * than the handle's read child when it can, so that it does not queue
     * ahead of the reader's own reads and the copies share the sweep. */
    uint8_t spread;
};

/* A layer's life: its constructor (cl_proto_new, cl_repl_new, cl_dht_new, ...)
 * makes it over children that already exist; reconfigure() gives it the
 * volume's options once at build (cl_stack_build) and again whenever they
 * change; submit() runs operations; stop() ends its own background work that
 * uses the children (heal threads, workers), after which operations still in
 * flight complete; destroy() frees it. A stack is torn down whole by
 * cl_layer_destroy_tree: every layer is stopped, parents before children,
 * then destroyed, children before parents, so no layer's thread ever calls
 * into a child that is gone. */
struct cl_layer {
    const char *name;
    void (*submit)(struct cl_layer *self, struct cl_op *op);
    /* Applies changed volume options (live options); may be NULL. */
    void (*reconfigure)(struct cl_layer *self, const struct opt_set *opts);
    /* Ends the layer's background work that uses its children; may be NULL.
     * Called once, before any child is stopped or destroyed. */
    void (*stop)(struct cl_layer *self);
    /* Frees the layer (not its children), after its children are destroyed. */
    void (*destroy)(struct cl_layer *self);
    struct cl_layer **children;
    int n_children;
    void *priv;
};

static inline void cl_submit(struct cl_layer *l, struct cl_op *op)
{
    l->submit(l, op);
}

static inline void cl_op_init(struct cl_op *op, uint16_t opcode, cl_done_cb done, void *ctx)
{
    __builtin_memset(op, 0, sizeof(*op));
    op->args.op = opcode;
    op->done = done;
    op->ctx = ctx;
}

/* Records the result and calls done(). Takes ownership of reply. */
static inline void cl_op_complete(struct cl_op *op, int status, struct rpc_frame *reply)
{
    op->status = status;
    if (status < 0 && reply) {
        rpc_frame_free(reply);
        reply = NULL;
    }
    op->reply = reply;
    op->done(op);
}

static inline void cl_op_release(struct cl_op *op)
{
    rpc_frame_free(op->reply);
    op->reply = NULL;
}

/* What an application is told of an op's status: 0 or -errno. A brick
 * unreachable or silent reads as GlusterFS's "Transport endpoint is not
 * connected" (ENOTCONN); anything outside the errno range as EIO. */
static inline int cl_status_errno(int status)
{
    if (status >= 0)
        return 0;
    if (status == -ETIMEDOUT)
        return -ENOTCONN;
    if (status < -4095)
        return -EIO;
    return status;
}

/* Applies changed volume options to top and every layer below it, children
 * first (a layer shared by two parents is reconfigured once per parent). */
void cl_layer_reconfigure_all(struct cl_layer *top, const struct opt_set *opts);

/* Stops every layer of the tree under top (parents first), then destroys
 * them (children first). Only after every operation submitted to the tree
 * has completed. NULL is ignored. */
void cl_layer_destroy_tree(struct cl_layer *top);

/* Runs an operation synchronously: submits it and waits for done(). Never
 * on a thread that completes operations (a reply would wait for itself).
 * Returns op->status. */
int cl_op_run(struct cl_layer *l, struct cl_op *op);

#endif
