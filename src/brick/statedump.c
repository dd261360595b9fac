/* Statedump: the brick's internal state written to a file on SIGUSR1
 * (`cairn volume statedump VOL` sends it; an administrator may too), for
 * finding what a stuck or misbehaving brick holds: its connections and
 * the requests they have running, every open handle, every lease and its
 * holders, the byte-range locks and their waiters, the space reserve.
 *
 * The file is DIR/BRICKPATH.PID.dump.SECONDS, BRICKPATH with '/' turned
 * into '-' (the shape GlusterFS's dumps have), DIR being the live option
 * server.statedump-path (created when missing). The format is sections of
 * key=value lines (docs/operations.md, "Statedump"); lib/statedump.c
 * makes the file.
 *
 * Written by the main thread, which takes signals; the other threads keep
 * serving. A dump is for a brick that may be stuck with a lock held, so
 * every lock is only tried for a while (sd_lock): a part whose lock
 * stays taken is written as "skipped=busy" and the dump goes on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../lib/statedump.h"
#include "brick.h"

int brick_statedump(struct brick *b, char *written, size_t len)
{
    char dir[PATH_MAX];
    pthread_mutex_lock(&b->opt_lock);
    snprintf(dir, sizeof(dir), "%s", b->statedump_path ? b->statedump_path : SD_DEFAULT_DIR);
    pthread_mutex_unlock(&b->opt_lock);
    FILE *f = sd_open(dir, b->path, written, len);
    if (!f)
        return -errno;
    fprintf(f, "\n[brick]\nvolume=%s\npath=%s\nid=%s\npid=%d\n", b->volume, b->path, b->id,
            (int)getpid());
    brick_space_dump(b, f);
    brick_quota_dump(b, f);
    brick_conns_dump(b, f);
    brick_lease_dump(b, f);
    brick_locks_dump(b, f);
    return sd_close(f);
}
