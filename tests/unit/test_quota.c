/* features.quota-limits (lib/quota.c): parsing, printing, paths, sizes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/quota.h"
#include "check.h"

static void test_limits(void)
{
    struct quota_limits q;
    char err[128];
    CHECK_EQ(quota_limits_parse("", &q, err, sizeof(err)), 0);
    CHECK_EQ(q.n, 0);
    quota_limits_free(&q);
    const char *s = "1048576:80:0:0:/a;0:0:5:50:/b c:d;10:0:0:0:/";
    CHECK_EQ(quota_limits_parse(s, &q, err, sizeof(err)), 0);
    CHECK_EQ(q.n, 3);
    CHECK_EQ(q.l[0].hard, 1048576);
    CHECK_EQ(q.l[0].soft, 80);
    CHECK_EQ(q.l[1].objects, 5);
    CHECK_EQ(q.l[1].obj_soft, 50);
    CHECK(strcmp(q.l[1].path, "/b c:d") == 0);
    CHECK(quota_limits_find(&q, "/") == &q.l[2]);
    CHECK(quota_limits_find(&q, "/x") == NULL);
    char *back = quota_limits_format(&q);
    CHECK(back && strcmp(back, s) == 0);
    free(back);
    quota_limits_free(&q);
    const char *bad[] = {
        "1:2:3:/a",    "x:0:0:0:/a",    "1:101:0:0:/a",    "-1:0:0:0:/a",           "1:0:0:0:a",
        "1:0:0:0:/a/", "1:0:0:0:/a//b", "1:0:0:0:/a/../b", "1:0:0:0:/a;1:0:0:0:/a", "1:0:0:0:/a\n",
        NULL};
    for (int i = 0; bad[i]; i++) {
        CHECK_EQ(quota_limits_parse(bad[i], &q, err, sizeof(err)), -EINVAL);
        CHECK_EQ(q.n, 0);
    }
}

static void test_paths(void)
{
    char out[64];
    CHECK_EQ(quota_path_norm("/a/b/", out, sizeof(out)), 0);
    CHECK(strcmp(out, "/a/b") == 0);
    CHECK_EQ(quota_path_norm("/", out, sizeof(out)), 0);
    CHECK(strcmp(out, "/") == 0);
    CHECK_EQ(quota_path_norm("a", out, sizeof(out)), -EINVAL);
    CHECK_EQ(quota_path_norm("/a/./b", out, sizeof(out)), -EINVAL);
    CHECK_EQ(quota_path_norm("/a;b", out, sizeof(out)), -EINVAL);
    CHECK(quota_path_under("/", "/x"));
    CHECK(quota_path_under("/a", "/a"));
    CHECK(quota_path_under("/a", "/a/b"));
    CHECK(!quota_path_under("/a", "/ab"));
    CHECK(!quota_path_under("/a/b", "/a"));
}

static void test_sizes(void)
{
    int64_t v;
    CHECK_EQ(quota_parse_size("1MB", &v), 0);
    CHECK_EQ(v, 1 << 20);
    CHECK_EQ(quota_parse_size("10GB", &v), 0);
    CHECK_EQ(v, 10ll << 30);
    CHECK_EQ(quota_parse_size("1.5KB", &v), 0);
    CHECK_EQ(v, 1536);
    CHECK_EQ(quota_parse_size("2t", &v), 0);
    CHECK_EQ(v, 2ll << 40);
    CHECK_EQ(quota_parse_size("512", &v), 0);
    CHECK_EQ(v, 512);
    const char *bad[] = {"10XB", "-5MB", "0", "MB", "", "1e30PB", "nan", "inf", " 1MB", NULL};
    for (int i = 0; bad[i]; i++)
        CHECK_EQ(quota_parse_size(bad[i], &v), -EINVAL);
    char buf[32];
    quota_format_size(512, buf, sizeof(buf));
    CHECK(strcmp(buf, "512Bytes") == 0);
    quota_format_size(10 << 20, buf, sizeof(buf));
    CHECK(strcmp(buf, "10.0MB") == 0);
    quota_format_size(1536, buf, sizeof(buf));
    CHECK(strcmp(buf, "1.5KB") == 0);
}

int main(void)
{
    test_limits();
    test_paths();
    test_sizes();
    return check_summary("test_quota");
}
