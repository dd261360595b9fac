/* Statedump files (statedump.h). */
#include "statedump.h"

#include "dirs.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_MS 1000

int sd_lock(pthread_mutex_t *m)
{
    struct timespec step = {0, 1000000};
    for (int i = 0; i < LOCK_MS; i++) {
        if (pthread_mutex_trylock(m) == 0)
            return 0;
        nanosleep(&step, NULL);
    }
    return -EBUSY;
}

int sd_section(FILE *f, const char *name, pthread_mutex_t *m)
{
    fprintf(f, "\n[%s]\n", name);
    if (sd_lock(m) == 0)
        return 0;
    fprintf(f, "skipped=busy\n");
    return -EBUSY;
}

static void stamp(FILE *f, const char *what)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char t[64];
    strftime(t, sizeof(t), "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(f, "%s: %s.%06ld UTC\n", what, t, ts.tv_nsec / 1000);
}

FILE *sd_open(const char *dir, const char *name, char *path, size_t len)
{
    int rc = dirs_make(dir);
    if (rc < 0) {
        snprintf(path, len, "%s", dir);
        errno = -rc;
        return NULL;
    }
    char flat[NAME_MAX + 1];
    snprintf(flat, sizeof(flat) - 40, "%s", name[0] == '/' && name[1] ? name + 1 : name);
    for (char *s = flat; *s; s++)
        if (*s == '/')
            *s = '-';
    if (snprintf(path, len, "%s/%s.%d.dump.%lld", dir, flat, (int)getpid(),
                 (long long)time(NULL)) >= (int)len) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    stamp(f, "DUMP-START-TIME");
    return f;
}

void sd_log(int rc, const char *path)
{
    if (rc < 0)
        log_error("SIGUSR1: cannot write the statedump %s: %s", path, strerror(-rc));
    else
        log_info("SIGUSR1: statedump written to %s", path);
}

int sd_close(FILE *f)
{
    fputc('\n', f);
    stamp(f, "DUMP-END-TIME");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}
