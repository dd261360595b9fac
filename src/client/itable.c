/* Inode table: three chained hash indexes over one set of inodes. */
#include "itable.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/statedump.h"

#define MAX_DEPTH 2048

struct ino;

/* One name of an inode: a directory has at most one, a file one per hard
 * link the mount has met (the kernel keeps a dentry for each). */
struct iname {
    struct ino *ino, *parent;
    struct iname *next_name;  /* the by-name chain */
    struct iname *next_alias; /* the inode's next name */
    char name[];
};

struct ino {
    uint64_t nodeid;
    gfid_t gfid;
    struct iname *names; /* NULL for the root and once every name is removed;
                          * paths go through the first, the latest met */
    uint64_t nlookup, nchildren;
    uint64_t nlink; /* the link count a reply last gave, 0 when none did */
    uint64_t *fhs;  /* open file handles, for attribute calls once unlinked */
    size_t n_fh, cap_fh;
    int locked;  /* a SETLK went out for it (cl_itable_mark_locked) */
    int kind;    /* 0 unknown, 1 not a directory, 2 a directory */
    mode_t type; /* its file type (S_IFMT bits), 0 when not known */
    struct ino *next_id, *next_gfid;
};

struct index {
    void **b;
    size_t n; /* buckets, a power of two */
};

