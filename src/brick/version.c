/* Replica state on the brick: pending marks and the heal index
 * (docs/replication.md).
 *
 * A modifying request of a replicated volume carries PENDING, the bitmask of
 * the replica set's members that will not get this change. Before the change
 * is made, in the same execution (a worker, or the reader thread for the
 * short requests dispatch.c runs inline), the brick writes
 *   1. .cairn/index/<gfid>, a file holding the object's volume path, and
 *   2. the xattr trusted.cairn.pending (u32 little-endian bitmask) OR-ed with
 *      PENDING,
 * on every existing object the change touches (the object, and for namespace
 * changes its parent directory or directories). Objects a change creates are
 * marked right after they exist. Because marks come first, a crash can leave
 * an object marked for a change that never happened (heal then copies equal
 * data) but never a change without its mark. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../rpc/opinfo.h"
#include "brick.h"

#define VFS (b->vfs)
#define INDEX_DIR "index"

/* Marks are read-modify-write: one lock for every brick of the process
 * (one brick per process in practice). */
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;

/* Opens BRICK/.cairn/index, creating it when create is set. */
static int index_open(struct brick *b, int create)
{
    int cfd = VFS->openat(b->root_fd, BRICK_PRIVATE, O_RDONLY | O_DIRECTORY, 0);
    if (cfd < 0)
        return cfd;
    int fd = VFS->openat(cfd, INDEX_DIR, O_RDONLY | O_DIRECTORY, 0);
    if (fd == -ENOENT && create) {
        int rc = VFS->mkdirat(cfd, INDEX_DIR, 0700);
        if (rc < 0 && rc != -EEXIST) {
            VFS->close(cfd);
            return rc;
        }
        fd = VFS->openat(cfd, INDEX_DIR, O_RDONLY | O_DIRECTORY, 0);
    }
    VFS->close(cfd);
    return fd;
}

/* Writes the index entry of g holding path. An entry that already holds
 * path is left alone: that is the common case (a directory is marked again
 * by every entry made in it while a member is down), and rewriting it with
 * O_TRUNC made ext4 write the file out at close (its replace-via-truncate
 * heuristic), milliseconds per create on a degraded volume. A longer old
 * path is overwritten, then cut to length. */
static int index_put(struct brick *b, const gfid_t *g, const char *path)
{
    char name[GFID_STRLEN];
    gfid_format(g, name);
    int dfd = index_open(b, 1);
    if (dfd < 0)
        return dfd;
    int fd = VFS->openat(dfd, name, O_RDWR | O_CREAT, 0600);
    VFS->close(dfd);
    if (fd < 0)
        return fd;
    size_t len = strlen(path);
    char cur[RPC_PATH_MAX + 1];
    long n = len < sizeof(cur) ? VFS->pread(fd, cur, len + 1, 0) : -1;
    int rc = 0;
    if (n != (long)len || memcmp(cur, path, len) != 0) {
        long w = VFS->pwrite(fd, path, len, 0);
        rc = w < 0 ? (int)w : (size_t)w != len ? -EIO : 0;
        if (rc == 0 && n > (long)len)
            rc = VFS->ftruncate(fd, (off_t)len);
    }
    VFS->close(fd);
    return rc;
}

