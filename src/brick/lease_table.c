/* The brick's table of leases: a hash of paths, the tree of those paths,
 * the timed list, and the deferred freeing of unused nodes (lease_table.h
 * says why). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lease_table.h"

int brick_ltab_init(struct brick_ltab *T, size_t max)
{
    memset(T, 0, sizeof(*T));
    T->nb = 1024;
    T->max = max;
    T->b = calloc(T->nb, sizeof(*T->b));
    return T->b ? 0 : -ENOMEM;
}

static void node_free(struct lease *l)
{
    free(l->h);
    free(l->path);
    free(l);
}

void brick_ltab_fini(struct brick_ltab *T)
{
    for (size_t k = 0; k < T->nb; k++)
        for (struct lease *l = T->b[k], *next; l; l = next) {
            next = l->next;
            node_free(l);
        }
    free(T->b);
    memset(T, 0, sizeof(*T));
}

uint64_t brick_ltab_hash(const char *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

size_t brick_ltab_parent_len(const char *p, size_t len)
{
    size_t i = len;
    while (i > 0 && p[i - 1] != '/')
        i--;
    return i <= 1 ? 1 : i - 1;
}

static struct lease *find_hashed(const struct brick_ltab *T, const char *p, size_t len, uint64_t h)
{
    for (struct lease *l = T->b[h & (T->nb - 1)]; l; l = l->next)
        if (l->hash == h && l->len == len && memcmp(l->path, p, len) == 0)
            return l;
    return NULL;
}

struct lease *brick_ltab_find(const struct brick_ltab *T, const char *p, size_t len)
{
    return find_hashed(T, p, len, brick_ltab_hash(p, len));
}

static void grow(struct brick_ltab *T)
{
    size_t nb = T->nb * 2;
    struct lease **b = calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t k = 0; k < T->nb; k++) {
        for (struct lease *l = T->b[k], *next; l; l = next) {
            next = l->next;
            l->next = b[l->hash & (nb - 1)];
            b[l->hash & (nb - 1)] = l;
        }
    }
    free(T->b);
    T->b = b;
    T->nb = nb;
}

/* A new node for p, in the hash but not yet in the tree. */
static struct lease *add(struct brick_ltab *T, const char *p, size_t len, uint64_t h)
{
    if (T->count >= T->max)
        return NULL;
    if (T->count >= T->nb)
        grow(T);
    struct lease *l = calloc(1, sizeof(*l));
    if (!l || !(l->path = strndup(p, len))) {
        free(l);
        return NULL;
    }
    l->len = len;
    l->hash = h;
    l->next = T->b[h & (T->nb - 1)];
    T->b[h & (T->nb - 1)] = l;
    T->count++;
    return l;
}

static void attach(struct lease *l, struct lease *up)
{
    l->up = up;
    l->sib_prev = NULL;
    l->sib_next = up->kid;
    if (up->kid)
        up->kid->sib_prev = l;
    up->kid = l;
}

struct lease *brick_ltab_find_or_add(struct brick_ltab *T, const char *p, size_t len)
{
    uint64_t h = brick_ltab_hash(p, len);
    struct lease *l = find_hashed(T, p, len, h);
    if (l)
        return l;
    if (!(l = add(T, p, len, h)))
        return NULL;
    /* Up to the nearest ancestor already there, adding the missing ones. */
    for (struct lease *cur = l; cur->len > 1;) {
        size_t pl = brick_ltab_parent_len(p, cur->len);
        uint64_t ph = brick_ltab_hash(p, pl);
        struct lease *up = find_hashed(T, p, pl, ph);
        if (up) {
            attach(cur, up);
            break;
        }
        if (!(up = add(T, p, pl, ph))) {
            brick_ltab_put(T, l); /* the chain added so far goes at the reap */
            return NULL;
        }
        attach(cur, up);
        cur = up;
    }
    return l;
}

void brick_ltab_put(struct brick_ltab *T, struct lease *l)
{
    if (l->reaping)
        return;
    l->reaping = 1;
    l->reap_next = T->reap;
    T->reap = l;
}

static int unused(const struct lease *l, uint64_t now)
{
    return l->n == 0 && l->cooldown_until_ms <= now && !l->kid && !l->timed;
}

static void unlink_free(struct brick_ltab *T, struct lease *l)
{
    struct lease **pp = &T->b[l->hash & (T->nb - 1)];
    while (*pp != l)
        pp = &(*pp)->next;
    *pp = l->next;
    if (l->sib_prev)
        l->sib_prev->sib_next = l->sib_next;
    else if (l->up)
        l->up->kid = l->sib_next;
    if (l->sib_next)
        l->sib_next->sib_prev = l->sib_prev;
    T->count--;
    node_free(l);
}

void brick_ltab_reap(struct brick_ltab *T, uint64_t now)
{
    while (T->reap) {
        struct lease *l = T->reap;
        T->reap = l->reap_next;
        l->reaping = 0;
        /* An ancestor still on the reap list is freed when its turn comes. */
        while (l && unused(l, now)) {
            struct lease *up = l->up;
            unlink_free(T, l);
            l = up && !up->reaping ? up : NULL;
        }
    }
}

struct lease *brick_ltab_walk_next(const struct lease *top, const struct lease *l)
{
    if (l->kid)
        return l->kid;
    for (; l != top; l = l->up)
        if (l->sib_next)
            return l->sib_next;
    return NULL;
}

int brick_ltab_watch(struct brick_ltab *T, struct lease *l)
{
    if (l->timed)
        return 0;
    int was_empty = T->timed == NULL;
    l->timed = 1;
    l->t_prev = NULL;
    l->t_next = T->timed;
    if (T->timed)
        T->timed->t_prev = l;
    T->timed = l;
    return was_empty;
}

void brick_ltab_unwatch(struct brick_ltab *T, struct lease *l)
{
    if (!l->timed)
        return;
    if (l->t_prev)
        l->t_prev->t_next = l->t_next;
    else
        T->timed = l->t_next;
    if (l->t_next)
        l->t_next->t_prev = l->t_prev;
    l->t_prev = l->t_next = NULL;
    l->timed = 0;
    brick_ltab_put(T, l);
}
