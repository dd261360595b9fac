/* Self-heal of one replica set (replicate.h, docs/replication.md).
 *
 * For each heal index entry, every up child is asked for the object (LOOKUP
 * with PENDING returns its marks). A child that some other child accuses
 * (has its bit in trusted.cairn.pending) is stale; the sources are the
 * children holding the object that nobody accuses. The stale copies are made
 * equal to a source (names, type, data, owner, mode, times, user xattrs;
 * directories entry by entry), then the healed bits are cleared. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "ec_codec.h"
#include "heal_int.h"

/* Files at least this big, already present on the sink, get a range heal. */
#define RANGE_HEAL_MIN (1u << 20)
/* How often heal_one retries a file that changed while it was copied. */
#define HEAL_TRIES 3

#define path_op cl__heal_path_op
#define do_lookup cl__heal_lookup
#define simple cl__heal_simple

void cl__heal_path_op(struct cl_op *op, uint16_t code, const char *path)
{
    cl_op_init(op, code, NULL, NULL);
    rpc_set_str(&op->args, RPC_T_PATH, &op->args.path, path);
}

int cl__heal_lookup(struct cl_layer *c, const char *path, struct look *l)
{
    struct cl_op op;
    path_op(&op, RPC_OP_LOOKUP, path);
    RPC_SET(&op.args, pending, RPC_T_PENDING, 0);
    memset(l, 0, sizeof(*l));
    l->rc = cl_op_run(c, &op);
    if (l->rc == 0) {
        if (!rpc_has(&op.reply->msg, RPC_T_ATTR))
            l->rc = -EPROTO;
        else
            l->a = op.reply->msg.attr;
        if (rpc_has(&op.reply->msg, RPC_T_PENDING))
            l->pending = (uint32_t)op.reply->msg.pending;
    }
    cl_op_release(&op);
    return l->rc;
}

int cl__heal_simple(struct cl_layer *c, struct cl_op *op)
{
    /* what heal writes is never refused by quota (docs/quota.md) */
    if (!rpc_has(&op->args, RPC_T_PID))
        RPC_SET(&op->args, pid, RPC_T_PID, RPC_PID_HEAL);
    int rc = cl_op_run(c, op);
    cl_op_release(op);
    return rc;
}

/* dir/name into out (RPC_PATH_MAX bytes): 0, or -ENAMETOOLONG when that
 * path is deeper than a volume path may be (an object a rename of a
 * directory above it took past the limit). Never cut short: a prefix of
 * the name may name another object. */
static int join(char *out, const char *dir, const char *name)
{
    int n = snprintf(out, RPC_PATH_MAX, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, name);
    if (n >= 0 && n < RPC_PATH_MAX)
        return 0;
    log_warn("heal: %s/%s is longer than a volume path may be (%d bytes); left alone", dir, name,
             RPC_PATH_MAX - 1);
    return -ENAMETOOLONG;
}

/* Names of a directory (without . and ..): a malloc'd array of malloc'd
 * strings in *names, count returned, or -errno. */
static int list_dir(struct cl_layer *c, const char *path, char ***names)
{
    struct cl_op op;
    path_op(&op, RPC_OP_OPENDIR, path);
    int rc = cl_op_run(c, &op);
    if (rc < 0) {
        cl_op_release(&op);
        return rc;
    }
    uint64_t fh = op.reply->msg.fh, cookie = 0;
    cl_op_release(&op);
    char **v = NULL;
    int n = 0, eof = 0;
    while (!eof && rc == 0) {
        cl_op_init(&op, RPC_OP_READDIR, NULL, NULL);
        RPC_SET(&op.args, fh, RPC_T_FH, fh);
        RPC_SET(&op.args, offset, RPC_T_OFFSET, cookie);
        RPC_SET(&op.args, size, RPC_T_SIZE, 65536);
        if ((rc = cl_op_run(c, &op)) < 0)
            break;
        const struct rpc_frame *f = op.reply;
        eof = rpc_has(&f->msg, RPC_T_EOF) && f->msg.eof;
        struct rpc_iter it;
        struct rpc_field fl;
        int got = 0;
        rpc_iter_init(&it, f->body, f->hdr.body_len);
        while (rpc_iter_next(&it, &fl) > 0) {
            struct rpc_msg d;
            if (fl.tag != RPC_T_DIRENT || rpc_msg_decode(fl.val, fl.len, &d, NULL) < 0)
                continue;
            got++;
            cookie = d.offset;
            char name[256];
            if (rpc_bytes_str(&d.name, name, sizeof(name)) < 0 || !strcmp(name, ".") ||
                !strcmp(name, ".."))
                continue;
            char **nv = realloc(v, (size_t)(n + 1) * sizeof(*v));
            if (!nv || !(nv[n] = strdup(name))) {
                v = nv ? nv : v;
                rc = -ENOMEM;
                break;
            }
            v = nv;
            n++;
        }
        if (!got)
            eof = 1;
        cl_op_release(&op);
    }
    cl_op_init(&op, RPC_OP_RELEASEDIR, NULL, NULL);
    RPC_SET(&op.args, fh, RPC_T_FH, fh);
    simple(c, &op);
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return rc;
    }
    *names = v;
    return n;
}

