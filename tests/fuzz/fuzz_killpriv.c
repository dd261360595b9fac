/* Fuzz target: the mount's own reading of raw kernel FUSE requests
 * (killpriv.c), which runs before libfuse checks anything. */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/fuse/killpriv.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cf_killpriv_note(data, size);
    int a = cf_killpriv_asked();
    if (a != 0 && a != 1)
        abort();
    /* Only WRITE, OPEN and SETATTR with their flag set ask. */
    if (a && size < 48)
        abort();
    mode_t m = (mode_t)(size ? data[0] << 4 | (size > 1 ? data[1] & 0xf : 0) : 0) & 07777;
    if (cf_killpriv_bits(rpc_kill_suidgid_mode(m)))
        abort();
    return 0;
}
