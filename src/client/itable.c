/* Inode table: three chained hash indexes over one set of inodes. */
#include "itable.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH 2048

struct ino {
    uint64_t nodeid;
    gfid_t gfid;
    struct ino *parent; /* NULL for the root and for removed names */
    char *name;
    uint64_t nlookup, nchildren;
    uint64_t *fhs; /* open file handles, for attribute calls once unlinked */
    size_t n_fh, cap_fh;
    int locked;  /* a SETLK went out for it (cl_itable_mark_locked) */
    int kind;    /* 0 unknown, 1 not a directory, 2 a directory */
    mode_t type; /* its file type (S_IFMT bits), 0 when not known */
    struct ino *next_id, *next_gfid, *next_name;
};

struct index {
    struct ino **b;
    size_t n; /* buckets, a power of two */
};

struct cl_itable {
    pthread_mutex_t lock;
    struct index by_id, by_gfid, by_name;
    size_t count;
    uint64_t next_id;
    struct ino *root;
};

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_gfid(const gfid_t *g)
{
    uint64_t a, b;
    memcpy(&a, g->b, 8);
    memcpy(&b, g->b + 8, 8);
    return mix(a ^ mix(b));
}

static uint64_t hash_name(uint64_t parent, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull ^ parent;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return mix(h);
}

#define NEXT(i, which) (*(struct ino **)((char *)(i) + (which)))
#define OFF_ID offsetof(struct ino, next_id)
#define OFF_GFID offsetof(struct ino, next_gfid)
#define OFF_NAME offsetof(struct ino, next_name)

static uint64_t key_of(const struct ino *i, size_t which)
{
    if (which == OFF_ID)
        return mix(i->nodeid);
    if (which == OFF_GFID)
        return hash_gfid(&i->gfid);
    return hash_name(i->parent->nodeid, i->name);
}

static int index_init(struct index *x, size_t n)
{
    x->b = calloc(n, sizeof(*x->b));
    x->n = n;
    return x->b ? 0 : -ENOMEM;
}

static void index_grow(struct index *x, size_t which)
{
    size_t n = x->n * 2;
    struct ino **b = calloc(n, sizeof(*b));
    if (!b)
        return; /* keep the longer chains */
    for (size_t k = 0; k < x->n; k++) {
        struct ino *i = x->b[k];
        while (i) {
            struct ino *next = NEXT(i, which);
            size_t h = key_of(i, which) & (n - 1);
            NEXT(i, which) = b[h];
            b[h] = i;
            i = next;
        }
    }
    free(x->b);
    x->b = b;
    x->n = n;
}

static void index_add(struct index *x, size_t which, struct ino *i)
{
    size_t h = key_of(i, which) & (x->n - 1);
    NEXT(i, which) = x->b[h];
    x->b[h] = i;
}

static void index_del(struct index *x, size_t which, struct ino *i)
{
    struct ino **pp = &x->b[key_of(i, which) & (x->n - 1)];
    for (; *pp; pp = &NEXT(*pp, which))
        if (*pp == i) {
            *pp = NEXT(i, which);
            return;
        }
}

static struct ino *find_id(struct cl_itable *t, uint64_t id)
{
    for (struct ino *i = t->by_id.b[mix(id) & (t->by_id.n - 1)]; i; i = i->next_id)
        if (i->nodeid == id)
            return i;
    return NULL;
}

static struct ino *find_gfid(struct cl_itable *t, const gfid_t *g)
{
    for (struct ino *i = t->by_gfid.b[hash_gfid(g) & (t->by_gfid.n - 1)]; i; i = i->next_gfid)
        if (gfid_equal(&i->gfid, g))
            return i;
    return NULL;
}

static struct ino *find_name(struct cl_itable *t, struct ino *parent, const char *name)
{
    size_t h = hash_name(parent->nodeid, name) & (t->by_name.n - 1);
    for (struct ino *i = t->by_name.b[h]; i; i = i->next_name)
        if (i->parent == parent && strcmp(i->name, name) == 0)
            return i;
    return NULL;
}

static void maybe_free(struct cl_itable *t, struct ino *i);

/* Removes i's name; may free its former parent. */
static void detach(struct cl_itable *t, struct ino *i)
{
    if (!i->parent)
        return;
    index_del(&t->by_name, OFF_NAME, i);
    struct ino *parent = i->parent;
    i->parent = NULL;
    free(i->name);
    i->name = NULL;
    parent->nchildren--;
    maybe_free(t, parent);
}

