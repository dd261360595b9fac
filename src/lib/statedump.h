/* Statedump files, for every process that writes one (bricks, clients):
 * where they go, how they start and end, and locking that never hangs a
 * dump of a process stuck with a lock held (docs/operations.md,
 * "Statedump"). */
#ifndef CAIRN_LIB_STATEDUMP_H
#define CAIRN_LIB_STATEDUMP_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

/* Where dumps go when server.statedump-path was never set. */
#define SD_DEFAULT_DIR "/var/run/cairn"

/* Opens DIR/NAME.PID.dump.SECONDS for writing (DIR made when missing;
 * NAME with every '/' turned into '-', a leading one dropped) and writes
 * the start stamp. The file's name goes to path (or, on failure, what
 * failed). NULL with errno set on failure. */
FILE *sd_open(const char *dir, const char *name, char *path, size_t len);
/* Writes the end stamp and closes f: 0, or -errno. */
int sd_close(FILE *f);
/* Logs what a dump asked for by SIGUSR1 came to: rc 0, written to path;
 * else the error, path naming what failed. */
void sd_log(int rc, const char *path);
/* Locks m, or gives up after a second (-EBUSY). */
int sd_lock(pthread_mutex_t *m);
/* Starts section [name] and locks m with sd_lock: 0, or -EBUSY with
 * "skipped=busy" written. */
int sd_section(FILE *f, const char *name, pthread_mutex_t *m);

#endif
