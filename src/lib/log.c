#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *log_component = "cairn";
static volatile int log_level = LOG_INFO;
static int log_fd = 2;

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
    return 0;
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
