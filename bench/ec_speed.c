/* ec-speed: how fast disperse's erasure code (src/client/ec_codec.c, ISA-L)
 * encodes and decodes on this machine, for the codes GlusterFS users run
 * (2 + 1, 4 + 2, 8 + 3) and two chunk sizes; buffers are touched before
 * timing, each figure is the best of three passes over 256 MiB.
 * docs/notes/2026-12-07-disperse-plan.md quotes it.
 *
 *   build/bench/ec-speed */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/client/ec_codec.h"

#define TOTAL (256u << 20)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
    static const int ks[] = {2, 4, 8}, ms[] = {1, 2, 3};
    static const size_t chunks[] = {512, 4096};
    uint8_t *in = malloc(TOTAL), *out = malloc(TOTAL), *frag[CL_EC_MAX];
    if (!in || !out)
        return 1;
    for (size_t x = 0; x < TOTAL; x++)
        in[x] = (uint8_t)(x * 131 + (x >> 12));
    memset(out, 0, TOTAL);
    printf("| code | chunk | encode MiB/s | read, all data present MiB/s | read, one data "
           "fragment lost MiB/s |\n|---|---|---|---|---|\n");
    for (int c = 0; c < 2; c++) {
        for (int i = 0; i < 3; i++) {
            int k = ks[i], m = ms[i];
            size_t chunk = chunks[c], stripes = TOTAL / ((size_t)k * chunk);
            struct cl_ec *ec = cl_ec_new(k, m);
            if (!ec)
                return 1;
            for (int j = 0; j < k + m; j++) {
                frag[j] = malloc(stripes * chunk);
                if (!frag[j])
                    return 1;
                memset(frag[j], 1, stripes * chunk);
            }
            uint32_t all = (1u << (k + m)) - 1;
            double best[3] = {1e9, 1e9, 1e9};
            for (int pass = 0; pass < 3; pass++) {
                double t0 = now_s();
                cl_ec_encode(ec, chunk, stripes, in, frag);
                double t1 = now_s();
                cl_ec_decode(ec, chunk, stripes, all, (const uint8_t *const *)frag, out);
                double t2 = now_s();
                cl_ec_decode(ec, chunk, stripes, all & ~1u, (const uint8_t *const *)frag, out);
                double t3 = now_s();
                double d[3] = {t1 - t0, t2 - t1, t3 - t2};
                for (int x = 0; x < 3; x++)
                    best[x] = d[x] < best[x] ? d[x] : best[x];
            }
            if (memcmp(in, out, stripes * chunk * (size_t)k) != 0) {
                fprintf(stderr, "ec-speed: %d+%d decoded wrong data\n", k, m);
                return 1;
            }
            double mib = (double)(stripes * chunk * (size_t)k) / (1 << 20);
            printf("| %d + %d | %zu | %.0f | %.0f | %.0f |\n", k, m, chunk, mib / best[0],
                   mib / best[1], mib / best[2]);
            for (int j = 0; j < k + m; j++)
                free(frag[j]);
            cl_ec_free(ec);
        }
    }
    free(in);
    free(out);
    return 0;
}
