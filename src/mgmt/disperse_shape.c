/* The shape of a dispersed volume from `volume create`'s words: disperse
 * [N], disperse-data K, redundancy M (GlusterFS's, docs/disperse.md). */
#include <stdio.h>

#include "mgmt.h"

/* The largest set a dispersed volume may have: the client's sets hold at
 * most 16 bricks (CL_REPL_MAX, the set layer below disperse). */
#define DISPERSE_MAX 16

/* GlusterFS's choice when only N is given: the smallest redundancy that
 * leaves a power of two of data fragments (so that a 4 KiB write is whole
 * stripes), below half the set; 0 when there is none. */
static int optimal_redundancy(int n)
{
    int data = n - 1;
    for (int i = data / 2; i > 0; i--, data--)
        if ((data & (data - 1)) == 0)
            return n - data;
    return 0;
}

int mgmt_disperse_shape(const struct mgmt_shape_args *a, int n_bricks, int *redundancy, char *note,
                        size_t notelen, char *err, size_t errlen)
{
    int n = a->disperse, k = a->data, m = a->redundancy;
    *note = 0;
    if (n == 0) /* "disperse" without a count: one set of every brick */
        n = k > 0 && m > 0 ? k + m : n_bricks;
    if (n < 0)
        n = k > 0 && m >= 0 ? k + m : k > 0 ? n_bricks : -1;
    if (n < 0) {
        snprintf(err, errlen, "redundancy needs disperse N or disperse-data K");
        return -1;
    }
    if (k >= 0 && m < 0)
        m = n - k;
    if (k >= 0 && k + m != n) {
        snprintf(err, errlen, "disperse %d is not disperse-data %d plus redundancy %d", n, k, m);
        return -1;
    }
    if (n < 3) {
        snprintf(err, errlen, "disperse count must be greater than 2");
        return -1;
    }
    if (n > DISPERSE_MAX) {
        snprintf(err, errlen, "disperse count must be at most %d", DISPERSE_MAX);
        return -1;
    }
    if (m < 0) {
        m = optimal_redundancy(n);
        if (m == 0) {
            m = 1;
            snprintf(note, notelen,
                     "There isn't an optimal redundancy value for this configuration: the "
                     "volume is created with redundancy 1");
        } else if (m > 1) {
            snprintf(note, notelen, "The optimal redundancy for this configuration is %d.", m);
        }
    }
    if (m < 1) {
        snprintf(err, errlen, "redundancy must be greater than 0");
        return -1;
    }
    if (2 * m >= n) {
        snprintf(err, errlen, "redundancy must be less than %d for a disperse %d volume",
                 (n + 1) / 2, n);
        return -1;
    }
    if (n_bricks % n) {
        snprintf(err, errlen, "Incorrect number of bricks supplied %d with count %d", n_bricks, n);
        return -1;
    }
    *redundancy = m;
    return n;
}
