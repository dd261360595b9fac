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
 *   label, an ACL) on every listing. An object the brick reported without
 *   any (in a lookup, create or readdirplus entry asked with a lease) has
 *   none of them; a single absence a brick reported is kept too.
 * - Leased directories: the kernel may keep a directory's listing between
 *   opens (FOPEN_CACHE_DIR) while a lease covers its entries; the recall
 *   drops that cache (docs/consistency.md, "Listings").
 * - Directory attributes: each change of a directory's entries makes the
 *   kernel drop its attributes and ask again at the next permission check;
 *   the brick's reply to the change (asked with a lease) carries the
 *   directory's new attributes, kept here for that question.
 *
 * One record per node holds all of it; a complete directory holds its node
 * in the inode table (cl_itable_hold) so that its node id survives the
 * kernel forgetting it. Everything about an object is
 * forgotten when its lease is recalled, when this mount renames it, and when
 * a brick connection drops, and a record goes when the kernel forgets its
 * node (node ids are never reused). Bounded: past KNOWN_MAX records and
 * names everything is forgotten (which only costs round trips). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/statedump.h"
#include "bridge.h"

#define KNOWN_MAX (1u << 20)
#define SLOTS_MIN 1024

enum {
    K_COMPLETE = 1 << 0, /* a directory with every entry in names */
    K_EXCL = 1 << 1,     /* ... under an exclusive lease (write-back, wb.c) */
    K_NOCAPS = 1 << 2,   /* no security.capability */
    K_ATTR = 1 << 3,     /* st is current */
    K_NOXATTRS = 1 << 4, /* no extended attributes at all */
    K_LEASED = 1 << 5,   /* a reply under a lease named it (its entries too) */
    K_LISTED = 1 << 6,   /* the kernel's listing cache was started under it */
    K_NOSETID = 1 << 7,  /* made here without set-id bits, none set since */
    K_FEXCL = 1 << 8,    /* a file under an exclusive lease (write-behind) */
};

struct kname {
    struct kname *next;
    uint64_t hash;
    uint64_t ino; /* an entry's inode number (d_ino) and file type, */
    mode_t type;  /* 0 when not known (its directory is not listed here) */
    char name[];
};

struct knode {
    struct knode *next;
    uint64_t id;
    unsigned flags;
    int pinned;           /* K_COMPLETE: one itable lookup held (see dir_made) */
    int acl;              /* K_COMPLETE: 0 unknown, 1 no default ACL, 2 one */
    struct stat st;       /* K_ATTR */
    struct kname *absent; /* extended attributes known absent */
    struct kname **b;     /* K_COMPLETE: the entries, nb buckets */
    size_t nb, n;
    size_t untyped, bytes; /* K_COMPLETE: entries of unknown type; names' bytes */
};

struct cf_known {
    struct cl_itable *it;
    pthread_mutex_t lock;
    struct knode **slots;
    size_t nslots; /* a power of two, at least SLOTS_MIN */
    size_t nodes;  /* records */
    size_t total;  /* records and names */
};

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h ^ (h >> 31);
}

static size_t slot(const struct cf_known *k, uint64_t id)
{
    return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (k->nslots - 1);
}

int cf_known_init(struct cf *cf)
{
    struct cf_known *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->nslots = SLOTS_MIN;
    if (!(k->slots = calloc(k->nslots, sizeof(*k->slots)))) {
        free(k);
        return -ENOMEM;
    }
    pthread_mutex_init(&k->lock, NULL);
    k->it = cf->it;
    cf->known = k;
    return 0;
}

static struct kname *name_new(const char *name, uint64_t h)
{
    size_t len = strlen(name);
    struct kname *n = malloc(sizeof(*n) + len + 1);
    if (n) {
        n->hash = h;
        n->next = NULL;
        n->ino = 0;
        n->type = 0;
        memcpy(n->name, name, len + 1);
    }
    return n;
}

static size_t names_free(struct kname *n)
{
    size_t count = 0;
    for (struct kname *nx; n; n = nx, count++) {
        nx = n->next;
        free(n);
    }
    return count;
}