static void free_names(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Removes path (a whole tree) from child c. */
static int remove_tree(struct cl_layer *c, const char *path)
{
    struct look l;
    if (do_lookup(c, path, &l) < 0)
        return l.rc == -ENOENT ? 0 : l.rc;
    struct cl_op op;
    if (S_ISDIR(l.a.mode)) {
        char **names;
        int k = list_dir(c, path, &names);
        if (k < 0)
            return k;
        for (int i = 0; i < k; i++) {
            char sub[RPC_PATH_MAX];
            if (join(sub, path, names[i]) == 0)
                remove_tree(c, sub);
        }
        free_names(names, k);
        path_op(&op, RPC_OP_RMDIR, path);
    } else {
        path_op(&op, RPC_OP_UNLINK, path);
    }
    int rc = simple(c, &op);
    return rc == -ENOENT ? 0 : rc;
}

static void copy_xattrs(struct cl_layer *src, struct cl_layer *dst, const char *path)
{
    struct cl_op op;
    path_op(&op, RPC_OP_LISTXATTR, path);
    RPC_SET(&op.args, size, RPC_T_SIZE, 65536);
    if (cl_op_run(src, &op) == 0 && rpc_has(&op.reply->msg, RPC_T_DATA)) {
        struct rpc_bytes l = op.reply->msg.data;
        for (uint32_t o = 0; o < l.len;) {
            const char *name = (const char *)l.p + o;
            size_t nl = strnlen(name, l.len - o);
            o += (uint32_t)nl + 1;
            if (nl == 0 || nl >= 256)
                continue;
            char nm[256];
            memcpy(nm, name, nl);
            nm[nl] = 0;
            struct cl_op g;
            path_op(&g, RPC_OP_GETXATTR, path);
            rpc_set_str(&g.args, RPC_T_NAME, &g.args.name, nm);
            RPC_SET(&g.args, size, RPC_T_SIZE, 65536);
            if (cl_op_run(src, &g) == 0 && rpc_has(&g.reply->msg, RPC_T_DATA)) {
                struct cl_op s;
                path_op(&s, RPC_OP_SETXATTR, path);
                rpc_set_str(&s.args, RPC_T_NAME, &s.args.name, nm);
                rpc_set_bytes(&s.args, RPC_T_DATA, &s.args.data, g.reply->msg.data.p,
                              g.reply->msg.data.len);
                simple(dst, &s);
            }
            cl_op_release(&g);
        }
    }
    cl_op_release(&op);
}

static int set_meta(struct cl_layer *dst, const char *path, const struct rpc_attr *a, int link)
{
    struct cl_op op;
    path_op(&op, RPC_OP_SETATTR, path);
    uint64_t valid = RPC_SET_UID | RPC_SET_GID | RPC_SET_ATIME | RPC_SET_MTIME;
    if (!link)
        valid |= RPC_SET_MODE;
    RPC_SET(&op.args, valid, RPC_T_VALID, valid);
    RPC_SET(&op.args, mode, RPC_T_MODE, a->mode & 07777);
    RPC_SET(&op.args, uid, RPC_T_UID, a->uid);
    RPC_SET(&op.args, gid, RPC_T_GID, a->gid);
    op.args.atime = (struct rpc_time){a->atime, a->atime_ns};
    op.args.mtime = (struct rpc_time){a->mtime, a->mtime_ns};
    op.args.present |= 1ull << RPC_T_ATIME | 1ull << RPC_T_MTIME;
    return simple(dst, &op);
}

static int heal_tree(struct hctx *h, int src, int dst, const char *path, int is_arbiter);

static int same_version(const struct look *a, const struct look *b)
{
    return a->a.ctime == b->a.ctime && a->a.ctime_ns == b->a.ctime_ns && a->a.size == b->a.size &&
           gfid_equal(&a->a.gfid, &b->a.gfid);
}

/* An object copied inside a directory's heal has no check of its own (the
 * entry's heal_one checks only the entry's object): a client that changed
 * it meanwhile may have reached the sink before the copy did, and the copy
 * then put back what was there before. When src's copy moved since before
 * (ctime or size), the object gets a mark of its own on src accusing dst,
 * so that its own index entry heals it again, with heal_one's checks. */
static void mark_if_changed(struct hctx *h, int src, int dst, const char *path,
                            const struct look *before)
{
    struct look now;
    if (do_lookup(h->ch[src], path, &now) < 0 || same_version(&now, before))
        return; /* gone: the parent's entry heal covers it */
    struct cl_op op;
    path_op(&op, RPC_OP_MARK, path);
    RPC_SET(&op.args, flags, RPC_T_FLAGS, RPC_OP_SETATTR);
    RPC_SET(&op.args, pending, RPC_T_PENDING, 1u << dst);
    int rc = simple(h->ch[src], &op);
    if (rc < 0)
        log_warn("heal: %s changed while it was copied to child %d, and marking it for "
                 "another heal failed: %s",
                 path, dst, strerror(-rc));
    else
        log_debug("heal: %s changed while it was copied to child %d; marked for another heal", path,
                  dst);
}

/* The mark that keeps dst accused while path is copied onto it (below):
 * 0, or -errno (then the copy goes on unguarded, as before). */
static int guard_mark(struct hctx *h, int src, int dst, const char *path)
{
    struct cl_op op;
    path_op(&op, RPC_OP_MARK, path);
    RPC_SET(&op.args, flags, RPC_T_FLAGS, RPC_OP_SETATTR);
    RPC_SET(&op.args, pending, RPC_T_PENDING, 1u << dst);
    return simple(h->ch[src], &op);
}

/* Whether src's object at path is still as before (else the guard stays,
 * and its own index entry heals it again with heal_one's checks). */
static int unchanged(struct hctx *h, int src, const char *path, const struct look *before)
{
    struct look now;
    return do_lookup(h->ch[src], path, &now) == 0 && same_version(&now, before);
}

static int unmark(struct hctx *h, int i, const char *path, const gfid_t *g, uint32_t bits);

static void guard_clear(struct hctx *h, int src, int dst, const char *path, const gfid_t *g)
{
    int rc = unmark(h, src, path, g, 1u << dst);
    if (rc < 0)
        log_debug("heal: clearing the copy mark of %s on child %d failed (%s); its own heal "
                  "clears it",
                  path, src, strerror(-rc));
}

/* Makes dst's directory path list what src's does. */
static int heal_entries(struct hctx *h, int src, int dst, const char *path, int is_arbiter)
{
    char **sn = NULL, **dn = NULL;
    int ns = list_dir(h->ch[src], path, &sn);
    if (ns < 0)
        return ns;
    int nd = list_dir(h->ch[dst], path, &dn);
    if (nd < 0) {
        free_names(sn, ns);
        return nd;
    }
    int rc = 0;
    for (int i = 0; i < nd; i++) {
        int found = 0;
        for (int j = 0; j < ns && !found; j++)
            found = strcmp(dn[i], sn[j]) == 0;
        char sub[RPC_PATH_MAX];
        if (!found && (join(sub, path, dn[i]) < 0 || remove_tree(h->ch[dst], sub) < 0))
            rc = -EIO;
    }
    for (int j = 0; j < ns; j++) {
        char sub[RPC_PATH_MAX];
        if (join(sub, path, sn[j]) < 0) {
            rc = -EIO; /* the marks stay: heal info keeps showing it */
            continue;
        }
        struct look ls, ld;
        if (do_lookup(h->ch[src], sub, &ls) < 0)
            continue;
        do_lookup(h->ch[dst], sub, &ld);
        if (ld.rc == 0 && gfid_equal(&ld.a.gfid, &ls.a.gfid) &&
            (ld.a.mode & S_IFMT) == (ls.a.mode & S_IFMT))
            continue; /* the same object: its own index entry heals its content */
        /* While the copy is made, the source's object accuses dst: a heal
         * of this directory running beside this one (another daemon, the
         * CLI) finds the object on dst and skips it, and may clear the
         * directory's marks before this copy is complete; this mark keeps
         * dst accused, so not read from, until it is (and heals it again
         * if this heal dies half-way). Marked first, then looked at again:
         * the mark moves the source's ctime. */
        int guard = guard_mark(h, src, dst, sub) == 0;
        if (guard && do_lookup(h->ch[src], sub, &ls) < 0)
            continue;
        if (heal_tree(h, src, dst, sub, is_arbiter) < 0)
            rc = -EIO; /* the guard stays: its own index entry heals it */
        else if (!guard)
            mark_if_changed(h, src, dst, sub, &ls);
        else if (unchanged(h, src, sub, &ls))
            guard_clear(h, src, dst, sub, &ls.a.gfid);
    }
    free_names(sn, ns);
    free_names(dn, nd);
    return rc;
}

/* -ENOSPC when child c plainly has no room for need more bytes (its free
 * space read at most a second ago, less what was copied there since): the
 * copy is left for a later pass instead of filling the brick up to its
 * storage.reserve with a copy that cannot complete. */
static int room_for(struct hctx *h, int c, uint64_t need)
{
    if (!need)
        return 0;
    uint64_t now = net_now_ms();
    pthread_mutex_lock(&h->lock);
    int fresh = h->room_ms[c] && now - h->room_ms[c] < 1000;
    pthread_mutex_unlock(&h->lock);
    if (!fresh) {
        struct cl_op op;
        path_op(&op, RPC_OP_STATFS, "/");
        int rc = cl_op_run(h->ch[c], &op);
        if (rc == 0) {
            const struct rpc_statfs *st = &op.reply->msg.statfs;
            pthread_mutex_lock(&h->lock);
            h->room[c] = st->bavail * (st->frsize ? st->frsize : st->bsize);
            h->room_ms[c] = now;
            pthread_mutex_unlock(&h->lock);
        }
        cl_op_release(&op);
        if (rc < 0)
            return 0; /* the copy will tell */
    }
    pthread_mutex_lock(&h->lock);
    int rc = h->room[c] < need ? -ENOSPC : 0;
    if (rc == 0)
        h->room[c] -= need;
    uint64_t left = h->room[c];
    pthread_mutex_unlock(&h->lock);
    if (rc < 0)
        log_info("heal: no room on replica %d for %llu more bytes (%llu free): left for later", c,
                 (unsigned long long)need, (unsigned long long)left);
    return rc;
}

/* Makes dst's object at path a copy of src's (recursively for a new
 * directory). */
static int heal_tree(struct hctx *h, int src, int dst, const char *path, int is_arbiter)
{
    struct cl_layer *S = h->ch[src], *D = h->ch[dst];
    struct look ls, ld;
    if (do_lookup(S, path, &ls) < 0)
        return ls.rc;
    do_lookup(D, path, &ld);
    int same = ld.rc == 0 && gfid_equal(&ld.a.gfid, &ls.a.gfid) &&
               (ld.a.mode & S_IFMT) == (ls.a.mode & S_IFMT);
    if (ld.rc == 0 && !same && strcmp(path, "/") != 0) {
        int rc = remove_tree(D, path);
        if (rc < 0)
            return rc;
    }
    struct cl_op op;
    int rc = 0;
    mode_t type = (mode_t)(ls.a.mode & S_IFMT);
    if (type == S_IFDIR) {
        if (!same && strcmp(path, "/") != 0) {
            path_op(&op, RPC_OP_MKDIR, path);
            RPC_SET(&op.args, mode, RPC_T_MODE, ls.a.mode & 07777);
            RPC_SET(&op.args, umask, RPC_T_UMASK, 0);
            RPC_SET(&op.args, uid, RPC_T_UID, ls.a.uid);
            RPC_SET(&op.args, gid, RPC_T_GID, ls.a.gid);
            memcpy(&op.args.gfid, &ls.a.gfid, sizeof(gfid_t));
            op.args.present |= 1ull << RPC_T_GFID;
            if ((rc = simple(D, &op)) < 0)
                return rc;
        }
        if ((rc = heal_entries(h, src, dst, path, is_arbiter)) < 0)
            return rc;
    } else if (type == S_IFREG) {
        /* A big file the sink already holds (a VM image) heals by ranges;
         * a fragment is rebuilt whole (heal_ec.c), taking 1/k of the size. */
        int ranged = same && !is_arbiter && !h->ec && ls.a.size >= RANGE_HEAL_MIN;
        uint64_t had = same ? ld.a.size : 0, want = ls.a.size, room_had = had;
        if (h->ec) /* a fragment's bytes are about a k-th of its file's size */
            room_had = 0, want = want / (uint64_t)cl_ec_data(h->ec);
        if (!is_arbiter && (rc = room_for(h, dst, want > room_had ? want - room_had : 0)) < 0)
            return rc;
        if (!same) {
            path_op(&op, RPC_OP_CREATE, path);
            RPC_SET(&op.args, flags, RPC_T_FLAGS, O_WRONLY | O_EXCL);
            RPC_SET(&op.args, mode, RPC_T_MODE, S_IFREG | (ls.a.mode & 07777));
            RPC_SET(&op.args, umask, RPC_T_UMASK, 0);
            RPC_SET(&op.args, uid, RPC_T_UID, ls.a.uid);
            RPC_SET(&op.args, gid, RPC_T_GID, ls.a.gid);
            memcpy(&op.args.gfid, &ls.a.gfid, sizeof(gfid_t));
            op.args.present |= 1ull << RPC_T_GFID;
        } else {
            path_op(&op, RPC_OP_OPEN, path);
            /* a fragment is rewritten in place, never cut (heal_ec.c) */
            RPC_SET(&op.args, flags, RPC_T_FLAGS, ranged || h->ec ? O_RDWR : O_WRONLY | O_TRUNC);
        }
        if ((rc = cl_op_run(D, &op)) < 0) {
            cl_op_release(&op);
            return rc;
        }
        uint64_t dfh = op.reply->msg.fh;
        cl_op_release(&op);
        if (h->ec)
            rc = cl__heal_ec_data(h, dst, path, &ls.a.gfid, dfh, ls.a.size, had);
        else if (!is_arbiter)
            rc = cl__heal_data(h, S, D, path, dfh, ls.a.size, ranged);
        cl_op_init(&op, RPC_OP_RELEASE, NULL, NULL);
        RPC_SET(&op.args, fh, RPC_T_FH, dfh);
        simple(D, &op);
        if (rc < 0)
            return rc;
    } else if (type == S_IFLNK) {
        if (!same) {
            path_op(&op, RPC_OP_READLINK, path);
            if ((rc = cl_op_run(S, &op)) < 0) {
                cl_op_release(&op);
                return rc;
            }
            char target[4096];
            rc = rpc_bytes_str(&op.reply->msg.data, target, sizeof(target));
            cl_op_release(&op);
            if (rc < 0)
                return rc;
            path_op(&op, RPC_OP_SYMLINK, path);
            rpc_set_str(&op.args, RPC_T_NAME, &op.args.name, target);
            RPC_SET(&op.args, uid, RPC_T_UID, ls.a.uid);
            RPC_SET(&op.args, gid, RPC_T_GID, ls.a.gid);
            memcpy(&op.args.gfid, &ls.a.gfid, sizeof(gfid_t));
            op.args.present |= 1ull << RPC_T_GFID;
            if ((rc = simple(D, &op)) < 0)
                return rc;
        }
    } else if (!same) {
        path_op(&op, RPC_OP_MKNOD, path);
        RPC_SET(&op.args, mode, RPC_T_MODE, ls.a.mode);
        RPC_SET(&op.args, rdev, RPC_T_RDEV, ls.a.rdev);
        RPC_SET(&op.args, umask, RPC_T_UMASK, 0);
        RPC_SET(&op.args, uid, RPC_T_UID, ls.a.uid);
        RPC_SET(&op.args, gid, RPC_T_GID, ls.a.gid);
        memcpy(&op.args.gfid, &ls.a.gfid, sizeof(gfid_t));
        op.args.present |= 1ull << RPC_T_GFID;
        if ((rc = simple(D, &op)) < 0)
            return rc;
    }
    if (type != S_IFLNK)
        copy_xattrs(S, D, path);
    rc = set_meta(D, path, &ls.a, type == S_IFLNK);
    if (rc < 0)
        log_warn("heal: setting owner, mode and times of %s failed: %s", path, strerror(-rc));
    return 0;
}

int cl__heal_view(struct hctx *h, const char *path, const gfid_t *g, struct cl__heal_view *v)
{
    memset(v, 0, sizeof(*v));
    uint32_t all = (1u << h->n) - 1;
    v->data = h->arbiter ? all & ~(1u << (h->n - 1)) : all;
    for (int i = 0; i < h->n; i++) {
        if (!cl_proto_connected(h->ch[i]))
            continue;
        v->up |= 1u << i;
        struct look *l = &v->l[i];
        do_lookup(h->ch[i], path, l);
        if (l->rc == 0 && (!g || gfid_equal(&l->a.gfid, g))) {
            v->have |= 1u << i;
            /* a mark against a member the set no longer has (one that
             * left by remove-brick while a client still counted it) names
             * no copy: the unmark below clears it */
            v->accused |= l->pending & all;
            if (l->pending & RPC_PENDING_DIRTY)
                v->dirty |= 1u << i;
        } else if (l->rc != -ENOENT && l->rc != 0) {
            return -EAGAIN;
        }
    }
    v->sources = cl_heal_sources(v->have, v->accused, v->data);
    return 0;
}

static void count(unsigned *field)
{
    __atomic_add_fetch(field, 1, __ATOMIC_RELAXED);
}

/* UNMARK of bits on child i's object at path (NULL: its index entry only)
 * with id g. 0 also when the object is gone or another one (nothing of
 * this object left to clear there). */
static int unmark(struct hctx *h, int i, const char *path, const gfid_t *g, uint32_t bits)
{
    struct cl_op op;
    if (path)
        path_op(&op, RPC_OP_UNMARK, path);
    else
        cl_op_init(&op, RPC_OP_UNMARK, NULL, NULL);
    memcpy(&op.args.gfid, g, sizeof(*g));
    op.args.present |= 1ull << RPC_T_GFID;
    RPC_SET(&op.args, pending, RPC_T_PENDING, bits);
    int rc = simple(h->ch[i], &op);
    return rc == -ENOENT || rc == -ESTALE ? 0 : rc;
}

static void unmark_all(struct hctx *h, uint32_t up, const char *path, const gfid_t *g)
{
    /* every mark: against the members, those against members the set no
     * longer has (cl__heal_view), and the dirty one */
    for (int i = 0; i < h->n; i++) {
        int u = up >> i & 1 ? unmark(h, i, path, g, UINT32_MAX) : 0;
        if (u < 0)
            log_warn("heal: clearing the marks of %s on child %d failed: %s", path ? path : "?", i,
                     strerror(-u));
    }
}

/* The source of an object no copy of which is unaccused, or -1 (left in
 * split brain). */
static int split_source(struct hctx *h, const char *path, const struct cl__heal_view *v)
{
    uint32_t cand = v->have & v->data;
    if (h->p.source >= 0 && h->p.source < h->n && (cand >> h->p.source & 1))
        return h->p.source;
    if (h->p.policy == CL_HEAL_POL_NONE)
        return -1;
    struct cl_heal_copy c[CL_REPL_MAX];
    for (int i = 0; i < h->n; i++)
        c[i] = (struct cl_heal_copy){.size = v->l[i].a.size,
                                     .mtime = v->l[i].a.mtime,
                                     .mtime_ns = v->l[i].a.mtime_ns,
                                     .ctime = v->l[i].a.ctime,
                                     .ctime_ns = v->l[i].a.ctime_ns};
    int src = cl_heal_policy_pick(h->n, cand, c, h->p.policy);
    for (int i = 0; i < h->n; i++)
        if (cand >> i & 1)
            log_info("heal: split brain on %s: child %d holds %llu bytes, mtime %lld.%09u, "
                     "ctime %lld.%09u",
                     path, i, (unsigned long long)c[i].size, (long long)c[i].mtime, c[i].mtime_ns,
                     (long long)c[i].ctime, c[i].ctime_ns);
    if (src < 0)
        log_warn("heal: the favorite-child policy cannot choose a copy of %s (a tie)", path);
    return src;
}

/* Makes the copy split_source chose the only source before anything is
 * copied: every other copy stops accusing it (UNMARK of its bit), while the
 * accusations of the others stay. A heal interrupted half-way (a daemon
 * killed, a brick gone) then resumes from the same copy instead of asking
 * the policy again, which could now pick a half-copied sink: it has the
 * newest mtime and ctime. Highest child first: the owner (the lowest
 * marked child, owner()) keeps its marks until the last UNMARK, so no
 * other daemon owns the entry while the record is half made (an UNMARK
 * changes a copy's ctime, which the ctime policy compares). */
static int keep_choice(struct hctx *h, const char *path, const struct cl__heal_view *v, int src)
{
    for (int i = h->n - 1; i >= 0; i--) {
        if (i == src || !((v->have & v->up) >> i & 1) ||
            !((v->l[i].pending & ~RPC_PENDING_DIRTY) >> src & 1))
            continue;
        int rc = unmark(h, i, path, &v->l[i].a.gfid, 1u << src);
        if (rc < 0) {
            log_warn("heal: recording child %d as the source of %s on child %d failed: %s", src,
                     path, i, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* Whether this heal (a self-heal daemon, which reads only its own bricks'
 * indexes) is the one that heals the object: several daemons find the same
 * entry in their bricks' indexes, and two copying at once could undo each
 * other (under the ctime policy each copy makes its sink the newest). The
 * owner is the daemon of the lowest-numbered up child that holds marks;
 * when none does, any daemon may (there is only clean-up left). */
static int owner(struct hctx *h, const struct cl__heal_view *v)
{
    uint32_t marked = 0;
    for (int i = 0; i < h->n; i++)
        if ((v->have >> i & 1) && v->l[i].pending)
            marked |= 1u << i;
    if (!marked)
        return 1;
    return h->p.index_mask >> __builtin_ctz(marked) & 1;
}

/* Heals one object named by path (and gfid, when known from an index). */
static int heal_one(struct hctx *h, const char *path, const gfid_t *g)
{
    /* Set once this heal has chosen the source of a split brain and
     * recorded it (keep_choice). The choice makes the entry an ordinary heal
     * from that copy, which the owner's daemon may then run at the same
     * time: its UNMARK moves the source's ctime, so the check below sends
     * this heal round again, and the next view finds a source and no split
     * brain, or nothing left to copy. It is still this heal's choice that
     * resolved it. */
    int chose = 0;
    for (int attempt = 0;; attempt++) {
        struct cl__heal_view v;
        if (cl__heal_view(h, path, g, &v) < 0) {
            count(&h->st->pending);
            return -EAGAIN;
        }
        if (!v.have) {
            /* Gone everywhere: its parent's entry heal removed or will
             * remove it; nothing left to mark. */
            if (g)
                unmark_all(h, v.up, NULL, g);
            return h->p.path ? -ENOENT : 0;
        }
        if (h->p.index_mask && !h->p.takeover && !owner(h, &v)) {
            count(&h->st->skipped);
            return 0;
        }
        int src;
        uint32_t sinks;
        if (v.sources) {
            src = __builtin_ctz(v.sources);
            sinks = v.up & ~v.sources & ~(v.have & ~v.accused);
            /* A child holding no object, or another one, under this name is
             * a sink too (it missed the create). */
            sinks |= v.up & ~v.have;
            if (v.dirty && !h->ec) {
                /* A client died with changes in flight: the copies nobody
                 * accuses may still differ. The largest becomes the source
                 * of all others (any choice makes them equal; the largest
                 * keeps appended data). */
                for (int i = 0; i < h->n; i++)
                    if ((v.sources >> i & 1) && v.l[i].a.size > v.l[src].a.size)
                        src = i;
                sinks |= v.have & v.up & ~(1u << src);
            }
        } else if (h->ec) {
            /* No fragment is a copy of another: no policy or chosen
             * source can stand in for k good ones. */
            log_error("heal: %s has no fragment that no brick accuses (0x%x): it cannot be "
                      "rebuilt",
                      path, v.accused);
            count(&h->st->split);
            return -EIO;
        } else {
            /* Only the owner resolves a split brain, even where other
             * daemons took its entries over: two resolving one at once
             * would each change what the policies compare (a copy made
             * is the newest, by mtime and ctime), and could choose apart.
             * Counted as a split brain here, not as skipped: an owner that
             * cannot resolve it is not an owner gone (the takeover clock). */
            if (h->p.index_mask && !owner(h, &v)) {
                log_debug("heal: %s is in split brain; its owner resolves it", path);
                count(&h->st->split);
                return -EIO;
            }
            if ((src = split_source(h, path, &v)) < 0) {
                log_error("heal: %s is in split brain (every copy is accused: 0x%x)", path,
                          v.accused);
                count(&h->st->split);
                return -EIO;
            }
            sinks = v.up & ~(1u << src);
            log_info("heal: %s was in split brain; the copy of child %d is the source", path, src);
            if (keep_choice(h, path, &v, src) < 0) {
                count(&h->st->pending);
                return -EAGAIN;
            }
            chose = 1;
        }
        int rc = 0;
        for (int i = 0; i < h->n; i++) {
            if (!(sinks >> i & 1))
                continue;
            int arb = h->arbiter && i == h->n - 1;
            int r = heal_tree(h, src, i, path, arb);
            if (r == -EAGAIN && h->ec) {
                rc = rc ? rc : r; /* too few good fragments up (heal_ec.c): later */
            } else if (r < 0) {
                log_warn("heal: copying %s from child %d to child %d failed", path, src, i);
                rc = -EIO;
            }
        }
        if (rc == -EAGAIN) {
            count(&h->st->pending);
            return rc;
        }
        if (rc < 0) {
            count(&h->st->failed);
            return rc;
        }
        if (v.accused & ~v.up) { /* a child it is accused of missing is down: later */
            count(&h->st->pending);
            return -EAGAIN;
        }
        /* A client may have changed the object while it was copied: a write
         * landing on every replica between our read of the source and our
         * write to a sink would be overwritten there with older data. The
         * source's ctime moves with every change; if it moved, the marks
         * stay and the copy is made again (a range heal copies only what
         * changed since). */
        struct look again;
        if (sinks &&
            (do_lookup(h->ch[src], path, &again) < 0 || !same_version(&again, &v.l[src]))) {
            if (attempt + 1 < HEAL_TRIES)
                continue;
            log_debug("heal: %s changed while it was healed; again on the next pass", path);
            count(&h->st->pending);
            return -EAGAIN;
        }
        /* Everything up now agrees: clear the marks that said otherwise. */
        unmark_all(h, v.up, path, &v.l[src].a.gfid);
        if (sinks) {
            count(&h->st->healed);
            if (h->p.progress)
                count(&h->p.progress->healed);
        }
        if (chose)
            count(&h->st->resolved);
        return 0;
    }
}

static int walk_full(struct hctx *h, const char *path)
{
    heal_one(h, path, NULL);
    if (h->p.progress)
        count(&h->p.progress->walked);
    struct look l;
    int src = -1;
    for (int i = 0; i < h->n && src < 0; i++)
        if (cl_proto_connected(h->ch[i]) && (!h->arbiter || i != h->n - 1) &&
            do_lookup(h->ch[i], path, &l) == 0 && S_ISDIR(l.a.mode))
            src = i;
    if (src < 0)
        return 0;
    char **names;
    int k = list_dir(h->ch[src], path, &names);
    for (int i = 0; i < k; i++) {
        char sub[RPC_PATH_MAX];
        if (join(sub, path, names[i]) == 0)
            walk_full(h, sub);
    }
    if (k > 0)
        free_names(names, k);
    return 0;
}

int cl__heal_read_index(struct cl_layer *c, uint32_t down, char **out, size_t *len,
                        uint64_t *waiting)
{
    size_t cap = 0, used = 0;
    char *buf = NULL;
    uint64_t skip = 0;
    if (waiting)
        *waiting = 0;
    for (;;) {
        struct cl_op op;
        cl_op_init(&op, RPC_OP_INDEX, NULL, NULL);
        RPC_SET(&op.args, offset, RPC_T_OFFSET, skip);
        RPC_SET(&op.args, size, RPC_T_SIZE, 1u << 20);
        if (down)
            RPC_SET(&op.args, pending, RPC_T_PENDING, down);
        int rc = cl_op_run(c, &op);
        if (rc < 0) {
            cl_op_release(&op);
            free(buf);
            return rc;
        }
        struct rpc_bytes d = op.reply->msg.data;
        int eof = !rpc_has(&op.reply->msg, RPC_T_EOF) || op.reply->msg.eof;
        if (waiting && rpc_has(&op.reply->msg, RPC_T_WAITING))
            *waiting += op.reply->msg.waiting;
        if (used + d.len + 1 > cap) {
            cap = (used + d.len + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                cl_op_release(&op);
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
        }
        memcpy(buf + used, d.p, d.len);
        used += d.len;
        for (uint32_t i = 0; i < d.len; i++)
            skip += d.p[i] == '\n';
        cl_op_release(&op);
        if (eof || d.len == 0)
            break;
    }
    if (!buf && !(buf = malloc(1)))
        return -ENOMEM;
    buf[used] = 0;
    *out = buf;
    *len = used;
    return 0;
}

struct entry {
    gfid_t g;
    char *path;
};

static int entry_cmp(const void *a, const void *b)
{
    return memcmp(&((const struct entry *)a)->g, &((const struct entry *)b)->g, sizeof(gfid_t));
}

/* The index entries of the children in the mask, one per gfid. Entries
 * without a path (a file unlinked while open) are dropped on the spot: the
 * parent's entry heal covers them. The bricks leave out the entries that
 * wait only for children that are down (nothing can heal them before one
 * is back, and its return starts a crawl): they count as pending. */
static int collect(struct hctx *h, struct entry **out, size_t *count)
{
    struct entry *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    uint32_t down = 0;
    for (int i = 0; i < h->n; i++)
        if (!cl_proto_connected(h->ch[i]))
            down |= 1u << i;
    for (int i = 0; i < h->n; i++) {
        if ((h->p.index_mask && !(h->p.index_mask >> i & 1)) || !cl_proto_connected(h->ch[i]))
            continue;
        char *idx;
        size_t len;
        uint64_t waiting;
        int r = cl__heal_read_index(h->ch[i], down, &idx, &len, &waiting);
        if (r < 0) {
            rc = r;
            continue;
        }
        h->st->entries += (unsigned)waiting;
        h->st->pending += (unsigned)waiting;
        for (char *line = idx, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = 0;
            char *sp = strchr(line, ' ');
            gfid_t g;
            if (!sp)
                continue;
            *sp = 0;
            if (gfid_parse(line, &g) < 0)
                continue;
            h->st->entries++;
            if (sp[1] != '/') {
                struct cl_op op;
                cl_op_init(&op, RPC_OP_UNMARK, NULL, NULL);
                memcpy(&op.args.gfid, &g, sizeof(g));
                op.args.present |= 1ull << RPC_T_GFID;
                RPC_SET(&op.args, pending, RPC_T_PENDING, 0);
                simple(h->ch[i], &op);
                continue;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                struct entry *nv = realloc(v, cap * sizeof(*v));
                if (!nv) {
                    rc = -ENOMEM;
                    break;
                }
                v = nv;
            }
            if (!(v[n].path = strdup(sp + 1))) {
                rc = -ENOMEM;
                break;
            }
            v[n++].g = g;
        }
        free(idx);
    }
    if (n)
        qsort(v, n, sizeof(*v), entry_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && gfid_equal(&v[k - 1].g, &v[i].g)) {
            free(v[i].path);
            continue;
        }
        v[k++] = v[i];
    }
    *out = v;
    *count = k;
    return rc;
}

struct work {
    struct hctx *h;
    struct entry *e;
    size_t n, next;
};

static void *worker(void *arg)
{
    struct work *w = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (i >= w->n)
            return NULL;
        heal_one(w->h, w->e[i].path, &w->e[i].g);
        if (w->h->p.progress)
            count(&w->h->p.progress->done);
    }
}

static void heal_entries_parallel(struct hctx *h, struct entry *e, size_t n)
{
    struct work w = {.h = h, .e = e, .n = n};
    int t = h->p.threads < 1 ? 1 : h->p.threads > 64 ? 64 : h->p.threads;
    if ((size_t)t > n)
        t = (int)n;
    pthread_t tid[64];
    int started = 0;
    for (int i = 1; i < t; i++)
        if (pthread_create(&tid[started], NULL, worker, &w) == 0)
            started++;
    worker(&w);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
}

int cl_heal_run(struct cl_layer **children, int n, int arbiter, const struct cl_heal_params *p,
                struct cl_heal_stats *st)
{
    struct cl_heal_stats run = {0};
    struct hctx h = {.ch = children, .n = n, .arbiter = arbiter, .st = &run};
    if (p)
        h.p = *p;
    else
        h.p.source = -1;
    pthread_mutex_init(&h.lock, NULL);
    int rc = 0;
    if (h.p.redundancy > 0 && !(h.ec = cl_ec_new(n - h.p.redundancy, h.p.redundancy))) {
        rc = -errno;
        goto out;
    }
    if (h.p.path) {
        rc = heal_one(&h, h.p.path, NULL);
        if (rc == -EAGAIN || (rc == -EIO && run.split))
            rc = 0; /* reported through the statistics */
        goto out;
    }
    if (h.p.full)
        walk_full(&h, "/");
    /* Directories first would be ideal; a second pass catches entries whose
     * parent was healed by the first. */
    for (int pass = 0; pass < 2; pass++) {
        unsigned before = run.healed;
        struct entry *e = NULL;
        size_t k = 0;
        int r = collect(&h, &e, &k);
        if (r < 0)
            rc = r;
        if (h.p.progress)
            __atomic_add_fetch(&h.p.progress->queued, (unsigned)k, __ATOMIC_RELAXED);
        heal_entries_parallel(&h, e, k);
        for (size_t i = 0; i < k; i++)
            free(e[i].path);
        free(e);
        if (run.healed == before)
            break;
        if (pass == 0)
            run.pending = 0, run.split = 0, run.failed = 0, run.skipped = 0;
    }
out:
    cl_ec_free(h.ec);
    pthread_mutex_destroy(&h.lock);
    st->entries += run.entries;
    st->healed += run.healed;
    st->pending += run.pending;
    st->split += run.split;
    st->failed += run.failed;
    st->resolved += run.resolved;
    st->skipped += run.skipped;
    st->bytes_copied += run.bytes_copied;
    st->bytes_same += run.bytes_same;
    return rc;
}

unsigned cl_heal_expect(struct cl_layer **children, int n, int arbiter)
{
    uint64_t most = 0;
    for (int i = 0; i < n; i++) {
        if ((arbiter && i == n - 1) || !cl_proto_connected(children[i]))
            continue;
        struct cl_op op;
        path_op(&op, RPC_OP_STATFS, "/");
        if (cl_op_run(children[i], &op) == 0) {
            const struct rpc_statfs *st = &op.reply->msg.statfs;
            uint64_t used = st->files > st->ffree ? st->files - st->ffree : 0;
            if (used > most)
                most = used;
        }
        cl_op_release(&op);
    }
    return most > UINT32_MAX ? UINT32_MAX : (unsigned)most;
}

int cl_heal_set(struct cl_layer **children, int n, int arbiter, int full, struct cl_heal_stats *st)
{
    struct cl_heal_params p = {.full = full, .threads = 1, .source = -1};
    return cl_heal_run(children, n, arbiter, &p, st);
}
