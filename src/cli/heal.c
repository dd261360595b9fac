/* cairn volume heal NAME [info [summary|split-brain] | summary | full |
 * split-brain ...]: run by the CLI itself, as a client of the volume's
 * bricks (the layout comes from cairnd's GETVOL). enable, disable and
 * statistics go to cairnd (src/mgmt/cmd_heal.c). heal info also in
 * GlusterFS's XML (--xml; docs/cli.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/client.h"
#include "../client/heal.h"
#include "../lib/log.h"
#include "../lib/xml.h"
#include "cli.h"

static int usage(void)
{
    fprintf(stderr,
            "Usage:\nvolume heal <VOLNAME> [enable | disable | full | summary | info [summary | "
            "split-brain] | statistics | split-brain {bigger-file <FILE> | latest-mtime <FILE> | "
            "source-brick <HOSTNAME:BRICKNAME> [<FILE>]}]\n");
    return 1;
}

int cli_heal_by_cairnd(int argc, char **argv)
{
    return argc == 4 && (strcmp(argv[3], "enable") == 0 || strcmp(argv[3], "disable") == 0 ||
                         strcmp(argv[3], "statistics") == 0);
}

enum what { INDEX, FULL, INFO, SUMMARY, INFO_SPLIT, SB_BIGGER, SB_MTIME, SB_SOURCE };

struct set {
    struct cl_layer *ch[CL_REPL_MAX];
    char *names[CL_REPL_MAX];
    int n;
};

static void set_open(struct set *s, const struct cl_volinfo *v, int first)
{
    s->n = v->replica;
    for (int i = 0; i < s->n; i++) {
        const struct cl_brickinfo *b = &v->bricks[first + i];
        s->ch[i] = cli_brick_connect(v, first + i);
        s->names[i] = malloc(strlen(b->path) + NET_HOST_MAX + 2);
        if (s->names[i])
            sprintf(s->names[i], "%s:%s", b->addr.host, b->path);
    }
}

static void set_close(struct set *s)
{
    for (int i = 0; i < s->n; i++) {
        if (s->ch[i])
            cl_layer_destroy_tree(s->ch[i]);
        free(s->names[i]);
    }
}

static int parse(int argc, char **argv, enum what *w, const char **file, const char **brick)
{
    *file = *brick = NULL;
    if (argc == 3) {
        *w = INDEX;
        return 0;
    }
    const char *a = argv[3];
    if (argc == 4 && strcmp(a, "full") == 0)
        *w = FULL;
    else if (argc == 4 && strcmp(a, "info") == 0)
        *w = INFO;
    else if ((argc == 4 && strcmp(a, "summary") == 0) ||
             (argc == 5 && strcmp(a, "info") == 0 && strcmp(argv[4], "summary") == 0))
        *w = SUMMARY;
    else if (argc == 5 && strcmp(a, "info") == 0 && strcmp(argv[4], "split-brain") == 0)
        *w = INFO_SPLIT;
    else if (argc == 6 && strcmp(a, "split-brain") == 0 && strcmp(argv[4], "bigger-file") == 0)
        *w = SB_BIGGER, *file = argv[5];
    else if (argc == 6 && strcmp(a, "split-brain") == 0 && strcmp(argv[4], "latest-mtime") == 0)
        *w = SB_MTIME, *file = argv[5];
    else if ((argc == 6 || argc == 7) && strcmp(a, "split-brain") == 0 &&
             strcmp(argv[4], "source-brick") == 0)
        *w = SB_SOURCE, *brick = argv[5], *file = argc == 7 ? argv[6] : NULL;
    else
        return -EINVAL;
    if (*file && (*file)[0] != '/') {
        fprintf(stderr, "%s: a file is named by its path from the volume's root (/dir/file)\n",
                *file);
        return -EINVAL;
    }
    return 0;
}

/* One split-brain resolution on set s; prints the outcome. 0 or 1. */
static int resolve(struct set *s, const struct cl_volinfo *v, enum what w, const char *file,
                   int source, int *found)
{
    struct cl_heal_params p = {.threads = 1, .source = source, .path = file};
    p.policy = w == SB_BIGGER  ? CL_HEAL_POL_SIZE
               : w == SB_MTIME ? CL_HEAL_POL_MTIME
                               : CL_HEAL_POL_NONE;
    struct cl_heal_stats st = {0};
    int rc = cl_heal_run(s->ch, s->n, v->arbiter, &p, &st);
    if (file) {
        if (rc == -ENOENT)
            return 0; /* not in this set */
        *found = 1;
        /* healed without resolving: a source already existed, the choice
         * of an earlier resolution that was cut short (keep_choice), and
         * this run finished copying it */
        if (st.resolved || st.healed) {
            printf("Healed %s.\n", file);
            return 0;
        }
        if (st.split) {
            fprintf(stderr, "%s: the copies tie on %s; use split-brain source-brick\n", file,
                    w == SB_BIGGER ? "size" : "modification time");
            return 1;
        }
        if (rc < 0 || st.pending || st.failed) {
            fprintf(stderr, "Healing %s failed: %s\n", file,
                    rc < 0 ? strerror(-rc) : "a brick is down or a copy failed; see the log");
            return 1;
        }
        fprintf(stderr, "%s: File not in split-brain.\n", file);
        return 1;
    }
    *found = 1;
    printf("Number of healed entries: %u\n", st.resolved);
    if (st.split || st.pending || st.failed) {
        fprintf(stderr, "%u entries could not be healed now\n", st.split + st.pending + st.failed);
        return 1;
    }
    return 0;
}