static void dir_clear(struct cf_known *k, struct knode *d)
{
    for (size_t i = 0; i < d->nb; i++)
        names_free(d->b[i]);
    k->total -= d->n;
    free(d->b);
    d->b = NULL;
    d->nb = d->n = 0;
    d->untyped = d->bytes = 0;
    d->acl = 0;
    d->flags &= ~(unsigned)(K_COMPLETE | K_EXCL);
    if (d->pinned) {
        d->pinned = 0;
        cl_itable_forget(k->it, d->id, 1); /* the table is a leaf: no lock order issue */
    }
}

static void xattrs_clear(struct cf_known *k, struct knode *x)
{
    k->total -= names_free(x->absent);
    x->absent = NULL;
    x->flags &= ~(unsigned)K_NOXATTRS;
    x->acl = 0; /* a default ACL may have come or gone: ask again */
}

static void node_free(struct cf_known *k, struct knode *x)
{
    dir_clear(k, x);
    xattrs_clear(k, x);
    k->total--;
    k->nodes--;
    free(x);
}

static void clear_all(struct cf_known *k)
{
    for (size_t i = 0; i < k->nslots; i++) {
        for (struct knode *x = k->slots[i], *nx; x; x = nx) {
            nx = x->next;
            node_free(k, x);
        }
        k->slots[i] = NULL;
    }
    k->total = k->nodes = 0;
}

void cf_known_free(struct cf *cf)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    clear_all(k);
    pthread_mutex_destroy(&k->lock);
    free(k->slots);
    free(k);
    cf->known = NULL;
}

static struct knode **find(struct cf_known *k, uint64_t id)
{
    struct knode **pp = &k->slots[slot(k, id)];
    while (*pp && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

/* Twice the slots when records outnumber them two to one (kept as is
 * when memory is short: chains only get longer). */
static void grow_slots(struct cf_known *k)
{
    size_t old = k->nslots;
    struct knode **was = k->slots;
    struct knode **b = calloc(old * 2, sizeof(*b));
    if (!b)
        return;
    k->slots = b;
    k->nslots = old * 2;
    for (size_t i = 0; i < old; i++)
        for (struct knode *x = was[i], *nx; x; x = nx) {
            nx = x->next;
            x->next = b[slot(k, x->id)];
            b[slot(k, x->id)] = x;
        }
    free(was);
}

/* The record of id, made when absent and create is set (NULL when it
 * cannot be). Past the bound everything is forgotten first. */
static struct knode *get(struct cf_known *k, uint64_t id, int create)
{
    struct knode *x = *find(k, id);
    if (x || !create)
        return x;
    if (k->total >= KNOWN_MAX)
        clear_all(k);
    if (!(x = calloc(1, sizeof(*x))))
        return NULL;
    if (k->nodes >= 2 * k->nslots)
        grow_slots(k);
    x->id = id;
    x->next = k->slots[slot(k, id)];
    k->slots[slot(k, id)] = x;
    k->total++;
    k->nodes++;
    return x;
}

/* Drops the record of id when it no longer says anything. */
static void trim(struct cf_known *k, uint64_t id)
{
    struct knode **pp = find(k, id);
    if (*pp && !(*pp)->flags && !(*pp)->absent) {
        struct knode *x = *pp;
        *pp = x->next;
        node_free(k, x);
    }
}

static struct kname **find_name(struct knode *d, const char *name, uint64_t h)
{
    struct kname **pp = &d->b[h & (d->nb - 1)];
    while (*pp && ((*pp)->hash != h || strcmp((*pp)->name, name)))
        pp = &(*pp)->next;
    return pp;
}

static void grow(struct knode *d)
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
    struct knode *d = get(k, dir, 1);
    if (d && !(d->flags & K_COMPLETE) && (d->b = calloc(8, sizeof(*d->b)))) {
        d->nb = 8;
        d->flags |= K_COMPLETE | (excl ? K_EXCL : 0);
        /* The directory keeps its node id while it is complete: a recall
         * of its parent makes the kernel forget its entry, and the next
         * lookup must find this record again (and a recall of the
         * directory itself must find its path). */
        d->pinned = k->it && cl_itable_hold(k->it, dir) == 0;
    }
    pthread_mutex_unlock(&k->lock);
}

void cf_known_add(struct cf *cf, uint64_t dir, const char *name, const struct stat *st)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    if (d && (d->flags & K_COMPLETE)) {
        uint64_t h = hash_name(name);
        struct kname **pp = find_name(d, name, h);
        struct kname *n = *pp;
        if (!n) {
            n = k->total < KNOWN_MAX ? name_new(name, h) : NULL;
            if (!n) {
                /* Cannot track it: the directory stops being complete. */
                dir_clear(k, d);
                trim(k, dir);
            } else {
                *pp = n;
                d->n++;
                d->bytes += strlen(name) + 1;
                d->untyped++; /* until typed below */
                k->total++;
                if (d->n > d->nb)
                    grow(d);
            }
        }
        if (n) { /* new, or another object under the name now */
            int typed = st && st->st_ino && (st->st_mode & S_IFMT);
            d->untyped -= !n->type;
            n->ino = typed ? (uint64_t)st->st_ino : 0;
            n->type = typed ? st->st_mode & S_IFMT : 0;
            d->untyped += !n->type;
        }
    }
    pthread_mutex_unlock(&k->lock);
}

