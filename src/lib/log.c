/* Leveled logging (log.h): one write(2) per line, to stderr or a file
 * that SIGHUP reopens. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *log_component = "cairn";
static volatile int log_level = LOG_INFO;
static int log_fd = 2;
static char log_path[PATH_MAX]; /* what log_open opened, for log_reopen */
/* Set by log_reopen: the next line logged says the file was reopened. */
static volatile sig_atomic_t log_reopened;
/* Descriptors 1 and 2 that were the log file at log_open (bit 1 << fd):
 * log_reopen moves them to the new file too. */
static int log_std_same;

static const char *const level_names[] = {"E", "W", "I", "D", "T"};

void log_init(const char *component, enum log_level level)
{
    log_component = component;
    log_level = level;
}

int log_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    log_fd = fd;
    struct stat lst, st;
    log_std_same = 0;
    if (fstat(fd, &lst) == 0)
        for (int std = 1; std <= 2; std++)
            if (fstat(std, &st) == 0 && st.st_dev == lst.st_dev && st.st_ino == lst.st_ino)
                log_std_same |= 1 << std;
    if (strlen(path) < sizeof(log_path))
        memcpy(log_path, path, strlen(path) + 1);
    return 0;
}

int log_reopen(void)
{
    if (!log_path[0] || log_fd == 2)
        return 0;
    int saved = errno;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        errno = saved;
        return rc; /* the old file stays in use */
    }
    /* dup3 swaps the file under log_fd at once: a line written meanwhile
     * goes wholly to the old file or wholly to the new one. */
    int rc = dup3(fd, log_fd, O_CLOEXEC) < 0 ? -errno : 0;
    for (int std = 1; std <= 2 && rc == 0; std++)
        if (log_std_same & (1 << std))
            (void)dup2(fd, std);
    close(fd);
    if (rc == 0)
        log_reopened = 1;
    errno = saved;
    return rc;
}

static void reopen_cb(int sig)
{
    (void)sig;
    (void)log_reopen();
}

void log_reopen_on_sighup(void)
{
    struct sigaction sa = {.sa_handler = reopen_cb, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
}

void log_set_level(enum log_level level)
{
    log_level = level;
}

enum log_level log_get_level(void)
{
    return (enum log_level)log_level;
}

int log_parse_level(const char *s)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {{"none", LOG_ERROR},   {"critical", LOG_ERROR}, {"error", LOG_ERROR},
                 {"warning", LOG_WARN}, {"warn", LOG_WARN},      {"info", LOG_INFO},
                 {"debug", LOG_DEBUG},  {"trace", LOG_TRACE}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(s, names[i].name) == 0)
            return names[i].level;
    return -EINVAL;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if ((int)level > log_level)
        return;
    if (log_reopened) {
        log_reopened = 0;
        log_msg(LOG_INFO, "log file %s reopened (SIGHUP)", log_path);
    }
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line),
                     "[%04d-%02d-%02d %02d:%02d:%02d.%06ld] %s %s[%d]: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000,
                     level_names[level], log_component, getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    ssize_t w = write(log_fd, line, len);
    (void)w;
}
