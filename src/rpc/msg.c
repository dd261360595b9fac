/* Message bodies (msg.h): a decoded TLV body as struct rpc_msg, field by
 * field, and the encoders the layers and the brick build bodies with. */
#include "msg.h"

#include <errno.h>
#include <string.h>

enum field_kind { K_NONE, K_U64, K_STR, K_BYTES, K_GFID, K_ATTR, K_TIME, K_LOCK, K_STATFS, K_REP };

/* Each tag's kind; K_REP fields may repeat and are counted. */
static const unsigned char tag_kind[RPC_T_MAX] = {
    [RPC_T_OP] = K_U64,       [RPC_T_PATH] = K_STR,         [RPC_T_PATH2] = K_STR,
    [RPC_T_NAME] = K_BYTES,   [RPC_T_GFID] = K_GFID,        [RPC_T_FH] = K_U64,
    [RPC_T_MODE] = K_U64,     [RPC_T_UID] = K_U64,          [RPC_T_GID] = K_U64,
    [RPC_T_UMASK] = K_U64,    [RPC_T_FLAGS] = K_U64,        [RPC_T_RDEV] = K_U64,
    [RPC_T_OFFSET] = K_U64,   [RPC_T_SIZE] = K_U64,         [RPC_T_DATA] = K_BYTES,
    [RPC_T_ATTR] = K_ATTR,    [RPC_T_VALID] = K_U64,        [RPC_T_ATIME] = K_TIME,
    [RPC_T_MTIME] = K_TIME,   [RPC_T_LOCK] = K_LOCK,        [RPC_T_OWNER] = K_U64,
    [RPC_T_DIRENT] = K_REP,   [RPC_T_STATFS] = K_STATFS,    [RPC_T_ARG] = K_REP,
    [RPC_T_TEXT] = K_BYTES,   [RPC_T_STATUS] = K_U64,       [RPC_T_SUB] = K_REP,
    [RPC_T_ERRNO] = K_U64,    [RPC_T_GROUP] = K_REP,        [RPC_T_PID] = K_U64,
    [RPC_T_FEATURES] = K_U64, [RPC_T_BRICK] = K_REP,        [RPC_T_HOST] = K_STR,
    [RPC_T_PORT] = K_U64,     [RPC_T_OPTION] = K_REP,       [RPC_T_EOF] = K_U64,
    [RPC_T_WHENCE] = K_U64,   [RPC_T_ID] = K_STR,           [RPC_T_GEN] = K_U64,
    [RPC_T_REPLICA] = K_U64,  [RPC_T_ARBITER] = K_U64,      [RPC_T_PENDING] = K_U64,
    [RPC_T_LEASE] = K_U64,    [RPC_T_PATTR] = K_ATTR,       [RPC_T_NOXATTRS] = K_U64,
    [RPC_T_XATTRS] = K_BYTES, [RPC_T_EXTENTS] = K_BYTES,    [RPC_T_LAYOUT] = K_BYTES,
    [RPC_T_LINKTO] = K_BYTES, [RPC_T_OPSTAT] = K_REP,       [RPC_T_CALLS] = K_U64,
    [RPC_T_NSEC] = K_U64,     [RPC_T_NSECMAX] = K_U64,      [RPC_T_SUBDIR] = K_STR,
    [RPC_T_WAITING] = K_U64,  [RPC_T_BUCKET] = K_REP,       [RPC_T_ERRSTAT] = K_REP,
    [RPC_T_COUNTER] = K_REP,  [RPC_T_TOPENTRY] = K_REP,     [RPC_T_TOPPERF] = K_BYTES,
    [RPC_T_CLIENT] = K_REP,   [RPC_T_QUOTA] = K_REP,        [RPC_T_REDUNDANCY] = K_U64,
    [RPC_T_PLACE] = K_BYTES,  [RPC_T_PLACE_PREV] = K_BYTES,
};

