/* volume create and volume import: argument parsing and every check, done
 * before anything is written, so a refused create leaves no trace. A
 * missing brick directory is checked to be creatable here and made by its
 * server when the create is applied (pool_apply.c). An import takes the
 * same path: the same words and checks, then the GlusterFS bricks are
 * checked and converted in place (import.c) before the volume is
 * committed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../client/distribute.h"
#include "../lib/log.h"
#include "import.h"
#include "pool.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(out, "volume %s: %s: failed: ", verb, name);                                       \
        fprintf(out, __VA_ARGS__);                                                                 \
        fputc('\n', out);                                                                          \
        goto fail;                                                                                 \
    } while (0)

/* (mgmt.h) */
int mgmt_brick_split(const char *arg, struct mgmt_brick *b)
{
    const char *colon = strchr(arg, ':');
    if (!colon || colon == arg || colon[1] != '/' || (size_t)(colon - arg) >= sizeof(b->host))
        return -EINVAL;
    memcpy(b->host, arg, (size_t)(colon - arg));
    b->host[colon - arg] = 0;
    char *out = b->path;
    size_t n = 0;
    for (const char *p = colon + 1; *p;) {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        if (!len)
            break;
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return -EINVAL;
        if (n + len + 2 >= sizeof(b->path))
            return -EINVAL;
        out[n++] = '/';
        memcpy(out + n, p, len);
        n += len;
        p += len;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = 0;
    return 0;
}

/* Whether directory a is b or contains it (both canonical). */
static int path_within(const char *inner, const char *outer)
{
    size_t n = strlen(outer);
    if (strcmp(outer, "/") == 0)
        return 1;
    return strncmp(inner, outer, n) == 0 && (inner[n] == 0 || inner[n] == '/');
}

static int is_keyword(const char *w)
{
    static const char *const words[] = {"replica",    "arbiter", "disperse", "disperse-data",
                                        "redundancy", "stripe",  NULL};
    for (int i = 0; words[i]; i++)
        if (strcmp(w, words[i]) == 0)
            return 1;
    return 0;
}

/* The placement's steps run by the owner of each brick. */
struct place_run {
    struct mgmt *m;
    struct mgmt_vol *v;
};

static int place_step(void *arg, int brick, int argc, const char *const *argv, char **text)
{
    struct place_run *pr = arg;
    return mgmt_owner_import_step(pr->m, &pr->v->bricks[brick], argc, argv, text);
}

/* Checks and converts every brick of an import (each by its own server),
 * links names where Cairn's hash looks for them on a volume of several
 * sets, then gives v the GlusterFS volume's id. 0, or -errno with err. */
static int import_bricks(struct mgmt *m, struct mgmt_vol *v, int force, int keep, FILE *out,
                         char *err, size_t errlen)
{
    char first[GFID_STRLEN] = "", id[GFID_STRLEN], line[PATH_MAX + 512];
    int replica = v->replica > 1 ? v->replica : 1;
    if (v->n_bricks / replica > CL_DHT_MAX) {
        snprintf(err, errlen, "%d subvolumes: Cairn's distribute takes at most %d",
                 v->n_bricks / replica, CL_DHT_MAX);
        return -EINVAL;
    }
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_import_brick ib = {v->bricks[i].path, i, replica, v->n_bricks, force, keep};
        int rc = mgmt_owner_import(m, &v->bricks[i], "check", &ib, NULL, line, sizeof(line));
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", v->bricks[i].host, line);
            return rc;
        }
        snprintf(id, sizeof(id), "%.36s", line);
        if (i == 0)
            snprintf(first, sizeof(first), "%s", id);
        else if (strcmp(first, id) != 0) {
            snprintf(err, errlen,
                     "%s:%s belongs to GlusterFS volume %s, %s:%s to volume %s: every brick must "
                     "come from the same GlusterFS volume",
                     v->bricks[i].host, v->bricks[i].path, id, v->bricks[0].host, v->bricks[0].path,
                     first);
            return -EINVAL;
        }
    }
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_import_brick ib = {v->bricks[i].path, i, replica, v->n_bricks, force, keep};
        char summary[PATH_MAX + 512];
        int rc =
            mgmt_owner_import(m, &v->bricks[i], "convert", &ib, first, summary, sizeof(summary));
        if (rc < 0) {
            snprintf(line, sizeof(line), "%s", summary);
            snprintf(err, errlen, "%s: %s (run the import again once that is fixed)",
                     v->bricks[i].host, line);
            return rc;
        }
        log_info("volume import %s: brick %s:%s: %s", v->name, v->bricks[i].host, v->bricks[i].path,
                 summary);
        fprintf(out, "volume import: %s: brick %s:%s: %s\n", v->name, v->bricks[i].host,
                v->bricks[i].path, summary);
    }
    if (v->n_bricks > replica) {
        char *paths[v->n_bricks];
        unsigned long made;
        struct place_run pr = {m, v};
        for (int i = 0; i < v->n_bricks; i++)
            paths[i] = v->bricks[i].path;
        int rc = mgmt_import_place(paths, v->n_bricks, replica, place_step, &pr, &made, line,
                                   sizeof(line));
        if (rc < 0) {
            snprintf(err, errlen, "%s (run the import again once that is fixed)", line);
            return rc;
        }
        log_info("volume import %s: %lu link-to files for Cairn's placement", v->name, made);
        fprintf(out,
                "volume import: %s: %lu names linked where Cairn's distribute looks for them\n",
                v->name, made);
    }
    /* the Cairn volume keeps the GlusterFS volume's id */
    snprintf(v->id, sizeof(v->id), "%s", first);
    return 0;
}

