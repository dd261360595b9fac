/* Self-heal of replica sets: the engine (heal.c, heal_data.c) shared by the
 * self-heal daemon (src/shd), the CLI (`cairn volume heal`) and the replicate
 * layer's own heal thread, and its pure decision logic (heal_policy.c).
 * docs/replication.md, "Heal", says how the good copy is chosen. */
#ifndef CAIRN_CLIENT_HEAL_H
#define CAIRN_CLIENT_HEAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "replicate.h"

/* cluster.favorite-child-policy: how a split brain is resolved without an
 * administrator. */
enum cl_heal_policy {
    CL_HEAL_POL_NONE,     /* leave it; heal info reports it */
    CL_HEAL_POL_SIZE,     /* the biggest copy */
    CL_HEAL_POL_MTIME,    /* the latest modification time */
    CL_HEAL_POL_CTIME,    /* the latest change time */
    CL_HEAL_POL_MAJORITY, /* the (size, mtime) that more than half of the set holds */
};

/* "none|size|mtime|ctime|majority" -> policy, or -EINVAL. Pure. */
int cl_heal_policy_parse(const char *s);

/* What a heal knows of one child's copy of an object. */
struct cl_heal_copy {
    uint64_t size;
    int64_t mtime, ctime;
    uint32_t mtime_ns, ctime_ns;
};

/* The sources of an object: the children holding it (have) that no holder
 * accuses (accused: OR of the holders' pending marks), data children only
 * (data). 0 with have != 0 means split brain: every copy is accused by
 * another (for two replicas: each blames the other). Pure. */
uint32_t cl_heal_sources(uint32_t have, uint32_t accused, uint32_t data);

/* The child a policy picks among cand (bit i: child i's copy is c[i]), or -1
 * when the policy is none or cannot decide (a tie on size or time, no
 * majority). n: the set's size (majority counts against it). Pure. */
int cl_heal_policy_pick(int n, uint32_t cand, const struct cl_heal_copy *c, enum cl_heal_policy p);

/* Range heal: which blocks differ. src/dst hold n_src/n_dst checksums (u64
 * little-endian, 8 bytes each, as CHECKSUM returns them); bit i of out (a
 * caller's array of (max+63)/64 words) is set when block i must be copied:
 * checksums differ, or the sink has no such block. Blocks past n_src are
 * not the sink's business (it is truncated first). Returns the number of
 * blocks to copy, or -EPROTO when a length is not a multiple of 8 or a count
 * exceeds max. Pure; the fuzz target fuzz_heal_sums exercises it. */
int cl_heal_diff_sums(const uint8_t *src, size_t src_len, const uint8_t *dst, size_t dst_len,
                      uint64_t *out, size_t max);

/* How far a long heal or heal info has come, for progress lines (the CLI
 * prints them, src/cli/progress.c). Owned by the caller, which reads it
 * from another thread while the engine adds to it (__atomic builtins); the
 * engine never reads it. Counts accumulate over runs that share it. */
struct cl_heal_progress {
    unsigned walked;       /* full heal: objects the walk from the root looked at */
    unsigned queued;       /* index entries (heal) or entries to classify (info) found */
    unsigned done;         /* of those, finished */
    unsigned healed;       /* objects brought in line */
    uint64_t bytes_copied; /* file data written to sinks */
};

/* How one heal run behaves. */
struct cl_heal_params {
    uint32_t index_mask; /* children whose heal index is read; 0: every child */
    int full;            /* also walk the whole tree from the root */
    int threads;         /* objects healed in parallel (cluster.shd-max-threads); <1: 1 */
    uint64_t rate_bps;   /* data copied per second at most (cluster.heal-rate-limit); 0: no limit */
    enum cl_heal_policy policy; /* applied to split-brain objects */
    int source;                 /* >= 0: this child is the source of every split-brain object */
    const char *path;           /* non-NULL: heal only this object (split-brain commands) */
    int takeover;               /* with index_mask: also heal entries another daemon owns */
    struct cl_heal_progress *progress; /* non-NULL: kept up to date during the run */
    /* > 0: the set is a disperse set of n - redundancy data fragments and
     * redundancy redundancy ones (docs/disperse.md, "Heal"): a stale
     * file's fragment is rebuilt from k good ones (heal_ec.c), never copied
     * from another brick, and split-brain policies do not apply. */
    int redundancy;
};

/* One heal run over a replica set with params p (NULL: index heal, one
 * thread, no limit, policy none). Statistics are added to st. Uses the
 * children synchronously; never call on a completion thread. 0, or -errno of
 * a child's INDEX failing; -ENOENT when p->path names nothing. */
int cl_heal_run(struct cl_layer **children, int n, int arbiter, const struct cl_heal_params *p,
                struct cl_heal_stats *st);

/* How many objects a full heal of a set will walk, about: the inodes in use
 * on the file system of its fullest data child (from STATFS). An upper
 * bound where that file system holds more than the brick; 0 when no data
 * child answers. */
unsigned cl_heal_expect(struct cl_layer **children, int n, int arbiter);

/* State of one index entry, for heal info. */
enum cl_heal_state {
    CL_HEAL_ST_PENDING, /* needs heal */
    CL_HEAL_ST_SPLIT,   /* is in split brain */
    CL_HEAL_ST_HEALING, /* could not be looked at everywhere (possibly healing) */
};

/* What heal info finds, child by child (cl_heal_walk): brick_cb before a
 * child's entries; entry_cb for each, with its gfid as text and its path
 * from the volume's root (NULL when the index knows only the gfid);
 * brick_end_cb after them, with err 0 and the count of entries in total and
 * per state, or err -errno when the child's index could not be read (a
 * child that is down: -ENOTCONN). */
struct cl_heal_visitor {
    void (*brick_cb)(void *arg, int child);
    void (*entry_cb)(void *arg, const char *gfid, const char *path, enum cl_heal_state s);
    void (*brick_end_cb)(void *arg, int child, int err, unsigned total, const unsigned count[3]);
};

/* Walks every child's index entries, classifying each; the last child's
 * error, or 0. Uses the children synchronously. progress (may be NULL):
 * queued counts the entries read, done those classified. */
int cl_heal_walk(struct cl_layer **children, int n, int arbiter, const struct cl_heal_visitor *v,
                 void *arg, struct cl_heal_progress *progress);

/* heal info: every up child's index entries with their state, in GlusterFS's
 * layout; mode 0: list, 1: summary, 2: split-brain only. Adds the entries
 * in split brain to *split when non-NULL. progress as cl_heal_walk's.
 * 0 or -errno. */
int cl_heal_report(struct cl_layer **children, char **names, int n, int arbiter, int mode,
                   FILE *out, unsigned *split, struct cl_heal_progress *progress);

#endif
