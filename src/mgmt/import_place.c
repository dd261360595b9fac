/* `volume import` of a volume of several sets: the link-to files that let
 * Cairn's distribute hash find what GlusterFS's hash placed, with the
 * bricks on any servers of the pool.
 *
 * The server running the import drives the steps; each step runs on the
 * server owning the brick it touches (import.c does the brick's part):
 *   1. every brick lists its names that Cairn's hash puts on another set
 *      (place-names, into BRICK/.cairn/import-names);
 *   2. the list is read back a chunk at a time (place-list) and its lines
 *      grouped by the set their link-to file goes on;
 *   3. every brick of that set checks them (place-check): a name that is
 *      already a file there is on two sets, and is left alone;
 *   4. every brick of that set makes the rest (place-make), with the id
 *      the list gives, so all the copies agree.
 * Every brick is walked, not one per set: a file that only some copies of
 * its set have (a heal GlusterFS had not finished) is linked too. Each step
 * can be repeated, so an import cut short (a server down, a full disk) is
 * finished by running it again. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../client/distribute.h"
#include "../lib/log.h"
#include "import.h"

/* A decimal in [0, limit], the whole string. -EINVAL otherwise. */
static long word_num(const char *s, long limit)
{
    char *end;
    if (!*s || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v > (unsigned long long)limit)
        return -EINVAL;
    return (long)v;
}

static int fail_text(char **text, int rc, const char *msg)
{
    *text = strdup(msg);
    return rc;
}

int mgmt_import_cmd(int argc, const char *const *argv, char **text)
{
    char err[PATH_MAX + 256] = "";
    char *buf = NULL;
    size_t len = 0;
    *text = NULL;
    if (argc < 3)
        return fail_text(text, -EINVAL, "usage: place-names|place-list|place-check|place-make ...");
    const char *w = argv[0];
    int make = strcmp(w, "place-make") == 0;
    int names = strcmp(w, "place-names") == 0, list = strcmp(w, "place-list") == 0;
    if (!((names && argc == 4) || (list && argc == 3) ||
          ((make || strcmp(w, "place-check") == 0) && argc == 5)))
        return fail_text(text, -EINVAL,
                         "usage: place-names SET SETS PATH | place-list OFFSET PATH | "
                         "place-check|place-make SET SETS PATH LINES");
    const char *brick = list ? argv[2] : argv[3];
    if (brick[0] != '/')
        return fail_text(text, -EINVAL, "the brick path must be absolute");
    long set = -1, sets = -1, off = -1;
    if (list) {
        if ((off = word_num(argv[1], INT64_MAX)) < 0)
            return fail_text(text, -EINVAL, "the offset must be a number");
    } else if ((sets = word_num(argv[2], CL_DHT_MAX)) < 1 ||
               (set = word_num(argv[1], sets - 1)) < 0) {
        return fail_text(text, -EINVAL, "bad set or set count");
    }
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        return fail_text(text, -ENOMEM, "out of memory");
    int rc;
    if (names) {
        unsigned long count = 0;
        rc = mgmt_import_names(brick, (int)set, (int)sets, &count, err, sizeof(err));
        fprintf(out, "%lu\n", count);
    } else if (list) {
        rc = mgmt_import_names_read(brick, (uint64_t)off, out, err, sizeof(err));
    } else {
        rc = mgmt_import_link(brick, (int)set, (int)sets, make, argv[4], strlen(argv[4]), out, err,
                              sizeof(err));
    }
    fclose(out);
    if (rc < 0) {
        free(buf);
        return fail_text(text, rc, err[0] ? err : strerror(-rc));
    }
    if (len == 0) {
        free(buf);
        buf = NULL;
    }
    *text = buf;
    return 0;
}

int mgmt_import_check_answer(const char *text, unsigned long lines, char *conflict)
{
    char num[24];
    for (const char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl || (size_t)(nl - p) >= sizeof(num) || lines == 0)
            return -EPROTO;
        memcpy(num, p, (size_t)(nl - p));
        num[nl - p] = 0;
        long idx = word_num(num, (long)(lines - 1));
        if (idx < 0)
            return -EPROTO;
        conflict[idx] = 1;
    }
    return 0;
}

/* ---- the driver ---- */

struct batch {
    char *p;
    size_t len, cap;
    unsigned long lines;
};

static int batch_add(struct batch *b, const char *line, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return -ENOMEM;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, line, n);
    b->len += n;
    b->p[b->len] = 0;
    b->lines++;
    return 0;
}

struct driver {
    char *const *paths;
    int replica, sets;
    mgmt_import_run_fn run;
    void *arg;
    unsigned long made, conflicts;
    char *err;
    size_t errlen;
};

/* Runs a step on brick i; the answer in *text (may be NULL). */
static int step(struct driver *d, int i, int argc, const char *const *argv, char **text)
{
    *text = NULL;
    int rc = d->run(d->arg, i, argc, argv, text);
    if (rc < 0) {
        snprintf(d->err, d->errlen, "%s (%s of brick %d, %s)", *text ? *text : strerror(-rc),
                 argv[0], i + 1, d->paths[i]);
        free(*text);
        *text = NULL;
    }
    return rc;
}

