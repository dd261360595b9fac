/* `volume import`, the brick side: converts a GlusterFS brick in place.
 *
 * What a GlusterFS brick holds besides the plain files (read from its
 * documentation and sources for the facts; nothing of it is reused):
 *   trusted.gfid             16 bytes, the object's id: Cairn's ids are the
 *                            same kind, so it becomes trusted.cairn.gfid and
 *                            every replica keeps agreeing on it;
 *   trusted.afr.V-client-N   12 bytes, three big-endian u32 counters (data,
 *                            metadata, entry): this copy saw changes that
 *                            brick N of the volume (counted from 0 in
 *                            `volume create` order) missed;
 *   trusted.afr.dirty        the same counters: a change in flight;
 *   trusted.glusterfs.mdata  the times clients see: u8 version (1), u64
 *                            flags, then ctime, mtime, atime as big-endian
 *                            u64 seconds and nanoseconds (57 bytes);
 *   trusted.glusterfs.dht.linkto  on DHT link files (mode ---------T, size
 *                            0), which only point at a file held elsewhere;
 *   trusted.glusterfs.volume-id   on the brick root;
 *   .glusterfs/              hard links of every file by gfid, symbolic
 *                            links of directories, indices, changelogs;
 *   .glusterfs-anonymous-inode-ID/  entries an unfinished entry heal set
 *                            aside.
 * Cairn keeps its own names (docs/brick-format.md); the GlusterFS ones are
 * removed once converted, so no mount shows them and no heal copies them.
 *
 * Every step can be repeated: an interrupted import is finished by running
 * it again (the volume id is then read from the report, written before
 * the root's GlusterFS volume id is removed).
 *
 * A brick is converted by the cairnd of its server (cmd_create.c asks the
 * owner, pool_rpc.c's __import). A volume of several sets then gets Cairn
 * link-to files where Cairn's hash looks for names GlusterFS's hash placed:
 * each brick lists its names and the bricks of the set Cairn's hash picks
 * make them (below), driven by import_place.c through the owners. */
#include "import.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../client/distribute.h"
#include "../lib/log.h"
#include "../rpc/msg.h"

#define GF_GFID "trusted.gfid"
#define GF_AFR "trusted.afr."
#define GF_MDATA "trusted.glusterfs.mdata"
#define GF_LINKTO "trusted.glusterfs.dht.linkto"
#define GF_VOLID "trusted.glusterfs.volume-id"
#define GF_MDATA_LEN 57
#define CAIRN_GFID "trusted.cairn.gfid"
#define CAIRN_PENDING "trusted.cairn.pending"
#define REPORT ".cairn/import-report"
#define LIST_MAX 10 /* names quoted in a refusal */

struct walk {
    const struct mgmt_import_brick *ib;
    int check; /* 1: read only, count what would be done */
    int index_fd;
    FILE *report; /* convert: the files to heal */
    char vpath[RPC_PATH_MAX + NAME_MAX + 2];
    size_t vlen;
    unsigned long objects, dirs, links, marks, unmapped, noid, orphans;
    int fatal;      /* a refusal that force does not lift */
    char list[512]; /* the first unmappable names */
    int listed;
    char err[PATH_MAX + 256];
};

__attribute__((format(printf, 2, 3))) static void werr(struct walk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof(w->err), fmt, ap);
    va_end(ap);
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* A name for the l*xattr calls that never follows the last component. */
static void xname(char *out, size_t len, int dirfd, const char *name)
{
    snprintf(out, len, "/proc/self/fd/%d/%s", dirfd, name);
}

static int nonzero(const uint8_t *v, ssize_t n)
{
    for (ssize_t i = 0; i < n; i++)
        if (v[i])
            return 1;
    return 0;
}

