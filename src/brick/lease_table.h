/* The brick's table of leases (internal to lease.c and lease_table.c).
 *
 * Leases are keyed by request path, found by a hash of it, and also kept
 * as a tree of paths: every lease's node hangs under the node of its
 * parent directory's path, which exists (as a node without holders, a
 * placeholder) while anything under it does. A change to a path and
 * everything beneath it (a rename, the removal of a tree) and a listing of
 * a directory then visit only the nodes concerned, never the whole table:
 * with tens of thousands of leases held, a scan per rename made each one
 * cost milliseconds (docs/notes/performance-notes.md, round thirty-three).
 *
 * Nodes cooling down or with a holder being recalled are also on the timed
 * list, which is all the timer looks at.
 *
 * Nodes are freed only by brick_ltab_reap (called before the table's lock
 * is dropped): brick_ltab_put marks a node that may have become unused, so
 * that loops over nodes never meet a freed one. All of it runs under the
 * lock of the brick_leases holding the table. */
#ifndef CAIRN_BRICK_LEASE_TABLE_H
#define CAIRN_BRICK_LEASE_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct brick_conn;
struct parked;
struct lease_wait;

struct holder {
    struct brick_conn *bc;
    int recalling;
    int excl;              /* an exclusive lease (RPC_LEASE_EXCL) */
    unsigned xdir;         /* on a file: 1 + the slot of its directory in xdirs */
    struct parked *parked; /* requests waiting for it */
    uint64_t deadline_ms;
    uint64_t recalled_ms;      /* when it was recalled (recalling): for the metrics */
    struct lease_wait **waits; /* replies held until this holder returns */
    int n_waits, cap_waits;
};

struct lease {
    struct lease *next; /* hash chain */
    char *path;
    size_t len;
    uint64_t hash;
    uint64_t cooldown_until_ms;
    int shared_ok; /* the cool-down refuses exclusive leases only */
    /* The connection whose change started a full cool-down (compared,
     * never followed): it may still take the file exclusively, as its
     * writes made the others' leases go (lease.c, grant_file). */
    const void *cool_by;
    /* After a look, no exclusive lease before this, whoever asks (within
     * cooldown_until_ms). */
    uint64_t excl_until_ms;
    struct holder *h;
    int n, cap;
    /* the tree of paths: the parent directory's node ("/" has none), the
     * first child, and the siblings */
    struct lease *up, *kid, *sib_prev, *sib_next;
    struct lease *t_prev, *t_next; /* the timed list */
    int timed, reaping;
    struct lease *reap_next;
};

struct brick_ltab {
    struct lease **b;
    size_t nb, count;    /* buckets; nodes, placeholders included */
    size_t max;          /* nodes at most; beyond, no new path is added */
    struct lease *timed; /* the timed list */
    struct lease *reap;  /* nodes that may have become unused */
};

/* 0 or -ENOMEM. */
int brick_ltab_init(struct brick_ltab *T, size_t max);
/* Frees every node; their holders must have been dealt with. */
void brick_ltab_fini(struct brick_ltab *T);

uint64_t brick_ltab_hash(const char *p, size_t len);
/* The parent of path p (len bytes): "/" for "/x" and for "/". */
size_t brick_ltab_parent_len(const char *p, size_t len);

struct lease *brick_ltab_find(const struct brick_ltab *T, const char *p, size_t len);
/* The node of p, added (with its missing ancestors) if need be; NULL when
 * out of memory or at T->max nodes. */
struct lease *brick_ltab_find_or_add(struct brick_ltab *T, const char *p, size_t len);

/* l may have become unused (no holder, cooled down, no children, not
 * timed): it is freed at the next reap if it still is, and then its
 * ancestors that became unused with it. */
void brick_ltab_put(struct brick_ltab *T, struct lease *l);
void brick_ltab_reap(struct brick_ltab *T, uint64_t now);

/* The node after l in a walk of top and everything under it (parents
 * before children); NULL at the end. Start with l = top. */
struct lease *brick_ltab_walk_next(const struct lease *top, const struct lease *l);

/* On the timed list from now on; 1 when the list was empty. */
int brick_ltab_watch(struct brick_ltab *T, struct lease *l);
/* Off the timed list (and put). */
void brick_ltab_unwatch(struct brick_ltab *T, struct lease *l);

#endif
