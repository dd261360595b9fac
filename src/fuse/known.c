/* What a mount knows for sure under its leases, beyond the kernel's caches
 * (docs/consistency.md, "Answers without the brick"):
 *
 * - Complete directories: a directory this mount made while holding a lease
 *   on it starts empty, and every name added or removed since went through
 *   this mount. While the lease holds, a lookup of a name it does not list
 *   is answered "no such entry" here; copying or unpacking a tree then
 *   costs no lookup round trip per file.
 * - Files without security.capability: a file this mount created under a
 *   lease has none, and the kernel asks for it before every write.
 * - Absent extended attributes: `ls -l` asks for two per entry (an SELinux
 *   label, an ACL) on every listing; an absence the brick reported under
 *   a lease is kept for the next one.
 * - Directory attributes: each change of a directory's entries makes the
 *   kernel drop its attributes and ask again at the next permission check;
 *   the brick's reply to the change (asked with a lease) carries the
 *   directory's new attributes, kept here for that question.
 *
 * Everything about an object is forgotten when its lease is recalled, when
 * this mount renames it, and when a brick connection drops. Bounded: past
 * KNOWN_MAX names everything is forgotten (which only costs lookups). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"

#define KNOWN_MAX (1u << 20)

struct kname {
    struct kname *next;
    uint64_t hash;
    char name[];
};

struct kdir {
    struct kdir *next;
    uint64_t id;
    int excl; /* the lease on it is exclusive (write-back, wb.c) */
    int acl;  /* 0 unknown, 1 no default ACL, 2 a default ACL */
    struct kname **b;
    size_t nb, n;
};

struct knode {
    struct knode *next;
    uint64_t id;
};

struct kattr {
    struct kattr *next;
    uint64_t id;
    struct stat st;
};

/* An extended attribute known to be absent from node id. */
struct kxa {
    struct kxa *next;
    uint64_t id;
    char name[];
};

struct cf_known {
    pthread_mutex_t lock;
    struct kdir *dirs[1024];
    struct knode *nocaps[1024];
    struct kattr *attrs[1024];
    struct kxa *noxattr[1024];
    size_t total;
};

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h ^ (h >> 31);
}

static size_t slot(uint64_t id)
{
    return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 54); /* 1024 buckets */
}

int cf_known_init(struct cf *cf)
{
    struct cf_known *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    pthread_mutex_init(&k->lock, NULL);
    cf->known = k;
    return 0;
}

static void dir_free(struct cf_known *k, struct kdir *d)
{
    for (size_t i = 0; i < d->nb; i++)
        for (struct kname *n = d->b[i], *nx; n; n = nx) {
            nx = n->next;
            free(n);
        }
    k->total -= d->n;
    free(d->b);
    free(d);
}

static void clear_all(struct cf_known *k)
{
    for (size_t i = 0; i < 1024; i++) {
        for (struct kdir *d = k->dirs[i], *nx; d; d = nx) {
            nx = d->next;
            dir_free(k, d);
        }
        k->dirs[i] = NULL;
        for (struct knode *n = k->nocaps[i], *nx; n; n = nx) {
            nx = n->next;
            free(n);
        }
        k->nocaps[i] = NULL;
        for (struct kattr *a = k->attrs[i], *nx; a; a = nx) {
            nx = a->next;
            free(a);
        }
        k->attrs[i] = NULL;
        for (struct kxa *x = k->noxattr[i], *nx; x; x = nx) {
            nx = x->next;
            free(x);
        }
        k->noxattr[i] = NULL;
    }
    k->total = 0;
}

void cf_known_free(struct cf *cf)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    clear_all(k);
    pthread_mutex_destroy(&k->lock);
    free(k);
    cf->known = NULL;
}

static struct kdir **find_dir(struct cf_known *k, uint64_t id)
{
    struct kdir **pp = &k->dirs[slot(id)];
    while (*pp && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

static struct kname **find_name(struct kdir *d, const char *name, uint64_t h)
{
    struct kname **pp = &d->b[h & (d->nb - 1)];
    while (*pp && ((*pp)->hash != h || strcmp((*pp)->name, name)))
        pp = &(*pp)->next;
    return pp;
}

static void grow(struct kdir *d)
{
    size_t nb = d->nb * 2;
    struct kname **b = calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < d->nb; i++)
        for (struct kname *n = d->b[i], *nx; n; n = nx) {
            nx = n->next;
            n->next = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
        }
    free(d->b);
    d->b = b;
    d->nb = nb;
}

void cf_known_dir_made(struct cf *cf, uint64_t dir, int excl)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct kdir **pp = find_dir(k, dir);
    if (!*pp) {
        struct kdir *d = calloc(1, sizeof(*d));
        if (d && (d->b = calloc(8, sizeof(*d->b)))) {
            d->id = dir;
            d->nb = 8;
            d->excl = excl;
            *pp = d;
        } else {
            free(d);
        }
    }
    pthread_mutex_unlock(&k->lock);
}

void cf_known_add(struct cf *cf, uint64_t dir, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct kdir *d = *find_dir(k, dir);
    if (d) {
        uint64_t h = hash_name(name);
        struct kname **pp = find_name(d, name, h);
        if (!*pp) {
            size_t len = strlen(name);
            struct kname *n = malloc(sizeof(*n) + len + 1);
            if (!n || k->total >= KNOWN_MAX) {
                /* Cannot track it: the directory stops being complete. */
                free(n);
                *find_dir(k, dir) = d->next;
                dir_free(k, d);
                if (k->total >= KNOWN_MAX)
                    clear_all(k);
            } else {
                n->hash = h;
                memcpy(n->name, name, len + 1);
                n->next = NULL;
                *pp = n;
                d->n++;
                k->total++;
                if (d->n > d->nb)
                    grow(d);
            }
        }
    }
    pthread_mutex_unlock(&k->lock);
}

