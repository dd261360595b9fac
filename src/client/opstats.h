/* Client-side counters: per opcode, how many operations the stack was
 * given and how many sequential network round trips they cost (cl_op.rounds,
 * layer.h). Read on a mount as the virtual xattr trusted.cairn.io-stats of
 * its root (docs/replication.md, "Round trips per operation").
 *
 * Ownership: the caller owns the struct; every function is thread-safe
 * (relaxed atomics; a format racing a note may mix two moments). */
#ifndef CAIRN_CLIENT_OPSTATS_H
#define CAIRN_CLIENT_OPSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "../rpc/msg.h"

#define CL_OPSTATS_HIST 4 /* operations with 0, 1, 2 and 3+ round trips */

struct cl_opstat {
    uint64_t calls, rounds, max_rounds, errors;
    uint64_t hist[CL_OPSTATS_HIST];
};

struct cl_opstats {
    struct cl_opstat op[RPC_OP_MAX];
    uint64_t since_ns; /* CLOCK_MONOTONIC of the start or the last clear */
};

void cl_opstats_init(struct cl_opstats *s);
/* One operation of opcode op completed with status after rounds round trips. */
void cl_opstats_note(struct cl_opstats *s, unsigned op, uint32_t rounds, int status);
void cl_opstats_clear(struct cl_opstats *s);
/* Writes the table (text, one line per opcode seen) into out, NUL-terminated;
 * returns the length it needed (like snprintf). */
size_t cl_opstats_format(const struct cl_opstats *s, char *out, size_t len);

#endif
