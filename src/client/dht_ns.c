/* Distribute: namespace changes that touch several subvolumes or names:
 * mkdir and rmdir on every subvolume, unlink and link with link-to files,
 * rename within and across hash ranges, RENAME_EXCHANGE. Runs on the
 * layer's workers (dht_int.h). docs/replication.md, "Distribute". */
#include "dht_int.h"

/* (Re)creates directory path on the subvolumes in mask as a copy of the
 * one on subvolume from: same gfid, mode and owner, default layout. With
 * replace, the copies there now (empty ones of our own making) are removed
 * first; a copy that is not empty is in use and stays. */
void dht__remake_dirs(struct dht *d, const char *path, uint64_t mask, int from, int replace)
{
    struct cl_op lk;
    cl_op_init(&lk, RPC_OP_LOOKUP, NULL, NULL);
    rpc_set_str(&lk.args, RPC_T_PATH, &lk.args.path, path);
    if (dht__run(d, from, &lk) < 0 || !rpc_has(&lk.reply->msg, RPC_T_ATTR) ||
        !S_ISDIR(lk.reply->msg.attr.mode)) {
        log_warn("volume %s: cannot read directory %s on subvolume %d to copy it", d->volume, path,
                 from);
        cl_op_release(&lk);
        return;
    }
    const struct rpc_attr *a = &lk.reply->msg.attr;
    struct cl_op ops[CL_DHT_MAX];
    if (replace) {
        for (int i = 0; i < d->n; i++)
            if (mask >> i & 1) {
                cl_op_init(&ops[i], RPC_OP_RMDIR, NULL, NULL);
                rpc_set_str(&ops[i].args, RPC_T_PATH, &ops[i].args.path, path);
            }
        dht__fan_run(d, ops, mask);
        dht__release_all(d, ops, mask);
        for (int i = 0; i < d->n; i++)
            if ((mask >> i & 1) && ops[i].status < 0)
                mask &= ~(1ull << i);
    }
    struct cl_dht_layout l;
    cl_dht_layout_default(d->n, &l);
    uint8_t v[CL_DHT_LAYOUT_MAXLEN];
    size_t vl = cl_dht_layout_encode(&l, v);
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1) {
            struct rpc_msg *m = &ops[i].args;
            cl_op_init(&ops[i], RPC_OP_MKDIR, NULL, NULL);
            rpc_set_str(m, RPC_T_PATH, &m->path, path);
            RPC_SET(m, mode, RPC_T_MODE, a->mode & 07777);
            RPC_SET(m, umask, RPC_T_UMASK, 0);
            RPC_SET(m, uid, RPC_T_UID, a->uid);
            RPC_SET(m, gid, RPC_T_GID, a->gid);
            m->gfid = a->gfid;
            m->present |= 1ull << RPC_T_GFID;
            rpc_set_bytes(m, RPC_T_LAYOUT, &m->layout, v, vl);
        }
    dht__fan_run(d, ops, mask);
    for (int i = 0; i < d->n; i++)
        if ((mask >> i & 1) && ops[i].status < 0 && ops[i].status != -EEXIST)
            log_warn("volume %s: directory %s could not be made on subvolume %d: %s", d->volume,
                     path, i, strerror(-ops[i].status));
    dht__release_all(d, ops, mask);
    cl_op_release(&lk);
}

/* After a mkdir that met EEXIST somewhere (two clients making one name at
 * once): every subvolume must end with a copy of the hashed subvolume's
 * directory (its gfid). Copies with another gfid are replaced, missing
 * ones made; both racing clients run this, so it checks again until the
 * copies agree (a few rounds at most). */