void cf_known_remove(struct cf *cf, uint64_t dir, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct kdir *d = *find_dir(k, dir);
    if (d) {
        struct kname **pp = find_name(d, name, hash_name(name));
        if (*pp) {
            struct kname *n = *pp;
            *pp = n->next;
            free(n);
            d->n--;
            k->total--;
        }
    }
    pthread_mutex_unlock(&k->lock);
}

int cf_known_excl(struct cf *cf, uint64_t dir)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct kdir *d = *find_dir(k, dir);
    int excl = d && d->excl;
    pthread_mutex_unlock(&k->lock);
    return excl;
}

int cf_known_dir_acl(struct cf *cf, uint64_t dir)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct kdir *d = *find_dir(k, dir);
    int acl = d ? d->acl : 0;
    pthread_mutex_unlock(&k->lock);
    return acl;
}

void cf_known_set_dir_acl(struct cf *cf, uint64_t dir, int acl)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct kdir *d = *find_dir(k, dir);
    if (d)
        d->acl = acl;
    pthread_mutex_unlock(&k->lock);
}

int cf_known_absent(struct cf *cf, uint64_t dir, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct kdir *d = *find_dir(k, dir);
    int absent = d && !*find_name(d, name, hash_name(name));
    pthread_mutex_unlock(&k->lock);
    return absent;
}

void cf_known_nocaps(struct cf *cf, uint64_t node)
{
    struct cf_known *k = cf->known;
    struct knode *n = k ? malloc(sizeof(*n)) : NULL;
    if (!n)
        return;
    n->id = node;
    pthread_mutex_lock(&k->lock);
    n->next = k->nocaps[slot(node)];
    k->nocaps[slot(node)] = n;
    pthread_mutex_unlock(&k->lock);
}

int cf_known_has_nocaps(struct cf *cf, uint64_t node)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *n = k->nocaps[slot(node)];
    while (n && n->id != node)
        n = n->next;
    pthread_mutex_unlock(&k->lock);
    return n != NULL;
}

static void attr_drop(struct cf_known *k, uint64_t node)
{
    for (struct kattr **pp = &k->attrs[slot(node)]; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == node) {
            struct kattr *a = *pp;
            *pp = a->next;
            free(a);
            return;
        }
    }
}

void cf_known_set_attr(struct cf *cf, uint64_t node, const struct stat *st)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct kattr *a = k->attrs[slot(node)];
    while (a && a->id != node)
        a = a->next;
    if (!a && (a = malloc(sizeof(*a)))) {
        a->id = node;
        a->next = k->attrs[slot(node)];
        k->attrs[slot(node)] = a;
    }
    if (a)
        a->st = *st;
    pthread_mutex_unlock(&k->lock);
}

int cf_known_attr(struct cf *cf, uint64_t node, struct stat *st)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct kattr *a = k->attrs[slot(node)];
    while (a && a->id != node)
        a = a->next;
    if (a)
        *st = a->st;
    pthread_mutex_unlock(&k->lock);
    return a != NULL;
}

void cf_known_forget_attr(struct cf *cf, uint64_t node)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    attr_drop(k, node);
    pthread_mutex_unlock(&k->lock);
}

static void xattrs_drop(struct cf_known *k, uint64_t node)
{
    for (struct kxa **pp = &k->noxattr[slot(node)]; *pp;) {
        if ((*pp)->id == node) {
            struct kxa *x = *pp;
            *pp = x->next;
            free(x);
            k->total--;
        } else {
            pp = &(*pp)->next;
        }
    }
}

void cf_known_noxattr(struct cf *cf, uint64_t node, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k || cf_known_xattr_absent(cf, node, name))
        return;
    size_t len = strlen(name);
    struct kxa *x = malloc(sizeof(*x) + len + 1);
    if (!x)
        return;
    x->id = node;
    memcpy(x->name, name, len + 1);
    pthread_mutex_lock(&k->lock);
    if (k->total >= KNOWN_MAX) {
        pthread_mutex_unlock(&k->lock);
        free(x);
        return;
    }
    x->next = k->noxattr[slot(node)];
    k->noxattr[slot(node)] = x;
    k->total++;
    pthread_mutex_unlock(&k->lock);
}

int cf_known_xattr_absent(struct cf *cf, uint64_t node, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct kxa *x = k->noxattr[slot(node)];
    while (x && (x->id != node || strcmp(x->name, name)))
        x = x->next;
    pthread_mutex_unlock(&k->lock);
    return x != NULL;
}

void cf_known_forget_xattrs(struct cf *cf, uint64_t node)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    xattrs_drop(k, node);
    pthread_mutex_unlock(&k->lock);
}

void cf_known_forget(struct cf *cf, uint64_t node)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    attr_drop(k, node);
    xattrs_drop(k, node);
    struct kdir **dp = find_dir(k, node);
    if (*dp) {
        struct kdir *d = *dp;
        *dp = d->next;
        dir_free(k, d);
    }
    for (struct knode **pp = &k->nocaps[slot(node)]; *pp;) {
        if ((*pp)->id == node) {
            struct knode *n = *pp;
            *pp = n->next;
            free(n);
        } else {
            pp = &(*pp)->next;
        }
    }
    pthread_mutex_unlock(&k->lock);
}

void cf_known_forget_all(struct cf *cf)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    clear_all(k);
    pthread_mutex_unlock(&k->lock);
}