void cf_known_add_node(struct cf *cf, uint64_t dir, const char *name, uint64_t node)
{
    struct stat st;
    gfid_t g;
    memset(&st, 0, sizeof(st));
    if (node && cl_itable_gfid(cf->it, node, &g) == 0) {
        st.st_ino = gfid_ino(&g);
        st.st_mode = cl_itable_type(cf->it, node);
    }
    cf_known_add(cf, dir, name, &st); /* no type known: none recorded */
}

void cf_known_remove(struct cf *cf, uint64_t dir, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    if (d && (d->flags & K_COMPLETE)) {
        struct kname **pp = find_name(d, name, hash_name(name));
        if (*pp) {
            struct kname *n = *pp;
            *pp = n->next;
            d->bytes -= strlen(n->name) + 1;
            d->untyped -= !n->type;
            free(n);
            d->n--;
            k->total--;
        }
    }
    pthread_mutex_unlock(&k->lock);
}

/* The flags of node (0 when nothing is known), and its ACL state. */
static unsigned flags_of(struct cf *cf, uint64_t node, int *acl)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 0);
    unsigned fl = x ? x->flags : 0;
    if (acl)
        *acl = x ? x->acl : 0;
    pthread_mutex_unlock(&k->lock);
    return fl;
}

int cf_known_excl(struct cf *cf, uint64_t dir)
{
    unsigned fl = flags_of(cf, dir, NULL);
    return (fl & K_COMPLETE) && (fl & K_EXCL);
}

int cf_known_dir_acl(struct cf *cf, uint64_t dir)
{
    int acl;
    unsigned fl = flags_of(cf, dir, &acl);
    if (!(fl & K_COMPLETE))
        return 0;
    /* no extended attributes at all: no default ACL either */
    return acl == 0 && (fl & K_NOXATTRS) ? 1 : acl;
}

void cf_known_set_dir_acl(struct cf *cf, uint64_t dir, int acl)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    if (d && (d->flags & K_COMPLETE))
        d->acl = acl;
    pthread_mutex_unlock(&k->lock);
}

int cf_known_absent(struct cf *cf, uint64_t dir, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    int absent = d && (d->flags & K_COMPLETE) && !*find_name(d, name, hash_name(name));
    pthread_mutex_unlock(&k->lock);
    return absent;
}

int cf_known_dir_empty(struct cf *cf, uint64_t dir)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    int empty = d && (d->flags & K_COMPLETE) && d->n == 0;
    pthread_mutex_unlock(&k->lock);
    return empty;
}

/* Whether a complete directory's entries can be listed here: every one of
 * a known type. Under k->lock. */
static int listable(const struct knode *d)
{
    return d && (d->flags & K_COMPLETE) && d->untyped == 0;
}

struct cf_known_list *cf_known_list(struct cf *cf, uint64_t dir)
{
    struct cf_known *k = cf->known;
    if (!k)
        return NULL;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    struct cf_known_list *l = NULL;
    if (listable(d) && (l = malloc(sizeof(*l) + d->n * sizeof(l->e[0]) + d->bytes))) {
        char *names = (char *)&l->e[d->n];
        l->n = 0;
        for (size_t i = 0; i < d->nb; i++)
            for (const struct kname *n = d->b[i]; n; n = n->next) {
                size_t len = strlen(n->name) + 1;
                memcpy(names, n->name, len);
                l->e[l->n++] = (struct cf_known_ent){.name = names, .ino = n->ino, .type = n->type};
                names += len;
            }
    }
    pthread_mutex_unlock(&k->lock);
    return l;
}