/* --xml: the visitor of heal info that writes GlusterFS's healInfo bricks.
 * Cairn's bricks do not know their server's uuid: hostUuid is "-", what
 * GlusterFS prints when it cannot learn it. */
struct xml_report {
    struct xml_writer *w;
    char **names;
    int mode; /* as cl_heal_report: 0 list, 1 summary, 2 split-brain */
};

static void xml_brick_cb(void *arg, int i)
{
    struct xml_report *x = arg;
    xml_open(x->w, "brick", "hostUuid", "-");
    xml_leaf(x->w, "name", x->names[i] ? x->names[i] : "-");
}

static void xml_entry_cb(void *arg, const char *gfid, const char *path, enum cl_heal_state s)
{
    struct xml_report *x = arg;
    if (x->mode == 1 || (x->mode == 2 && s != CL_HEAL_ST_SPLIT))
        return;
    char only_gfid[64];
    snprintf(only_gfid, sizeof(only_gfid), "<gfid:%s>", gfid);
    xml_leaf_attr(x->w, "file", "gfid", gfid, path ? path : only_gfid);
}

static void xml_brick_end_cb(void *arg, int i, int err, unsigned total, const unsigned cnt[3])
{
    struct xml_report *x = arg;
    struct xml_writer *w = x->w;
    xml_leaf(w, "status",
             err == 0           ? "Connected"
             : err == -ENOTCONN ? "Transport endpoint is not connected"
                                : strerror(-err));
    if (x->mode == 1) {
        if (err) {
            xml_leaf(w, "totalNumberOfEntries", "-");
            xml_leaf(w, "numberOfEntriesInHealPending", "-");
            xml_leaf(w, "numberOfEntriesInSplitBrain", "-");
            xml_leaf(w, "numberOfEntriesPossiblyHealing", "-");
        } else {
            xml_leaf_int(w, "totalNumberOfEntries", total);
            xml_leaf_int(w, "numberOfEntriesInHealPending", cnt[CL_HEAL_ST_PENDING]);
            xml_leaf_int(w, "numberOfEntriesInSplitBrain", cnt[CL_HEAL_ST_SPLIT]);
            xml_leaf_int(w, "numberOfEntriesPossiblyHealing", cnt[CL_HEAL_ST_HEALING]);
        }
    } else if (err) {
        xml_leaf(w, "numberOfEntries", "-");
    } else {
        xml_leaf_int(w, "numberOfEntries", x->mode == 2 ? cnt[CL_HEAL_ST_SPLIT] : total);
    }
    xml_close(w);
}

/* heal info [summary|split-brain] --xml: every replica set's bricks. */
static int xml_heal_info(const struct cl_volinfo *v, int mode)
{
    static const struct cl_heal_visitor visit = {xml_brick_cb, xml_entry_cb, xml_brick_end_cb};
    struct xml_writer w;
    xml_begin(&w, stdout);
    xml_open(&w, "healInfo", NULL, NULL);
    xml_open(&w, "bricks", NULL, NULL);
    for (int f = 0; f + v->replica <= v->n_bricks; f += v->replica) {
        struct set s;
        set_open(&s, v, f);
        struct xml_report x = {.w = &w, .names = s.names, .mode = mode};
        /* A brick that is down is part of the answer, not a failure. */
        cl_heal_walk(s.ch, s.n, v->arbiter, &visit, &x, NULL);
        set_close(&s);
    }
    xml_close(&w);
    xml_close(&w);
    xml_op_status(&w, 0, 0, NULL); /* after healInfo, where GlusterFS puts it */
    xml_end(&w);
    return 0;
}