static uint64_t *u64_slot(struct rpc_msg *m, uint16_t tag)
{
    switch (tag) {
    case RPC_T_OP:
        return &m->op;
    case RPC_T_FH:
        return &m->fh;
    case RPC_T_MODE:
        return &m->mode;
    case RPC_T_UID:
        return &m->uid;
    case RPC_T_GID:
        return &m->gid;
    case RPC_T_UMASK:
        return &m->umask;
    case RPC_T_FLAGS:
        return &m->flags;
    case RPC_T_RDEV:
        return &m->rdev;
    case RPC_T_OFFSET:
        return &m->offset;
    case RPC_T_SIZE:
        return &m->size;
    case RPC_T_VALID:
        return &m->valid;
    case RPC_T_OWNER:
        return &m->owner;
    case RPC_T_STATUS:
        return &m->status;
    case RPC_T_ERRNO:
        return &m->err;
    case RPC_T_PID:
        return &m->pid;
    case RPC_T_FEATURES:
        return &m->features;
    case RPC_T_PORT:
        return &m->port;
    case RPC_T_EOF:
        return &m->eof;
    case RPC_T_WHENCE:
        return &m->whence;
    case RPC_T_GEN:
        return &m->gen;
    case RPC_T_REPLICA:
        return &m->replica;
    case RPC_T_ARBITER:
        return &m->arbiter;
    case RPC_T_PENDING:
        return &m->pending;
    case RPC_T_LEASE:
        return &m->lease;
    case RPC_T_NOXATTRS:
        return &m->noxattrs;
    case RPC_T_CALLS:
        return &m->calls;
    case RPC_T_NSEC:
        return &m->nsec;
    case RPC_T_NSECMAX:
        return &m->nsecmax;
    case RPC_T_WAITING:
        return &m->waiting;
    case RPC_T_REDUNDANCY:
        return &m->redundancy;
    default:
        return NULL;
    }
}

static struct rpc_bytes *bytes_slot(struct rpc_msg *m, uint16_t tag)
{
    switch (tag) {
    case RPC_T_PATH:
        return &m->path;
    case RPC_T_PATH2:
        return &m->path2;
    case RPC_T_NAME:
        return &m->name;
    case RPC_T_DATA:
        return &m->data;
    case RPC_T_TEXT:
        return &m->text;
    case RPC_T_HOST:
        return &m->host;
    case RPC_T_ID:
        return &m->id;
    case RPC_T_XATTRS:
        return &m->xattrs;
    case RPC_T_LAYOUT:
        return &m->layout;
    case RPC_T_LINKTO:
        return &m->linkto;
    case RPC_T_EXTENTS:
        return &m->extents;
    case RPC_T_SUBDIR:
        return &m->subdir;
    case RPC_T_TOPPERF:
        return &m->topperf;
    case RPC_T_PLACE:
        return &m->place;
    case RPC_T_PLACE_PREV:
        return &m->place_prev;
    default:
        return NULL;
    }
}

int rpc_attr_decode(const uint8_t *p, size_t len, struct rpc_attr *a)
{
    if (len != RPC_ATTR_LEN)
        return -EPROTO;
    memcpy(a->gfid.b, p, 16);
    p += 16;
    uint64_t v[13];
    for (int i = 0; i < 13; i++)
        v[i] = rpc_get64(p + 8 * i);
    a->mode = v[0];
    a->nlink = v[1];
    a->uid = v[2];
    a->gid = v[3];
    a->rdev = v[4];
    a->size = v[5];
    a->blocks = v[6];
    a->blksize = v[7];
    a->atime = (int64_t)v[8];
    a->mtime = (int64_t)v[9];
    a->ctime = (int64_t)v[10];
    a->atime_ns = (uint32_t)v[11];
    a->mtime_ns = (uint32_t)(v[11] >> 32);
    a->ctime_ns = (uint32_t)v[12];
    if (a->atime_ns >= 1000000000u || a->mtime_ns >= 1000000000u || a->ctime_ns >= 1000000000u)
        return -EPROTO;
    return 0;
}

void rpc_put_attr(struct rpc_buf *b, uint16_t tag, const struct rpc_attr *a)
{
    uint8_t d[RPC_ATTR_LEN];
    memcpy(d, a->gfid.b, 16);
    uint64_t v[13] = {a->mode,
                      a->nlink,
                      a->uid,
                      a->gid,
                      a->rdev,
                      a->size,
                      a->blocks,
                      a->blksize,
                      (uint64_t)a->atime,
                      (uint64_t)a->mtime,
                      (uint64_t)a->ctime,
                      (uint64_t)a->atime_ns | (uint64_t)a->mtime_ns << 32,
                      a->ctime_ns};
    for (int i = 0; i < 13; i++)
        rpc_le64(d + 16 + 8 * i, v[i]);
    rpc_put_bytes(b, tag, d, sizeof(d));
}

