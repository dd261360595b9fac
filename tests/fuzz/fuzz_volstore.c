/* Fuzz target: cairnd reading a volume definition from its store (a file
 * that a crash, a full disk or a careless admin may have damaged). The input
 * is parsed as it is, and again with a valid checksum line appended so the
 * line parser behind the checksum is reached too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/mgmt/mgmt.h"
#include "../../src/rpc/wire.h"

static void parse(const char *text, size_t len)
{
    struct mgmt_vol *v = NULL;
    char err[256];
    if (mgmt_vol_parse(text, len, &v, err, sizeof(err)) == 0)
        mgmt_vol_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse((const char *)data, size);
    char *buf = malloc(size + 32);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    int n = snprintf(buf + size, 32, "checksum=%08x\n", rpc_crc32c(0, data, size));
    parse(buf, size + (size_t)n);
    free(buf);
    return 0;
}
