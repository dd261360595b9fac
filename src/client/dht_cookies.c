/* The table behind mapped readdir cookies (distribute.h).
 *
 * A brick cookie too large for the direct form gets a slot here, and the
 * cookie handed out names the slot. The table belongs to the layer, not to
 * a directory handle: the kernel may resume a listing on another handle
 * than the one that produced its cookies (a listing it cached, one fetched
 * ahead), and every handle must read them the same way. A slot is shared
 * by every listing that produces the same (subvolume, brick cookie); ext4's
 * cookies are name hashes, so the table grows with the distinct names
 * listed, not with the listings. Bounded: when max slots are in use the
 * table starts over under a new generation, and cookies of the older one
 * no longer decode. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "distribute.h"

#define GEN_BITS 29
#define GEN_MASK ((1u << GEN_BITS) - 1)

struct entry {
    uint64_t bc;
    int subvol;
};

struct cl_dht_cookie_map {
    pthread_mutex_t lock;
    size_t max;
    uint32_t gen;
    struct entry *ent; /* by slot */
    size_t n, cap;
    uint32_t *index; /* slot + 1 by hash, 0 empty; nindex a power of two */
    size_t nindex;
};

struct cl_dht_cookie_map *cl_dht_cookie_map_new(size_t max)
{
    if (max == 0 || max > UINT32_MAX)
        return NULL;
    struct cl_dht_cookie_map *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    m->max = max;
    return m;
}

void cl_dht_cookie_map_free(struct cl_dht_cookie_map *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m->ent);
    free(m->index);
    free(m);
}

static size_t hash(int subvol, uint64_t bc)
{
    uint64_t h = (bc ^ (uint64_t)subvol * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    return (size_t)(h ^ (h >> 29));
}

/* The index position of (subvol, bc): its slot's, or the empty one where
 * it would go. */
static size_t probe(const struct cl_dht_cookie_map *m, int subvol, uint64_t bc)
{
    size_t mask = m->nindex - 1, i = hash(subvol, bc) & mask;
    while (m->index[i]) {
        const struct entry *e = &m->ent[m->index[i] - 1];
        if (e->bc == bc && e->subvol == subvol)
            break;
        i = (i + 1) & mask;
    }
    return i;
}

static int grow_index(struct cl_dht_cookie_map *m)
{
    size_t n = m->nindex ? m->nindex * 2 : 1024;
    uint32_t *idx = calloc(n, sizeof(*idx));
    if (!idx)
        return -ENOMEM;
    free(m->index);
    m->index = idx;
    m->nindex = n;
    for (size_t s = 0; s < m->n; s++)
        m->index[probe(m, m->ent[s].subvol, m->ent[s].bc)] = (uint32_t)s + 1;
    return 0;
}

static int grow_entries(struct cl_dht_cookie_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    if (cap > m->max)
        cap = m->max;
    struct entry *e = realloc(m->ent, cap * sizeof(*e));
    if (!e)
        return -ENOMEM;
    m->ent = e;
    m->cap = cap;
    return 0;
}

static void start_over(struct cl_dht_cookie_map *m)
{
    m->gen = (m->gen + 1) & GEN_MASK;
    m->n = 0;
    for (size_t i = 0; i < m->nindex; i++)
        m->index[i] = 0;
}

int cl_dht_cookie_map_put(struct cl_dht_cookie_map *m, int subvol, uint64_t bc, uint64_t *out)
{
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    if ((m->n + 1) * 2 > m->nindex)
        rc = grow_index(m);
    size_t i = rc == 0 ? probe(m, subvol, bc) : 0;
    if (rc == 0 && !m->index[i]) {
        if (m->n == m->max) {
            start_over(m);
            i = probe(m, subvol, bc);
        }
        if (m->n == m->cap && (rc = grow_entries(m)) < 0) {
            pthread_mutex_unlock(&m->lock);
            return rc;
        }
        m->ent[m->n] = (struct entry){.bc = bc, .subvol = subvol};
        m->index[i] = (uint32_t)++m->n;
    }
    if (rc == 0)
        *out = CL_DHT_COOKIE_MAPPED | (uint64_t)m->gen << 32 | (m->index[i] - 1);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int cl_dht_cookie_map_get(struct cl_dht_cookie_map *m, uint64_t cookie, int *subvol, uint64_t *bc)
{
    if ((cookie >> 61) != 1)
        return -EINVAL;
    uint32_t gen = (uint32_t)(cookie >> 32) & GEN_MASK, slot = (uint32_t)cookie;
    int rc = -EINVAL;
    pthread_mutex_lock(&m->lock);
    if (gen == m->gen && slot < m->n) {
        *subvol = m->ent[slot].subvol;
        *bc = m->ent[slot].bc;
        rc = 0;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
