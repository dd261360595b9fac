/* The disperse layer's stripe arithmetic (disperse.h). Pure. */
#include "disperse.h"

uint64_t cl_disp_frag_used(int k, size_t chunk, int j, uint64_t size)
{
    uint64_t sw = (uint64_t)k * chunk;
    if (size == 0)
        return 0;
    uint64_t full = (size - 1) / sw; /* stripes before the last */
    uint64_t r = size - full * sw;   /* bytes of the last stripe, 1..sw */
    uint64_t mine;
    if (j >= k)
        mine = r < chunk ? r : chunk;
    else if (r <= (uint64_t)j * chunk)
        mine = 0;
    else
        mine = r - (uint64_t)j * chunk < chunk ? r - (uint64_t)j * chunk : chunk;
    return full * chunk + mine;
}

struct cl_disp_span cl_disp_span(int k, size_t chunk, uint64_t off, uint64_t len)
{
    uint64_t sw = (uint64_t)k * chunk, end = off + len;
    struct cl_disp_span s = {off / sw, (end + sw - 1) / sw, 0, 0};
    if (len == 0) {
        s.s1 = s.s0;
        return s;
    }
    s.head = off % sw != 0;
    s.tail = end % sw != 0 && !(s.head && s.s1 - 1 == s.s0);
    return s;
}
