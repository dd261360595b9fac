/* Leveled logging to stderr or a log file. Thread-safe: one write(2) per line. */
#ifndef CAIRN_LOG_H
#define CAIRN_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3, LOG_TRACE = 4 };

/* Process-wide settings. log_open() replaces stderr with an append-mode file;
 * returns 0 or -errno. The component name prefixes every line. */
void log_init(const char *component, enum log_level level);
int log_open(const char *path);
/* Opens the log file again by the path log_open was given, so that a file
 * logrotate moved away is replaced by a new one. Async-signal-safe (open,
 * dup3, close): callable from a signal handler. The next line logged says
 * so. 0 (also when logging to stderr) or -errno, the old file kept.
 * Standard output and error that were the log file at log_open (a brick or
 * self-heal daemon cairnd started: crash messages go there) follow it to
 * the new file. */
int log_reopen(void);
/* Makes SIGHUP reopen the log (log_reopen) instead of ending the process,
 * as logrotate configurations expect; for processes that take signals by
 * handler rather than by sigwait. */
void log_reopen_on_sighup(void);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Parses "error|warning|info|debug|trace" (also GlusterFS's upper-case names
 * and "none"); returns the level or -EINVAL. */
int log_parse_level(const char *s);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_get_level() >= LOG_DEBUG)                                                          \
            log_msg(LOG_DEBUG, __VA_ARGS__);                                                       \
    } while (0)

#endif