static void maybe_free(struct cl_itable *t, struct ino *i)
{
    while (i && i != t->root && i->nlookup == 0 && i->nchildren == 0) {
        struct ino *parent = i->parent;
        if (parent) {
            index_del(&t->by_name, OFF_NAME, i);
            parent->nchildren--;
        }
        index_del(&t->by_id, OFF_ID, i);
        index_del(&t->by_gfid, OFF_GFID, i);
        free(i->fhs);
        free(i->name);
        free(i);
        t->count--;
        i = parent;
    }
}

/* Gives i the name (parent, name); the caller checked it has none. */
static int attach(struct cl_itable *t, struct ino *i, struct ino *parent, const char *name)
{
    char *n = strdup(name);
    if (!n)
        return -ENOMEM;
    i->name = n;
    i->parent = parent;
    parent->nchildren++;
    index_add(&t->by_name, OFF_NAME, i);
    return 0;
}

static int is_ancestor(struct ino *a, struct ino *i)
{
    for (int d = 0; i && d < MAX_DEPTH; i = i->parent, d++)
        if (i == a)
            return 1;
    return 0;
}

struct cl_itable *cl_itable_new(void)
{
    struct cl_itable *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    if (index_init(&t->by_id, 1024) < 0 || index_init(&t->by_gfid, 1024) < 0 ||
        index_init(&t->by_name, 1024) < 0 || !(t->root = calloc(1, sizeof(*t->root))))
        goto fail;
    pthread_mutex_init(&t->lock, NULL);
    t->root->nodeid = CL_ROOT_ID;
    gfid_root(&t->root->gfid);
    t->next_id = CL_ROOT_ID + 1;
    index_add(&t->by_id, OFF_ID, t->root);
    index_add(&t->by_gfid, OFF_GFID, t->root);
    t->count = 1;
    return t;
fail:
    free(t->by_id.b);
    free(t->by_gfid.b);
    free(t->by_name.b);
    free(t);
    return NULL;
}

void cl_itable_free(struct cl_itable *t)
{
    if (!t)
        return;
    for (size_t k = 0; k < t->by_id.n; k++) {
        struct ino *i = t->by_id.b[k];
        while (i) {
            struct ino *next = i->next_id;
            free(i->fhs);
            free(i->name);
            free(i);
            i = next;
        }
    }
    free(t->by_id.b);
    free(t->by_gfid.b);
    free(t->by_name.b);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

uint64_t cl_itable_link(struct cl_itable *t, uint64_t parent_id, const char *name, const gfid_t *g,
                        mode_t type, int *err)
{
    *err = 0;
    pthread_mutex_lock(&t->lock);
    struct ino *parent = find_id(t, parent_id);
    if (!parent) {
        pthread_mutex_unlock(&t->lock);
        *err = -ENOENT;
        return 0;
    }
    struct ino *i = find_gfid(t, g);
    if (!i) {
        if (!(i = calloc(1, sizeof(*i)))) {
            pthread_mutex_unlock(&t->lock);
            *err = -ENOMEM;
            return 0;
        }
        i->nodeid = t->next_id++;
        i->gfid = *g;
        index_add(&t->by_id, OFF_ID, i);
        index_add(&t->by_gfid, OFF_GFID, i);
        t->count++;
        if (t->count > t->by_id.n) {
            index_grow(&t->by_id, OFF_ID);
            index_grow(&t->by_gfid, OFF_GFID);
            index_grow(&t->by_name, OFF_NAME);
        }
    }
    i->nlookup++;
    i->kind = type == S_IFDIR ? 2 : 1;
    if (type)
        i->type = type;
    else if (i->type == S_IFDIR)
        i->type = 0; /* not a directory after all */
    if (i != t->root && !(i->parent == parent && strcmp(i->name, name) == 0) &&
        !is_ancestor(i, parent)) {
        /* Whatever else carried this name is not there any more. */
        struct ino *other = find_name(t, parent, name);
        if (other && other != i) {
            detach(t, other);
            maybe_free(t, other);
        }
        parent->nchildren++; /* keep parent alive while i's old name goes */
        detach(t, i);
        if (attach(t, i, parent, name) < 0)
            *err = -ENOMEM;
        parent->nchildren--;
    }
    uint64_t id = i->nodeid;
    pthread_mutex_unlock(&t->lock);
    return id;
}

int cl_itable_forget(struct cl_itable *t, uint64_t nodeid, uint64_t n)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    int gone = 1;
    if (i) {
        i->nlookup = n > i->nlookup ? 0 : i->nlookup - n;
        gone = i->nlookup == 0;
        maybe_free(t, i);
    }
    pthread_mutex_unlock(&t->lock);
    return gone;
}

