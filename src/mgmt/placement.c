/* A volume's placement in the pool's state (docs/elastic.md, "Growing by
 * whole sets"; docs/notes/2026-12-07-placement.md): its text form in the
 * volume record, the placement `volume create` gives a new volume, and the
 * one add-brick of whole sets makes. Pure but for malloc. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/distribute.h"
#include "mgmt.h"

static const char *state_name(uint32_t s)
{
    return s == CL_PLACE_DRAINING ? "draining" : "active";
}

void mgmt_place_format(FILE *f, const char *key, const struct cl_place *p)
{
    fprintf(f, "%s=%llu", key, (unsigned long long)p->gen);
    for (int i = 0; i < p->n; i++)
        fprintf(f, " %llu:%u:%s", (unsigned long long)p->set[i].id, p->set[i].weight,
                state_name(p->set[i].state));
    fputc('\n', f);
}

int mgmt_place_parse(const char *val, struct cl_place **out)
{
    struct cl_place *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    char *end;
    p->gen = strtoull(val, &end, 10);
    int active = 0, rc = end == val || p->gen == 0 ? -EINVAL : 0;
    for (const char *s = end; rc == 0 && *s;) {
        if (*s++ != ' ') {
            rc = -EINVAL;
            break;
        }
        unsigned long long id = strtoull(s, &end, 10);
        unsigned long w = 0;
        if (end == s || *end != ':' || (w = strtoul(end + 1, &end, 10), *end != ':')) {
            rc = -EINVAL;
            break;
        }
        const char *st = end + 1;
        size_t len = strcspn(st, " ");
        int state = len == 6 && !strncmp(st, "active", 6)     ? CL_PLACE_ACTIVE
                    : len == 8 && !strncmp(st, "draining", 8) ? CL_PLACE_DRAINING
                                                              : 0;
        active += state == CL_PLACE_ACTIVE;
        uint64_t gen = p->gen;
        if (w > CL_PLACE_WEIGHT_MAX || cl_place_add(p, id, (uint32_t)w, state) < 0)
            rc = -EINVAL;
        p->gen = gen; /* cl_place_add counts a change; the record says which */
        s = st + len;
    }
    if (rc == 0 && !active)
        rc = -EINVAL;
    if (rc < 0) {
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

struct cl_place *mgmt_place_new(int sets)
{
    struct cl_place *p = calloc(1, sizeof(*p));
    for (int i = 0; p && i < sets; i++)
        if (cl_place_add(p, (uint64_t)i + 1, 1, CL_PLACE_ACTIVE) < 0) {
            free(p);
            return NULL;
        }
    if (p)
        p->gen = 1;
    return p;
}

int mgmt_place_grow(const struct cl_place *cur, int add, struct cl_place **out)
{
    if (cur->n + add > CL_DHT_MAX)
        return -E2BIG;
    struct cl_place *p = malloc(sizeof(*p));
    if (!p)
        return -ENOMEM;
    *p = *cur;
    uint64_t next = 0;
    for (int i = 0; i < p->n; i++)
        if (p->set[i].id > next)
            next = p->set[i].id;
    /* New ids above every id the volume has had: an id is never reused
     * (a reused id would draw the same numbers as the set it was). */
    for (int i = 0; i < add; i++)
        if (cl_place_add(p, next + 1 + (uint64_t)i, 1, CL_PLACE_ACTIVE) < 0) {
            free(p);
            return -EINVAL;
        }
    p->gen = cur->gen + 1;
    *out = p;
    return 0;
}