/* Checks then makes one set's lines on each of its bricks. */
static int place_set(struct driver *d, int h, struct batch *b)
{
    char set[16], sets[16];
    snprintf(set, sizeof(set), "%d", h);
    snprintf(sets, sizeof(sets), "%d", d->sets);
    char *conflict = calloc(b->lines ? b->lines : 1, 1);
    struct batch keep = {0};
    int rc = conflict ? 0 : -ENOMEM;
    for (int k = 0; k < d->replica && rc == 0; k++) {
        int i = h * d->replica + k;
        const char *argv[] = {"place-check", set, sets, d->paths[i], b->p};
        char *text;
        if ((rc = step(d, i, 5, argv, &text)) < 0)
            break;
        if (text && (rc = mgmt_import_check_answer(text, b->lines, conflict)) < 0)
            snprintf(d->err, d->errlen, "a malformed answer to place-check from brick %d, %s",
                     i + 1, d->paths[i]);
        free(text);
    }
    unsigned long idx = 0;
    for (char *p = b->p; rc == 0 && p < b->p + b->len; idx++) {
        char *nl = strchr(p, '\n'); /* every line of a batch ends in one */
        if (conflict[idx])
            d->conflicts++;
        else
            rc = batch_add(&keep, p, (size_t)(nl - p + 1));
        p = nl + 1;
    }
    unsigned long most = 0;
    for (int k = 0; k < d->replica && rc == 0 && keep.len; k++) {
        int i = h * d->replica + k;
        const char *argv[] = {"place-make", set, sets, d->paths[i], keep.p};
        char *text;
        if ((rc = step(d, i, 5, argv, &text)) < 0)
            break;
        long n = -1;
        if (text) {
            text[strcspn(text, "\n")] = 0;
            n = word_num(text, (long)keep.lines);
        }
        free(text);
        if (n < 0) {
            rc = -EPROTO;
            snprintf(d->err, d->errlen, "a malformed answer to place-make from brick %d, %s", i + 1,
                     d->paths[i]);
        } else if ((unsigned long)n > most) {
            most = (unsigned long)n;
        }
    }
    /* a name counts once, whichever copies of its set lacked the link-to */
    d->made += most;
    free(keep.p);
    free(conflict);
    if (rc == -ENOMEM && !d->err[0])
        snprintf(d->err, d->errlen, "out of memory");
    return rc;
}

/* Reads brick i's list a chunk at a time and places each chunk. */
static int place_brick(struct driver *d, int i)
{
    char set[16], sets[16], off[32];
    snprintf(set, sizeof(set), "%d", i / d->replica);
    snprintf(sets, sizeof(sets), "%d", d->sets);
    const char *names[] = {"place-names", set, sets, d->paths[i]};
    char *text;
    int rc = step(d, i, 4, names, &text);
    free(text);
    struct batch *by = calloc((size_t)d->sets, sizeof(*by));
    struct mgmt_import_line *l = malloc(sizeof(*l));
    if (rc == 0 && (!by || !l)) {
        rc = -ENOMEM;
        snprintf(d->err, d->errlen, "out of memory");
    }
    for (uint64_t at = 0; rc == 0;) {
        snprintf(off, sizeof(off), "%" PRIu64, at);
        const char *list[] = {"place-list", off, d->paths[i]};
        if ((rc = step(d, i, 3, list, &text)) < 0 || !text || !*text) {
            free(text);
            break; /* an empty chunk: the list is done */
        }
        size_t n = strlen(text);
        at += n;
        for (char *p = text; p < text + n && rc == 0;) {
            char *nl = strchr(p, '\n');
            if (!nl || mgmt_import_line_parse(p, (size_t)(nl - p), d->sets, l) < 0 ||
                l->at != i / d->replica) {
                rc = -EPROTO;
                snprintf(d->err, d->errlen, "a malformed line in the name list of brick %d, %s",
                         i + 1, d->paths[i]);
                break;
            }
            rc = batch_add(&by[l->to], p, (size_t)(nl - p + 1));
            p = nl + 1;
        }
        free(text);
        for (int h = 0; h < d->sets && rc == 0; h++)
            if (by[h].len)
                rc = place_set(d, h, &by[h]);
        for (int h = 0; h < d->sets && by; h++)
            by[h].len = by[h].lines = 0;
    }
    if (rc == -ENOMEM && !d->err[0])
        snprintf(d->err, d->errlen, "out of memory");
    for (int h = 0; by && h < d->sets; h++)
        free(by[h].p);
    free(by);
    free(l);
    return rc;
}

int mgmt_import_place(char *const *paths, int n_bricks, int replica, mgmt_import_run_fn run,
                      void *arg, unsigned long *made, char *err, size_t errlen)
{
    struct driver d = {.paths = paths,
                       .replica = replica > 1 ? replica : 1,
                       .run = run,
                       .arg = arg,
                       .err = err,
                       .errlen = errlen};
    d.sets = n_bricks / d.replica;
    err[0] = 0;
    if (d.sets < 2 || d.sets > CL_DHT_MAX || n_bricks % d.replica) {
        snprintf(err, errlen, "%d bricks in sets of %d: not 2 to %d subvolumes", n_bricks,
                 d.replica, CL_DHT_MAX);
        return -EINVAL;
    }
    int rc = 0;
    for (int i = 0; i < n_bricks && rc == 0; i++)
        rc = place_brick(&d, i);
    *made = d.made;
    if (d.conflicts)
        log_warn("volume import: %lu link-to file(s) not made: the name exists on two "
                 "subvolumes (left as it is; the servers' logs name them)",
                 d.conflicts);
    return rc;
}