void rpc_set_setattr(struct rpc_msg *a, const struct stat *attr, uint64_t valid)
{
    if (valid & RPC_SET_MODE)
        RPC_SET(a, mode, RPC_T_MODE, attr->st_mode);
    if (valid & RPC_SET_UID)
        RPC_SET(a, uid, RPC_T_UID, attr->st_uid);
    if (valid & RPC_SET_GID)
        RPC_SET(a, gid, RPC_T_GID, attr->st_gid);
    if (valid & RPC_SET_SIZE)
        RPC_SET(a, size, RPC_T_SIZE, (uint64_t)attr->st_size);
    if ((valid & RPC_SET_ATIME) && !(valid & RPC_SET_ATIME_NOW)) {
        a->atime.sec = attr->st_atim.tv_sec;
        a->atime.nsec = (uint32_t)attr->st_atim.tv_nsec;
        a->present |= 1ull << RPC_T_ATIME;
    }
    if ((valid & RPC_SET_MTIME) && !(valid & RPC_SET_MTIME_NOW)) {
        a->mtime.sec = attr->st_mtim.tv_sec;
        a->mtime.nsec = (uint32_t)attr->st_mtim.tv_nsec;
        a->present |= 1ull << RPC_T_MTIME;
    }
    RPC_SET(a, valid, RPC_T_VALID, valid);
}

void rpc_attr_from_stat(struct rpc_attr *a, const struct stat *st, const gfid_t *g)
{
    a->gfid = *g;
    a->mode = st->st_mode;
    a->nlink = st->st_nlink;
    a->uid = st->st_uid;
    a->gid = st->st_gid;
    a->rdev = st->st_rdev;
    a->size = (uint64_t)st->st_size;
    a->blocks = (uint64_t)st->st_blocks;
    a->blksize = (uint64_t)st->st_blksize;
    a->atime = st->st_atim.tv_sec;
    a->atime_ns = (uint32_t)st->st_atim.tv_nsec;
    a->mtime = st->st_mtim.tv_sec;
    a->mtime_ns = (uint32_t)st->st_mtim.tv_nsec;
    a->ctime = st->st_ctim.tv_sec;
    a->ctime_ns = (uint32_t)st->st_ctim.tv_nsec;
}

void rpc_attr_to_stat(const struct rpc_attr *a, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = gfid_ino(&a->gfid);
    st->st_mode = (mode_t)a->mode;
    st->st_nlink = (nlink_t)a->nlink;
    st->st_uid = (uid_t)a->uid;
    st->st_gid = (gid_t)a->gid;
    st->st_rdev = (dev_t)a->rdev;
    st->st_size = (off_t)a->size;
    st->st_blocks = (blkcnt_t)a->blocks;
    st->st_blksize = (blksize_t)a->blksize;
    st->st_atim.tv_sec = a->atime;
    st->st_atim.tv_nsec = a->atime_ns;
    st->st_mtim.tv_sec = a->mtime;
    st->st_mtim.tv_nsec = a->mtime_ns;
    st->st_ctim.tv_sec = a->ctime;
    st->st_ctim.tv_nsec = a->ctime_ns;
}

void rpc_put_time(struct rpc_buf *b, uint16_t tag, int64_t sec, uint32_t nsec)
{
    uint8_t d[12];
    rpc_le64(d, (uint64_t)sec);
    rpc_le32(d + 8, nsec);
    rpc_put_bytes(b, tag, d, sizeof(d));
}

void rpc_put_lock(struct rpc_buf *b, uint16_t tag, const struct rpc_lock *l)
{
    uint8_t d[RPC_LOCK_LEN];
    rpc_le64(d, l->type);
    rpc_le64(d + 8, l->start);
    rpc_le64(d + 16, l->len);
    rpc_le64(d + 24, l->pid);
    rpc_put_bytes(b, tag, d, sizeof(d));
}

void rpc_put_statfs(struct rpc_buf *b, uint16_t tag, const struct rpc_statfs *s)
{
    uint8_t d[RPC_STATFS_LEN];
    const uint64_t v[8] = {s->bsize,  s->frsize, s->blocks, s->bfree,
                           s->bavail, s->files,  s->ffree,  s->namemax};
    for (int i = 0; i < 8; i++)
        rpc_le64(d + 8 * i, v[i]);
    rpc_put_bytes(b, tag, d, sizeof(d));
}

void rpc_put_gfid(struct rpc_buf *b, uint16_t tag, const gfid_t *g)
{
    rpc_put_bytes(b, tag, g->b, GFID_LEN);
}

int rpc_bytes_str(const struct rpc_bytes *b, char *out, size_t outlen)
{
    if ((size_t)b->len + 1 > outlen)
        return -ENAMETOOLONG;
    if (b->len)
        memcpy(out, b->p, b->len);
    out[b->len] = 0;
    return 0;
}

