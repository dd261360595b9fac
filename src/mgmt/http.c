/* A strict HTTP/1.x request-head parser (http.h), after RFC 9112: a
 * request line of METHOD SP TARGET SP HTTP/1.x, header fields of a token,
 * a colon and a value of visible characters, spaces and tabs, each line
 * ended by CRLF, the head by an empty line. Only what it reads is looked
 * at: there is no state between calls; the caller calls again with more
 * bytes. */
#include "http.h"

#include <string.h>
#include <strings.h>

static int is_tchar(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_vchar(uint8_t c)
{
    return c > 0x20 && c < 0x7f;
}

/* The end of the line starting at p (the index of its CR), -1 if the line
 * is not complete, -2 if it holds a CR or LF other than its CRLF. */
static long line_end(const uint8_t *buf, size_t len, size_t p)
{
    for (size_t i = p; i < len; i++) {
        if (buf[i] == '\n')
            return -2; /* a bare LF */
        if (buf[i] == '\r') {
            if (i + 1 == len)
                return -1;
            return buf[i + 1] == '\n' ? (long)i : -2;
        }
    }
    return -1;
}

/* The request line buf[0..e). 0 or a negative status. */
static int request_line(const uint8_t *buf, size_t e, struct http_req *req)
{
    size_t i = 0;
    while (i < e && is_tchar(buf[i]))
        i++;
    if (i == 0 || i > 16 || i == e || buf[i] != ' ')
        return -400;
    size_t mlen = i;
    size_t t = ++i;
    while (i < e && is_vchar(buf[i]))
        i++;
    size_t tlen = i - t;
    if (tlen == 0 || i == e || buf[i] != ' ')
        return -400;
    if (buf[t] != '/')
        return -400; /* origin form only: no absolute or authority form */
    if (tlen >= HTTP_TARGET_MAX)
        return -414;
    i++;
    if (e - i != 8 || memcmp(buf + i, "HTTP/", 5) != 0 || buf[i + 6] != '.' || buf[i + 5] < '0' ||
        buf[i + 5] > '9' || buf[i + 7] < '0' || buf[i + 7] > '9')
        return -400;
    if (buf[i + 5] != '1' || buf[i + 7] > '1')
        return -505;
    req->minor = buf[i + 7] - '0';
    if (mlen == 3 && memcmp(buf, "GET", 3) == 0)
        req->method = HTTP_GET;
    else if (mlen == 4 && memcmp(buf, "HEAD", 4) == 0)
        req->method = HTTP_HEAD;
    else
        return -405;
    size_t plen = 0;
    while (plen < tlen && buf[t + plen] != '?')
        plen++;
    memcpy(req->path, buf + t, plen);
    req->path[plen] = 0;
    return 0;
}

/* A header line buf[p..e). 0 or a negative status. */
static int header_line(const uint8_t *buf, size_t p, size_t e)
{
    size_t i = p;
    if (buf[i] == ' ' || buf[i] == '\t')
        return -400; /* obsolete line folding */
    while (i < e && is_tchar(buf[i]))
        i++;
    if (i == p || i == e || buf[i] != ':')
        return -400;
    size_t nlen = i - p;
    const char *name = (const char *)buf + p;
    for (i++; i < e; i++)
        if (!is_vchar(buf[i]) && buf[i] != ' ' && buf[i] != '\t')
            return -400;
    /* No request of this server has a body: one announced is refused
     * rather than left unread (a request smuggled in it). */
    if (nlen == 17 && strncasecmp(name, "transfer-encoding", 17) == 0)
        return -400;
    if (nlen == 14 && strncasecmp(name, "content-length", 14) == 0) {
        size_t v = p + 15;
        while (v < e && (buf[v] == ' ' || buf[v] == '\t'))
            v++;
        size_t z = e;
        while (z > v && (buf[z - 1] == ' ' || buf[z - 1] == '\t'))
            z--;
        if (z - v != 1 || buf[v] != '0')
            return -400;
    }
    return 0;
}

long http_parse_request(const uint8_t *buf, size_t len, struct http_req *req)
{
    size_t lim = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
    long e = line_end(buf, lim, 0);
    if (e == -2)
        return -400;
    if (e == -1)
        return len >= HTTP_HEAD_MAX ? -431 : 0;
    int rc = request_line(buf, (size_t)e, req);
    if (rc < 0)
        return rc;
    size_t p = (size_t)e + 2;
    for (int n = 0;; n++) {
        e = line_end(buf, lim, p);
        if (e == -2)
            return -400;
        if (e == -1)
            return len >= HTTP_HEAD_MAX ? -431 : 0;
        if ((size_t)e == p)
            return (long)p + 2;
        if (n == HTTP_HEADERS_MAX)
            return -431;
        if ((rc = header_line(buf, p, (size_t)e)) < 0)
            return rc;
        p = (size_t)e + 2;
    }
}

const char *http_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}