int cl_itable_hold(struct cl_itable *t, uint64_t nodeid)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (i)
        i->nlookup++;
    pthread_mutex_unlock(&t->lock);
    return i ? 0 : -ENOENT;
}

int cl_itable_path(struct cl_itable *t, uint64_t nodeid, const char *name, char *buf, size_t len)
{
    const char *parts[MAX_DEPTH];
    int n = 0, rc = 0;
    if (name)
        parts[n++] = name;
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (!i) {
        rc = -ENOENT;
        goto out;
    }
    for (; i != t->root; i = i->parent) {
        if (!i->parent) {
            rc = -ENOENT;
            goto out;
        }
        if (n == MAX_DEPTH) {
            rc = -ENAMETOOLONG;
            goto out;
        }
        parts[n++] = i->name;
    }
    size_t pos = 0;
    if (n == 0) {
        if (len < 2) {
            rc = -ENAMETOOLONG;
            goto out;
        }
        buf[pos++] = '/';
    }
    while (n > 0) {
        const char *s = parts[--n];
        size_t l = strlen(s);
        if (pos + 1 + l + 1 > len) {
            rc = -ENAMETOOLONG;
            goto out;
        }
        buf[pos++] = '/';
        memcpy(buf + pos, s, l);
        pos += l;
    }
    buf[pos] = 0;
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

long cl_itable_path_len(struct cl_itable *t, uint64_t nodeid, const char *name)
{
    long len = name ? 1 + (long)strlen(name) : 0;
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    int d = 0;
    for (; i && i != t->root && i->parent && d < MAX_DEPTH; i = i->parent, d++)
        len += 1 + (long)strlen(i->name);
    if (!i || (i != t->root && !i->parent))
        len = -ENOENT;
    else if (i != t->root)
        len = LONG_MAX; /* deeper than any path */
    pthread_mutex_unlock(&t->lock);
    return len == 0 ? 1 : len; /* the root alone: "/" */
}

int cl_itable_gfid(struct cl_itable *t, uint64_t nodeid, gfid_t *g)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (i)
        *g = i->gfid;
    pthread_mutex_unlock(&t->lock);
    return i ? 0 : -ENOENT;
}

int cl_itable_is_dir(struct cl_itable *t, uint64_t nodeid)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    int kind = i ? i->kind : 0;
    pthread_mutex_unlock(&t->lock);
    return kind - 1;
}

mode_t cl_itable_type(struct cl_itable *t, uint64_t nodeid)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    mode_t type = i ? i->type : 0;
    pthread_mutex_unlock(&t->lock);
    return type;
}

uint64_t cl_itable_parent(struct cl_itable *t, uint64_t nodeid)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    uint64_t p = i && i->parent ? i->parent->nodeid : 0;
    pthread_mutex_unlock(&t->lock);
    return p;
}

void cl_itable_unlink(struct cl_itable *t, uint64_t parent_id, const char *name)
{
    pthread_mutex_lock(&t->lock);
    struct ino *parent = find_id(t, parent_id);
    struct ino *i = parent ? find_name(t, parent, name) : NULL;
    if (i) {
        detach(t, i);
        maybe_free(t, i);
    }
    pthread_mutex_unlock(&t->lock);
}