#define FAIL(msg)                                                                                  \
    do {                                                                                           \
        if (why)                                                                                   \
            *why = msg;                                                                            \
        return -EPROTO;                                                                            \
    } while (0)

int rpc_msg_decode(const uint8_t *p, size_t len, struct rpc_msg *m, const char **why)
{
    struct rpc_iter it;
    struct rpc_field f;
    int rc;
    memset(m, 0, sizeof(*m));
    m->body = p;
    m->body_len = len;
    if (why)
        *why = NULL;
    rpc_iter_init(&it, p, len);
    while ((rc = rpc_iter_next(&it, &f)) > 0) {
        if (f.tag == 0 || f.tag >= RPC_T_MAX || tag_kind[f.tag] == K_NONE)
            FAIL("unknown field tag");
        unsigned kind = tag_kind[f.tag];
        if (kind != K_REP && rpc_has(m, f.tag))
            FAIL("duplicated field");
        rpc_mark(m, f.tag);
        switch (kind) {
        case K_U64:
            if (rpc_field_u64(&f, u64_slot(m, f.tag)) < 0)
                FAIL("bad integer length");
            break;
        case K_STR:
            if (memchr(f.val, 0, f.len))
                FAIL("NUL inside string");
            /* fall through */
        case K_BYTES: {
            struct rpc_bytes *s = bytes_slot(m, f.tag);
            s->p = f.val;
            s->len = f.len;
            break;
        }
        case K_GFID:
            if (f.len != GFID_LEN)
                FAIL("bad gfid length");
            memcpy(m->gfid.b, f.val, GFID_LEN);
            break;
        case K_ATTR:
            if (rpc_attr_decode(f.val, f.len, f.tag == RPC_T_PATTR ? &m->pattr : &m->attr) < 0)
                FAIL("bad attributes");
            break;
        case K_TIME: {
            if (f.len != 12)
                FAIL("bad time length");
            struct rpc_time *t = f.tag == RPC_T_ATIME ? &m->atime : &m->mtime;
            t->sec = (int64_t)rpc_get64(f.val);
            t->nsec = rpc_get32(f.val + 8);
            if (t->nsec >= 1000000000u)
                FAIL("nanoseconds out of range");
            break;
        }
        case K_LOCK:
            if (f.len != RPC_LOCK_LEN)
                FAIL("bad lock length");
            m->lock.type = rpc_get64(f.val);
            m->lock.start = rpc_get64(f.val + 8);
            m->lock.len = rpc_get64(f.val + 16);
            m->lock.pid = rpc_get64(f.val + 24);
            break;
        case K_STATFS: {
            if (f.len != RPC_STATFS_LEN)
                FAIL("bad statfs length");
            uint64_t *v = &m->statfs.bsize;
            for (int i = 0; i < 8; i++)
                v[i] = rpc_get64(f.val + 8 * i);
            break;
        }
        case K_REP:
            switch (f.tag) {
            case RPC_T_DIRENT:
                m->n_dirent++;
                break;
            case RPC_T_ARG:
                if (memchr(f.val, 0, f.len))
                    FAIL("NUL inside argument");
                m->n_arg++;
                break;
            case RPC_T_SUB:
                m->n_sub++;
                break;
            case RPC_T_GROUP: {
                uint64_t g;
                if (rpc_field_u64(&f, &g) < 0)
                    FAIL("bad group length");
                if (m->n_group < 32)
                    m->groups[m->n_group] = (uint32_t)g;
                m->n_group++;
                break;
            }
            case RPC_T_BRICK:
                m->n_brick++;
                break;
            case RPC_T_OPTION:
                m->n_option++;
                break;
            case RPC_T_OPSTAT:
                m->n_opstat++;
                break;
            case RPC_T_BUCKET:
                m->n_bucket++;
                break;
            case RPC_T_ERRSTAT:
                m->n_errstat++;
                break;
            case RPC_T_COUNTER:
                m->n_counter++;
                break;
            case RPC_T_TOPENTRY:
                m->n_topentry++;
                break;
            case RPC_T_CLIENT:
                m->n_client++;
                break;
            case RPC_T_QUOTA:
                m->n_quota++;
                break;
            }
            break;
        }
    }
    if (rc < 0)
        FAIL("truncated field");
    return 0;
}

