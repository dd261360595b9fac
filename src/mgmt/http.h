/* The request side of HTTP/1.x as cairnd's metrics endpoint needs it: one
 * GET or HEAD without a body per connection. Strict and bounded: anything
 * else is refused with a status, never guessed at. */
#ifndef CAIRN_MGMT_HTTP_H
#define CAIRN_MGMT_HTTP_H

#include <stddef.h>
#include <stdint.h>

/* A request head (request line and headers, up to the empty line) is at
 * most this long; a longer one gets 431. */
#define HTTP_HEAD_MAX 8192
#define HTTP_TARGET_MAX 256
#define HTTP_HEADERS_MAX 64

enum http_method { HTTP_GET = 1, HTTP_HEAD = 2 };

struct http_req {
    enum http_method method;
    int minor;                  /* HTTP/1.0 or HTTP/1.1 */
    char path[HTTP_TARGET_MAX]; /* the target without its query */
};

/* Parses the head of a request at the start of buf[0..len). Returns the
 * length of the head (through its empty line) with *req filled; 0 when it
 * is not complete yet and may still be (len < HTTP_HEAD_MAX); or a negative
 * HTTP status to answer with before closing: -400 (malformed, a body, an
 * obsolete line folding, a bare CR or LF), -405 (a method other than GET
 * and HEAD), -414 (a target of HTTP_TARGET_MAX bytes or more), -431 (the
 * head too long, too many headers), -505 (not HTTP/1.0 or 1.1). Pure. */
long http_parse_request(const uint8_t *buf, size_t len, struct http_req *req);

/* The reason phrase of a status this server sends ("Bad Request"). */
const char *http_reason(int status);

#endif
