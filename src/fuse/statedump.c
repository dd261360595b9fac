/* The mount's statedump: on SIGUSR1 (sent by `cairn volume statedump VOL
 * client HOST:PID`, or by an administrator), cairn-fuse writes what it
 * holds to DIR/client-MOUNTPOINT.PID.dump.SECONDS, DIR being the volume's
 * server.statedump-path (docs/operations.md, "Statedump"): the mount, its
 * counters (the io-stats text), the nodes with open handles, and what it
 * holds under leases.
 *
 * SIGUSR1 is blocked in every thread (cf_statedump_block, before the
 * first thread starts); one thread of its own takes it with sigwait, so
 * the dump never runs inside a signal handler and the FUSE threads keep
 * serving meanwhile. Locks are only tried for a while (sd_lock). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/statedump.h"
#include "bridge.h"

#define STATS_MAX 65536

struct cf_sd {
    struct cf *cf;
    pthread_t thread;
    pthread_mutex_t lock; /* dir */
    char *dir;
    char mountpoint[PATH_MAX];
    char volume[256];
    int stop;
};

void cf_statedump_block(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static int dump(struct cf_sd *d, char *path, size_t len)
{
    pthread_mutex_lock(&d->lock);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", d->dir ? d->dir : SD_DEFAULT_DIR);
    pthread_mutex_unlock(&d->lock);
    char name[PATH_MAX + 8];
    snprintf(name, sizeof(name), "client-%s",
             d->mountpoint[0] == '/' ? d->mountpoint + 1 : d->mountpoint);
    FILE *f = sd_open(dir, name, path, len);
    if (!f)
        return -errno;
    fprintf(f, "\n[client]\nmountpoint=%s\nvolume=%s\npid=%d\n", d->mountpoint, d->volume,
            (int)getpid());
    char *stats = malloc(STATS_MAX);
    if (stats) {
        size_t n = cf_stats_format(d->cf, stats, STATS_MAX);
        fprintf(f, "\n[client.io-stats]\n%.*s", (int)n, stats);
        free(stats);
    }
    cl_itable_dump_open(d->cf->it, f);
    cf_known_dump(d->cf, f);
    return sd_close(f);
}

static void *sd_main(void *arg)
{
    struct cf_sd *d = arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    for (;;) {
        int sig;
        if (sigwait(&s, &sig) != 0)
            continue;
        if (__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE))
            break;
        char path[PATH_MAX + 64];
        sd_log(dump(d, path, sizeof(path)), path);
    }
    return NULL;
}

int cf_statedump_start(struct cf *cf, const char *mountpoint, const char *volume, const char *dir)
{
    struct cf_sd *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->cf = cf;
    pthread_mutex_init(&d->lock, NULL);
    d->dir = dir && *dir ? strdup(dir) : NULL;
    snprintf(d->mountpoint, sizeof(d->mountpoint), "%s", mountpoint);
    snprintf(d->volume, sizeof(d->volume), "%s", volume);
    int rc = pthread_create(&d->thread, NULL, sd_main, d);
    if (rc) {
        pthread_mutex_destroy(&d->lock);
        free(d->dir);
        free(d);
        return -rc;
    }
    cf->sd = d;
    return 0;
}

void cf_statedump_set_dir(struct cf *cf, const char *dir)
{
    struct cf_sd *d = cf->sd;
    if (!d)
        return;
    char *v = dir && *dir ? strdup(dir) : NULL;
    pthread_mutex_lock(&d->lock);
    free(d->dir);
    d->dir = v;
    pthread_mutex_unlock(&d->lock);
}

void cf_statedump_stop(struct cf *cf)
{
    struct cf_sd *d = cf->sd;
    if (!d)
        return;
    __atomic_store_n(&d->stop, 1, __ATOMIC_RELEASE);
    pthread_kill(d->thread, SIGUSR1);
    pthread_join(d->thread, NULL);
    pthread_mutex_destroy(&d->lock);
    free(d->dir);
    free(d);
    cf->sd = NULL;
}
