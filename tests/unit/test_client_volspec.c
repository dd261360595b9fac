/* HOST[:PORT]:/VOLNAME and backup server lists (client/volspec.c). */
#include <errno.h>

#include "../../src/client/volspec.h"
#include "check.h"

static void test_spec(void)
{
    struct net_addr a;
    char vol[16];
    const char *why;
    CHECK_EQ(cl_volspec_parse("host1:/gv0", &a, vol, sizeof(vol), &why), 0);
    CHECK_STR(a.host, "host1");
    CHECK_EQ(a.port, CAIRN_MGMT_PORT);
    CHECK_STR(vol, "gv0");
    CHECK(why == NULL);
    CHECK_EQ(cl_volspec_parse("127.0.0.1:7000:/v", &a, vol, sizeof(vol), NULL), 0);
    CHECK_STR(a.host, "127.0.0.1");
    CHECK_EQ(a.port, 7000);
    CHECK_EQ(cl_volspec_parse("[::1]:7001:/v", &a, vol, sizeof(vol), NULL), 0);
    CHECK_STR(a.host, "::1");
    CHECK_EQ(a.port, 7001);
    const char *bad[] = {"",         "host",          "host:",  "host:/",
                         ":/v",      "host:/a/b",     "host/v", "host:/0123456789abcdef",
                         "ho st:/v", "host:99999:/v", NULL};
    for (int i = 0; bad[i]; i++) {
        CHECK_EQ(cl_volspec_parse(bad[i], &a, vol, sizeof(vol), &why), -EINVAL);
        CHECK(why != NULL);
    }
    CHECK_EQ(cl_volspec_parse(NULL, &a, vol, sizeof(vol), NULL), -EINVAL);
}

/* HOST:/VOLNAME/DIR: GlusterFS's mount of a directory of the volume. */
static void test_spec_dir(void)
{
    struct net_addr a;
    char vol[16], dir[32];
    const char *why;
    CHECK_EQ(cl_volspec_parse_dir("h:/gv0", &a, vol, sizeof(vol), dir, sizeof(dir), &why), 0);
    CHECK_STR(vol, "gv0");
    CHECK_STR(dir, "/");
    CHECK_EQ(cl_volspec_parse_dir("h:7000:/gv0/a/b", &a, vol, sizeof(vol), dir, sizeof(dir), &why),
             0);
    CHECK_STR(vol, "gv0");
    CHECK_STR(dir, "/a/b");
    CHECK_EQ(a.port, 7000);
    CHECK_EQ(cl_volspec_parse_dir("h:/gv0/a/", &a, vol, sizeof(vol), dir, sizeof(dir), &why), 0);
    CHECK_STR(dir, "/a");
    CHECK_EQ(cl_volspec_parse_dir("h:/gv0/", &a, vol, sizeof(vol), dir, sizeof(dir), &why), 0);
    CHECK_STR(dir, "/");
    const char *bad[] = {"h:/gv0/a/../b",
                         "h:/gv0/./a",
                         "h:/gv0//a",
                         "h:/gv0/..",
                         "h:/gv0/0123456789012345678901234567890123",
                         NULL};
    for (int i = 0; bad[i]; i++) {
        CHECK_EQ(cl_volspec_parse_dir(bad[i], &a, vol, sizeof(vol), dir, sizeof(dir), &why),
                 -EINVAL);
        CHECK_STR(why, "bad directory");
    }
    CHECK_EQ(cl_volspec_parse_dir("h://a", &a, vol, sizeof(vol), dir, sizeof(dir), &why), -EINVAL);
}

static void test_servers(void)
{
    struct net_addr s[3];
    int n;
    CHECK_EQ(cl_servers_parse("a:b:7000:c", s, 3, &n), 0);
    CHECK_EQ(n, 3);
    CHECK_STR(s[0].host, "a");
    CHECK_EQ(s[0].port, CAIRN_MGMT_PORT);
    CHECK_STR(s[1].host, "b");
    CHECK_EQ(s[1].port, 7000);
    CHECK_STR(s[2].host, "c");
    CHECK_EQ(cl_servers_parse("[::1]:9:x", s, 3, &n), 0);
    CHECK_EQ(n, 2);
    CHECK_STR(s[0].host, "::1");
    CHECK_EQ(s[0].port, 9);
    CHECK_EQ(cl_servers_parse("a:b:c:d", s, 3, &n), -EINVAL); /* more than max */
    CHECK_EQ(cl_servers_parse("", s, 3, &n), -EINVAL);
    CHECK_EQ(cl_servers_parse("::", s, 3, &n), -EINVAL);
    CHECK_EQ(cl_servers_parse("[::1", s, 3, &n), -EINVAL);
}

int main(void)
{
    test_spec();
    test_spec_dir();
    test_servers();
    return check_summary("test_client_volspec");
}