static void converge(struct dht *d, const char *path, int h)
{
    for (int round = 0; round < 5; round++) {
        struct cl_op lk[CL_DHT_MAX];
        for (int i = 0; i < d->n; i++) {
            cl_op_init(&lk[i], RPC_OP_LOOKUP, NULL, NULL);
            rpc_set_str(&lk[i].args, RPC_T_PATH, &lk[i].args.path, path);
        }
        dht__fan_run(d, lk, dht__all_mask(d));
        uint64_t foreign = 0, missing = 0;
        int ok = lk[h].status == 0 && lk[h].reply && rpc_has(&lk[h].reply->msg, RPC_T_ATTR);
        for (int i = 0; ok && i < d->n; i++) {
            if (i == h)
                continue;
            if (lk[i].status == -ENOENT)
                missing |= 1ull << i;
            else if (lk[i].status == 0 && rpc_has(&lk[i].reply->msg, RPC_T_ATTR) &&
                     !gfid_equal(&lk[i].reply->msg.attr.gfid, &lk[h].reply->msg.attr.gfid))
                foreign |= 1ull << i;
        }
        dht__release_all(d, lk, dht__all_mask(d));
        if (!ok || (!foreign && !missing))
            return;
        if (foreign)
            dht__remake_dirs(d, path, foreign, h, 1);
        if (missing)
            dht__remake_dirs(d, path, missing, h, 0);
    }
    log_warn("volume %s: copies of directory %s still differ after a racing mkdir", d->volume,
             path);
}

/* Placement volumes: the parent of path on subvolume i, made there when a
 * set added after it lacks it (dht__dir_ensure). 0 or -errno. */
static int ensure_parent(struct dht *d, const char *path, int i)
{
    if (!d->placed)
        return 0;
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t dl = !slash || slash == path ? 1 : (size_t)(slash - path);
    if (dl >= sizeof(dir))
        return -ENAMETOOLONG;
    memcpy(dir, path, dl);
    dir[dl] = 0;
    return dht__dir_ensure(d, dir, i);
}

void dht__do_mkdir(struct dht *d, struct cl_op *op, const char *path)
{
    int h, rc = dht__down_mask(d) ? -ENOTCONN : dht__hashed(d, path, &h);
    for (int i = 0; rc == 0 && d->placed && i < d->n; i++)
        rc = ensure_parent(d, path, i); /* every set gets a copy */
    if (rc < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    struct cl_dht_layout l;
    cl_dht_layout_default(d->n, &l);
    uint8_t v[CL_DHT_LAYOUT_MAXLEN];
    size_t vl = cl_dht_layout_encode(&l, v);
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++) {
        dht__sub_from(&subs[i], &op->args);
        dht__ask_lease(&subs[i].args, &op->args);
        rpc_set_bytes(&subs[i].args, RPC_T_LAYOUT, &subs[i].args.layout, v, vl);
    }
    dht__fan_run(d, subs, dht__all_mask(d));
    /* The hashed subvolume decides (a racing mkdir of the same name loses
     * there); elsewhere an existing directory is adopted. */
    int st = subs[h].status;
    for (int i = 0; i < d->n && st == 0; i++)
        if (i != h && subs[i].status < 0 && subs[i].status != -EEXIST)
            st = subs[i].status;
    uint64_t made = 0;
    for (int i = 0; i < d->n; i++)
        if (subs[i].status == 0)
            made |= 1ull << i;
    if (st == 0) {
        if (made != dht__all_mask(d)) /* another mkdir of the name raced ours */
            converge(d, path, h);
        dht__cache_set_loc(d, path, h, 1);
        dht__cache_set_layout(d, path, &l);
        /* The new directory is leased where every copy was made and
         * leased here (another's mkdir raced ours: not). */
        struct rpc_frame *r = subs[h].reply;
        dht__dir_lease(d, subs, made, r);
        subs[h].reply = NULL;
        dht__complete_op(op, 0, r);
    } else if (st == -EEXIST && made) {
        /* Another client's mkdir of this name won on the hashed subvolume
         * (or a copy was missing here): the copies we made may already be
         * the winner's, so never just remove them; make them copies of the
         * hashed subvolume's directory (its gfid). */
        converge(d, path, h);
        dht__complete_op(op, -EEXIST, NULL);
    } else {
        /* Undo: a directory on some subvolumes only is worse than none. */
        uint64_t undo = 0;
        struct cl_op rm[CL_DHT_MAX];
        for (int i = 0; i < d->n; i++)
            if (subs[i].status == 0) {
                cl_op_init(&rm[i], RPC_OP_RMDIR, NULL, NULL);
                rpc_set_str(&rm[i].args, RPC_T_PATH, &rm[i].args.path, path);
                undo |= 1ull << i;
            }
        dht__fan_run(d, rm, undo);
        dht__release_all(d, rm, undo);
        dht__complete_op(op, st, NULL);
    }
    dht__release_all(d, subs, dht__all_mask(d));
}

