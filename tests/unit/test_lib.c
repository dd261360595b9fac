/* Object ids and address parsing. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../../src/lib/gfid.h"
#include "../../src/lib/net.h"
#include "check.h"

static void test_gfid(void)
{
    gfid_t a, b, root;
    char s[GFID_STRLEN];
    gfid_generate(&a);
    gfid_generate(&b);
    CHECK(!gfid_equal(&a, &b));
    CHECK(!gfid_is_null(&a));
    CHECK_EQ(a.b[6] >> 4, 4);
    gfid_format(&a, s);
    CHECK_EQ(strlen(s), 36);
    CHECK_EQ(gfid_parse(s, &b), 0);
    CHECK(gfid_equal(&a, &b));
    gfid_root(&root);
    gfid_format(&root, s);
    CHECK_STR(s, "00000000-0000-0000-0000-000000000001");
    CHECK_EQ(gfid_ino(&root), 1);
    CHECK(gfid_ino(&a) > 1);
    CHECK_EQ(gfid_parse("00000000-0000-0000-0000-00000000000", &b), -EINVAL);
    CHECK_EQ(gfid_parse("00000000+0000-0000-0000-000000000001", &b), -EINVAL);
    CHECK_EQ(gfid_parse("0000000g-0000-0000-0000-000000000001", &b), -EINVAL);
}

static void test_addr(void)
{
    struct net_addr a;
    char s[300];
    CHECK_EQ(net_parse_addr("127.0.0.2", 24810, &a), 0);
    CHECK_STR(a.host, "127.0.0.2");
    CHECK_EQ(a.port, 24810);
    CHECK_EQ(net_parse_addr("server-1.example:7000", 24810, &a), 0);
    CHECK_STR(a.host, "server-1.example");
    CHECK_EQ(a.port, 7000);
    CHECK_EQ(net_parse_addr("[::1]:99", 1, &a), 0);
    CHECK_STR(a.host, "::1");
    net_format_addr(&a, s, sizeof(s));
    CHECK_STR(s, "[::1]:99");
    CHECK_EQ(net_parse_addr("", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("h:", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("h:0", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("h:65536", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("h:12x", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("::1", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("[::1", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("[abc]", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("a b", 1, &a), -EINVAL);
    CHECK_EQ(net_parse_addr("a/b", 1, &a), -EINVAL);
}

static void test_listen_connect(void)
{
    struct net_addr a;
    net_parse_addr("127.0.0.1:25999", 0, &a);
    int l = net_listen(&a, 4);
    CHECK(l >= 0);
    int c = net_connect(&a, 1000);
    CHECK(c >= 0);
    if (c >= 0)
        CHECK_EQ(net_write_all(c, "ping", 4), 0);
    if (c >= 0)
        close(c);
    if (l >= 0)
        close(l);
    /* nothing listens on this port: a clear refusal, not a hang */
    net_parse_addr("127.0.0.1:25998", 0, &a);
    CHECK_EQ(net_connect(&a, 1000), -ECONNREFUSED);
    CHECK_EQ(net_parse_addr("no-such-host.invalid:1", 0, &a), 0);
    CHECK(net_connect(&a, 1000) < 0);
}

int main(void)
{
    test_gfid();
    test_addr();
    test_listen_connect();
    return check_summary("test_lib");
}
