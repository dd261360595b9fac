/* Statedump files (statedump.h). */
#include "statedump.h"

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

/* mkdir -p of dir (mode 0755 for what it makes). */
static int make_dirs(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        if (!c)
            break;
        *s = c;
    }
    struct stat st;
    if (stat(p, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
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
    int rc = make_dirs(dir);
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

int sd_close(FILE *f)
{
    fputc('\n', f);
    stamp(f, "DUMP-END-TIME");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}