static int index_drop(struct brick *b, const gfid_t *g)
{
    char name[GFID_STRLEN];
    gfid_format(g, name);
    int dfd = index_open(b, 0);
    if (dfd < 0)
        return dfd == -ENOENT ? 0 : dfd;
    int rc = VFS->unlinkat(dfd, name, 0);
    VFS->close(dfd);
    return rc == -ENOENT ? 0 : rc;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The object: fd >= 0 (an open file), else dirfd/name ("." for dirfd). */
struct obj {
    int fd, dirfd;
    const char *name;
};

static long obj_get(struct brick *b, const struct obj *o, const char *x, void *buf, size_t len)
{
    return o->fd >= 0 ? VFS->fgetxattr(o->fd, x, buf, len)
                      : VFS->getxattr(o->dirfd, o->name, x, buf, len);
}

static int obj_set(struct brick *b, const struct obj *o, const char *x, const void *v, size_t len)
{
    return o->fd >= 0 ? VFS->fsetxattr(o->fd, x, v, len, 0)
                      : VFS->setxattr(o->dirfd, o->name, x, v, len, 0);
}

static int obj_pending(struct brick *b, const struct obj *o, uint32_t *out)
{
    uint8_t v[4];
    long n = obj_get(b, o, BRICK_XATTR_PENDING, v, sizeof(v));
    if (n == -ENODATA) {
        *out = 0;
        return 0;
    }
    if (n < 0)
        return (int)n;
    *out = n == 4 ? le32(v) : 0;
    return 0;
}

/* Index entry first, then the mark (see the top of the file). */
static int mark_obj(struct brick *b, const struct obj *o, const char *path, uint32_t bits)
{
    gfid_t g;
    long n = obj_get(b, o, BRICK_XATTR_GFID, &g, sizeof(g));
    if (n == -ENOENT)
        return 0; /* nothing to mark: the change will fail too */
    pthread_mutex_lock(&mark_lock);
    uint32_t old;
    int rc = obj_pending(b, o, &old);
    if (rc == 0 && n == (long)sizeof(g))
        rc = index_put(b, &g, path);
    if (rc == 0 && (old | bits) != old) {
        uint32_t nv = old | bits;
        uint8_t v[4] = {(uint8_t)nv, (uint8_t)(nv >> 8), (uint8_t)(nv >> 16), (uint8_t)(nv >> 24)};
        rc = obj_set(b, o, BRICK_XATTR_PENDING, v, sizeof(v));
    }
    /* Accused even when the xattr could not be written: the copies
     * differ all the same (the change fails with it, or already failed on
     * the accused member). */
    if (n == (long)sizeof(g))
        brick_accused_note(b, &g, old | bits);
    pthread_mutex_unlock(&mark_lock);
    if (rc < 0)
        log_error("recording that replicas 0x%x miss a change of %s failed: %s", bits, path,
                  strerror(-rc));
    return rc == -ENOENT ? 0 : rc;
}

/* Marks the object at path (self) and/or its parent directory. */
static int mark_path(struct brick *b, const struct rpc_bytes *p, int self, int parent,
                     uint32_t bits)
{
    struct brick_loc loc;
    int rc = brick_resolve(b, p, BRICK_LOC_CREATE, &loc);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    if (parent && !loc.is_root) {
        char ppath[RPC_PATH_MAX];
        snprintf(ppath, sizeof(ppath), "%s", loc.pathbuf);
        char *slash = strrchr(ppath, '/');
        if (slash == ppath)
            slash[1] = 0;
        else
            *slash = 0;
        struct obj o = {.fd = -1, .dirfd = loc.dirfd, .name = "."};
        rc = mark_obj(b, &o, ppath, bits);
    }
    if (rc == 0 && self) {
        struct obj o = {.fd = -1, .dirfd = loc.dirfd, .name = loc.name};
        rc = mark_obj(b, &o, loc.pathbuf, bits);
    }
    brick_loc_release(b, &loc);
    return rc;
}

/* Whether path (a volume path) names the object dev/ino now. */
static int still_names(struct brick *b, const char *path, dev_t dev, ino_t ino)
{
    struct rpc_bytes p = {(const uint8_t *)path, (uint32_t)strlen(path)};
    struct brick_loc loc;
    struct stat st;
    int same = brick_resolve(b, &p, BRICK_LOC_EXISTING, &loc) == 0 &&
               VFS->fstatat(loc.dirfd, loc.name, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
    brick_loc_release(b, &loc);
    return same;
}

/* The volume path of fh's file now; "" when it has none (unlinked, or
 * removed into the trash) or none is found.
 *
 * The path it was opened by, while that still names it: a lookup from the
 * brick root's fd, so any volume path works wherever the brick is mounted.
 * After a rename, the kernel's name for the fd (it follows renames); that
 * one is absolute, and the kernel gives none longer than PATH_MAX - 1
 * bytes, brick path included. A file renamed to such a depth is left
 * unnamed here (its mark stays: a full heal finds it), and said so. */
static void fh_path(struct brick *b, const struct brick_fh *fh, char *out, size_t len)
{
    char link[64], abs[PATH_MAX], root[PATH_MAX];
    out[0] = 0;
    if (fh->path && still_names(b, fh->path, fh->dev, fh->ino)) {
        snprintf(out, len, "%s", fh->path);
        return;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fh->fd);
    ssize_t n = readlink(link, abs, sizeof(abs) - 1);
    if (n < 0 && errno == ENAMETOOLONG) {
        log_warn("the volume path of a file opened as %s is longer than the kernel names with "
                 "the brick path; its heal index entry holds none",
                 fh->path ? fh->path : "?");
        return;
    }
    if (n <= 0)
        return;
    abs[n] = 0;
    if (!realpath(b->path, root))
        return;
    size_t rl = strlen(root);
    if (strncmp(abs, root, rl) != 0 || (abs[rl] != '/' && abs[rl] != 0) ||
        strstr(abs, " (deleted)"))
        return;
    /* In the trash (a tree removed at once, trash.c): gone, as unlinked. */
    if (!strncmp(abs + rl, "/" BRICK_PRIVATE "/", strlen(BRICK_PRIVATE) + 2))
        return;
    snprintf(out, len, "%s", abs[rl] ? abs + rl : "/");
}

static int mark_fh(struct brick_req *r, uint32_t bits)
{
    struct brick *b = r->b;
    struct brick_fh *fh;
    if (!rpc_has(r->in, RPC_T_FH))
        return 0;
    if (brick_fh_get(r->bc, r->in->fh, 0, &fh) < 0 && brick_fh_get(r->bc, r->in->fh, 1, &fh) < 0)
        return 0; /* the operation fails with EBADF itself */
    char path[RPC_PATH_MAX];
    fh_path(b, fh, path, sizeof(path));
    struct obj o = {.fd = fh->fd, .dirfd = -1, .name = NULL};
    int rc = mark_obj(b, &o, path, bits);
    brick_fh_put(r->bc, fh);
    return rc;
}

/* Marks what opcode changes; pre: the objects that exist before it, post:
 * the ones it made. */
static int mark_for(struct brick_req *r, unsigned opcode, uint32_t bits, int pre, int post)
{
    struct brick *b = r->b;
    const struct rpc_msg *in = r->in;
    int has_path = rpc_has(in, RPC_T_PATH), has_path2 = rpc_has(in, RPC_T_PATH2);
    int rc = 0;
    switch (opcode) {
    case RPC_OP_CREATE:
    case RPC_OP_MAKE_FILE:
    case RPC_OP_MKNOD:
    case RPC_OP_MKDIR:
    case RPC_OP_SYMLINK:
        if (!has_path)
            return 0;
        if (pre)
            rc = mark_path(b, &in->path, opcode == RPC_OP_CREATE || opcode == RPC_OP_MAKE_FILE, 1,
                           bits);
        if (rc == 0 && post)
            rc = mark_path(b, &in->path, 1, 0, bits);
        return rc;
    case RPC_OP_LINK:
        if (pre && has_path)
            rc = mark_path(b, &in->path, 1, 0, bits);
        if (rc == 0 && pre && has_path2)
            rc = mark_path(b, &in->path2, 0, 1, bits);
        return rc;
    case RPC_OP_UNLINK:
    case RPC_OP_RMDIR:
        return pre && has_path ? mark_path(b, &in->path, 0, 1, bits) : 0;
    case RPC_OP_RENAME:
        if (pre && has_path)
            rc = mark_path(b, &in->path, 1, 1, bits);
        if (rc == 0 && pre && has_path2)
            rc = mark_path(b, &in->path2, 1, 1, bits);
        if (rc == 0 && post && has_path2)
            rc = mark_path(b, &in->path2, 1, 0, bits); /* the index names the new path */
        return rc;
    case RPC_OP_SETATTR:
    case RPC_OP_SETXATTR:
    case RPC_OP_REMOVEXATTR:
    case RPC_OP_WRITE:
    case RPC_OP_FALLOCATE:
    case RPC_OP_FSYNC:
        if (!pre)
            return 0;
        if (rpc_has(in, RPC_T_FH))
            return mark_fh(r, bits);
        return has_path ? mark_path(b, &in->path, 1, 0, bits) : 0;
    default:
        return 0;
    }
}

/* Remembers that a change came through the request's handle (for a CREATE,
 * the handle it returns): if the client's connection ends before it
 * releases the handle, the change may be missing on another replica. */
static void note_changed(struct brick_req *r)
{
    uint64_t id;
    if (r->opcode == RPC_OP_CREATE) {
        struct rpc_iter it;
        struct rpc_field f;
        int found = 0;
        rpc_iter_init(&it, r->out->data, r->out->len);
        while (!found && rpc_iter_next(&it, &f) > 0)
            if (f.tag == RPC_T_FH && rpc_field_u64(&f, &id) == 0)
                found = 1;
        if (!found)
            return;
    } else if (rpc_has(r->in, RPC_T_FH)) {
        id = r->in->fh;
    } else {
        return;
    }
    struct brick_fh *fh;
    if (!r->bc || brick_fh_get(r->bc, id, 0, &fh) < 0)
        return;
    __atomic_store_n(&fh->changed, 1, __ATOMIC_RELAXED);
    brick_fh_put(r->bc, fh);
}

void brick_version_conn_gone(struct brick *b, struct brick_fh *fh)
{
    char path[RPC_PATH_MAX];
    fh_path(b, fh, path, sizeof(path));
    if (!path[0])
        return; /* unlinked meanwhile: nothing left to heal */
    struct obj o = {.fd = fh->fd, .dirfd = -1, .name = NULL};
    if (mark_obj(b, &o, path, RPC_PENDING_DIRTY) == 0)
        log_info("%s: its client went away with changes in flight; marked for heal", path);
}

int brick_version_pre(struct brick_req *r)
{
    if (!rpc_has(r->in, RPC_T_PENDING) || !(uint32_t)r->in->pending)
        return 0;
    return mark_for(r, r->opcode, (uint32_t)r->in->pending, 1, 0);
}

void brick_version_post(struct brick_req *r)
{
    if (rpc_has(r->in, RPC_T_PENDING) && (uint32_t)r->in->pending)
        mark_for(r, r->opcode, (uint32_t)r->in->pending, 0, 1);
    /* a change through a handle (a CREATE's: the one it returns) */
    if (r->opcode == RPC_OP_CREATE || rpc_op_is(r->opcode, RPC_OPF_DATA | RPC_OPF_META))
        note_changed(r);
    /* A LOOKUP that asks for PENDING (heal) gets the object's marks. */
    if (r->opcode == RPC_OP_LOOKUP && rpc_has(r->in, RPC_T_PENDING) && rpc_has(r->in, RPC_T_PATH)) {
        struct brick_loc loc;
        uint32_t p = 0;
        if (brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc) == 0) {
            struct obj o = {.fd = -1, .dirfd = loc.dirfd, .name = loc.name};
            obj_pending(r->b, &o, &p);
            brick_loc_release(r->b, &loc);
        }
        rpc_put_u64(r->out, RPC_T_PENDING, p);
    }
}

/* MARK: FLAGS (the opcode a replica missed), its PATH/PATH2/FH, PENDING. */
int brick_op_mark(struct brick_req *r)
{
    if (!rpc_has(r->in, RPC_T_FLAGS) || !rpc_has(r->in, RPC_T_PENDING))
        return -EINVAL;
    /* An arbiter keeps no data but the file's mode: a write that clears
     * set-id bits on the data bricks clears them here too. */
    struct brick_fh *fh;
    if (r->in->flags == RPC_OP_WRITE && rpc_has(r->in, RPC_T_VALID) &&
        (r->in->valid & RPC_SET_KILL_SUIDGID) && rpc_has(r->in, RPC_T_FH) &&
        brick_fh_get(r->bc, r->in->fh, 0, &fh) == 0) {
        int rc = brick_kill_setid_at(r->b, fh->fd, "", NULL);
        brick_fh_put(r->bc, fh);
        if (rc < 0)
            return rc;
    }
    if (!(uint32_t)r->in->pending)
        return 0;
    return mark_for(r, (unsigned)r->in->flags, (uint32_t)r->in->pending, 1, 1);
}

/* UNMARK: PATH, GFID, PENDING (bits to clear). Without PATH, drops the index
 * entry of GFID (the object is gone). -ESTALE when PATH is another object. */
int brick_op_unmark(struct brick_req *r)
{
    struct brick *b = r->b;
    const struct rpc_msg *in = r->in;
    if (!rpc_has(in, RPC_T_GFID) || !rpc_has(in, RPC_T_PENDING))
        return -EINVAL;
    if (!rpc_has(in, RPC_T_PATH)) {
        /* A gfid alone may name anything on the brick: a connection
         * confined to a directory (confine.c) leaves such entries to
         * cairn-shd. */
        if (r->bc->subdir)
            return -EPERM;
        int rc = index_drop(b, &in->gfid);
        if (rc == 0)
            brick_accused_note(b, &in->gfid, 0);
        return rc;
    }
    struct brick_loc loc;
    int rc = brick_resolve(b, &in->path, BRICK_LOC_EXISTING, &loc);
    if (rc < 0)
        return rc;
    struct obj o = {.fd = -1, .dirfd = loc.dirfd, .name = loc.name};
    gfid_t g;
    pthread_mutex_lock(&mark_lock);
    long n = obj_get(b, &o, BRICK_XATTR_GFID, &g, sizeof(g));
    uint32_t old = 0;
    if (n < 0)
        rc = (int)n;
    else if (n != (long)sizeof(g) || memcmp(&g, &in->gfid, sizeof(g)) != 0)
        rc = -ESTALE;
    else
        rc = obj_pending(b, &o, &old);
    if (rc == 0) {
        uint32_t nv = old & ~(uint32_t)in->pending;
        if (nv != old && nv) {
            uint8_t v[4] = {(uint8_t)nv, (uint8_t)(nv >> 8), (uint8_t)(nv >> 16),
                            (uint8_t)(nv >> 24)};
            rc = obj_set(b, &o, BRICK_XATTR_PENDING, v, sizeof(v));
        } else if (nv != old) {
            rc = VFS->removexattr(o.dirfd, o.name, BRICK_XATTR_PENDING);
        }
        if (rc == 0 && nv == 0)
            rc = index_drop(b, &g);
        if (rc == 0) {
            brick_accused_note(b, &g, nv);
            rpc_put_u64(r->out, RPC_T_PENDING, nv);
        }
    }
    pthread_mutex_unlock(&mark_lock);
    brick_loc_release(b, &loc);
    return rc;
}

/* A brick that replaces a lost copy, or adds one, starts empty: cairnd
 * leaves BRICK/.cairn/fill holding "member=N", its place in its replica
 * set (docs/elastic.md). The brick then marks its own root as missing
 * every change for member N before it serves anyone. That one mark makes
 * the brick accuse itself (its accusation mask, in every handshake), so no
 * client reads from it, and names the root in its heal index, so the heal
 * copies the whole tree onto it from the other copies (the root's sources)
 * and clears the mark only once the copy is complete. The marker goes once
 * the mark is written: a restart before that writes it again. */
int brick_version_fill(struct brick *b)
{
    int cfd = VFS->openat(b->root_fd, BRICK_PRIVATE, O_RDONLY | O_DIRECTORY, 0);
    if (cfd < 0)
        return cfd == -ENOENT ? 0 : cfd;
    int fd = VFS->openat(cfd, BRICK_FILL_NAME, O_RDONLY, 0);
    if (fd < 0) {
        VFS->close(cfd);
        return fd == -ENOENT ? 0 : fd;
    }
    char text[64] = "";
    long n = VFS->pread(fd, text, sizeof(text) - 1, 0);
    VFS->close(fd);
    unsigned member;
    int rc = 0;
    if (n <= 0 || sscanf(text, "member=%u", &member) != 1 || member >= 31) {
        /* an empty copy served as a full one would lose data: no start */
        log_error("%s: %s/%s is malformed (\"member=N\" expected)", b->path, BRICK_PRIVATE,
                  BRICK_FILL_NAME);
        rc = -EINVAL;
    } else {
        struct obj o = {.fd = -1, .dirfd = b->root_fd, .name = "."};
        if ((rc = mark_obj(b, &o, "/", 1u << member)) == 0)
            log_info("%s: a new copy (member %u of its set): not read from until heal has "
                     "filled it",
                     b->path, member);
    }
    if (rc == 0)
        rc = VFS->unlinkat(cfd, BRICK_FILL_NAME, 0);
    VFS->close(cfd);
    return rc;
}

int brick_version_load(struct brick *b)
{
    int dfd = index_open(b, 0);
    if (dfd == -ENOENT)
        return 0;
    if (dfd < 0)
        return dfd;
    char buf[8192];
    int rc = 0;
    for (;;) {
        long n = VFS->getdents(dfd, buf, sizeof(buf));
        if (n <= 0) {
            rc = (int)n;
            break;
        }
        for (long o = 0; o < n;) {
            const struct linux_dirent64 *d = (const void *)(buf + o);
            o += d->d_reclen;
            gfid_t g, have;
            if (gfid_parse(d->d_name, &g) < 0)
                continue;
            char path[PATH_MAX];
            int fd = VFS->openat(dfd, d->d_name, O_RDONLY, 0);
            long len = fd >= 0 ? VFS->pread(fd, path, sizeof(path) - 1, 0) : 0;
            if (fd >= 0)
                VFS->close(fd);
            if (len <= 0)
                continue;
            struct rpc_bytes p = {.p = (const uint8_t *)path, .len = (uint32_t)len};
            struct brick_loc loc;
            if (brick_resolve(b, &p, BRICK_LOC_EXISTING, &loc) < 0)
                continue; /* gone: its parent's marks cover its removal */
            struct obj ob = {.fd = -1, .dirfd = loc.dirfd, .name = loc.name};
            uint32_t bits = 0;
            if (obj_get(b, &ob, BRICK_XATTR_GFID, &have, sizeof(have)) == (long)sizeof(have) &&
                !memcmp(&have, &g, sizeof(g)) && obj_pending(b, &ob, &bits) == 0)
                brick_accused_note(b, &g, bits);
            brick_loc_release(b, &loc);
        }
    }
    VFS->close(dfd);
    return rc;
}

/* The entries of the heal index (metrics), or -errno. */
long brick_index_count(struct brick *b)
{
    int dfd = index_open(b, 0);
    if (dfd == -ENOENT)
        return 0;
    if (dfd < 0)
        return dfd;
    char buf[8192];
    long count = 0, n;
    while ((n = VFS->getdents(dfd, buf, sizeof(buf))) > 0)
        for (long o = 0; o < n;) {
            const struct linux_dirent64 *d = (const void *)(buf + o);
            o += d->d_reclen;
            gfid_t g;
            count += gfid_parse(d->d_name, &g) == 0;
        }
    VFS->close(dfd);
    return n < 0 ? n : count;
}

/* INDEX: OFFSET (entries to skip), SIZE (reply budget), PENDING (members
 * the caller knows are down). DATA holds lines "<gfid> <path>\n"; EOF 1
 * when the listing is complete. Entries that wait only for members named
 * down (brick_accused_waits_for) are left out, without reading their
 * paths, and counted in WAITING: with a server down, a self-heal daemon's
 * crawl of an index that grows by every change would otherwise look up
 * each of them on the survivors only to learn that it cannot be healed
 * yet. OFFSET counts the entries listed, not those left out. */
int brick_op_index(struct brick_req *r)
{
    struct brick *b = r->b;
    uint64_t skip = rpc_has(r->in, RPC_T_OFFSET) ? r->in->offset : 0;
    uint32_t down = rpc_has(r->in, RPC_T_PENDING) ? (uint32_t)r->in->pending : 0;
    size_t budget = rpc_has(r->in, RPC_T_SIZE) && r->in->size ? r->in->size : 65536;
    if (budget > 1u << 20)
        budget = 1u << 20;
    int dfd = index_open(b, 0);
    if (dfd == -ENOENT) {
        rpc_put_bytes(r->out, RPC_T_DATA, "", 0);
        rpc_put_u64(r->out, RPC_T_EOF, 1);
        return 0;
    }
    if (dfd < 0)
        return dfd;
    char *out = malloc(budget);
    char buf[8192];
    size_t used = 0;
    uint64_t seen = 0, waiting = 0;
    int eof = 1, rc = 0;
    if (!out) {
        VFS->close(dfd);
        return -ENOMEM;
    }
    for (;;) {
        long n = VFS->getdents(dfd, buf, sizeof(buf));
        if (n < 0) {
            rc = (int)n;
            break;
        }
        if (n == 0)
            break;
        for (long o = 0; o < n && eof;) {
            const struct linux_dirent64 *d = (const void *)(buf + o);
            o += d->d_reclen;
            gfid_t g;
            if (gfid_parse(d->d_name, &g) < 0)
                continue;
            if (down && brick_accused_waits_for(b, &g, down)) {
                waiting += seen >= skip; /* those before were counted by earlier pages */
                continue;
            }
            if (!r->bc->subdir && seen++ < skip)
                continue;
            char path[RPC_PATH_MAX];
            int fd = VFS->openat(dfd, d->d_name, O_RDONLY, 0);
            long len = fd >= 0 ? VFS->pread(fd, path, sizeof(path) - 1, 0) : 0;
            if (fd >= 0)
                VFS->close(fd);
            if (len < 0)
                len = 0;
            path[len] = 0;
            /* A confined connection sees the entries of its directory, by
             * its names (confine.c); OFFSET counts those alone. */
            const char *shown = path;
            if (r->bc->subdir && (!(shown = brick_confine_out(r->bc, path)) || seen++ < skip))
                continue;
            size_t need = strlen(d->d_name) + 1 + strlen(shown) + 1;
            if (used + need > budget) {
                eof = 0;
                break;
            }
            used += (size_t)snprintf(out + used, budget - used, "%s %s\n", d->d_name, shown);
        }
        if (!eof)
            break;
    }
    VFS->close(dfd);
    if (rc == 0) {
        rpc_put_bytes(r->out, RPC_T_DATA, out, used);
        rpc_put_u64(r->out, RPC_T_EOF, (uint64_t)eof);
        if (down)
            rpc_put_u64(r->out, RPC_T_WAITING, waiting);
    }
    free(out);
    return rc;
}