int cli_volume_heal(const struct net_addr *mgmt, int argc, char **argv, int xml, int progress)
{
    const char *name = argv[2], *file, *brick;
    enum what w;
    if (parse(argc, argv, &w, &file, &brick) < 0) {
        if (xml) {
            xml_error_doc(stdout, EINVAL,
                          "Usage: volume heal <VOLNAME> info [summary | split-brain]");
            return 1;
        }
        return usage();
    }
    if (xml && w != INFO && w != SUMMARY && w != INFO_SPLIT) {
        xml_error_doc(stdout, EOPNOTSUPP,
                      "only volume heal <VOLNAME> info [summary | split-brain] has XML output; "
                      "run this one without --xml");
        return 1;
    }
    struct cl_volinfo v;
    char err[512];
    int rc = cl_volume_fetch(mgmt, name, 10000, &v, err, sizeof(err));
    if (rc < 0 && xml) {
        xml_error_doc(stdout, -rc, err);
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr,
                "Launching heal operation to perform index self heal on volume %s has "
                "been unsuccessful: %s\n",
                name, err);
        return 1;
    }
    if (v.replica < 2) {
        char msg[512];
        snprintf(msg, sizeof(msg), "Volume %s is not of type replicate", name);
        if (xml)
            xml_error_doc(stdout, EOPNOTSUPP, msg);
        else
            fprintf(stderr, "%s\n", msg);
        cl_volinfo_free(&v);
        return 1;
    }
    if (v.redundancy && (w == SB_BIGGER || w == SB_MTIME || w == SB_SOURCE)) {
        /* no fragment is a copy of another to choose */
        fprintf(stderr,
                "Volume %s is dispersed: split-brain resolution does not apply (a file needs %d "
                "good fragments of %d; docs/disperse.md)\n",
                name, v.replica - v.redundancy, v.replica);
        cl_volinfo_free(&v);
        return 1;
    }
    if (xml) {
        rc = xml_heal_info(&v, w == INFO ? 0 : w == SUMMARY ? 1 : 2);
        cl_volinfo_free(&v);
        return rc;
    }
    int status = 0, found = 0, matched_brick = 0;
    unsigned split = 0;
    /* Progress lines for what may take long: a heal, and heal info that
     * looks at every entry of every brick. */
    struct cl_heal_progress prog = {0};
    struct cli_progress *pr = NULL;
    if ((progress || (!xml && isatty(STDERR_FILENO))) && w != SB_BIGGER && w != SB_MTIME &&
        w != SB_SOURCE)
        pr = cli_progress_start(w == FULL ? "heal full" : w == INDEX ? "heal" : "heal info", &prog);
    for (int f = 0; f + v.replica <= v.n_bricks; f += v.replica) {
        struct set s;
        int source = -1;
        if (w == SB_SOURCE) {
            for (int i = 0; i < v.replica; i++) {
                char hb[NET_HOST_MAX + 4200];
                snprintf(hb, sizeof(hb), "%s:%s", v.bricks[f + i].addr.host, v.bricks[f + i].path);
                if (strcmp(hb, brick) == 0)
                    source = i;
            }
            if (source < 0)
                continue;
            matched_brick = 1;
            if (v.arbiter && source == v.replica - 1) {
                fprintf(stderr, "%s is an arbiter: it holds no file data to heal from\n", brick);
                status = 1;
                break;
            }
        }
        set_open(&s, &v, f);
        switch (w) {
        case INFO:
        case SUMMARY:
        case INFO_SPLIT:
            /* A brick that is down is part of the answer, not a failure. */
            cl_heal_report(s.ch, s.names, s.n, v.arbiter,
                           w == INFO      ? 0
                           : w == SUMMARY ? 1
                                          : 2,
                           stdout, &split, pr ? &prog : NULL);
            break;
        case INDEX:
        case FULL: {
            struct cl_heal_params p = {.full = w == FULL, .source = -1};
            if (pr) {
                p.progress = &prog;
                if (w == FULL)
                    cli_progress_expect(pr, cl_heal_expect(s.ch, s.n, v.arbiter));
            }
            p.threads = (int)opt_int(&v.opts, "cluster.shd-max-threads");
            p.rate_bps = (uint64_t)opt_int(&v.opts, "cluster.heal-rate-limit") << 20;
            int pol = cl_heal_policy_parse(opt_value(&v.opts, "cluster.favorite-child-policy"));
            p.policy = pol < 0 ? CL_HEAL_POL_NONE : (enum cl_heal_policy)pol;
            p.redundancy = v.redundancy; /* fragments rebuilt, not copied */
            struct cl_heal_stats st = {0};
            rc = cl_heal_run(s.ch, s.n, v.arbiter, &p, &st);
            if (rc < 0 || st.split || st.failed)
                status = 1;
            if (st.split)
                fprintf(stderr, "%u entries are in split brain\n", st.split);
            if (st.pending)
                fprintf(stderr, "%u entries could not be healed now (a brick is down?)\n",
                        st.pending);
            break;
        }
        default:
            status |= resolve(&s, &v, w, file, source, &found);
            break;
        }
        set_close(&s);
        if (found && file)
            break;
    }
    cli_progress_stop(pr);
    if (w == SB_SOURCE && !matched_brick) {
        fprintf(stderr, "%s: no such brick in volume %s\n", brick, name);
        status = 1;
    } else if (file && !found && !status) {
        fprintf(stderr, "Lookup failed on %s: No such file or directory\n", file);
        status = 1;
    }
    if ((w == INDEX || w == FULL) && status == 0)
        printf("Launching heal operation to perform %s self heal on volume %s has been "
               "successful \nUse heal info commands to check status.\n",
               w == FULL ? "full" : "index", name);
    cl_volinfo_free(&v);
    return status;
}
