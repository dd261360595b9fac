/* Fuzz target: `volume set NAME KEY VALUE` validation, for every option of
 * the registry: the input is the value; a valid value's normalized form
 * must validate again to itself. The input is also matched as an
 * auth.allow / auth.reject list, whole-volume and per directory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *value = malloc(size + 1);
    if (!value)
        return 0;
    memcpy(value, data, size);
    value[size] = 0;
    for (const struct opt_def *d = opt_table; d->name; d++) {
        char norm[512], again[512], err[512];
        if (opt_validate(d->name, value, norm, sizeof(norm), err, sizeof(err)) != 0)
            continue;
        if (opt_validate(d->name, norm, again, sizeof(again), err, sizeof(err)) != 0 ||
            strcmp(norm, again) != 0)
            abort();
    }
    static const char *const dirs[] = {"/", "/s", "/a/b"};
    for (int i = 0; i < 3; i++) {
        opt_addr_allowed_dir(value, "", dirs[i], "10.0.0.2");
        opt_addr_allowed_dir("*", value, dirs[i], "::1");
    }
    free(value);
    return 0;
}
