/* The metrics endpoint's request parser (src/mgmt/http.c). */
#include <string.h>

#include "../../src/mgmt/http.h"
#include "check.h"

static long parse(const char *s, struct http_req *r)
{
    return http_parse_request((const uint8_t *)s, strlen(s), r);
}

static void test_accepts(void)
{
    struct http_req r;
    const char *get = "GET /metrics HTTP/1.1\r\nHost: a:1\r\nAccept: */*\r\n\r\n";
    CHECK_EQ(parse(get, &r), (long)strlen(get));
    CHECK_EQ(r.method, HTTP_GET);
    CHECK_EQ(r.minor, 1);
    CHECK(strcmp(r.path, "/metrics") == 0);
    CHECK_EQ(parse("HEAD /metrics?name[]=x HTTP/1.0\r\n\r\n", &r), 35);
    CHECK_EQ(r.method, HTTP_HEAD);
    CHECK(strcmp(r.path, "/metrics") == 0);
    /* bytes after the head are not its business */
    CHECK_EQ(parse("GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n", &r), 18);
    CHECK_EQ(parse("GET / HTTP/1.1\r\nContent-Length:  0 \r\n\r\n", &r), 39);
}

static void test_incomplete(void)
{
    struct http_req r;
    CHECK_EQ(parse("", &r), 0);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r", &r), 0);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nHost: a\r\n", &r), 0);
    /* a full buffer without the end of the head: too large */
    char big[HTTP_HEAD_MAX + 1];
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    CHECK_EQ(http_parse_request((const uint8_t *)big, HTTP_HEAD_MAX, &r), -431);
    CHECK_EQ(http_parse_request((const uint8_t *)big, HTTP_HEAD_MAX - 1, &r), 0);
}

static void test_refuses(void)
{
    struct http_req r;
    CHECK_EQ(parse("POST /metrics HTTP/1.1\r\n\r\n", &r), -405);
    CHECK_EQ(parse("DELETE /metrics HTTP/1.1\r\n\r\n", &r), -405);
    CHECK_EQ(parse("get /metrics HTTP/1.1\r\n\r\n", &r), -405);
    CHECK_EQ(parse("GET /metrics HTTP/2.0\r\n\r\n", &r), -505);
    CHECK_EQ(parse("GET /metrics HTTP/1.2\r\n\r\n", &r), -505);
    CHECK_EQ(parse("GET /metrics HTTP/1.1 \r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET  /metrics HTTP/1.1\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET http://a/metrics HTTP/1.1\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GARBAGE\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\nHost: a\n\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nHost: a\rb\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\n folded\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nNo colon\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\n: empty name\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nHost: a\x01\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\ncontent-length: 00\r\n\r\n", &r), -400);
    CHECK_EQ(parse("GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r), -400);
    char target[HTTP_TARGET_MAX + 64] = "GET /";
    memset(target + 5, 'x', HTTP_TARGET_MAX);
    strcpy(target + 5 + HTTP_TARGET_MAX - 1, " HTTP/1.1\r\n\r\n");
    CHECK_EQ(parse(target, &r), -414);
    /* too many headers */
    char many[HTTP_HEAD_MAX];
    strcpy(many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i <= HTTP_HEADERS_MAX; i++)
        strcat(many, "A: b\r\n");
    strcat(many, "\r\n");
    CHECK_EQ(parse(many, &r), -431);
}

int main(void)
{
    test_accepts();
    test_incomplete();
    test_refuses();
    return check_summary("test_mgmt_http");
}