void cl_itable_rename(struct cl_itable *t, uint64_t oldparent_id, const char *oldname,
                      uint64_t newparent_id, const char *newname, int exchange)
{
    pthread_mutex_lock(&t->lock);
    struct ino *op = find_id(t, oldparent_id), *np = find_id(t, newparent_id);
    struct ino *src = op ? find_name(t, op, oldname) : NULL;
    struct ino *dst = np ? find_name(t, np, newname) : NULL;
    if (!op || !np || src == dst)
        goto out;
    /* Pin both parents: detaching may otherwise free them. */
    op->nchildren++;
    np->nchildren++;
    if (dst)
        detach(t, dst);
    if (src) {
        detach(t, src);
        attach(t, src, np, newname);
    }
    if (dst && exchange)
        attach(t, dst, op, oldname);
    op->nchildren--;
    np->nchildren--;
    if (dst && !exchange)
        maybe_free(t, dst);
    maybe_free(t, op);
    if (np != op)
        maybe_free(t, np);
out:
    pthread_mutex_unlock(&t->lock);
}

uint64_t cl_itable_resolve(struct cl_itable *t, const char *path)
{
    char name[256];
    pthread_mutex_lock(&t->lock);
    struct ino *i = t->root;
    const char *p = path;
    while (i && *p) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        if (n >= sizeof(name)) {
            i = NULL;
            break;
        }
        memcpy(name, p, n);
        name[n] = 0;
        i = find_name(t, i, name);
        p += n;
    }
    uint64_t id = i ? i->nodeid : 0;
    pthread_mutex_unlock(&t->lock);
    return id;
}

size_t cl_itable_names(struct cl_itable *t, uint64_t parent_id, struct cl_itable_name **out)
{
    *out = NULL;
    pthread_mutex_lock(&t->lock);
    struct ino *parent = parent_id ? find_id(t, parent_id) : NULL;
    size_t cap = parent_id ? (parent ? parent->nchildren : 0) : t->count;
    size_t n = 0;
    struct cl_itable_name *v = cap ? calloc(cap, sizeof(*v)) : NULL;
    for (size_t k = 0; v && k < t->by_id.n && n < cap; k++) {
        for (struct ino *i = t->by_id.b[k]; i && n < cap; i = i->next_id) {
            if (parent_id && i->parent != parent)
                continue;
            if (!parent_id && !i->parent && i != t->root)
                continue;
            v[n].nodeid = i->nodeid;
            v[n].parent = i->parent ? i->parent->nodeid : 0;
            if (i->name && !(v[n].name = strdup(i->name)))
                continue;
            n++;
        }
    }
    pthread_mutex_unlock(&t->lock);
    *out = v;
    return n;
}

void cl_itable_names_free(struct cl_itable_name *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

size_t cl_itable_count(struct cl_itable *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->count;
    pthread_mutex_unlock(&t->lock);
    return n;
}

uint64_t cl_itable_child(struct cl_itable *t, uint64_t parent_id, const char *name)
{
    pthread_mutex_lock(&t->lock);
    struct ino *parent = find_id(t, parent_id);
    struct ino *i = parent ? find_name(t, parent, name) : NULL;
    uint64_t id = i ? i->nodeid : 0;
    pthread_mutex_unlock(&t->lock);
    return id;
}

int cl_itable_open_fh(struct cl_itable *t, uint64_t nodeid, uint64_t fh)
{
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (!i) {
        rc = -ENOENT;
    } else if (i->n_fh == i->cap_fh) {
        size_t cap = i->cap_fh ? i->cap_fh * 2 : 2;
        uint64_t *fhs = realloc(i->fhs, cap * sizeof(*fhs));
        if (!fhs)
            rc = -ENOMEM;
        else {
            i->fhs = fhs;
            i->cap_fh = cap;
        }
    }
    if (rc == 0)
        i->fhs[i->n_fh++] = fh;
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void cl_itable_close_fh(struct cl_itable *t, uint64_t nodeid, uint64_t fh)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    for (size_t k = 0; i && k < i->n_fh; k++)
        if (i->fhs[k] == fh) {
            i->fhs[k] = i->fhs[--i->n_fh];
            break;
        }
    pthread_mutex_unlock(&t->lock);
}

void cl_itable_mark_locked(struct cl_itable *t, uint64_t nodeid)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (i)
        i->locked = 1;
    pthread_mutex_unlock(&t->lock);
}

int cl_itable_was_locked(struct cl_itable *t, uint64_t nodeid)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    int r = !i || i->locked;
    pthread_mutex_unlock(&t->lock);
    return r;
}

int cl_itable_any_fh(struct cl_itable *t, uint64_t nodeid, uint64_t *fh)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (i && i->n_fh) {
        *fh = i->fhs[i->n_fh - 1];
        rc = 0;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}