int rpc_xattrs_next(struct rpc_iter *it, struct rpc_bytes *name, struct rpc_bytes *value)
{
    struct rpc_field f;
    int rc = rpc_iter_next(it, &f);
    if (rc <= 0)
        return rc < 0 ? -EPROTO : 0;
    if (f.tag != RPC_T_NAME || f.len == 0 || f.len > 255 || memchr(f.val, 0, f.len))
        return -EPROTO;
    name->p = f.val;
    name->len = f.len;
    if (rpc_iter_next(it, &f) <= 0 || f.tag != RPC_T_DATA)
        return -EPROTO;
    value->p = f.val;
    value->len = f.len;
    return 1;
}

int rpc_extents_check(const struct rpc_msg *m, const char **why)
{
    const char *w = NULL;
    const struct rpc_bytes *x = &m->extents;
    uint32_t n = x->len / RPC_EXTENT_LEN;
    uint64_t sum = 0;
    if (!rpc_has(m, RPC_T_EXTENTS))
        w = "no EXTENTS";
    else if (x->len % RPC_EXTENT_LEN)
        w = "EXTENTS not whole entries";
    else if (n == 0 || n > RPC_EXTENTS_MAX)
        w = "EXTENTS count out of range";
    for (uint32_t i = 0; !w && i < n; i++) {
        uint64_t off;
        uint32_t len;
        rpc_extent_get(x, i, &off, &len);
        if (len == 0)
            w = "empty extent";
        else if (off > (uint64_t)INT64_MAX - len)
            w = "extent ends past the largest offset";
        sum += len;
    }
    if (!w && sum != (rpc_has(m, RPC_T_DATA) ? m->data.len : 0))
        w = "EXTENTS do not add up to DATA";
    if (why)
        *why = w;
    return w ? -EPROTO : (int)n;
}

/* Whether the component p[0..n) is acceptable in a tree entry. */
static const char *tree_component(const uint8_t *p, size_t n)
{
    if (n == 0)
        return "empty component in a tree entry";
    if (n > 255)
        return "tree entry component longer than 255";
    if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
        return "'.' or '..' in a tree entry";
    return NULL;
}

int rpc_tree_check(const struct rpc_bytes *tree, const char **why)
{
    const char *w = NULL;
    uint32_t n = 0, comp = 0, entry = 0, depth = 0;
    if (tree->len == 0 || tree->p[tree->len - 1] != 0)
        w = "tree empty or not NUL-terminated";
    for (uint32_t i = 0; !w && i < tree->len; i++) {
        uint8_t c = tree->p[i];
        if (c != '/' && c != 0)
            continue;
        w = tree_component(tree->p + comp, i - comp);
        comp = i + 1;
        if (!w && ++depth > RPC_TREE_DEPTH)
            w = "tree entry deeper than RPC_TREE_DEPTH";
        if (c != 0)
            continue;
        depth = 0;
        if (!w && i - entry >= RPC_TREE_ENTRY_MAX)
            w = "tree entry too long";
        else if (!w && ++n > RPC_TREE_MAX)
            w = "too many tree entries";
        entry = i + 1;
    }
    if (why)
        *why = w;
    return w ? -EPROTO : (int)n;
}

void rpc_msg_encode(const struct rpc_msg *m, struct rpc_buf *b)
{
    struct rpc_msg *mm = (struct rpc_msg *)m; /* slot lookups only read */
    for (uint16_t tag = 1; tag < RPC_T_MAX; tag++) {
        if (!rpc_has(m, tag))
            continue;
        switch (tag_kind[tag]) {
        case K_U64:
            rpc_put_u64(b, tag, *u64_slot(mm, tag));
            break;
        case K_STR:
        case K_BYTES: {
            const struct rpc_bytes *s = bytes_slot(mm, tag);
            rpc_put_bytes(b, tag, s->p, s->len);
            break;
        }
        case K_GFID:
            rpc_put_gfid(b, tag, &m->gfid);
            break;
        case K_ATTR:
            rpc_put_attr(b, tag, tag == RPC_T_PATTR ? &m->pattr : &m->attr);
            break;
        case K_TIME: {
            const struct rpc_time *t = tag == RPC_T_ATIME ? &m->atime : &m->mtime;
            rpc_put_time(b, tag, t->sec, t->nsec);
            break;
        }
        case K_LOCK:
            rpc_put_lock(b, tag, &m->lock);
            break;
        case K_STATFS:
            rpc_put_statfs(b, tag, &m->statfs);
            break;
        case K_REP:
            if (tag == RPC_T_GROUP)
                for (uint32_t i = 0; i < m->n_group && i < 32; i++)
                    rpc_put_u64(b, tag, m->groups[i]);
            break;
        }
    }
}