/* GlusterFS's internal names, removed once converted. */
static int gluster_name(const char *x)
{
    static const char *const prefixes[] = {"trusted.gfid",
                                           "trusted.afr.",
                                           "trusted.glusterfs.",
                                           "trusted.pgfid.",
                                           "trusted.bit-rot.",
                                           "trusted.tier.",
                                           NULL};
    for (int i = 0; prefixes[i]; i++)
        if (strncmp(x, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

static void note_unmapped(struct walk *w, const char *why)
{
    w->unmapped++;
    if (w->listed++ >= LIST_MAX)
        return;
    size_t l = strlen(w->list);
    snprintf(w->list + l, sizeof(w->list) - l, "%s%s (%s)", l ? ", " : "", w->vlen ? w->vpath : "/",
             why);
}

/* Which member of this brick's replica set client-N is: the bit of
 * trusted.cairn.pending, RPC_PENDING_DIRTY for the brick itself (a copy
 * that blames itself), or -1 when N is outside the set. */
static int64_t member_bit(const struct mgmt_import_brick *ib, const char *x)
{
    const char *c = strstr(x, "-client-");
    const char *last = c;
    while (c && (c = strstr(c + 1, "-client-")))
        last = c;
    if (!last)
        return -1;
    char *end;
    long n = strtol(last + 8, &end, 10);
    if (*end || end == last + 8 || n < 0 || n >= ib->n_bricks)
        return -1;
    int r = ib->replica > 1 ? ib->replica : 1;
    if (n / r != ib->index / r)
        return -1;
    if (n == ib->index)
        return RPC_PENDING_DIRTY;
    return (int64_t)1 << (n % r);
}

static int index_put(struct walk *w, const uint8_t g[GFID_LEN])
{
    char name[GFID_STRLEN];
    gfid_t id;
    memcpy(id.b, g, GFID_LEN);
    gfid_format(&id, name);
    int fd = openat(w->index_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    const char *p = w->vlen ? w->vpath : "/";
    ssize_t n = write(fd, p, strlen(p));
    int rc = n == (ssize_t)strlen(p) ? 0 : -EIO;
    close(fd);
    return rc;
}

/* One object (the root when name is "."): its id, marks, times. *times
 * gets the GlusterFS times (mtime, atime) when it has them: the caller
 * applies a directory's after its entries are done. */
static int convert_obj(struct walk *w, int dirfd, const char *name, struct timespec times[2],
                       int *has_times)
{
    char x[64 + NAME_MAX], *names = NULL;
    int rc = 0;
    *has_times = 0;
    xname(x, sizeof(x), dirfd, name);
    ssize_t len = llistxattr(x, NULL, 0);
    if (len < 0)
        return -errno;
    names = malloc((size_t)len + 1);
    if (!names)
        return -ENOMEM;
    len = llistxattr(x, names, (size_t)len);
    if (len < 0) {
        free(names);
        return -errno;
    }
    uint8_t gf[GFID_LEN], cg[GFID_LEN], v[64];
    int has_gf = lgetxattr(x, GF_GFID, gf, sizeof(gf)) == GFID_LEN;
    int has_cg = lgetxattr(x, CAIRN_GFID, cg, sizeof(cg)) == GFID_LEN;
    uint32_t bits = 0;
    int unmapped = 0;
    for (char *p = names; p < names + len; p += strlen(p) + 1) {
        if (strncmp(p, "trusted.ec.", 11) == 0 || strncmp(p, "trusted.glusterfs.shard.", 24) == 0) {
            werr(w,
                 "%s%s carries %s: dispersed and sharded GlusterFS volumes cannot be imported "
                 "(copy their files through a mount instead)",
                 w->ib->path, w->vlen ? w->vpath : "", p);
            w->fatal = 1;
            rc = -EINVAL;
            goto out;
        }
        if (strncmp(p, GF_AFR, strlen(GF_AFR)) == 0) {
            ssize_t n = lgetxattr(x, p, v, sizeof(v));
            if (n <= 0 || !nonzero(v, n))
                continue;
            if (strcmp(p, GF_AFR "dirty") == 0) {
                bits |= RPC_PENDING_DIRTY;
                continue;
            }
            int64_t b = member_bit(w->ib, p);
            if (b < 0) {
                if (!unmapped++)
                    note_unmapped(w, p);
                continue;
            }
            bits |= (uint32_t)b;
        } else if (strcmp(p, GF_MDATA) == 0) {
            ssize_t n = lgetxattr(x, p, v, sizeof(v));
            if (n == GF_MDATA_LEN && v[0] == 1) {
                times[0].tv_sec = (time_t)be64(v + 41); /* atime */
                times[0].tv_nsec = (long)be64(v + 49);
                times[1].tv_sec = (time_t)be64(v + 25); /* mtime */
                times[1].tv_nsec = (long)be64(v + 33);
                *has_times = times[0].tv_nsec < 1000000000L && times[1].tv_nsec < 1000000000L;
            }
        }
    }
    if (w->check) {
        if (bits)
            w->marks++;
        goto out;
    }
    if (has_gf && (!has_cg || memcmp(gf, cg, GFID_LEN) != 0)) {
        if (lsetxattr(x, CAIRN_GFID, gf, GFID_LEN, 0) < 0) {
            rc = -errno;
            werr(w, "cannot set %s on %s%s: %s", CAIRN_GFID, w->ib->path, w->vpath,
                 strerror(errno));
            goto out;
        }
        memcpy(cg, gf, GFID_LEN);
        has_cg = 1;
    } else if (!has_gf && !has_cg) {
        w->noid++;
    }
    if (unmapped)
        bits |= RPC_PENDING_DIRTY; /* force: Cairn's heal compares the copies */
    if (bits && has_cg) {
        uint8_t old[4] = {0};
        ssize_t n = lgetxattr(x, CAIRN_PENDING, old, sizeof(old));
        uint32_t cur = n == 4 ? (uint32_t)old[0] | (uint32_t)old[1] << 8 | (uint32_t)old[2] << 16 |
                                    (uint32_t)old[3] << 24
                              : 0;
        cur |= bits;
        uint8_t nv[4] = {(uint8_t)cur, (uint8_t)(cur >> 8), (uint8_t)(cur >> 16),
                         (uint8_t)(cur >> 24)};
        /* the index entry first, as the brick does (docs/replication.md) */
        if ((rc = index_put(w, cg)) < 0 || lsetxattr(x, CAIRN_PENDING, nv, 4, 0) < 0) {
            rc = rc < 0 ? rc : -errno;
            werr(w, "cannot record the pending marks of %s%s: %s", w->ib->path, w->vpath,
                 strerror(-rc));
            goto out;
        }
        w->marks++;
        fprintf(w->report, "heal %s%s\n", w->vlen ? w->vpath : "/",
                unmapped ? " (unmapped GlusterFS mark)" : "");
    }
    for (char *p = names; p < names + len; p += strlen(p) + 1) {
        if (!gluster_name(p) || (strcmp(name, ".") == 0 && strcmp(p, GF_VOLID) == 0))
            continue; /* the root's volume id goes last (see the top) */
        if (lremovexattr(x, p) < 0 && errno != ENODATA) {
            rc = -errno;
            werr(w, "cannot remove %s from %s%s: %s", p, w->ib->path, w->vpath, strerror(errno));
            goto out;
        }
    }
out:
    free(names);
    return rc;
}

static int is_link_file(int dirfd, const char *name, const struct stat *st)
{
    if (!S_ISREG(st->st_mode) || (st->st_mode & 07777) != S_ISVTX || st->st_size != 0)
        return 0;
    char x[64 + NAME_MAX];
    xname(x, sizeof(x), dirfd, name);
    return lgetxattr(x, GF_LINKTO, NULL, 0) >= 0;
}

/* The names of a directory (malloc'd, NUL-separated, *n of them). */
static char *list_dir(int fd, size_t *n, size_t *bytes)
{
    int d = dup(fd);
    DIR *dir = d >= 0 ? fdopendir(d) : NULL;
    if (!dir) {
        if (d >= 0)
            close(d);
        return NULL;
    }
    rewinddir(dir); /* the duplicate shares the offset of an earlier listing */
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    *n = 0;
    struct dirent *e;
    while (buf && (e = readdir(dir))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        size_t l = strlen(e->d_name) + 1;
        if (used + l > cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        memcpy(buf + used, e->d_name, l);
        used += l;
        (*n)++;
    }
    closedir(dir);
    *bytes = used;
    return buf;
}

static int root_special(const char *name)
{
    return strcmp(name, ".glusterfs") == 0 || strcmp(name, ".cairn") == 0 ||
           strncmp(name, ".glusterfs-anonymous-inode-", 27) == 0;
}

static int walk_dir(struct walk *w, int fd, int root)
{
    size_t n, bytes;
    char *names = list_dir(fd, &n, &bytes);
    if (!names) {
        werr(w, "cannot read directory %s%s: %s", w->ib->path, w->vpath, strerror(errno));
        return -EIO;
    }
    int rc = 0;
    for (char *p = names; p < names + bytes && rc == 0 && !w->fatal; p += strlen(p) + 1) {
        if (root && root_special(p))
            continue;
        struct stat st;
        size_t saved = w->vlen, l = strlen(p);
        if (saved + l + 1 >= sizeof(w->vpath)) {
            werr(w, "%s%s/%s: path too long", w->ib->path, w->vpath, p);
            rc = -ENAMETOOLONG;
            break;
        }
        w->vpath[w->vlen++] = '/';
        memcpy(w->vpath + w->vlen, p, l + 1);
        w->vlen += l;
        if (fstatat(fd, p, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = -errno;
            werr(w, "cannot stat %s%s: %s", w->ib->path, w->vpath, strerror(errno));
        } else if (is_link_file(fd, p, &st)) {
            w->links++;
            if (!w->check && unlinkat(fd, p, 0) < 0 && errno != ENOENT) {
                rc = -errno;
                werr(w, "cannot remove link file %s%s: %s", w->ib->path, w->vpath, strerror(errno));
            }
        } else {
            struct timespec t[2];
            int has_t;
            w->objects++;
            rc = convert_obj(w, fd, p, t, &has_t);
            if (rc == 0 && S_ISDIR(st.st_mode)) {
                w->dirs++;
                int sub = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0) {
                    rc = -errno;
                    werr(w, "cannot open %s%s: %s", w->ib->path, w->vpath, strerror(errno));
                } else {
                    rc = walk_dir(w, sub, 0);
                    close(sub);
                }
            }
            if (rc == 0 && has_t && !w->check)
                utimensat(fd, p, t, AT_SYMLINK_NOFOLLOW);
        }
        w->vlen = saved;
        w->vpath[saved] = 0;
    }
    free(names);
    return w->fatal && rc == 0 ? -EINVAL : rc;
}

/* Removes the tree at dirfd/name (never following symbolic links). */
static int remove_tree(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOTDIR || errno == ELOOP ? (unlinkat(dirfd, name, 0) < 0 ? -errno : 0)
                                                  : -errno;
    size_t n, bytes;
    char *names = list_dir(fd, &n, &bytes);
    int rc = names ? 0 : -ENOMEM;
    for (char *p = names; rc == 0 && p < names + bytes; p += strlen(p) + 1) {
        struct stat st;
        if (fstatat(fd, p, &st, AT_SYMLINK_NOFOLLOW) < 0)
            rc = -errno;
        else if (S_ISDIR(st.st_mode))
            rc = remove_tree(fd, p);
        else if (unlinkat(fd, p, 0) < 0)
            rc = -errno;
    }
    free(names);
    close(fd);
    if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
        rc = -errno;
    return rc;
}

/* Files in .glusterfs/XX/YY/ with one link have no name in the volume
 * (GlusterFS lost it, or a heal had not recreated it yet): counted, and
 * kept in .cairn/glusterfs-orphans/ unless check. */
static int keep_orphans(struct walk *w, int root)
{
    int g = openat(root, ".glusterfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (g < 0)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    const char *hex = "0123456789abcdef";
    for (int a = 0; a < 256 && rc == 0; a++) {
        char d1[3] = {hex[a >> 4], hex[a & 15], 0};
        int f1 = openat(g, d1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (f1 < 0)
            continue;
        for (int b = 0; b < 256 && rc == 0; b++) {
            char d2[3] = {hex[b >> 4], hex[b & 15], 0};
            int f2 = openat(f1, d2, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (f2 < 0)
                continue;
            size_t n, bytes;
            char *names = list_dir(f2, &n, &bytes);
            for (char *p = names; names && p < names + bytes && rc == 0; p += strlen(p) + 1) {
                struct stat st;
                /* a dropped DHT link file leaves its handle here with one link */
                if (fstatat(f2, p, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
                    st.st_nlink != 1 || is_link_file(f2, p, &st))
                    continue;
                w->orphans++;
                if (w->check)
                    continue;
                char to[PATH_MAX];
                snprintf(to, sizeof(to), ".cairn/glusterfs-orphans/%s", p);
                mkdirat(root, ".cairn/glusterfs-orphans", 0700);
                if (renameat(f2, p, root, to) < 0)
                    rc = -errno;
                else
                    fprintf(w->report, "orphan %s\n", to);
            }
            free(names);
            close(f2);
        }
        close(f1);
    }
    close(g);
    return rc;
}

/* Unfinished entry heals (.glusterfs-anonymous-inode-ID at the root): an
 * empty one is removed; one holding entries is refused without force and
 * kept in .cairn/ with it. */
static int anon_dirs(struct walk *w, int root)
{
    size_t n, bytes;
    char *names = list_dir(root, &n, &bytes);
    if (!names)
        return -ENOMEM;
    int rc = 0;
    for (char *p = names; p < names + bytes && rc == 0; p += strlen(p) + 1) {
        if (strncmp(p, ".glusterfs-anonymous-inode-", 27) != 0)
            continue;
        int fd = openat(root, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        size_t k = 0, kb;
        char *in = fd >= 0 ? list_dir(fd, &k, &kb) : NULL;
        free(in);
        if (fd >= 0)
            close(fd);
        if (k == 0) {
            if (!w->check && unlinkat(root, p, AT_REMOVEDIR) < 0)
                rc = -errno;
            continue;
        }
        if (w->check) {
            snprintf(w->vpath, sizeof(w->vpath), "/%s", p);
            w->vlen = strlen(w->vpath);
            note_unmapped(w, "an unfinished GlusterFS entry heal");
            w->vlen = 0;
            w->vpath[0] = 0;
            continue;
        }
        char to[PATH_MAX];
        snprintf(to, sizeof(to), ".cairn/%s", p);
        if (renameat(root, p, root, to) < 0)
            rc = -errno;
        else
            fprintf(w->report, "kept %s (an unfinished GlusterFS entry heal)\n", to);
    }
    free(names);
    return rc;
}

/* An empty .trashcan (GlusterFS makes it, with internal_op, on every
 * brick) is GlusterFS's; one holding files is the users'. */
static void drop_empty_trashcan(int root)
{
    int fd = openat(root, ".trashcan", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t n, bytes;
    char *names = list_dir(fd, &n, &bytes);
    int empty = names && (n == 0 || (n == 1 && strcmp(names, "internal_op") == 0 &&
                                     unlinkat(fd, "internal_op", AT_REMOVEDIR) == 0));
    free(names);
    close(fd);
    if (empty)
        unlinkat(root, ".trashcan", AT_REMOVEDIR);
}

/* A glusterfsd serving path: its command line holds --brick-name PATH. */
static int served_by(const char *path, char *real)
{
    DIR *proc = opendir("/proc");
    if (!proc)
        return 0;
    struct dirent *e;
    int pid = 0;
    while (!pid && (e = readdir(proc))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char f[NAME_MAX + 32], buf[8192];
        snprintf(f, sizeof(f), "/proc/%s/cmdline", e->d_name);
        int fd = open(f, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = 0;
        const char *base = strrchr(buf, '/');
        base = base ? base + 1 : buf;
        if (strncmp(base, "glusterfs", 9) != 0)
            continue;
        for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
            char *next = a + strlen(a) + 1;
            if (strcmp(a, "--brick-name") != 0 || next >= buf + n)
                continue;
            char r[PATH_MAX];
            if (strcmp(next, path) == 0 || (realpath(next, r) && strcmp(r, real) == 0))
                pid = atoi(e->d_name);
        }
    }
    closedir(proc);
    return pid;
}

static int report_volid(const char *path, char volid[GFID_STRLEN])
{
    char f[PATH_MAX + 32], text[4096];
    snprintf(f, sizeof(f), "%s/%s", path, REPORT);
    int fd = open(f, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -EINVAL;
    text[n] = 0;
    const char *k = strstr(text, "glusterfs-volume-id=");
    gfid_t g;
    char id[GFID_STRLEN];
    if (!k || sscanf(k + 20, "%36s", id) != 1 || gfid_parse(id, &g) < 0)
        return -EINVAL;
    gfid_format(&g, volid);
    return 0;
}

static int read_volid(const struct mgmt_import_brick *ib, char volid[GFID_STRLEN], char *err,
                      size_t errlen)
{
    gfid_t g;
    ssize_t n = lgetxattr(ib->path, GF_VOLID, g.b, sizeof(g.b));
    if (n == GFID_LEN) {
        gfid_format(&g, volid);
        return 0;
    }
    if (report_volid(ib->path, volid) == 0)
        return 0; /* an import that stopped after its report: finish it */
    snprintf(err, errlen, "%s is not a GlusterFS brick: it has no %s (%s)", ib->path, GF_VOLID,
             n < 0 ? strerror(errno) : "wrong size");
    return -EINVAL;
}

int mgmt_import_check(const struct mgmt_import_brick *ib, char volid[GFID_STRLEN], char *err,
                      size_t errlen)
{
    struct stat st;
    char real[PATH_MAX];
    if (stat(ib->path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "Brick directory %s is missing", ib->path);
        return -ENOENT;
    }
    if (!realpath(ib->path, real))
        snprintf(real, sizeof(real), "%s", ib->path);
    int pid = served_by(ib->path, real);
    if (pid) {
        snprintf(err, errlen,
                 "%s is served by a GlusterFS brick process (glusterfsd, pid %d): stop the "
                 "GlusterFS volume first (gluster volume stop VOLNAME)",
                 ib->path, pid);
        return -EBUSY;
    }
    if (read_volid(ib, volid, err, errlen) < 0)
        return -EINVAL;
    int root = open(ib->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        snprintf(err, errlen, "cannot open %s: %s", ib->path, strerror(errno));
        return -errno;
    }
    if (faccessat(root, ".shard", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
        close(root);
        snprintf(err, errlen,
                 "%s holds .shard: sharded GlusterFS volumes cannot be imported (copy their "
                 "files through a mount instead)",
                 ib->path);
        return -EINVAL;
    }
    struct walk *w = calloc(1, sizeof(*w));
    if (!w) {
        close(root);
        return -ENOMEM;
    }
    w->ib = ib;
    w->check = 1;
    struct timespec t[2];
    int has_t;
    int rc = convert_obj(w, root, ".", t, &has_t);
    if (rc == 0)
        rc = anon_dirs(w, root);
    if (rc == 0)
        rc = walk_dir(w, root, 1);
    close(root);
    if (rc < 0)
        snprintf(err, errlen, "%s", w->err[0] ? w->err : strerror(-rc));
    else if (w->unmapped && !ib->force) {
        snprintf(err, errlen,
                 "%s: %lu object(s) carry GlusterFS heal state Cairn cannot map to this brick's "
                 "replica set (are the bricks given in GlusterFS's order?): %s%s. Heal them with "
                 "GlusterFS first (gluster volume heal VOLNAME), or add 'force' to import them "
                 "marked for Cairn's heal",
                 ib->path, w->unmapped, w->list, w->unmapped > LIST_MAX ? ", ..." : "");
        rc = -EINVAL;
    }
    free(w);
    return rc;
}

int mgmt_import_convert(const struct mgmt_import_brick *ib, const char *volid, char *summary,
                        size_t slen, char *err, size_t errlen)
{
    struct walk *w = calloc(1, sizeof(*w));
    char tmp[PATH_MAX + 64];
    int root = -1, rc = 0;
    if (!w)
        return -ENOMEM;
    w->ib = ib;
    w->index_fd = -1;
    root = open(ib->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0 || (mkdirat(root, ".cairn", 0700) < 0 && errno != EEXIST) ||
        (mkdirat(root, ".cairn/index", 0700) < 0 && errno != EEXIST) ||
        (w->index_fd = openat(root, ".cairn/index", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot make %s/.cairn: %s", ib->path, strerror(errno));
        goto out;
    }
    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", ib->path, REPORT);
    w->report = fopen(tmp, "we");
    if (!w->report) {
        rc = -errno;
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fprintf(w->report, "glusterfs-volume-id=%s\nbrick-index=%d\n", volid, ib->index);
    struct timespec root_t[2];
    int root_has_t;
    rc = convert_obj(w, root, ".", root_t, &root_has_t);
    if (rc == 0)
        rc = anon_dirs(w, root);
    if (rc == 0) {
        drop_empty_trashcan(root);
        rc = walk_dir(w, root, 1);
    }
    if (rc == 0)
        rc = keep_orphans(w, root);
    const char *gl = "none";
    if (rc == 0 && faccessat(root, ".glusterfs", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
        if (ib->keep) {
            gl = "kept as .cairn/glusterfs";
            if (renameat(root, ".glusterfs", root, ".cairn/glusterfs") < 0)
                rc = -errno;
        } else {
            gl = "removed";
            rc = remove_tree(root, ".glusterfs");
        }
        if (rc < 0)
            werr(w, "cannot %s %s/.glusterfs: %s", ib->keep ? "move" : "remove", ib->path,
                 strerror(-rc));
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s", w->err[0] ? w->err : strerror(-rc));
        goto out;
    }
    fprintf(w->report,
            "objects=%lu\ndirectories=%lu\nlink-files-dropped=%lu\nmarks-converted=%lu\n"
            "unmapped-marks=%lu\nobjects-without-id=%lu\norphans=%lu\nglusterfs=%s\n",
            w->objects, w->dirs, w->links, w->marks, w->unmapped, w->noid, w->orphans, gl);
    if (fflush(w->report) != 0 || fsync(fileno(w->report)) < 0) {
        rc = -EIO;
        snprintf(err, errlen, "cannot write %s", tmp);
        goto out;
    }
    fclose(w->report);
    w->report = NULL;
    char final[PATH_MAX + 64];
    snprintf(final, sizeof(final), "%s/%s", ib->path, REPORT);
    if (rename(tmp, final) < 0 || (lremovexattr(ib->path, GF_VOLID) < 0 && errno != ENODATA)) {
        rc = -errno;
        snprintf(err, errlen, "cannot finish %s: %s", final, strerror(errno));
        goto out;
    }
    if (root_has_t)
        utimensat(root, ".", root_t, 0);
    snprintf(summary, slen,
             "%lu objects (%lu directories), %lu link files dropped, %lu objects to heal "
             "(%lu unmapped), .glusterfs %s; report in %s",
             w->objects + 1, w->dirs + 1, w->links, w->marks, w->unmapped, gl, final);
out:
    if (w->report)
        fclose(w->report);
    if (w->index_fd >= 0)
        close(w->index_fd);
    if (root >= 0)
        close(root);
    free(w);
    return rc;
}

/* ---- distributed volumes: names where Cairn's hash looks for them ----
 *
 * The brick side of the placement (import_place.c drives it, through the
 * owner of each brick): a brick lists the names it holds that Cairn's hash
 * puts on another set, and a brick of that set checks and makes their
 * link-to files. Nothing here needs another brick. */

#define NAMES ".cairn/import-names"
#define LINKTO_TMP ".cairn/import-linkto.tmp"
#define CAIRN_LINKTO "trusted.cairn.linkto"

static int is_cairn_linkto(int dirfd, const char *name, const struct stat *st)
{
    if (!S_ISREG(st->st_mode) || (st->st_mode & 07777) != S_ISVTX || st->st_size != 0)
        return 0;
    char x[64 + NAME_MAX];
    xname(x, sizeof(x), dirfd, name);
    return lgetxattr(x, CAIRN_LINKTO, NULL, 0) >= 0;
}

/* The link-to file's id, the same on every brick of its set whichever
 * server makes it and however often the import runs: derived from the
 * file's id (zeros when it has none) and its path, two independent 64-bit
 * hashes, shaped as a random (version 4) id. */
static void linkto_id(const uint8_t *file_id, const char *vpath, gfid_t *out)
{
    uint64_t a = 0xcbf29ce484222325ull, b = 0x9e3779b97f4a7c15ull;
    uint8_t zero[GFID_LEN] = {0};
    const uint8_t *f = file_id ? file_id : zero;
    size_t plen = strlen(vpath);
    for (size_t i = 0; i < GFID_LEN + plen; i++) {
        uint8_t c = i < GFID_LEN ? f[i] : (uint8_t)vpath[i - GFID_LEN];
        a = (a ^ c) * 0x100000001b3ull;
        b = (b ^ c) * 0xff51afd7ed558ccdull;
        b ^= b >> 29;
    }
    a ^= a >> 33;
    a *= 0xc4ceb9fe1a85ec53ull;
    a ^= a >> 33;
    for (int i = 0; i < 8; i++) {
        out->b[i] = (uint8_t)(a >> (8 * i));
        out->b[8 + i] = (uint8_t)(b >> (8 * i));
    }
    out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x40);
    out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80);
}

/* ---- the list's lines ---- */

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

/* A decimal in [0, limit) ending at a space; *p moves past the space. */
static int parse_index(const char **p, const char *end, int limit)
{
    long v = 0;
    const char *s = *p;
    if (s >= end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end && s[1] != ' '))
        return -EPROTO;
    while (s < end && *s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
        if (v >= limit)
            return -EPROTO;
    }
    if (s >= end || *s != ' ')
        return -EPROTO;
    *p = s + 1;
    return (int)v;
}

int mgmt_import_line_parse(const char *p, size_t n, int sets, struct mgmt_import_line *l)
{
    const char *end = p + n;
    if (sets < 1 || sets > CL_DHT_MAX || (l->to = parse_index(&p, end, sets)) < 0 ||
        (l->at = parse_index(&p, end, sets)) < 0 || l->to == l->at)
        return -EPROTO;
    char id[GFID_STRLEN];
    if (end - p < GFID_STRLEN || p[GFID_STRLEN - 1] != ' ')
        return -EPROTO;
    memcpy(id, p, GFID_STRLEN - 1);
    id[GFID_STRLEN - 1] = 0;
    if (gfid_parse(id, &l->id) < 0)
        return -EPROTO;
    p += GFID_STRLEN;
    size_t o = 0;
    while (p < end) {
        char c = *p++;
        if (c == 0 || c == '\n')
            return -EPROTO;
        if (c == '\\') {
            if (p >= end || (*p != '\\' && *p != 'n'))
                return -EPROTO;
            c = *p++ == 'n' ? '\n' : '\\';
        }
        if (o + 1 >= sizeof(l->path))
            return -EPROTO;
        l->path[o++] = c;
    }
    l->path[o] = 0;
    /* an absolute path of plain components, none of them Cairn's or
     * GlusterFS's own directories at the top */
    if (o < 2 || l->path[0] != '/')
        return -EPROTO;
    for (const char *c = l->path + 1;;) {
        size_t len = strcspn(c, "/");
        if (len == 0 || len > NAME_MAX || (len == 1 && c[0] == '.') ||
            (len == 2 && c[0] == '.' && c[1] == '.'))
            return -EPROTO;
        if (c == l->path + 1) {
            char first[NAME_MAX + 1];
            memcpy(first, c, len);
            first[len] = 0;
            if (root_special(first))
                return -EPROTO;
        }
        if (!c[len])
            break;
        c += len + 1;
    }
    return 0;
}

/* ---- listing a brick's names ---- */

struct names {
    int set;
    struct cl_dht_layout layout; /* the default: imported directories carry none */
    FILE *out;
    unsigned long count;
    char vpath[RPC_PATH_MAX + NAME_MAX + 2];
    size_t vlen;
};

static int names_dir(struct names *w, int fd, int root)
{
    size_t n, bytes;
    char *names = list_dir(fd, &n, &bytes);
    if (!names)
        return errno ? -errno : -ENOMEM;
    int rc = 0;
    for (char *e = names; e < names + bytes && rc == 0; e += strlen(e) + 1) {
        if (root && root_special(e))
            continue;
        size_t saved = w->vlen, l = strlen(e);
        if (saved + l + 1 >= RPC_PATH_MAX) {
            rc = -ENAMETOOLONG;
            break;
        }
        w->vpath[w->vlen++] = '/';
        memcpy(w->vpath + w->vlen, e, l + 1);
        w->vlen += l;
        struct stat st;
        if (fstatat(fd, e, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = -errno;
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(fd, e, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? -errno : names_dir(w, sub, 0);
            if (sub >= 0)
                close(sub);
        } else if (!is_cairn_linkto(fd, e, &st)) {
            int h = cl_dht_layout_pick(&w->layout, cl_dht_hash(e, l));
            if (h >= 0 && h != w->set) {
                char x[64 + NAME_MAX], id[GFID_STRLEN];
                uint8_t g[GFID_LEN];
                gfid_t lid;
                xname(x, sizeof(x), fd, e);
                int has = lgetxattr(x, CAIRN_GFID, g, sizeof(g)) == GFID_LEN;
                linkto_id(has ? g : NULL, w->vpath, &lid);
                gfid_format(&lid, id);
                fprintf(w->out, "%d %d %s ", h, w->set, id);
                put_escaped(w->out, w->vpath);
                fputc('\n', w->out);
                w->count++;
            }
        }
        w->vlen = saved;
        w->vpath[saved] = 0;
    }
    free(names);
    return rc;
}

int mgmt_import_names(const char *brick, int set, int sets, unsigned long *count, char *err,
                      size_t errlen)
{
    char tmp[PATH_MAX + 64], final[PATH_MAX + 64];
    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", brick, NAMES);
    snprintf(final, sizeof(final), "%s/%s", brick, NAMES);
    struct names *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->set = set;
    cl_dht_layout_default(sets, &w->layout);
    int rc = 0, root = open(brick, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root >= 0 && mkdirat(root, ".cairn", 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "cannot make %s/.cairn: %s", brick, strerror(errno));
        goto out;
    }
    if (root < 0 || !(w->out = fopen(tmp, "we"))) {
        rc = -errno;
        snprintf(err, errlen, "cannot %s %s: %s", root < 0 ? "open" : "write",
                 root < 0 ? brick : tmp, strerror(errno));
        goto out;
    }
    rc = names_dir(w, root, 1);
    if (rc < 0)
        snprintf(err, errlen, "cannot list the names of %s (at %.1000s): %s", brick,
                 w->vlen ? w->vpath : "/", strerror(-rc));
    if (fclose(w->out) != 0 && rc == 0) {
        rc = -EIO;
        snprintf(err, errlen, "cannot write %s", tmp);
    }
    w->out = NULL;
    if (rc == 0 && rename(tmp, final) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot write %s: %s", final, strerror(errno));
    }
    *count = w->count;
out:
    if (root >= 0)
        close(root);
    free(w);
    return rc;
}

int mgmt_import_names_read(const char *brick, uint64_t off, FILE *out, char *err, size_t errlen)
{
    char f[PATH_MAX + 64];
    snprintf(f, sizeof(f), "%s/%s", brick, NAMES);
    int fd = open(f, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot read %s: %s (list the names first)", f, strerror(errno));
        return -errno;
    }
    char *buf = malloc(MGMT_IMPORT_CHUNK);
    ssize_t n = buf ? pread(fd, buf, MGMT_IMPORT_CHUNK, (off_t)off) : -1;
    int rc = 0;
    if (n < 0) {
        rc = buf ? -errno : -ENOMEM;
        snprintf(err, errlen, "cannot read %s: %s", f, strerror(-rc));
    } else if (n == 0) {
        unlink(f); /* read to its end: done with */
    } else {
        size_t whole = (size_t)n;
        while (whole && buf[whole - 1] != '\n')
            whole--;
        if (!whole) {
            rc = -EPROTO;
            snprintf(err, errlen, "%s has no whole line at offset %llu", f,
                     (unsigned long long)off);
        } else {
            fwrite(buf, 1, whole, out);
        }
    }
    free(buf);
    close(fd);
    return rc;
}

/* ---- link-to files on a brick of the set Cairn's hash picks ---- */

/* The directory holding path's last component, opened one component at a
 * time without following symbolic links; *name points into path. */
static int open_parent(int root, const char *path, const char **name)
{
    int fd = dup(root);
    const char *c = path + 1;
    if (fd < 0)
        return -errno;
    for (;;) {
        size_t len = strcspn(c, "/");
        if (!c[len]) {
            *name = c;
            return fd;
        }
        char comp[NAME_MAX + 1];
        memcpy(comp, c, len);
        comp[len] = 0;
        int sub = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        if (sub < 0)
            return -e;
        fd = sub;
        c += len + 1;
    }
}

/* Makes the link-to file: built in .cairn, then moved into place, never
 * over an existing name, so a cut-short import leaves no half-made file
 * under a user's name. 1 when made, 0 when the name exists, or -errno. */
static int make_linkto(int root, int dir, const char *name, const struct mgmt_import_line *l)
{
    char v[16];
    snprintf(v, sizeof(v), "%d", l->at);
    int fd = openat(root, LINKTO_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (fchown(fd, 0, 0) < 0 || fchmod(fd, S_ISVTX) < 0 ||
        fsetxattr(fd, CAIRN_GFID, l->id.b, GFID_LEN, 0) < 0 ||
        fsetxattr(fd, CAIRN_LINKTO, v, strlen(v), 0) < 0)
        rc = -errno;
    close(fd);
    if (rc < 0)
        return rc;
    /* the directory keeps the times GlusterFS's clients saw */
    struct stat dst;
    int keep_times = fstat(dir, &dst) == 0;
    if (renameat2(root, LINKTO_TMP, dir, name, RENAME_NOREPLACE) < 0)
        return errno == EEXIST ? 0 : -errno;
    if (keep_times) {
        struct timespec t[2] = {dst.st_atim, dst.st_mtim};
        futimens(dir, t);
    }
    return 1;
}

int mgmt_import_link(const char *brick, int set, int sets, int make, const char *batch, size_t len,
                     FILE *out, char *err, size_t errlen)
{
    struct mgmt_import_line *l = malloc(sizeof(*l));
    int root = open(brick, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    unsigned long made = 0, index = 0;
    if (!l || root < 0) {
        rc = l ? -errno : -ENOMEM;
        snprintf(err, errlen, "cannot open %s: %s", brick, strerror(-rc));
        goto out;
    }
    if (make && mkdirat(root, ".cairn", 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "cannot make %s/.cairn: %s", brick, strerror(errno));
        goto out;
    }
    for (const char *p = batch, *end = batch + len; p < end; index++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || mgmt_import_line_parse(p, (size_t)(nl - p), sets, l) < 0 || l->to != set) {
            rc = -EPROTO;
            snprintf(err, errlen, "line %lu of the link-to list for %s is malformed", index + 1,
                     brick);
            goto out;
        }
        p = nl + 1;
        const char *name = NULL;
        int dir = open_parent(root, l->path, &name);
        if (dir < 0) {
            if (dir != -ENOENT)
                log_warn("volume import: %s%.4000s: a parent is not a directory on subvolume %d "
                         "(%s); no link-to file made",
                         brick, l->path, set, strerror(-dir));
            continue; /* this copy missed the directory: heal brings both */
        }
        struct stat st;
        int r = 0;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (!is_cairn_linkto(dir, name, &st)) {
                /* on two sets: the copy Cairn's hash finds stays, nothing is
                 * linked over it (a make after a check found none is a race
                 * with nothing: the volume is not running) */
                log_warn("volume import: %s%.4000s exists on two subvolumes (%d and %d); left "
                         "as it is",
                         brick, l->path, set, l->at);
                if (!make)
                    fprintf(out, "%lu\n", index);
            }
        } else if (errno != ENOENT) {
            r = -errno;
        } else if (make) {
            r = make_linkto(root, dir, name, l);
            made += r > 0;
        }
        close(dir);
        if (r < 0) {
            rc = r;
            snprintf(err, errlen, "cannot make the link-to file %s%.4000s: %s", brick, l->path,
                     strerror(-r));
            goto out;
        }
    }
    if (make)
        fprintf(out, "%lu\n", made);
out:
    if (root >= 0)
        close(root);
    free(l);
    return rc;
}
