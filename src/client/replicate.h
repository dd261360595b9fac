/* The replicate layer: one replica set of N protocol children (the last one
 * an arbiter when asked). See docs/replication.md.
 *
 * Modifying operations go to every up child at once, each carrying PENDING
 * (the children that will not get it), and succeed on quorum. Reads go to one
 * child. A child whose connection is down is skipped without waiting.
 *
 * Ownership: the layer owns neither its children nor their lifetime;
 * its stop() ends the background heal thread (layer.h: a tree is stopped
 * before any of it is destroyed). */
#ifndef CAIRN_CLIENT_REPLICATE_H
#define CAIRN_CLIENT_REPLICATE_H

#include <stdint.h>
#include <stdio.h>

#include "layer.h"

#define CL_REPL_MAX 16

/* Whether the children in ok (bit i: child i succeeded, or is up) make a
 * quorum of a set of n. need 0 is cluster.quorum-type auto: more than half,
 * or exactly half including the first child; need k >= 1 asks for at least
 * k children (fixed: quorum-count; none: 1). With an arbiter (child n-1) a
 * data change also needs one data child, whatever the type. Pure. */
int cl_repl_quorum_met(int n, int arbiter, int need, int data_op, uint32_t ok);
/* The need of cluster.quorum-type type with cluster.quorum-count count in a
 * set of n: 0 (auto), 1 (none) or the count, at most n. A fixed type without
 * a count (0) is auto. Pure. */
int cl_repl_quorum_need(const char *type, int64_t count, int n);

/* The error a failed fan-out returns: the most frequent errno among children
 * that answered (not ENOTCONN/ETIMEDOUT), else -ENOTCONN. errs[i] is 0 for a
 * success or a child that was not asked (asked bit clear). Pure. */
int cl_repl_merge_error(int n, uint32_t asked, const int *errs);

/* The child that serves a read: the first candidate from the start slot
 * (hash % n) in usable (bit set: up, not tried); prefer[] bits are tried
 * first. -1 when none. Pure. */
int cl_repl_pick(int n, uint64_t hash, uint32_t prefer, uint32_t usable);

/* Creates the layer over children[0..n) (2 <= n <= CL_REPL_MAX). The child
 * layers must be protocol layers (cl_proto_connected tells whether they are
 * up). heal_interval_ms 0: no background heal. NULL on ENOMEM / bad n. */
struct cl_layer *cl_repl_new(struct cl_layer **children, int n, int arbiter, const char *volume,
                             int heal_interval_ms);
/* Adds a member to the set while it is in use (add-brick raising the
 * replica count; docs/elastic.md): child (a protocol layer, now the
 * layer's) becomes member n, the arbiter when arbiter is set. The new brick
 * accuses itself until heal has filled it, so no read goes to it; changes
 * do, and those made through handles opened before are marked for it.
 * The caller then reconfigures the layer (the quorum counts the new
 * member). 0, or -ENOSPC (CL_REPL_MAX members, or an arbiter already). */
int cl_repl_add_child(struct cl_layer *l, struct cl_layer *child, int arbiter);
/* Removes a member from the set while it is in use (remove-brick lowering
 * the replica count; docs/elastic.md): the last member (the arbiter, when
 * the set has one). From the call on no operation asks it or reads from
 * it; those in flight on it fail there only, as when a brick goes down,
 * and count for nothing (no quorum, no marks against it). Open files
 * read from another member (a directory listing read from it fails at its
 * next part, as when a brick goes down). Its layer is shut down and destroyed with the
 * set's. The set may be left with one member. The caller then
 * reconfigures the layer (the quorum counts the members left). 0, or
 * -ENOTSUP (not the last member, or the only one). */
int cl_repl_remove_child(struct cl_layer *l, int member);

/* ---- for the disperse layer (disperse.h), which runs each disperse set's
 * fan-out, handles, quorum and marks through a replicate layer of its own
 * and gives every child its own fragment ---- */

/* Rewrites child's copy of an operation's arguments (FH already the
 * child's handle); args points into the fan-out, valid until it ends, and
 * what it is made to point to must stay valid until the operation completes. */
typedef void (*cl_repl_each_cb)(void *ctx, int child, struct rpc_msg *args);
/* Runs op (a change: WRITE, SETATTR, FALLOCATE, MAKE_FILE...) as replicate
 * runs changes (every up child holding the handle, the quorum, marks for
 * those that missed it), with each() shaping every child's arguments. The
 * reply is one child's. A WRITE's stored length is not compared between
 * children. */
void cl_repl_change_each(struct cl_layer *l, struct cl_op *op, cl_repl_each_cb each, void *ctx);
/* Sends op to child only (through its handle when op has FH); no
 * failing over. */
void cl_repl_submit_to(struct cl_layer *l, struct cl_op *op, int child);
/* The children holding a handle of open file fh (bit i: child i), and the
 * object's gfid as opened (*has_gfid 0 when unknown); 0 for an unknown fh. */
uint32_t cl_repl_fh_children(struct cl_layer *l, uint64_t fh, gfid_t *gfid, int *has_gfid);
/* The children up and accused by no brick of the set: their copies (their
 * fragments) hold every change. */
uint32_t cl_repl_readable(struct cl_layer *l);
/* Every change needs need children from now on, whatever
 * cluster.quorum-type says (disperse: the k fragments that decode). */
void cl_repl_pin_quorum(struct cl_layer *l, int need);

/* ---- heal (heal.c) ---- */

struct cl_heal_stats {
    unsigned entries;      /* index entries looked at */
    unsigned healed;       /* objects brought in line */
    unsigned pending;      /* left for later (a child down, an error) */
    unsigned split;        /* no replica is unaccused: split brain */
    unsigned failed;       /* a copy failed (errors other than a child being down) */
    unsigned resolved;     /* split-brain objects healed by a policy or a chosen source */
    unsigned skipped;      /* entries left to another server's daemon (their owner) */
    uint64_t bytes_copied; /* file data written to sinks */
    uint64_t bytes_same;   /* file data a range heal found equal and did not copy */
};

/* One heal pass over a replica set: every index entry of every up child
 * (full: also every object, walking the tree from the root). Uses the
 * children synchronously; never call on a completion thread. Progress and
 * problems go to the log. 0 or -errno (a child's INDEX failing). */
int cl_heal_set(struct cl_layer **children, int n, int arbiter, int full, struct cl_heal_stats *st);
/* Prints each child's index entries (heal info) in GlusterFS's layout. */
int cl_heal_info(struct cl_layer **children, char **names, int n, FILE *out);

#endif