struct cl_itable {
    pthread_mutex_t lock;
    struct index by_id, by_gfid, by_name; /* inodes, inodes, names */
    size_t count, nnames;
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

/* The three indexes chain through a pointer at offset `which` of what they
 * hold (an inode for by_id and by_gfid, a name for by_name). */
#define NEXT(x, which) (*(void **)((char *)(x) + (which)))
#define OFF_ID offsetof(struct ino, next_id)
#define OFF_GFID offsetof(struct ino, next_gfid)
#define OFF_NAME offsetof(struct iname, next_name)
_Static_assert(OFF_NAME != OFF_ID && OFF_NAME != OFF_GFID, "key_of tells the indexes apart");

static uint64_t key_of(const void *x, size_t which)
{
    if (which == OFF_NAME) {
        const struct iname *n = x;
        return hash_name(n->parent->nodeid, n->name);
    }
    const struct ino *i = x;
    return which == OFF_ID ? mix(i->nodeid) : hash_gfid(&i->gfid);
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
    void **b = calloc(n, sizeof(*b));
    if (!b)
        return; /* keep the longer chains */
    for (size_t k = 0; k < x->n; k++) {
        void *i = x->b[k];
        while (i) {
            void *next = NEXT(i, which);
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

static void index_add(struct index *x, size_t which, void *i)
{
    size_t h = key_of(i, which) & (x->n - 1);
    NEXT(i, which) = x->b[h];
    x->b[h] = i;
}

static void index_del(struct index *x, size_t which, void *i)
{
    void **pp = &x->b[key_of(i, which) & (x->n - 1)];
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

static struct iname *find_name(struct cl_itable *t, struct ino *parent, const char *name)
{
    size_t h = hash_name(parent->nodeid, name) & (t->by_name.n - 1);
    for (struct iname *n = t->by_name.b[h]; n; n = n->next_name)
        if (n->parent == parent && strcmp(n->name, name) == 0)
            return n;
    return NULL;
}

/* The inode named name in parent, or NULL. */
static struct ino *child_of(struct cl_itable *t, struct ino *parent, const char *name)
{
    struct iname *n = parent ? find_name(t, parent, name) : NULL;
    return n ? n->ino : NULL;
}

static size_t count_names(const struct ino *i)
{
    size_t k = 0;
    for (const struct iname *n = i->names; n; n = n->next_alias)
        k++;
    return k;
}

/* Takes name n away from its inode and frees it; the parent's count drops
 * but the parent is not freed here (callers call maybe_free). */
static void unhook(struct cl_itable *t, struct iname *n)
{
    index_del(&t->by_name, OFF_NAME, n);
    for (struct iname **pp = &n->ino->names; *pp; pp = &(*pp)->next_alias)
        if (*pp == n) {
            *pp = n->next_alias;
            break;
        }
    n->parent->nchildren--;
    t->nnames--;
    free(n);
}

static void maybe_free(struct cl_itable *t, struct ino *i);

/* Removes name n of its inode; may free its former parent. */
static void detach(struct cl_itable *t, struct iname *n)
{
    struct ino *parent = n->parent;
    unhook(t, n);
    maybe_free(t, parent);
}

/* Removes every name of i (a directory's one). */
static void detach_all(struct cl_itable *t, struct ino *i)
{
    while (i->names)
        detach(t, i->names);
}

static void maybe_free(struct cl_itable *t, struct ino *i)
{
    while (i && i != t->root && i->nlookup == 0 && i->nchildren == 0) {
        /* A file's other names first: their directories may go too. The
         * first name goes last, keeping its parent alive until then. */
        struct ino *up = i->names ? i->names->parent : NULL;
        while (i->names && i->names->next_alias) {
            struct ino *p = i->names->next_alias->parent;
            unhook(t, i->names->next_alias);
            if (p != up)
                maybe_free(t, p);
        }
        if (i->names)
            unhook(t, i->names);
        index_del(&t->by_id, OFF_ID, i);
        index_del(&t->by_gfid, OFF_GFID, i);
        free(i->fhs);
        free(i);
        t->count--;
        i = up;
    }
}

/* Gives i the name (parent, name), first among its names; the caller
 * checked that nothing holds it. */
static int attach(struct cl_itable *t, struct ino *i, struct ino *parent, const char *name)
{
    size_t len = strlen(name) + 1;
    struct iname *n = malloc(sizeof(*n) + len);
    if (!n)
        return -ENOMEM;
    memcpy(n->name, name, len);
    n->ino = i;
    n->parent = parent;
    n->next_alias = i->names;
    i->names = n;
    parent->nchildren++;
    index_add(&t->by_name, OFF_NAME, n);
    if (++t->nnames > t->by_name.n)
        index_grow(&t->by_name, OFF_NAME);
    return 0;
}

/* Makes n the first of its inode's names: paths go through it. */
static void make_first(struct iname *n)
{
    struct ino *i = n->ino;
    for (struct iname **pp = &i->names; *pp; pp = &(*pp)->next_alias)
        if (*pp == n) {
            *pp = n->next_alias;
            break;
        }
    n->next_alias = i->names;
    i->names = n;
}

static int is_ancestor(struct ino *a, struct ino *i)
{
    for (int d = 0; i && d < MAX_DEPTH; i = i->names ? i->names->parent : NULL, d++)
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
    t->root->kind = 2;
    t->root->type = S_IFDIR;
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
    for (size_t k = 0; k < t->by_name.n; k++)
        for (struct iname *n = t->by_name.b[k], *next; n; n = next) {
            next = n->next_name;
            free(n);
        }
    for (size_t k = 0; k < t->by_id.n; k++) {
        struct ino *i = t->by_id.b[k];
        while (i) {
            struct ino *next = i->next_id;
            free(i->fhs);
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
        }
    }
    i->nlookup++;
    if (i != t->root) {
        i->kind = type == S_IFDIR ? 2 : 1;
        if (type)
            i->type = type;
        else if (i->type == S_IFDIR)
            i->type = 0; /* not a directory after all */
    }
    struct iname *n = find_name(t, parent, name);
    if (n && n->ino == i) {
        make_first(n);
    } else if (i != t->root && !is_ancestor(i, parent)) {
        parent->nchildren++; /* keep parent alive while names go */
        if (n) {
            /* Whatever else carried this name is not there any more. */
            struct ino *other = n->ino;
            unhook(t, n);
            maybe_free(t, other);
        }
        /* A directory has one name (another client renamed it); a file
         * keeps the others: each is a hard link the kernel may use. */
        if (i->kind == 2)
            detach_all(t, i);
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

/* The path of i (NULL: -ENOENT) plus "/name" into buf; under t->lock. */
static int path_of(struct cl_itable *t, struct ino *i, const char *name, char *buf, size_t len)
{
    const char *parts[MAX_DEPTH];
    int n = 0;
    if (name)
        parts[n++] = name;
    if (!i)
        return -ENOENT;
    for (; i != t->root; i = i->names->parent) {
        if (!i->names)
            return -ENOENT;
        if (n == MAX_DEPTH)
            return -ENAMETOOLONG;
        parts[n++] = i->names->name;
    }
    size_t pos = 0;
    if (n == 0) {
        if (len < 2)
            return -ENAMETOOLONG;
        buf[pos++] = '/';
    }
    while (n > 0) {
        const char *s = parts[--n];
        size_t l = strlen(s);
        if (pos + 1 + l + 1 > len)
            return -ENAMETOOLONG;
        buf[pos++] = '/';
        memcpy(buf + pos, s, l);
        pos += l;
    }
    buf[pos] = 0;
    return 0;
}

int cl_itable_path(struct cl_itable *t, uint64_t nodeid, const char *name, char *buf, size_t len)
{
    pthread_mutex_lock(&t->lock);
    int rc = path_of(t, find_id(t, nodeid), name, buf, len);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

long cl_itable_path_len(struct cl_itable *t, uint64_t nodeid, const char *name)
{
    long len = name ? 1 + (long)strlen(name) : 0;
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    int d = 0;
    /* through the name paths take (the first, met last) */
    for (; i && i != t->root && i->names && d < MAX_DEPTH; i = i->names->parent, d++)
        len += 1 + (long)strlen(i->names->name);
    if (!i || (i != t->root && !i->names))
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
    uint64_t p = i && i->names ? i->names->parent->nodeid : 0;
    pthread_mutex_unlock(&t->lock);
    return p;
}

void cl_itable_set_nlink(struct cl_itable *t, uint64_t nodeid, uint64_t nlink)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (i)
        i->nlink = nlink;
    pthread_mutex_unlock(&t->lock);
}

uint64_t cl_itable_nlink(struct cl_itable *t, uint64_t nodeid)
{
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    uint64_t names = i ? count_names(i) : 0, nlink = i ? i->nlink : 0;
    pthread_mutex_unlock(&t->lock);
    return names > 1 && names > nlink ? names : nlink;
}

void cl_itable_unlink(struct cl_itable *t, uint64_t parent_id, const char *name)
{
    pthread_mutex_lock(&t->lock);
    struct ino *parent = find_id(t, parent_id);
    struct iname *n = parent ? find_name(t, parent, name) : NULL;
    if (n) {
        struct ino *i = n->ino;
        detach(t, n);
        maybe_free(t, i);
    }
    pthread_mutex_unlock(&t->lock);
}

int cl_itable_forget_alias(struct cl_itable *t, uint64_t parent_id, const char *name)
{
    int dropped = 0;
    pthread_mutex_lock(&t->lock);
    struct ino *parent = find_id(t, parent_id);
    struct iname *n = parent ? find_name(t, parent, name) : NULL;
    if (n && n->ino->kind == 1 && (n->ino->names != n || n->next_alias)) {
        struct ino *i = n->ino;
        detach(t, n);
        maybe_free(t, i);
        dropped = 1;
    }
    pthread_mutex_unlock(&t->lock);
    return dropped;
}

int cl_itable_demote_path(struct cl_itable *t, uint64_t nodeid, const char *path)
{
    char *now = malloc(PATH_MAX);
    int moved = 0;
    pthread_mutex_lock(&t->lock);
    struct ino *i = find_id(t, nodeid);
    if (now && i && i->kind == 1 && i->names && i->names->next_alias &&
        path_of(t, i, NULL, now, PATH_MAX) == 0 && strcmp(now, path) == 0) {
        struct iname *n = i->names, **pp = &n->next_alias;
        i->names = n->next_alias;
        while (*pp)
            pp = &(*pp)->next_alias;
        *pp = n;
        n->next_alias = NULL;
        moved = 1;
    }
    pthread_mutex_unlock(&t->lock);
    free(now);
    return moved;
}

void cl_itable_rename(struct cl_itable *t, uint64_t oldparent_id, const char *oldname,
                      uint64_t newparent_id, const char *newname, int exchange)
{
    pthread_mutex_lock(&t->lock);
    struct ino *op = find_id(t, oldparent_id), *np = find_id(t, newparent_id);
    struct iname *src = op ? find_name(t, op, oldname) : NULL;
    struct iname *dst = np ? find_name(t, np, newname) : NULL;
    /* Two names of one file: rename does nothing (POSIX). */
    if (!op || !np || (!src && !dst) || (src && dst && src->ino == dst->ino))
        goto out;
    struct ino *si = src ? src->ino : NULL, *di = dst ? dst->ino : NULL;
    /* Pin both parents: taking names away may otherwise free them. */
    op->nchildren++;
    np->nchildren++;
    if (dst)
        unhook(t, dst);
    if (src) {
        unhook(t, src);
        attach(t, si, np, newname);
    }
    if (di && exchange)
        attach(t, di, op, oldname);
    op->nchildren--;
    np->nchildren--;
    if (di && !exchange)
        maybe_free(t, di);
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
        i = child_of(t, i, name);
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
    size_t cap = parent_id ? (parent ? parent->nchildren : 0) : t->nnames + 1;
    size_t n = 0;
    struct cl_itable_name *v = cap ? calloc(cap, sizeof(*v)) : NULL;
    if (v && !parent_id)
        v[n++] = (struct cl_itable_name){.parent = 0, .nodeid = CL_ROOT_ID, .name = NULL};
    for (size_t k = 0; v && k < t->by_name.n && n < cap; k++) {
        for (struct iname *x = t->by_name.b[k]; x && n < cap; x = x->next_name) {
            if (parent_id && x->parent != parent)
                continue;
            v[n].nodeid = x->ino->nodeid;
            v[n].parent = x->parent->nodeid;
            if (!(v[n].name = strdup(x->name)))
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
    struct ino *i = child_of(t, find_id(t, parent_id), name);
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

void cl_itable_dump_open(struct cl_itable *t, FILE *f)
{
    if (sd_section(f, "client.open", &t->lock) < 0)
        return;
    fprintf(f, "inodes=%zu\nnames=%zu\n", t->count, t->nnames);
    size_t open = 0;
    for (size_t k = 0; k < t->by_id.n; k++)
        for (struct ino *i = t->by_id.b[k]; i; i = i->next_id) {
            if (!i->n_fh)
                continue;
            open++;
            char g[GFID_STRLEN], path[PATH_MAX];
            gfid_format(&i->gfid, g);
            if (path_of(t, i, NULL, path, sizeof(path)) < 0)
                snprintf(path, sizeof(path), "(no name: removed)");
            fprintf(f, "node=%llu gfid=%s path=%s handles=%zu%s", (unsigned long long)i->nodeid, g,
                    path, i->n_fh, i->locked ? " locked" : "");
            for (size_t h = 0; h < i->n_fh; h++)
                fprintf(f, " fh=%llx", (unsigned long long)i->fhs[h]);
            fputc('\n', f);
        }
    fprintf(f, "nodes-open=%zu\n", open);
    pthread_mutex_unlock(&t->lock);
}
