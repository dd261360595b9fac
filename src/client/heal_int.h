/* Internals shared by heal.c, heal_data.c and heal_report.c. */
#ifndef CAIRN_CLIENT_HEAL_INT_H
#define CAIRN_CLIENT_HEAL_INT_H

#include <pthread.h>

#include "client.h"
#include "heal.h"

struct hctx {
    struct cl_layer **ch;
    int n, arbiter;
    struct cl_heal_params p;
    struct cl_heal_stats *st; /* updated with __atomic builtins (heal threads) */
    pthread_mutex_t lock;     /* the rate limiter and the room below */
    uint64_t next_ns;         /* rate limiter: when the next copy may start */
    /* Free space of each child as last read (STATFS) less what was copied
     * there since, and when it was read (0: never). */
    uint64_t room[CL_REPL_MAX], room_ms[CL_REPL_MAX];
    struct cl_ec *ec; /* a disperse set's code (p.redundancy > 0), else NULL */
};

struct look {
    int rc; /* 0, -ENOENT, other -errno */
    struct rpc_attr a;
    uint32_t pending;
};

void cl__heal_path_op(struct cl_op *op, uint16_t code, const char *path);
int cl__heal_lookup(struct cl_layer *c, const char *path, struct look *l);
int cl__heal_simple(struct cl_layer *c, struct cl_op *op);
/* Index entries of child c: a malloc'd NUL-terminated buffer of
 * "gfid path\n" lines, leaving out the entries that wait only for members
 * in down (bit i: member i of the set; 0: none left out); *waiting (when
 * not NULL) counts those left out. */
int cl__heal_read_index(struct cl_layer *c, uint32_t down, char **out, size_t *len,
                        uint64_t *waiting);

/* What the up children hold under path (gfid g when known). */
struct cl__heal_view {
    struct look l[CL_REPL_MAX];
    uint32_t up, have, accused, sources, data;
    uint32_t dirty; /* children whose copy is marked RPC_PENDING_DIRTY */
};
/* 0, or -EAGAIN when a child could not answer. */
int cl__heal_view(struct hctx *h, const char *path, const gfid_t *g, struct cl__heal_view *v);

/* Makes the data of dst's open file dfh (size bytes at the end) equal to
 * src's file at path. ranged: the sink already holds an older copy of the
 * same file (open for reading and writing): only differing blocks are
 * copied. 0 or -errno. */
int cl__heal_data(struct hctx *h, struct cl_layer *src, struct cl_layer *dst, const char *path,
                  uint64_t dfh, uint64_t size, int ranged);

/* The rate limiter (cluster.heal-rate-limit): waits until bytes more may be
 * written, on a schedule shared by every heal thread of h. */
void cl__heal_throttle(struct hctx *h, uint64_t bytes);

/* Disperse heal (heal_ec.c): makes fragment dst of the file at path (id
 * g, size bytes) on dst's open file dfh (open for reading and writing,
 * had bytes long) what the code gives from k good fragments: the children
 * holding the file that nobody accuses, dst left out. 0, -EAGAIN when
 * fewer than k good fragments are up, or -errno. */
int cl__heal_ec_data(struct hctx *h, int dst, const char *path, const gfid_t *g, uint64_t dfh,
                     uint64_t size, uint64_t had);

#endif
