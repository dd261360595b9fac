/* placement: runs distribute's volume-wide placement (src/client/dht_place.c,
 * the code clients run) over many names and prints, as a Markdown table, how
 * evenly it spreads them over N sets and what moves when a set is added or
 * drained; beside it, what today's per-directory layout (equal hash ranges,
 * dht_layout.c) would move when a set is added. docs/notes/2026-12-07-placement.md quotes it.
 *
 *   build/bench/placement [--names N] [--dirs D] [--seed S] [SETS...]
 *
 * Names are NAME-like strings ("f0000042.dat", "IMG_1234.jpg", ...) in D
 * directories with random ids, from a seeded generator: a run is exactly
 * repeatable. Exit status 1 if a move the design forbids happens (a file
 * between two sets that were both there before and after). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/client/distribute.h"

struct name {
    uint64_t key;  /* volume-wide placement key */
    uint32_t hash; /* today's name hash */
};

static uint64_t rng_state;

static uint64_t next_rand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static struct name *make_names(size_t count, size_t dirs)
{
    struct name *v = malloc(count * sizeof(*v));
    uint8_t(*gfid)[16] = malloc(dirs * 16);
    if (!v || !gfid) {
        free(v);
        free(gfid);
        return NULL;
    }
    for (size_t d = 0; d < dirs; d++)
        for (int i = 0; i < 16; i += 8) {
            uint64_t r = next_rand();
            memcpy(gfid[d] + i, &r, 8);
        }
    static const char *const shapes[] = {"f%07zu.dat", "IMG_%04zu.jpg", "%zu", "part-%05zu.log",
                                         "node_modules-%zu.js"};
    for (size_t i = 0; i < count; i++) {
        char nm[64];
        size_t d = (size_t)(next_rand() % dirs);
        int len = snprintf(nm, sizeof(nm), shapes[i % 5], i / 5);
        v[i].key = cl_place_key(gfid[d], nm, (size_t)len);
        v[i].hash = cl_dht_hash(nm, (size_t)len);
    }
    free(gfid);
    return v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Today's placement of every name with n sets: the default layout. */
static void place_ranges(const struct name *v, size_t count, int n, int *out)
{
    struct cl_dht_layout l;
    cl_dht_layout_default(n, &l);
    for (size_t i = 0; i < count; i++)
        out[i] = cl_dht_layout_pick(&l, v[i].hash);
}

static int run(const struct name *v, size_t count, int n, struct cl_place *p, int *before,
               int *after, size_t *per)
{
    p->n = 0;
    p->gen = 0;
    for (int s = 0; s < n; s++)
        cl_place_add(p, (uint64_t)s + 1, 1, CL_PLACE_ACTIVE);
    memset(per, 0, sizeof(*per) * (size_t)(n + 1));
    double t0 = now_s();
    for (size_t i = 0; i < count; i++)
        per[before[i] = cl_place_pick(p, v[i].key)]++;
    double ns = (now_s() - t0) * 1e9 / (double)count;
    size_t most = 0, least = count;
    for (int s = 0; s < n; s++) {
        most = per[s] > most ? per[s] : most;
        least = per[s] < least ? per[s] : least;
    }
    double mean = (double)count / n;

    /* one set added */
    cl_place_add(p, (uint64_t)n + 1, 1, CL_PLACE_ACTIVE);
    size_t moved = 0, astray = 0;
    for (size_t i = 0; i < count; i++) {
        after[i] = cl_place_pick(p, v[i].key);
        if (after[i] != before[i]) {
            moved++;
            astray += after[i] != n; /* only to the new set */
        }
    }

    /* the middle set drained (without the added one) */
    p->set[n].state = CL_PLACE_DRAINING;
    int gone = n / 2;
    p->set[gone].state = CL_PLACE_DRAINING;
    size_t dmoved = 0, dastray = 0;
    for (size_t i = 0; i < count; i++) {
        int now = cl_place_pick(p, v[i].key);
        if (now != before[i]) {
            dmoved++;
            dastray += before[i] != gone; /* only the drained set's files */
        }
    }

    char today[32] = "-";
    if (n + 1 <= CL_DHT_MAX) {
        place_ranges(v, count, n, before);
        place_ranges(v, count, n + 1, after);
        size_t tm = 0;
        for (size_t i = 0; i < count; i++)
            tm += before[i] != after[i];
        snprintf(today, sizeof(today), "%.1f%%", 100.0 * (double)tm / (double)count);
    }
    printf("| %d | %.3f | %.3f | %.2f%% | %.2f%% | %zu | %.2f%% | %.2f%% | %zu | %s | %.0f |\n", n,
           (double)most / mean, (double)least / mean, 100.0 * (double)moved / (double)count,
           100.0 / (n + 1), astray, 100.0 * (double)dmoved / (double)count,
           100.0 * (double)per[gone] / (double)count, dastray, today, ns);
    return astray || dastray ? 1 : 0;
}

/* Sets of weights 1, 2 and 4 (twice each): the share each one gets. */
static void weighted(const struct name *v, size_t count, struct cl_place *p)
{
    static const uint32_t w[] = {1, 2, 4, 1, 2, 4};
    p->n = 0;
    for (int s = 0; s < 6; s++)
        cl_place_add(p, (uint64_t)s + 1, w[s], CL_PLACE_ACTIVE);
    size_t per[6] = {0};
    for (size_t i = 0; i < count; i++)
        per[cl_place_pick(p, v[i].key)]++;
    printf("\nWeighted (weights 1, 2, 4, 1, 2, 4; total 14):\n\n| set | weight | share | "
           "expected |\n|---|---|---|---|\n");
    for (int s = 0; s < 6; s++)
        printf("| %d | %u | %.2f%% | %.2f%% |\n", s, w[s], 100.0 * (double)per[s] / (double)count,
               100.0 * w[s] / 14);
}

int main(int argc, char **argv)
{
    size_t count = 1000000, dirs = 2000;
    uint64_t seed = 1;
    int sets[64], nsets = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--names") == 0 && i + 1 < argc)
            count = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--dirs") == 0 && i + 1 < argc)
            dirs = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && nsets < 64 && atoi(argv[i]) >= 2 &&
                 atoi(argv[i]) < CL_PLACE_MAX)
            sets[nsets++] = atoi(argv[i]);
        else {
            fprintf(stderr,
                    "usage: placement [--names N] [--dirs D] [--seed S] [SETS...] (2 <= SETS < "
                    "%d)\n",
                    CL_PLACE_MAX);
            return 2;
        }
    }
    if (!nsets) {
        static const int def[] = {4, 8, 16, 32, 63, 100, 250, 500};
        for (nsets = 0; nsets < 8; nsets++)
            sets[nsets] = def[nsets];
    }
    if (!count || !dirs) {
        fprintf(stderr, "placement: --names and --dirs must be at least 1\n");
        return 2;
    }
    rng_state = seed;
    struct name *v = make_names(count, dirs);
    int *before = malloc(count * sizeof(int)), *after = malloc(count * sizeof(int));
    size_t *per = malloc((CL_PLACE_MAX + 1) * sizeof(size_t));
    struct cl_place *p = malloc(sizeof(*p));
    if (!v || !before || !after || !per || !p) {
        fprintf(stderr, "placement: %s\n", strerror(ENOMEM));
        return 1;
    }
    printf("%zu names in %zu directories (seed %llu).\n\n", count, dirs, (unsigned long long)seed);
    printf("| sets | max/mean | min/mean | moved by adding one | ideal 1/(N+1) | moved between "
           "old sets | moved by draining one | its share | moved from other sets | today's "
           "layout, adding one | ns per pick |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (int i = 0; i < nsets; i++)
        bad |= run(v, count, sets[i], p, before, after, per);
    weighted(v, count, p);
    free(p);
    free(per);
    free(after);
    free(before);
    free(v);
    return bad;
}