static int create_or_import(struct mgmt *m, int argc, char **argv, FILE *out, int import)
{
    if (argc < 4)
        return 2;
    const char *name = argv[2], *verb = import ? "import" : "create";
    char err[2 * PATH_MAX + 1024];
    int force = 0, keep = 0, nb = 0, first = 3, last = argc;
    struct mgmt_vol *v = NULL;
    char(*real)[PATH_MAX] = NULL;
    struct mgmt_peer **remote = NULL;
    for (;;) {
        if (last > first && strcmp(argv[last - 1], "force") == 0 && !force)
            force = 1;
        else if (import && last > first && strcmp(argv[last - 1], "keep-glusterfs") == 0 && !keep)
            keep = 1;
        else
            break;
        last--;
    }
    if (mgmt_check_volname(name, err, sizeof(err)) < 0)
        FAIL("%s", err);
    if (mgmt_vol_find(m, name))
        FAIL("Volume %s already exists", name);
    int replica = 0, arbiter = 0;
    /* GlusterFS order: [replica N [arbiter 1]] [disperse [N]] [disperse-data K]
     * [redundancy M] [transport tcp] BRICK... */
    struct mgmt_shape_args sh = {.disperse = -1, .data = -1, .redundancy = -1};
    for (;;) {
        if (first < last && strcmp(argv[first], "replica") == 0) {
            char *end;
            long n = first + 1 < last ? strtol(argv[first + 1], &end, 10) : 0;
            if (first + 1 >= last || *end || end == argv[first + 1] || n < 2 || n > 16)
                FAIL("replica count must be a number from 2 to 16");
            replica = (int)n;
            first += 2;
            if (first < last && strcmp(argv[first], "arbiter") == 0) {
                if (first + 1 >= last || strcmp(argv[first + 1], "1") != 0)
                    FAIL("arbiter count must be 1");
                if (replica != 3)
                    FAIL("For arbiter configuration, replica count must be 3 (2 data bricks and "
                         "1 arbiter)");
                arbiter = 1;
                first += 2;
            }
            continue;
        }
        int which = first >= last                               ? -1
                    : strcmp(argv[first], "disperse") == 0      ? 0
                    : strcmp(argv[first], "disperse-data") == 0 ? 1
                    : strcmp(argv[first], "redundancy") == 0    ? 2
                                                                : -1;
        if (which < 0)
            break;
        int *slot = which == 0 ? &sh.disperse : which == 1 ? &sh.data : &sh.redundancy;
        char *end = NULL;
        long n = first + 1 < last ? strtol(argv[first + 1], &end, 10) : -1;
        int numeric = first + 1 < last && !*end && end != argv[first + 1];
        if (*slot != -1)
            FAIL("%s given twice", argv[first]);
        if (which == 0 && !numeric) { /* "disperse" alone: every brick makes the set */
            *slot = 0;
            first++;
            continue;
        }
        if (!numeric || n < 0 || n > 1000)
            FAIL("%s count must be a number", argv[first]);
        *slot = (int)n;
        first += 2;
    }
    int dispersed = sh.disperse >= 0 || sh.data >= 0 || sh.redundancy >= 0;
    if (dispersed && replica)
        FAIL("replica and disperse cannot be combined: a set is either replicated or "
             "dispersed");
    if (dispersed && import)
        FAIL("a dispersed GlusterFS volume cannot be imported (its fragments are GlusterFS's)");
    for (int i = first; i < last; i++) {
        if (strcmp(argv[i], "stripe") == 0)
            FAIL("stripe volumes are not supported (GlusterFS dropped them; disperse N "
                 "redundancy M spreads files over bricks)");
        if (is_keyword(argv[i]))
            FAIL("%s must come before transport and the bricks (GlusterFS order: [replica N "
                 "[arbiter 1]] [disperse [N]] [disperse-data K] [redundancy M] BRICK...)",
                 argv[i]);
        if (strcmp(argv[i], "transport") == 0) {
            if (i + 1 >= last || strcmp(argv[i + 1], "tcp") != 0)
                FAIL("transport %s is not supported (only tcp)", i + 1 < last ? argv[i + 1] : "");
            if (i != first)
                return 2;
            first = i + 2;
            i++;
        }
    }
    int redundancy = 0;
    if (dispersed) {
        char note[256] = "";
        int set = mgmt_disperse_shape(&sh, last - first, &redundancy, note, sizeof(note), err,
                                      sizeof(err));
        if (set < 0)
            FAIL("%s", err);
        if (*note)
            fprintf(out, "%s\n", note);
        replica = set;
    }
    if (first >= last)
        return 2;
    if (replica && (last - first) % replica)
        FAIL("Incorrect number of bricks supplied %d with count %d", last - first, replica);
    v = calloc(1, sizeof(*v));
    real = calloc((size_t)(last - first), sizeof(*real));
    remote = calloc((size_t)(last - first), sizeof(*remote));
    if (v)
        v->bricks = calloc((size_t)(last - first), sizeof(*v->bricks));
    if (!v || !real || !remote || !v->bricks)
        FAIL("out of memory");
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->replica = replica;
    v->arbiter = arbiter;
    v->redundancy = redundancy;
    for (int i = first; i < last; i++, nb++) {
        struct mgmt_brick *b = &v->bricks[nb];
        struct stat st, root;
        if (mgmt_brick_split(argv[i], b) < 0)
            FAIL("wrong brick type: %s, use <HOSTNAME>:<export-dir-abs-path>", argv[i]);
        int local = mgmt_host_is_local(m, b->host);
        struct mgmt_peer *owner = m->n_peers ? mgmt_peer_for_host(m, b->host) : NULL;
        if (local < 0 && !owner)
            FAIL("Host %s cannot be resolved", b->host);
        if (owner && !mgmt_peer_is_self(m, owner)) {
            /* Another server's brick: it checks the directory itself, below. */
            for (int j = 0; j < nb; j++)
                if (strcmp(v->bricks[j].host, b->host) == 0 &&
                    (path_within(v->bricks[j].path, b->path) ||
                     path_within(b->path, v->bricks[j].path)))
                    FAIL("The brick %s:%s overlaps with the brick %s:%s of the same command (one "
                         "is inside the other)",
                         b->host, b->path, v->bricks[j].host, v->bricks[j].path);
            remote[nb] = owner;
            snprintf(real[nb], PATH_MAX, "%s", b->path);
            continue;
        }
        if (!local && !owner)
            FAIL("Host %s is not in 'Peer in Cluster' state", b->host);
        char label[sizeof(b->host) + sizeof(b->path) + 1];
        int missing;
        snprintf(label, sizeof(label), "%s:%s", b->host, b->path);
        if (mgmt_brick_dir_usable(label, b->path, &st, &missing, err, sizeof(err)) < 0)
            FAIL("%s", err);
        if (import && missing)
            FAIL("Brick directory %s is missing: import takes the bricks of an existing "
                 "GlusterFS volume",
                 label);
        mgmt_brick_canonical(b->path, real[nb]);
        for (int j = 0; j < nb; j++) {
            if (remote[j])
                continue;
            if (strcmp(real[j], real[nb]) == 0)
                FAIL("Found duplicate exports %s:%s", b->host, b->path);
            if (path_within(real[nb], real[j]) || path_within(real[j], real[nb]))
                FAIL("The brick %s:%s overlaps with the brick %s:%s of the same command (one "
                     "is inside the other)",
                     b->host, b->path, v->bricks[j].host, v->bricks[j].path);
        }
        for (struct mgmt_vol *o = m->vols; o; o = o->next)
            for (int j = 0; j < o->n_bricks; j++) {
                char r[PATH_MAX];
                if (m->n_peers && !o->bricks[j].local)
                    continue;
                mgmt_brick_canonical(o->bricks[j].path, r);
                if (strcmp(r, real[nb]) == 0)
                    FAIL("%s:%s is already part of volume %s", b->host, b->path, o->name);
                if (path_within(real[nb], r))
                    FAIL("The brick %s:%s is inside the brick %s:%s of volume %s", b->host, b->path,
                         o->bricks[j].host, o->bricks[j].path, o->name);
                if (path_within(r, real[nb]))
                    FAIL("The brick %s:%s contains the brick %s:%s of volume %s", b->host, b->path,
                         o->bricks[j].host, o->bricks[j].path, o->name);
            }
        char oname[MGMT_VOLNAME_MAX + 1], oid[64];
        int rc = missing ? -ENOENT
                         : mgmt_brickinfo_read(b->path, oname, sizeof(oname), oid, sizeof(oid));
        if (rc == 0)
            FAIL("%s:%s is already part of a volume (%s, id %s); if that volume is gone, remove "
                 "%s/.cairn/brick.info to reuse the directory",
                 b->host, b->path, oname, oid, b->path);
        if (rc != -ENOENT && rc != -ENOTDIR)
            FAIL("Cannot read %s/.cairn/brick.info: %s", b->path, strerror(-rc));
        /* st: the directory, or the ancestor it will be made in */
        if (!force && stat("/", &root) == 0 && root.st_dev == st.st_dev)
            FAIL("The brick %s:%s is being created in the root partition. It is recommended that "
                 "you don't use the system's root partition for storage backend. Or use 'force' "
                 "at the end of the command if you want to override this behavior.",
                 b->host, b->path);
    }
    v->n_bricks = nb;
    /* The other servers check their bricks (a directory or one they can
     * make, other volumes, marker, root partition) before anything is
     * committed. */
    for (int i = 0; i < nb; i++) {
        if (!remote[i])
            continue;
        char *paths[nb];
        int n = 0;
        for (int j = i; j < nb; j++)
            if (remote[j] && strcmp(remote[j]->uuid, remote[i]->uuid) == 0) {
                paths[n++] = v->bricks[j].path;
                if (j != i)
                    remote[j] = NULL;
            }
        char owner[GFID_STRLEN], host[NET_HOST_MAX];
        snprintf(owner, sizeof(owner), "%s", remote[i]->uuid);
        snprintf(host, sizeof(host), "%s", v->bricks[i].host);
        if (mgmt_owner_check_bricks(m, owner, name, force, n, paths, err, sizeof(err)) < 0)
            FAIL("%s: %s", host, err);
        if (mgmt_vol_find(m, name))
            FAIL("Volume %s already exists", name);
    }
    v->status = MGMT_VOL_CREATED;
    /* Imported volumes keep their ranges: their link-to files point by
     * range (docs/elastic.md). */
    const char *placement = opt_set_get(&m->pool_opts, "cluster.placement");
    if (!import && placement && strcmp(placement, "rendezvous") == 0 && !redundancy &&
        !(v->place = mgmt_place_new(nb / (replica > 1 ? replica : 1))))
        FAIL("out of memory");
    gfid_t g;
    gfid_generate(&g);
    gfid_format(&g, v->id);
    if (import && import_bricks(m, v, force, keep, out, err, sizeof(err)) < 0)
        FAIL("%s", err);
    for (int i = 0; i < nb; i++) {
        gfid_generate(&g);
        gfid_format(&g, v->bricks[i].id);
    }
    /* One entry: the volume exists on every server or on none. Each server
     * makes its own missing brick directories and writes their markers when
     * it applies it, so a refused create leaves no directory behind. */
    char *text = mgmt_vol_format(v);
    if (!text)
        FAIL("out of memory");
    struct rpc_buf e;
    rpc_buf_init(&e);
    rpc_put_u64(&e, RPC_T_OP, MGMT_E_VOL_CREATE);
    rpc_put_str(&e, RPC_T_DATA, text);
    free(text);
    int rc = mgmt_commit(m, &e, err, sizeof(err));
    rpc_buf_free(&e);
    if (rc < 0)
        FAIL("%s", err);
    fprintf(out, "volume %s: %s: success: please start the volume to access data\n", verb, name);
    free(real);
    free(remote);
    mgmt_vol_free(v);
    return 0;
fail:
    free(real);
    free(remote);
    mgmt_vol_free(v);
    return 1;
}

int mgmt_cmd_create(struct mgmt *m, int argc, char **argv, FILE *out)
{
    return create_or_import(m, argc, argv, out, 0);
}

int mgmt_cmd_import(struct mgmt *m, int argc, char **argv, FILE *out)
{
    return create_or_import(m, argc, argv, out, 1);
}