int cf_known_listable(struct cf *cf, uint64_t dir)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    int ok = listable(get(k, dir, 0));
    pthread_mutex_unlock(&k->lock);
    return ok;
}

/* Clears fl (and with xattrs the absent extended attributes) from node's
 * record, dropping the record when nothing is left in it. */
static void clear_flags(struct cf *cf, uint64_t node, unsigned fl, int xattrs)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 0);
    if (x) {
        if (xattrs)
            xattrs_clear(k, x);
        x->flags &= ~fl;
        trim(k, node);
    }
    pthread_mutex_unlock(&k->lock);
}

static void set_flags(struct cf *cf, uint64_t node, unsigned fl)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 1);
    if (x)
        x->flags |= fl;
    pthread_mutex_unlock(&k->lock);
}

void cf_known_file_excl(struct cf *cf, uint64_t node)
{
    set_flags(cf, node, K_FEXCL);
}

void cf_known_file_shared(struct cf *cf, uint64_t node)
{
    clear_flags(cf, node, K_FEXCL, 0);
}

int cf_known_is_file_excl(struct cf *cf, uint64_t node)
{
    return (flags_of(cf, node, NULL) & K_FEXCL) != 0;
}

void cf_known_nocaps(struct cf *cf, uint64_t node)
{
    set_flags(cf, node, K_NOCAPS);
}

void cf_known_nosetid(struct cf *cf, uint64_t node, int nosetid)
{
    if (nosetid)
        set_flags(cf, node, K_NOSETID);
    else
        clear_flags(cf, node, K_NOSETID, 0);
}

int cf_known_has_nosetid(struct cf *cf, uint64_t node)
{
    return (flags_of(cf, node, NULL) & K_NOSETID) != 0;
}

int cf_known_has_nocaps(struct cf *cf, uint64_t node)
{
    return (flags_of(cf, node, NULL) & (K_NOCAPS | K_NOXATTRS)) != 0;
}

void cf_known_set_attr(struct cf *cf, uint64_t node, const struct stat *st)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 1);
    if (x) {
        x->st = *st;
        x->flags |= K_ATTR;
    }
    pthread_mutex_unlock(&k->lock);
}

void cf_known_touch_dir(struct cf *cf, uint64_t dir, int subdir_gone)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, dir, 0);
    if (x && (x->flags & K_ATTR)) {
        x->st.st_mtim = x->st.st_ctim = now;
        if (subdir_gone && x->st.st_nlink > 2)
            x->st.st_nlink--;
    }
    pthread_mutex_unlock(&k->lock);
}

int cf_known_attr(struct cf *cf, uint64_t node, struct stat *st)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 0);
    int ok = x && (x->flags & K_ATTR);
    if (ok)
        *st = x->st;
    pthread_mutex_unlock(&k->lock);
    return ok;
}

void cf_known_forget_attr(struct cf *cf, uint64_t node)
{
    clear_flags(cf, node, K_ATTR, 0);
}

void cf_known_leased(struct cf *cf, uint64_t node)
{
    set_flags(cf, node, K_LEASED);
}

void cf_known_leased_as(struct cf *cf, uint64_t node, const struct stat *st, int held)
{
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1)
        clear_flags(cf, node, K_LEASED, 0);
    else if (held)
        set_flags(cf, node, K_LEASED);
}

int cf_known_dir_cache(struct cf *cf, uint64_t dir)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    int c = 0;
    if (d && (d->flags & K_LEASED)) {
        c = d->flags & K_LISTED ? 2 : 1;
        d->flags |= K_LISTED;
    }
    pthread_mutex_unlock(&k->lock);
    return c;
}

int cf_known_dir_cache_kept(struct cf *cf, uint64_t dir)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *d = get(k, dir, 0);
    int kept = d && (d->flags & K_LEASED) && (d->flags & K_LISTED);
    pthread_mutex_unlock(&k->lock);
    return kept;
}