void dht__do_rmdir(struct dht *d, struct cl_op *op, const char *path)
{
    int h, rc = dht__down_mask(d) ? -ENOTCONN : dht__hashed(d, path, &h);
    if (rc < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++)
        dht__sub_from(&subs[i], &op->args);
    dht__fan_run(d, subs, dht__all_mask(d));
    /* a set added after the directory was made lacks it: the first copy
     * that was there decides */
    for (int i = 0; d->placed && subs[h].status == -ENOENT && i < d->n; i++)
        if (subs[i].status != -ENOENT)
            h = i;
    int st = subs[h].status, failed = -1;
    uint64_t removed = 0;
    for (int i = 0; i < d->n; i++) {
        if (subs[i].status == 0)
            removed |= 1ull << i;
        else if (subs[i].status != -ENOENT || i == h) {
            if (st == 0)
                st = subs[i].status;
            if (failed < 0 && subs[i].status != -ENOENT)
                failed = i;
        }
    }
    dht__cache_drop_all(d);
    if (st < 0 && removed && failed >= 0) {
        /* Not empty somewhere (or a subvolume failed): put the directory
         * back where it went, with the surviving copy's id and owner. */
        dht__remake_dirs(d, path, removed, failed, 0);
    }
    dht__complete_op(op, st, NULL);
    dht__release_all(d, subs, dht__all_mask(d));
}

/* A link-to file at path on subvolume at, pointing to subvolume target. */
int dht__make_linkto(struct dht *d, int at, const char *path, int target)
{
    char v[8];
    snprintf(v, sizeof(v), "%d", target);
    struct cl_op s;
    struct rpc_msg *m = &s.args;
    cl_op_init(&s, RPC_OP_MKNOD, NULL, NULL);
    rpc_set_str(m, RPC_T_PATH, &m->path, path);
    RPC_SET(m, mode, RPC_T_MODE, S_IFREG | S_ISVTX);
    RPC_SET(m, umask, RPC_T_UMASK, 0);
    RPC_SET(m, uid, RPC_T_UID, 0);
    RPC_SET(m, gid, RPC_T_GID, 0);
    gfid_generate(&m->gfid);
    m->present |= 1ull << RPC_T_GFID;
    rpc_set_bytes(m, RPC_T_LINKTO, &m->linkto, v, strlen(v));
    int rc = dht__run(d, at, &s);
    cl_op_release(&s);
    return rc;
}

