/* heal info: each child's index entries and what state they are in
 * (cl_heal_walk), and GlusterFS's text of them (docs/cli.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "heal_int.h"

static enum cl_heal_state classify(struct hctx *h, const char *path, const gfid_t *g)
{
    struct cl__heal_view v;
    if (cl__heal_view(h, path, g, &v) < 0)
        return CL_HEAL_ST_HEALING;
    if (v.have && !v.sources)
        return CL_HEAL_ST_SPLIT;
    return CL_HEAL_ST_PENDING;
}

int cl_heal_walk(struct cl_layer **children, int n, int arbiter, const struct cl_heal_visitor *v,
                 void *arg, struct cl_heal_progress *progress)
{
    struct hctx h = {.ch = children, .n = n, .arbiter = arbiter};
    int rc = 0;
    for (int i = 0; i < n; i++) {
        v->brick_cb(arg, i);
        char *idx = NULL;
        size_t len;
        unsigned total = 0, cnt[3] = {0};
        int r = cl_proto_connected(children[i])
                    ? cl__heal_read_index(children[i], 0, &idx, &len, NULL)
                    : -ENOTCONN;
        if (r < 0) {
            v->brick_end_cb(arg, i, r, 0, cnt);
            rc = r;
            continue;
        }
        if (progress) {
            unsigned lines = 0;
            for (size_t k = 0; k < len; k++)
                lines += idx[k] == '\n';
            __atomic_add_fetch(&progress->queued, lines, __ATOMIC_RELAXED);
        }
        for (char *line = idx, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = 0;
            char *sp = strchr(line, ' ');
            gfid_t g;
            enum cl_heal_state s = CL_HEAL_ST_PENDING;
            int named = sp && sp[1] == '/';
            if (sp)
                *sp = 0;
            if (named && gfid_parse(line, &g) == 0)
                s = classify(&h, sp + 1, &g);
            total++;
            cnt[s]++;
            v->entry_cb(arg, line, named ? sp + 1 : NULL, s);
            if (progress)
                __atomic_add_fetch(&progress->done, 1, __ATOMIC_RELAXED);
        }
        free(idx);
        v->brick_end_cb(arg, i, 0, total, cnt);
    }
    return rc;
}

/* cl_heal_report's visitor: GlusterFS's text. */
struct text_report {
    FILE *out;
    char **names;
    int mode;
    unsigned *split;
};

static void text_brick_cb(void *arg, int i)
{
    struct text_report *t = arg;
    fprintf(t->out, "Brick %s\n", t->names[i] ? t->names[i] : "?");
}

static void text_entry_cb(void *arg, const char *gfid, const char *path, enum cl_heal_state s)
{
    struct text_report *t = arg;
    if (t->mode == 1 || (t->mode == 2 && s != CL_HEAL_ST_SPLIT))
        return;
    if (path)
        fprintf(t->out, "%s", path);
    else
        fprintf(t->out, "<gfid:%s>", gfid);
    if (t->mode == 0 && s == CL_HEAL_ST_SPLIT)
        fprintf(t->out, " - Is in split-brain");
    else if (t->mode == 0 && s == CL_HEAL_ST_HEALING)
        fprintf(t->out, " - Possibly undergoing heal");
    fprintf(t->out, "\n");
}

static void text_brick_end_cb(void *arg, int i, int err, unsigned total, const unsigned cnt[3])
{
    struct text_report *t = arg;
    FILE *out = t->out;
    if (err < 0) {
        const char *why = err == -ENOTCONN ? "Transport endpoint is not connected" : strerror(-err);
        if (t->mode == 1)
            fprintf(out, "Status: %s\nTotal Number of entries: -\n\n", why);
        else
            fprintf(out, "Status: %s\nNumber of entries: -\n\n", why);
        return;
    }
    if (t->split)
        *t->split += cnt[CL_HEAL_ST_SPLIT];
    fprintf(out, "Status: Connected\n");
    if (t->mode == 1)
        fprintf(out,
                "Total Number of entries: %u\nNumber of entries in heal pending: %u\n"
                "Number of entries in split-brain: %u\n"
                "Number of entries possibly healing: %u\n\n",
                total, cnt[CL_HEAL_ST_PENDING], cnt[CL_HEAL_ST_SPLIT], cnt[CL_HEAL_ST_HEALING]);
    else if (t->mode == 2)
        fprintf(out, "Number of entries in split-brain: %u\n\n", cnt[CL_HEAL_ST_SPLIT]);
    else
        fprintf(out, "Number of entries: %u\n\n", total);
}

int cl_heal_report(struct cl_layer **children, char **names, int n, int arbiter, int mode,
                   FILE *out, unsigned *split_total, struct cl_heal_progress *progress)
{
    static const struct cl_heal_visitor text = {text_brick_cb, text_entry_cb, text_brick_end_cb};
    struct text_report t = {.out = out, .names = names, .mode = mode, .split = split_total};
    return cl_heal_walk(children, n, arbiter, &text, &t, progress);
}

int cl_heal_info(struct cl_layer **children, char **names, int n, FILE *out)
{
    return cl_heal_report(children, names, n, 0, 0, out, NULL, NULL);
}