void cf_known_dir_uncached(struct cf *cf, uint64_t dir)
{
    clear_flags(cf, dir, K_LEASED | K_LISTED, 0);
}

void cf_known_noxattrs(struct cf *cf, uint64_t node)
{
    set_flags(cf, node, K_NOXATTRS);
}

int cf_known_xattr_free(struct cf *cf, uint64_t node)
{
    return (flags_of(cf, node, NULL) & K_NOXATTRS) != 0;
}

void cf_known_noxattr(struct cf *cf, uint64_t node, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 1);
    uint64_t h = hash_name(name);
    struct kname *n = x ? x->absent : NULL;
    while (n && (n->hash != h || strcmp(n->name, name)))
        n = n->next;
    if (x && !(x->flags & K_NOXATTRS) && !n && (n = name_new(name, h))) {
        n->next = x->absent;
        x->absent = n;
        k->total++;
    }
    pthread_mutex_unlock(&k->lock);
}

int cf_known_xattr_absent(struct cf *cf, uint64_t node, const char *name)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 0);
    int absent = x && (x->flags & K_NOXATTRS);
    uint64_t h = hash_name(name);
    for (struct kname *n = x ? x->absent : NULL; n && !absent; n = n->next)
        absent = n->hash == h && !strcmp(n->name, name);
    pthread_mutex_unlock(&k->lock);
    return absent;
}

void cf_known_forget_xattrs(struct cf *cf, uint64_t node)
{
    clear_flags(cf, node, K_NOCAPS, 1);
}

int cf_known_is_leased(struct cf *cf, uint64_t node)
{
    struct cf_known *k = cf->known;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    struct knode *x = get(k, node, 0);
    int leased = x && (x->flags & K_LEASED);
    pthread_mutex_unlock(&k->lock);
    return leased;
}

static void drop(struct cf_known *k, uint64_t node)
{
    pthread_mutex_lock(&k->lock);
    struct knode **pp = find(k, node);
    if (*pp) {
        struct knode *x = *pp;
        *pp = x->next;
        node_free(k, x);
    }
    pthread_mutex_unlock(&k->lock);
}

void cf_known_forget(struct cf *cf, uint64_t node)
{
    cf_rc_changed(cf, node); /* the file's cached windows go with the lease */
    if (cf->known)
        drop(cf->known, node);
}

void cf_known_gone(struct cf *cf, uint64_t node)
{
    if (cf->known)
        drop(cf->known, node);
}

void cf_known_forget_all(struct cf *cf)
{
    struct cf_known *k = cf->known;
    cf_rc_forget_all(cf);
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    clear_all(k);
    pthread_mutex_unlock(&k->lock);
}

void cf_known_dump(struct cf *cf, FILE *f)
{
    static const struct {
        unsigned flag;
        const char *name;
    } names[] = {
        {K_LEASED, "leased"},        {K_COMPLETE, "complete"},     {K_EXCL, "exclusive-dir"},
        {K_FEXCL, "exclusive-file"}, {K_LISTED, "listing-cached"}, {K_ATTR, "attributes"},
        {K_NOXATTRS, "no-xattrs"},   {K_NOCAPS, "no-capability"},  {K_NOSETID, "no-setid"}};
    struct cf_known *k = cf->known;
    if (!k || sd_section(f, "client.leases", &k->lock) < 0)
        return;
    fprintf(f, "records=%zu\nrecords-and-names=%zu\n", k->nodes, k->total);
    for (size_t s = 0; s < k->nslots; s++)
        for (const struct knode *x = k->slots[s]; x; x = x->next) {
            char path[PATH_MAX];
            if (!k->it || cl_itable_path(k->it, x->id, NULL, path, sizeof(path)) < 0)
                snprintf(path, sizeof(path), "(not in the inode table)");
            fprintf(f, "node=%llu path=%s", (unsigned long long)x->id, path);
            for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (x->flags & names[i].flag)
                    fprintf(f, " %s", names[i].name);
            if (x->flags & K_COMPLETE)
                fprintf(f, " entries=%zu", x->n);
            fputc('\n', f);
        }
    pthread_mutex_unlock(&k->lock);
}
