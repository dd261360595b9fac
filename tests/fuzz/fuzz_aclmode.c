/* Fuzz target: the mode read out of an access ACL a caller sets on a file
 * written back (aclmode.c). */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/fuse/aclmode.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int m = cf_acl_mode(data, size);
    if (m < -1 || m > 0777)
        abort();
    if (m >= 0 && (size < 4 || (size - 4) % 8))
        abort();
    if (cf_acl_minimal(data, size) && (m < 0 || size != 28))
        abort();
    return 0;
}
