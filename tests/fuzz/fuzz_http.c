/* Fuzz target: cairnd's metrics endpoint request parser (src/mgmt/http.c),
 * which reads whatever any host sends to the metrics port. Checks that it
 * answers within the input, that a complete head stays complete with more
 * bytes after it, and that a prefix of the input never reads as a
 * different verdict than "need more" or the same one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/mgmt/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_req req;
    /* an exact-size copy, so that a read past the end is caught */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    long rc = http_parse_request(buf, size, &req);
    if (rc > 0) {
        if ((size_t)rc > size || rc > HTTP_HEAD_MAX || strlen(req.path) >= HTTP_TARGET_MAX ||
            req.path[0] != '/' || (req.method != HTTP_GET && req.method != HTTP_HEAD))
            abort();
        /* the head alone parses the same */
        struct http_req again;
        if (http_parse_request(buf, (size_t)rc, &again) != rc || strcmp(again.path, req.path))
            abort();
    } else if (rc < 0) {
        if (rc != -400 && rc != -405 && rc != -414 && rc != -431 && rc != -505)
            abort();
    } else if (size >= HTTP_HEAD_MAX) {
        abort(); /* a full buffer must be decided */
    }
    /* a shorter prefix is either undecided or decided alike */
    if (size > 1 && rc != 0) {
        long p = http_parse_request(buf, size - 1, &req);
        if (p != 0 && p != rc)
            abort();
    }
    free(buf);
    return 0;
}
