/* Disperse's erasure code on ISA-L (ec_codec.h says the layout). */
#include <errno.h>
#include <isa-l/erasure_code.h>
#include <stdlib.h>
#include <string.h>

#include "ec_codec.h"

struct cl_ec {
    int k, m;
    uint8_t gen[CL_EC_MAX * CL_EC_MAX]; /* (k + m) x k generator, identity on top */
    uint8_t *tables;                    /* ISA-L's expansion of the m redundancy rows */
};

struct cl_ec *cl_ec_new(int k, int m)
{
    if (m < 1 || m >= k || k + m > CL_EC_MAX) {
        errno = EINVAL;
        return NULL;
    }
    struct cl_ec *ec = calloc(1, sizeof(*ec));
    if (!ec || !(ec->tables = malloc(32 * (size_t)k * (size_t)m))) {
        free(ec);
        errno = ENOMEM;
        return NULL;
    }
    ec->k = k;
    ec->m = m;
    gf_gen_cauchy1_matrix(ec->gen, k + m, k);
    ec_init_tables(k, m, ec->gen + k * k, ec->tables);
    return ec;
}

void cl_ec_free(struct cl_ec *ec)
{
    if (!ec)
        return;
    free(ec->tables);
    free(ec);
}

int cl_ec_data(const struct cl_ec *ec)
{
    return ec->k;
}

int cl_ec_redundancy(const struct cl_ec *ec)
{
    return ec->m;
}

void cl_ec_encode(const struct cl_ec *ec, size_t chunk, size_t stripes, const uint8_t *in,
                  uint8_t *const *frag)
{
    int k = ec->k, m = ec->m;
    uint8_t *src[CL_EC_MAX], *dst[CL_EC_MAX];
    for (size_t s = 0; s < stripes; s++) {
        const uint8_t *stripe = in + s * (size_t)k * chunk;
        for (int j = 0; j < k; j++) {
            memcpy(frag[j] + s * chunk, stripe + (size_t)j * chunk, chunk);
            src[j] = frag[j] + s * chunk;
        }
        for (int p = 0; p < m; p++)
            dst[p] = frag[k + p] + s * chunk;
        ec_encode_data((int)chunk, k, m, ec->tables, src, dst);
    }
}

/* The first k fragments present, in order, into rows[]. */
static int pick_sources(const struct cl_ec *ec, uint32_t present, int *rows)
{
    int n = 0;
    for (int j = 0; j < ec->k + ec->m && n < ec->k; j++)
        if (present >> j & 1)
            rows[n++] = j;
    return n == ec->k ? 0 : -EIO;
}

/* dec (nout x k): the rows that turn the k source fragments (rows[]) into
 * the fragments out[0..nout). 0 or -EIO (cannot happen with a Cauchy
 * generator; kept as a guard). */
static int decode_rows(const struct cl_ec *ec, const int *rows, const int *out, int nout,
                       uint8_t *dec)
{
    int k = ec->k;
    uint8_t sub[CL_EC_MAX * CL_EC_MAX], inv[CL_EC_MAX * CL_EC_MAX];
    for (int i = 0; i < k; i++)
        memcpy(sub + i * k, ec->gen + rows[i] * k, (size_t)k);
    if (gf_invert_matrix(sub, inv, k) != 0)
        return -EIO;
    /* fragment f = gen[f] . data, data = inv . sources: f = (gen[f] . inv) . sources */
    for (int o = 0; o < nout; o++) {
        const uint8_t *g = ec->gen + out[o] * k;
        for (int c = 0; c < k; c++) {
            uint8_t acc = 0;
            for (int t = 0; t < k; t++)
                acc ^= gf_mul(g[t], inv[t * k + c]);
            dec[o * k + c] = acc;
        }
    }
    return 0;
}

/* Runs the decode of outs[0..nout) (each fragment j's buffer and stride)
 * from the sources, stripe by stripe. */
static int run_decode(const struct cl_ec *ec, size_t chunk, size_t stripes, const int *rows,
                      const uint8_t *const *frag, const int *outs, int nout, uint8_t *const *dst,
                      size_t dst_stride)
{
    int k = ec->k;
    uint8_t dec[CL_EC_MAX * CL_EC_MAX];
    int rc = decode_rows(ec, rows, outs, nout, dec);
    if (rc < 0)
        return rc;
    uint8_t *tables = malloc(32 * (size_t)k * (size_t)nout);
    if (!tables)
        return -ENOMEM;
    ec_init_tables(k, nout, dec, tables);
    uint8_t *src[CL_EC_MAX], *out[CL_EC_MAX];
    for (size_t s = 0; s < stripes; s++) {
        for (int i = 0; i < k; i++)
            src[i] = (uint8_t *)frag[rows[i]] + s * chunk;
        for (int o = 0; o < nout; o++)
            out[o] = dst[o] + s * dst_stride;
        ec_encode_data((int)chunk, k, nout, tables, src, out);
    }
    free(tables);
    return 0;
}

int cl_ec_decode(const struct cl_ec *ec, size_t chunk, size_t stripes, uint32_t present,
                 const uint8_t *const *frag, uint8_t *out)
{
    int k = ec->k, rows[CL_EC_MAX], missing[CL_EC_MAX], nmiss = 0;
    if (pick_sources(ec, present, rows) < 0)
        return -EIO;
    size_t stripe = (size_t)k * chunk;
    for (int j = 0; j < k; j++) {
        if (!(present >> j & 1)) {
            missing[nmiss++] = j;
            continue;
        }
        for (size_t s = 0; s < stripes; s++)
            memcpy(out + s * stripe + (size_t)j * chunk, frag[j] + s * chunk, chunk);
    }
    if (!nmiss)
        return 0;
    uint8_t *dst[CL_EC_MAX];
    for (int o = 0; o < nmiss; o++)
        dst[o] = out + (size_t)missing[o] * chunk;
    return run_decode(ec, chunk, stripes, rows, frag, missing, nmiss, dst, stripe);
}

int cl_ec_rebuild(const struct cl_ec *ec, size_t chunk, size_t stripes, uint32_t present,
                  uint32_t want, uint8_t *const *frag)
{
    int n = ec->k + ec->m, rows[CL_EC_MAX], outs[CL_EC_MAX], nout = 0;
    uint32_t all = n == 32 ? UINT32_MAX : (1u << n) - 1;
    if ((want & present) || (want & ~all) || !want)
        return -EINVAL;
    if (pick_sources(ec, present, rows) < 0)
        return -EIO;
    uint8_t *dst[CL_EC_MAX];
    for (int j = 0; j < n; j++)
        if (want >> j & 1) {
            dst[nout] = frag[j];
            outs[nout++] = j;
        }
    return run_decode(ec, chunk, stripes, rows, (const uint8_t *const *)frag, outs, nout, dst,
                      chunk);
}
