/* Giving the memory a process freed back to the system (memtrim.c). */
#ifndef CAIRN_MEMTRIM_H
#define CAIRN_MEMTRIM_H

#include <stddef.h>

struct memtrim;

/* Starts a thread that, every period_ms, returns the allocator's free
 * pages to the system once more than slack bytes, and more than are in
 * use, are free. Returns 0 and *out, or -errno (-ENOTSUP in a build with
 * AddressSanitizer, whose allocator this cannot trim). */
int memtrim_start(struct memtrim **out, unsigned period_ms, size_t slack);
void memtrim_stop(struct memtrim *m);
/* One line for the counters: the process's resident memory now, and the
 * trims made and the memory they returned ("not trimmed" when m is NULL).
 * Returns what snprintf would. */
int memtrim_format(struct memtrim *m, char *buf, size_t n);

#endif
