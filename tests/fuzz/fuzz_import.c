/* Fuzz target: what `volume import` decodes of another server's answers
 * and requests while placing link-to files (import.h): a line of a name
 * list, and a place-check answer. The first byte picks the set count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/mgmt/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int sets = 1 + data[0] % 8;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    struct mgmt_import_line l;
    if (mgmt_import_line_parse(p, n, sets, &l) == 0) {
        size_t len = strlen(l.path);
        if (l.to < 0 || l.to >= sets || l.at < 0 || l.at >= sets || l.to == l.at ||
            len >= sizeof(l.path) || l.path[0] != '/' || strstr(l.path, "//") ||
            strstr(l.path, "/../") || l.path[len - 1] == '/')
            abort();
    }
    char *text = malloc(n + 1);
    if (!text)
        return 0;
    memcpy(text, p, n);
    text[n] = 0; /* the answer arrives as a string */
    unsigned long lines = data[0];
    char *conflict = calloc(lines ? lines : 1, 1);
    if (conflict)
        mgmt_import_check_answer(text, lines, conflict);
    free(conflict);
    free(text);
    return 0;
}
