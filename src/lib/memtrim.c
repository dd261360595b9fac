/* Giving the memory a process freed back to the system.
 *
 * The allocator keeps what the process frees for its next allocations and
 * returns memory to the system only from the top of each heap. A mount
 * that copied, read or untarred many small files keeps long-lived records
 * (inodes, directory entries, attributes) scattered between the large
 * short-lived buffers of that work (request structures, written-back file
 * data, read windows); once the work is done, the freed buffers' pages
 * stay resident, pinned by the small records between them. After the
 * full-size tree was copied and read, a mount held about 90 MB free that
 * way beside 47 MB in use (docs/notes/performance-notes.md, round seventeen).
 *
 * A thread looks every period at how much the allocator holds free and,
 * once that is more than the slack and more than what is in use, has it
 * return every whole free page (malloc_trim; the addresses stay valid, a
 * later allocation there faults a fresh page in). A busy mount frees and
 * allocates its buffers again all the time; handing those pages back each
 * period and faulting them in again would cost more than it saves, so the
 * trim waits until most of the heap is free, which is what a mount looks
 * like once its work is done. Resident memory then stays below twice what
 * is in use, plus the slack. A trim that returned less than a mebibyte
 * (the free memory is in pieces smaller than a page, or already returned)
 * makes the next one wait twice as many periods, up to BACKOFF_MAX. */
#include "memtrim.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "net.h"

#define BACKOFF_MAX 32        /* periods */
#define PRODUCTIVE (1u << 20) /* a trim that returned at least this much */

struct memtrim {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    unsigned period_ms;
    size_t slack;
    int stop;
    unsigned backoff, skip;   /* periods to wait after trims that returned little */
    uint64_t trims, returned; /* bytes resident before a trim minus after */
};

/* The process's resident memory in bytes, or 0 when unknown. */
static size_t resident(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (!f)
        return 0;
    int n = fscanf(f, "%lu %lu", &size, &rss);
    fclose(f);
    return n == 2 ? (size_t)rss * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

static void *trim_main(void *arg)
{
    struct memtrim *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        struct timespec at;
        net_deadline(&at, CLOCK_MONOTONIC, m->period_ms);
        while (!m->stop && pthread_cond_timedwait(&m->cond, &m->lock, &at) != ETIMEDOUT)
            ;
        if (m->stop)
            break;
        if (m->skip) {
            m->skip--;
            continue;
        }
        pthread_mutex_unlock(&m->lock);
        struct mallinfo2 mi = mallinfo2();
        size_t before = 0, after = 0;
        int trimmed = mi.fordblks > m->slack && mi.fordblks > mi.uordblks;
        if (trimmed) {
            before = resident();
            malloc_trim(0);
            after = resident();
        }
        pthread_mutex_lock(&m->lock);
        if (trimmed) {
            size_t got = before > after ? before - after : 0;
            m->trims++;
            m->returned += got;
            if (got >= PRODUCTIVE)
                m->backoff = 0;
            else
                m->backoff =
                    m->backoff ? (m->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : m->backoff * 2) : 1;
            m->skip = m->backoff;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int memtrim_start(struct memtrim **out, unsigned period_ms, size_t slack)
{
#ifdef __SANITIZE_ADDRESS__
    (void)out, (void)period_ms, (void)slack;
    return -ENOTSUP; /* the sanitizer's allocator is not the one trimmed */
#endif
    struct memtrim *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    net_cond_init_mono(&m->cond);
    pthread_mutex_init(&m->lock, NULL);
    m->period_ms = period_ms ? period_ms : 1;
    m->slack = slack;
    int rc = pthread_create(&m->thread, NULL, trim_main, m);
    if (rc != 0) {
        pthread_cond_destroy(&m->cond);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return -rc;
    }
    *out = m;
    return 0;
}

void memtrim_stop(struct memtrim *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

int memtrim_format(struct memtrim *m, char *buf, size_t n)
{
    if (!m)
        return snprintf(buf, n, "FUSE client memory: %zu KiB resident, not trimmed\n",
                        resident() / 1024);
    pthread_mutex_lock(&m->lock);
    uint64_t trims = m->trims, returned = m->returned;
    pthread_mutex_unlock(&m->lock);
    return snprintf(
        buf, n, "FUSE client memory: %zu KiB resident, %llu trims returned %llu KiB freed\n",
        resident() / 1024, (unsigned long long)trims, (unsigned long long)(returned / 1024));
}