int dht__remove_name(struct dht *d, int at, const char *path)
{
    struct cl_op s;
    cl_op_init(&s, RPC_OP_UNLINK, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
    int rc = dht__run(d, at, &s);
    cl_op_release(&s);
    return rc;
}

void dht__do_unlink(struct dht *d, struct cl_op *op, const char *path)
{
    int c, is_dir, h, rc = dht__locate(d, &op->args, path, &c, &is_dir);
    if (rc == 0)
        rc = dht__hashed(d, path, &h);
    if (rc < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    struct cl_op s;
    dht__sub_from(&s, &op->args);
    rc = dht__run(d, c, &s);
    dht__cache_drop(d, path);
    if (rc == 0 && h != c) {
        int lr = dht__remove_name(d, h, path);
        if (lr < 0 && lr != -ENOENT)
            log_warn("volume %s: removing the link-to %s on subvolume %d: %s", d->volume, path, h,
                     strerror(-lr));
    }
    dht__complete_sub(op, &s);
    cl_op_release(&s);
}

void dht__do_link(struct dht *d, struct cl_op *op, const char *src, const char *dst)
{
    int c, is_dir, h2, rc = dht__locate(d, &op->args, src, &c, &is_dir);
    if (rc == 0)
        rc = dht__hashed(d, dst, &h2);
    if (rc == 0 && is_dir)
        rc = -EPERM;
    if (rc < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    if (h2 != c &&
        ((rc = ensure_parent(d, dst, h2)) < 0 || (rc = dht__make_linkto(d, h2, dst, c)) < 0)) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    struct cl_op s;
    dht__sub_from(&s, &op->args);
    rc = dht__run(d, c, &s);
    if (rc < 0 && h2 != c)
        dht__remove_name(d, h2, dst);
    if (rc == 0)
        dht__cache_set_loc(d, dst, c, 0);
    dht__complete_sub(op, &s);
    cl_op_release(&s);
}

/* A plain rename of one name on subvolume at. */
static int rename_on(struct dht *d, int at, const char *from, const char *to, uint64_t flags)
{
    struct cl_op s;
    cl_op_init(&s, RPC_OP_RENAME, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, from);
    rpc_set_str(&s.args, RPC_T_PATH2, &s.args.path2, to);
    if (flags)
        RPC_SET(&s.args, flags, RPC_T_FLAGS, flags);
    int rc = dht__run(d, at, &s);
    cl_op_release(&s);
    return rc;
}

/* Points the link-to of name (hashed to h) at the data's subvolume at:
 * drops a stale one, makes the new one where needed. */
static void relink(struct dht *d, const char *name, int h, int at, int had_linkto)
{
    if (had_linkto)
        dht__remove_name(d, h, name);
    if (h != at) {
        int rc = dht__make_linkto(d, h, name, at);
        if (rc < 0)
            log_warn("volume %s: link-to %s on subvolume %d -> %d: %s", d->volume, name, h, at,
                     strerror(-rc));
    }
}

/* RENAME_EXCHANGE. Two files on one subvolume swap there (their link-tos
 * stay right). Otherwise the swap is done name by name (not atomic to
 * other clients): files on two subvolumes each move to the other name on
 * their own subvolume; a file and a directory swap on the file's
 * subvolume and the directory's other copies are renamed. Link-tos follow. */
static void do_exchange(struct dht *d, struct cl_op *op, const char *a, const char *b)
{
    int ca, cb, da, db, ha, hb, rc;
    if ((rc = dht__locate(d, &op->args, a, &ca, &da)) < 0 ||
        (rc = dht__locate(d, &op->args, b, &cb, &db)) < 0 || (rc = dht__hashed(d, a, &ha)) < 0 ||
        (rc = dht__hashed(d, b, &hb)) < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    if (da && db) {
        dht__every(d, op, ca, NULL);
        dht__cache_drop_all(d);
        return;
    }
    if (dht__down_mask(d)) {
        dht__complete_op(op, -ENOTCONN, NULL);
        return;
    }
    dht__cache_drop(d, a);
    dht__cache_drop(d, b);
    if (!da && !db && ca == cb) {
        dht__complete_op(op, rename_on(d, ca, a, b, RENAME_EXCHANGE), NULL);
        return;
    }
    if (!da && !db) {
        if ((rc = rename_on(d, ca, a, b, 0)) < 0) {
            dht__complete_op(op, rc, NULL);
            return;
        }
        if ((rc = rename_on(d, cb, b, a, 0)) < 0) {
            rename_on(d, ca, b, a, 0); /* put a back */
            dht__complete_op(op, rc, NULL);
            return;
        }
        /* a's data (on ca) is now named b, b's (on cb) a */
        relink(d, a, ha, cb, ha != ca && ha != cb);
        relink(d, b, hb, ca, hb != ca && hb != cb);
        dht__complete_op(op, 0, NULL);
        return;
    }
    /* a file f (on cf) and a directory g */
    const char *f = da ? b : a, *g = da ? a : b;
    int cf = da ? cb : ca, hf = da ? hb : ha, hg = da ? ha : hb;
    if ((rc = rename_on(d, cf, a, b, RENAME_EXCHANGE)) < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    for (int j = 0; j < d->n && rc == 0; j++) {
        if (j == cf)
            continue;
        if (j == hf)
            dht__remove_name(d, j, f); /* the file's link-to makes way */
        rc = rename_on(d, j, g, f, 0);
    }
    if (rc < 0)
        log_warn("volume %s: exchanging %s and %s left directory copies behind: %s", d->volume, a,
                 b, strerror(-rc));
    /* the file is now named g, its data still on cf */
    relink(d, g, hg, cf, 0);
    dht__cache_drop_all(d);
    dht__complete_op(op, rc, NULL);
}

void dht__do_rename(struct dht *d, struct cl_op *op, const char *src, const char *dst)
{
    if (rpc_has(&op->args, RPC_T_FLAGS) && (op->args.flags & RENAME_EXCHANGE)) {
        do_exchange(d, op, src, dst);
        return;
    }
    int c, is_dir, rc = dht__locate(d, &op->args, src, &c, &is_dir);
    if (rc < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    if (is_dir) {
        /* Directories exist everywhere: rename every copy. A file in the
         * way exists on one subvolume only: refuse before renaming the
         * copies elsewhere. */
        int cd, dst_dir;
        rc = dht__locate(d, &op->args, dst, &cd, &dst_dir);
        if (rc == 0 && !dst_dir) {
            dht__complete_op(op, -ENOTDIR, NULL);
            return;
        }
        if (rc < 0 && rc != -ENOENT) {
            dht__complete_op(op, rc, NULL);
            return;
        }
        dht__every(d, op, c, NULL);
        dht__cache_drop_all(d);
        return;
    }
    int hs, hd, cd = -1, dst_dir = 0;
    if ((rc = dht__hashed(d, src, &hs)) < 0 || (rc = dht__hashed(d, dst, &hd)) < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    rc = dht__locate(d, &op->args, dst, &cd, &dst_dir);
    if (rc < 0 && rc != -ENOENT) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    if (rc == -ENOENT)
        cd = -1;
    uint64_t fl = rpc_has(&op->args, RPC_T_FLAGS) ? op->args.flags : 0;
    if ((fl & RENAME_NOREPLACE) && cd >= 0) {
        dht__complete_op(op, -EEXIST, NULL);
        return;
    }
    if (dst_dir && cd >= 0)
        cd = c; /* let the brick refuse (EISDIR) or replace an empty one */
    /* The data stays where it is; only names move. */
    struct cl_op s;
    dht__sub_from(&s, &op->args);
    rc = dht__run(d, c, &s);
    if (rc < 0) {
        dht__complete_sub(op, &s);
        cl_op_release(&s);
        return;
    }
    dht__cache_drop(d, src);
    dht__cache_drop(d, dst);
    if (cd >= 0 && cd != c) {
        int r2 = dht__remove_name(d, cd, dst); /* the replaced file's data */
        if (r2 < 0 && r2 != -ENOENT)
            log_warn("volume %s: rename: removing the replaced %s on subvolume %d: %s", d->volume,
                     dst, cd, strerror(-r2));
    }
    if (hd != c) {
        if (cd >= 0 && cd != hd)
            dht__remove_name(d, hd, dst); /* the replaced file's link-to */
        int r3 = ensure_parent(d, dst, hd);
        if (r3 == 0)
            r3 = dht__make_linkto(d, hd, dst, c);
        if (r3 < 0)
            log_warn("volume %s: rename: link-to %s on subvolume %d -> %d: %s", d->volume, dst, hd,
                     c, strerror(-r3));
    }
    if (hs != c) {
        int r4 = dht__remove_name(d, hs, src);
        if (r4 < 0 && r4 != -ENOENT)
            log_warn("volume %s: rename: removing the link-to %s on subvolume %d: %s", d->volume,
                     src, hs, strerror(-r4));
    }
    dht__cache_set_loc(d, dst, c, 0);
    dht__complete_sub(op, &s);
    cl_op_release(&s);
}
