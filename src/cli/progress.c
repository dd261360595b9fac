/* Progress lines of the long operations the CLI runs itself (volume heal
 * VOL [full], heal info on a big backlog): a thread that prints on stderr,
 * every PROGRESS_EVERY_S seconds, how far the operation has come, its rates
 * and the time left where a total is known, then one line when it ends.
 * stdout keeps GlusterFS's output unchanged. docs/cli.md shows the lines. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../client/heal.h"
#include "cli.h"

#define PROGRESS_EVERY_S 2

struct cli_progress {
    const char *what;
    struct cl_heal_progress *p;
    unsigned expect; /* objects a full walk is expected to meet (0: unknown) */
    double t0;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned get(unsigned *field)
{
    return __atomic_load_n(field, __ATOMIC_RELAXED);
}

/* "1.5 MiB", "3.2 GiB": bytes for a person. */
static void human_bytes(char *buf, size_t len, double b)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4)
        b /= 1024, u++;
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

/* "0.4 s", "45 s", "12 min", "3.5 h". */
static void human_time(char *buf, size_t len, double s)
{
    if (s < 10)
        snprintf(buf, len, "%.1f s", s);
    else if (s < 90)
        snprintf(buf, len, "%.0f s", s);
    else if (s < 5400)
        snprintf(buf, len, "%.0f min", s / 60);
    else
        snprintf(buf, len, "%.1f h", s / 3600);
}

/* Appends "about T left" for done of total at rate per second; nothing
 * when the rate or the total is not known. */
static void time_left(char *line, size_t len, double done, double total, double rate)
{
    if (rate <= 0 || total <= done)
        return;
    char t[32];
    human_time(t, sizeof(t), (total - done) / rate);
    size_t used = strlen(line);
    snprintf(line + used, len - used, ", about %s left", t);
}

static void print_line(struct cli_progress *pr, int final)
{
    struct cl_heal_progress *p = pr->p;
    double el = now_s() - pr->t0;
    if (el < 1e-3)
        el = 1e-3;
    unsigned walked = get(&p->walked), queued = get(&p->queued), done = get(&p->done);
    unsigned healed = get(&p->healed);
    uint64_t copied = __atomic_load_n(&p->bytes_copied, __ATOMIC_RELAXED);
    char line[512], b[32], r[32];
    int n = snprintf(line, sizeof(line), "%s: ", pr->what);
    if (final) {
        char t[32];
        human_time(t, sizeof(t), el);
        n += snprintf(line + n, sizeof(line) - (size_t)n, "done in %s: ", t);
    }
    if (walked) {
        n += snprintf(line + n, sizeof(line) - (size_t)n, "%u objects walked", walked);
        if (!final && pr->expect)
            n += snprintf(line + n, sizeof(line) - (size_t)n, " of about %u", pr->expect);
        n += snprintf(line + n, sizeof(line) - (size_t)n, " (%.0f/s), ", walked / el);
    }
    n += snprintf(line + n, sizeof(line) - (size_t)n, "%u of %u entries%s", done, queued,
                  final ? "" : " done");
    if (healed || copied) {
        human_bytes(b, sizeof(b), (double)copied);
        human_bytes(r, sizeof(r), (double)copied / el);
        n += snprintf(line + n, sizeof(line) - (size_t)n, ", %u healed, %s copied (%s/s)", healed,
                      b, r);
    }
    if (!final) {
        /* A full walk's own count is the larger part; entries come after. */
        if (walked && pr->expect && walked < pr->expect)
            time_left(line, sizeof(line), walked, pr->expect, walked / el);
        else if (!walked || walked >= pr->expect)
            time_left(line, sizeof(line), done, queued, done / el);
    }
    fprintf(stderr, "%s\n", line);
}

static void *ticker(void *arg)
{
    struct cli_progress *pr = arg;
    pthread_mutex_lock(&pr->lock);
    while (!pr->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += PROGRESS_EVERY_S;
        pthread_cond_timedwait(&pr->cond, &pr->lock, &until);
        if (!pr->stop)
            print_line(pr, 0);
    }
    pthread_mutex_unlock(&pr->lock);
    return NULL;
}

struct cli_progress *cli_progress_start(const char *what, struct cl_heal_progress *p)
{
    struct cli_progress *pr = calloc(1, sizeof(*pr));
    if (!pr)
        return NULL;
    pr->what = what;
    pr->p = p;
    pr->t0 = now_s();
    pthread_mutex_init(&pr->lock, NULL);
    pthread_cond_init(&pr->cond, NULL);
    if (pthread_create(&pr->thread, NULL, ticker, pr) != 0) {
        pthread_cond_destroy(&pr->cond);
        pthread_mutex_destroy(&pr->lock);
        free(pr);
        return NULL;
    }
    return pr;
}

void cli_progress_expect(struct cli_progress *pr, unsigned objects)
{
    if (!pr)
        return;
    pthread_mutex_lock(&pr->lock);
    pr->expect += objects;
    pthread_mutex_unlock(&pr->lock);
}

void cli_progress_stop(struct cli_progress *pr)
{
    if (!pr)
        return;
    pthread_mutex_lock(&pr->lock);
    pr->stop = 1;
    pthread_cond_signal(&pr->cond);
    pthread_mutex_unlock(&pr->lock);
    pthread_join(pr->thread, NULL);
    print_line(pr, 1);
    pthread_cond_destroy(&pr->cond);
    pthread_mutex_destroy(&pr->lock);
    free(pr);
}
