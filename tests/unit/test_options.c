/* The options registry: parsers, validation messages, option sets, address
 * checks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/options.h"
#include "check.h"

static void test_bool(void)
{
    const char *yes[] = {"on", "ON", "yes", "true", "enable", "1", "True"};
    const char *no[] = {"off", "no", "false", "disable", "0", "OFF"};
    bool b;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        b = false;
        CHECK_EQ(opt_parse_bool(yes[i], &b), 0);
        CHECK(b);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        b = true;
        CHECK_EQ(opt_parse_bool(no[i], &b), 0);
        CHECK(!b);
    }
    CHECK_EQ(opt_parse_bool("maybe", &b), -EINVAL);
    CHECK_EQ(opt_parse_bool("", &b), -EINVAL);
    CHECK_EQ(opt_parse_bool("onn", &b), -EINVAL);
}

static void test_size_time(void)
{
    int64_t v;
    CHECK_EQ(opt_parse_size("4096", &v), 0);
    CHECK_EQ(v, 4096);
    CHECK_EQ(opt_parse_size("4KB", &v), 0);
    CHECK_EQ(v, 4096);
    CHECK_EQ(opt_parse_size("1mb", &v), 0);
    CHECK_EQ(v, 1 << 20);
    CHECK_EQ(opt_parse_size("2GB", &v), 0);
    CHECK_EQ(v, 2ll << 30);
    CHECK_EQ(opt_parse_size("1TiB", &v), 0);
    CHECK_EQ(v, 1ll << 40);
    CHECK_EQ(opt_parse_size("12XB", &v), -EINVAL);
    CHECK_EQ(opt_parse_size("-1", &v), -EINVAL);
    CHECK_EQ(opt_parse_size("", &v), -EINVAL);
    CHECK_EQ(opt_parse_size("KB", &v), -EINVAL);
    CHECK_EQ(opt_parse_size("99999999999999999999", &v), -EINVAL);
    CHECK_EQ(opt_parse_size("9999999999TB", &v), -EINVAL); /* overflow */
    CHECK_EQ(opt_parse_time("42", &v), 0);
    CHECK_EQ(v, 42);
    CHECK_EQ(opt_parse_time("42s", &v), 0);
    CHECK_EQ(v, 42);
    CHECK_EQ(opt_parse_time("2m", &v), 0);
    CHECK_EQ(v, 120);
    CHECK_EQ(opt_parse_time("1h", &v), 0);
    CHECK_EQ(v, 3600);
    CHECK_EQ(opt_parse_time("1.5", &v), -EINVAL);
    CHECK_EQ(opt_parse_time("ten", &v), -EINVAL);
}

static void test_space(void)
{
    int pct;
    int64_t b;
    CHECK_EQ(opt_parse_space("1", &pct, &b), 0);
    CHECK_EQ(pct, 1);
    CHECK_EQ(b, 0);
    CHECK_EQ(opt_parse_space("10%", &pct, &b), 0);
    CHECK_EQ(pct, 10);
    CHECK_EQ(opt_parse_space("0", &pct, &b), 0);
    CHECK_EQ(pct, 0);
    CHECK_EQ(opt_parse_space("100", &pct, &b), 0);
    CHECK_EQ(opt_parse_space("101", &pct, &b), -EINVAL);
    CHECK_EQ(opt_parse_space("101%", &pct, &b), -EINVAL);
    CHECK_EQ(opt_parse_space("5GB", &pct, &b), 0);
    CHECK_EQ(pct, -1);
    CHECK_EQ(b, 5ll << 30);
    CHECK_EQ(opt_parse_space("%", &pct, &b), -EINVAL);
    CHECK_EQ(opt_parse_space("-1%", &pct, &b), -EINVAL);
    CHECK_EQ(opt_parse_space("ten", &pct, &b), -EINVAL);
    CHECK_EQ(opt_space_bytes(1, 0, 1000000), 10000);
    CHECK_EQ(opt_space_bytes(100, 0, 1000), 1000);
    CHECK_EQ(opt_space_bytes(-1, 4096, 1000000), 4096);
    /* no overflow near the top of the range */
    CHECK(opt_space_bytes(50, 0, UINT64_MAX) == UINT64_MAX / 2);
    char norm[64], err[256];
    CHECK_EQ(opt_validate("storage.reserve", "5", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, "5%");
    CHECK_EQ(opt_validate("storage.reserve", "2GB", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, "2GB");
    CHECK_EQ(opt_validate("storage.reserve", "x", norm, sizeof(norm), err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "percentage") != NULL);
    struct opt_set set = {0};
    opt_space(&set, "storage.reserve", &pct, &b);
    CHECK_EQ(pct, 1);
    opt_set_put(&set, "storage.reserve", "1GB");
    opt_space(&set, "storage.reserve", &pct, &b);
    CHECK_EQ(pct, -1);
    CHECK_EQ(b, 1ll << 30);
    opt_set_free(&set);
}

static void test_validate(void)
{
    char norm[256], err[256];
    CHECK_EQ(opt_validate("network.ping-timeout", "42", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, "42");
    CHECK_EQ(opt_validate("network.ping-timeout", "2m", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, "120");
    CHECK_EQ(opt_validate("network.ping-timeout", "5000", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_STR(err, "'5000' is out of range [1 - 1800] for network.ping-timeout");
    CHECK_EQ(opt_validate("network.ping-timeout", "0", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(opt_validate("network.ping-timeout", "abc", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_STR(err, "'abc' is not a time in seconds for network.ping-timeout");
    CHECK_EQ(opt_validate("no.such-option", "1", norm, sizeof(norm), err, sizeof(err)), -ENOENT);
    CHECK_STR(err, "option : no.such-option does not exist");
    CHECK_EQ(
        opt_validate("diagnostics.brick-log-level", "debug", norm, sizeof(norm), err, sizeof(err)),
        0);
    CHECK_STR(norm, "DEBUG");
    CHECK_EQ(
        opt_validate("diagnostics.client-log-level", "LOUD", norm, sizeof(norm), err, sizeof(err)),
        -EINVAL);
    CHECK(strstr(err, "ERROR|WARNING|INFO|DEBUG|TRACE") != NULL);
    CHECK_EQ(
        opt_validate("performance.io-thread-count", "64", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_EQ(
        opt_validate("performance.io-thread-count", "65", norm, sizeof(norm), err, sizeof(err)),
        -EINVAL);
    CHECK_STR(err, "'65' is out of range [1 - 64] for performance.io-thread-count");
    CHECK_EQ(
        opt_validate("performance.io-thread-count", "8x", norm, sizeof(norm), err, sizeof(err)),
        -EINVAL);
    CHECK_EQ(
        opt_validate("auth.allow", "192.168.1.*,10.0.0.0/8", norm, sizeof(norm), err, sizeof(err)),
        0);
    CHECK_EQ(opt_validate("auth.allow", "", norm, sizeof(norm), err, sizeof(err)), -EINVAL);
    CHECK_EQ(opt_validate("auth.allow", "1.2.3.4,,5.6.7.8", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(opt_validate("auth.allow", "10.0.0.0/33", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(opt_validate("auth.reject", "", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_EQ(opt_validate("auth.reject", "a b", norm, sizeof(norm), err, sizeof(err)), -EINVAL);
    CHECK_EQ(opt_validate("client.entry-timeout", "0", norm, sizeof(norm), err, sizeof(err)), 0);
    /* caching without a lease: only 0, and the refusal says why */
    CHECK_EQ(opt_validate("client.attribute-timeout", "600", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK(strncmp(err, "client.attribute-timeout must be 0: ", 36) == 0);
    CHECK(strstr(err, "client.lease-cache-timeout") != NULL);
    CHECK_EQ(opt_validate("client.entry-timeout", "1s", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(opt_validate("client.attribute-timeout", "0s", norm, sizeof(norm), err, sizeof(err)),
             0);
    CHECK_STR(norm, "0");
    /* a value with a newline would break the store's line format */
    CHECK_EQ(opt_validate("auth.allow", "1.2.3.4\nx", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    /* every default validates (but of options that take no value at all),
     * the table is sorted, and a refusal says what Cairn does instead */
    for (const struct opt_def *d = opt_table; d->name; d++) {
        if (d[1].name)
            CHECK(strcmp(d->name, d[1].name) < 0);
        CHECK(!d->only || (d->refused && *d->refused));
        CHECK(!d->no_effect || !d->live);
        if (d->only && !*d->only) {
            CHECK_EQ(opt_validate(d->name, d->def, norm, sizeof(norm), err, sizeof(err)), -EINVAL);
            continue;
        }
        CHECK(d->help && *d->help);
        if (!*d->def && d->pool)
            continue; /* not set: the reader's own rule (server-quorum-ratio) */
        int rc = opt_validate(d->name, d->def, norm, sizeof(norm), err, sizeof(err));
        if (rc)
            fprintf(stderr, "default of %s: %s\n", d->name, err);
        CHECK_EQ(rc, 0);
    }
}

/* GlusterFS options: taken with no effect, mapped, or refused with a reason. */
static void test_gluster_names(void)
{
    char norm[256], err[512];
    /* the seed-000 thread's volume, as its `volume info` lists the options */
    static const char *const seed[] = {"performance.rda-cache-limit",
                                       "256MB",
                                       "network.inode-lru-limit",
                                       "50000",
                                       "server.outstanding-rpc-limit",
                                       "256",
                                       "performance.client-io-threads",
                                       "true",
                                       "nfs.disable",
                                       "on",
                                       "transport.address-family",
                                       "inet",
                                       "client.event-threads",
                                       "8",
                                       "cluster.eager-lock",
                                       "true",
                                       "cluster.favorite-child-policy",
                                       "size",
                                       "cluster.lookup-optimize",
                                       "true",
                                       "cluster.readdir-optimize",
                                       "true",
                                       "cluster.use-compound-fops",
                                       "true",
                                       "diagnostics.brick-log-level",
                                       "ERROR",
                                       "diagnostics.client-log-level",
                                       "ERROR",
                                       "features.cache-invalidation-timeout",
                                       "600",
                                       "features.cache-invalidation",
                                       "true",
                                       "network.ping-timeout",
                                       "15",
                                       "performance.cache-invalidation",
                                       "true",
                                       "performance.cache-max-file-size",
                                       "6MB",
                                       "performance.cache-refresh-timeout",
                                       "60",
                                       "performance.cache-size",
                                       "1024MB",
                                       "performance.io-thread-count",
                                       "16",
                                       "performance.md-cache-timeout",
                                       "600",
                                       "performance.stat-prefetch",
                                       "true",
                                       "performance.write-behind-window-size",
                                       "256MB",
                                       "server.event-threads",
                                       "8",
                                       "transport.listen-backlog",
                                       "2048",
                                       NULL};
    for (int i = 0; seed[i]; i += 2) {
        int rc = opt_validate(seed[i], seed[i + 1], norm, sizeof(norm), err, sizeof(err));
        if (rc)
            fprintf(stderr, "%s %s: %s\n", seed[i], seed[i + 1], err);
        CHECK_EQ(rc, 0);
    }
    CHECK(opt_find("performance.nl-cache")->no_effect);
    CHECK(!opt_find("network.ping-timeout")->no_effect);
    /* values are still checked */
    CHECK_EQ(opt_validate("performance.nl-cache", "maybe", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(opt_validate("network.inode-lru-limit", "-5", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    /* sharding (docs/shard.md): on and off; blocks of 4MB at least, as GlusterFS */
    CHECK_EQ(opt_validate("features.shard", "on", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, "on");
    CHECK_EQ(opt_validate("features.shard", "disable", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, "off");
    CHECK(opt_find("features.shard")->live && !opt_find("features.shard")->no_effect);
    CHECK_EQ(opt_validate("features.shard-block-size", "4MB", norm, sizeof(norm), err, sizeof(err)),
             0);
    CHECK_EQ(opt_validate("features.shard-block-size", "1MB", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    /* quorum: GlusterFS's types and counts; the ratio is a percentage */
    CHECK_EQ(opt_validate("cluster.quorum-type", "auto", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_EQ(opt_validate("cluster.quorum-type", "none", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_EQ(opt_validate("cluster.quorum-type", "fixed", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_EQ(opt_validate("cluster.quorum-type", "most", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(opt_validate("cluster.quorum-count", "2", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_EQ(opt_validate("cluster.quorum-count", "17", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(
        opt_validate("cluster.server-quorum-type", "server", norm, sizeof(norm), err, sizeof(err)),
        0);
    CHECK_EQ(
        opt_validate("cluster.server-quorum-type", "none", norm, sizeof(norm), err, sizeof(err)),
        0);
    CHECK_EQ(
        opt_validate("cluster.server-quorum-ratio", "51", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, "51%");
    CHECK_EQ(
        opt_validate("cluster.server-quorum-ratio", "101%", norm, sizeof(norm), err, sizeof(err)),
        -EINVAL);
    CHECK_EQ(
        opt_validate("cluster.server-quorum-ratio", "10GB", norm, sizeof(norm), err, sizeof(err)),
        -EINVAL);
    CHECK(opt_find("cluster.server-quorum-ratio")->pool);
    CHECK(!opt_find("cluster.server-quorum-type")->pool);
    CHECK_EQ(opt_validate("storage.owner-uid", "107", norm, sizeof(norm), err, sizeof(err)),
             -EINVAL);
    CHECK_EQ(opt_validate("storage.owner-uid", "-1", norm, sizeof(norm), err, sizeof(err)), 0);
    /* GlusterFS's log levels */
    CHECK_EQ(opt_validate("diagnostics.client-log-level", "critical", norm, sizeof(norm), err,
                          sizeof(err)),
             0);
    CHECK_STR(norm, "CRITICAL");
    /* a GlusterFS name for a Cairn option */
    CHECK_STR(opt_canonical("features.lease-lock-recall-timeout"), "features.lease-recall-timeout");
    CHECK(opt_find("features.lease-lock-recall-timeout") ==
          opt_find("features.lease-recall-timeout"));
    struct opt_set s = {0};
    CHECK_EQ(opt_set_put(&s, "features.lease-recall-timeout", "30"), 0);
    CHECK_STR(opt_value(&s, "features.lease-lock-recall-timeout"), "30");
    opt_set_free(&s);
    /* user.* is free-form */
    CHECK_EQ(opt_validate("user.smb", "disable", norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_EQ(opt_validate("user.", "x", norm, sizeof(norm), err, sizeof(err)), -ENOENT);
    /* help says why */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    opt_print_help(f);
    fclose(f);
    CHECK(strstr(buf, "Option: performance.nl-cache\n") != NULL);
    CHECK(strstr(buf, "(no effect in Cairn: ") != NULL);
    CHECK(strstr(buf, "Option: user.*") != NULL);
    free(buf);
}

static void test_addr_pattern(void)
{
#define PAT(s) opt_addr_pattern(s, strlen(s))
    CHECK(PAT("*"));
    CHECK(PAT("127.0.0.*"));
    CHECK(PAT("192.168.1.[1-9]"));
    CHECK(PAT("10.0.0.0/8"));
    CHECK(PAT("10.1.2.3"));
    CHECK(PAT("::1"));
    CHECK(PAT("fe80::*"));
    CHECK(!PAT("on"));
    CHECK(!PAT("localhost"));
    CHECK(!PAT("*.example.com"));
    CHECK(!PAT("10.1.2")); /* no address is written so */
    CHECK(!PAT("10.0.0.0/33"));
    CHECK(!PAT(""));
#undef PAT
}

static void test_set(void)
{
    struct opt_set s = {0};
    CHECK(opt_set_get(&s, "network.ping-timeout") == NULL);
    CHECK_STR(opt_value(&s, "network.ping-timeout"), "10");
    CHECK_EQ(opt_int(&s, "network.ping-timeout"), 10);
    CHECK_EQ(opt_int(&s, "performance.io-thread-count"), 16);
    CHECK_EQ(opt_set_put(&s, "network.ping-timeout", "30"), 0);
    CHECK_EQ(opt_set_put(&s, "auth.allow", "127.0.0.*"), 0);
    CHECK_EQ(s.n, 2);
    CHECK_EQ(opt_int(&s, "network.ping-timeout"), 30);
    CHECK_EQ(opt_set_put(&s, "network.ping-timeout", "40"), 0);
    CHECK_EQ(s.n, 2);
    CHECK_EQ(opt_int(&s, "network.ping-timeout"), 40);
    CHECK_EQ(opt_set_put(&s, "network.ping-timeout", NULL), 0);
    CHECK_EQ(s.n, 1);
    CHECK_STR(opt_set_get(&s, "auth.allow"), "127.0.0.*");
    CHECK_EQ(opt_set_put(&s, "not.there", NULL), 0);
    /* a value that no longer parses falls back to the default */
    CHECK_EQ(opt_set_put(&s, "network.ping-timeout", "garbage"), 0);
    CHECK_EQ(opt_int(&s, "network.ping-timeout"), 10);
    /* and so does one out of the range (a clients' cache time without a
     * lease that an older version stored): a mount gets 0, never 600 */
    CHECK_EQ(opt_set_put(&s, "client.attribute-timeout", "600"), 0);
    CHECK_EQ(opt_int(&s, "client.attribute-timeout"), 0);
    CHECK_EQ(opt_set_put(&s, "cluster.shd-max-threads", "65"), 0);
    CHECK_EQ(opt_int(&s, "cluster.shd-max-threads"), 1);
    CHECK(opt_value(&s, "no.such") == NULL);
    opt_set_free(&s);
    CHECK_EQ(s.n, 0);
}

static void test_addr(void)
{
    CHECK(opt_addr_allowed("*", "", "10.1.2.3"));
    CHECK(opt_addr_allowed(NULL, NULL, "10.1.2.3"));
    CHECK(!opt_addr_allowed("192.168.1.*", "", "10.1.2.3"));
    CHECK(opt_addr_allowed("192.168.1.*", "", "192.168.1.77"));
    CHECK(opt_addr_allowed("1.1.1.1, 192.168.1.*", "", "192.168.1.77"));
    CHECK(!opt_addr_allowed("*", "192.168.1.77", "192.168.1.77"));
    CHECK(opt_addr_allowed("*", "192.168.1.77", "192.168.1.78"));
    CHECK(opt_addr_allowed("10.0.0.0/8", "", "10.200.3.4"));
    CHECK(!opt_addr_allowed("10.0.0.0/8", "", "11.0.0.1"));
    CHECK(!opt_addr_allowed("*", "127.0.0.0/24", "127.0.0.5"));
    CHECK(opt_addr_allowed("127.0.0.5", "", "::ffff:127.0.0.5"));
    CHECK(opt_addr_allowed("0.0.0.0/0", "", "8.8.8.8"));
    CHECK(!opt_addr_allowed("*", "", NULL));
}

/* GlusterFS's per-directory form: /DIR(A|B), bare entries for every mount. */
static void test_addr_dir(void)
{
    const char *allow = "/(192.168.10.*|192.168.11.*),/sub1(192.168.1.*),/sub2(10.0.0.0/8)";
#define OK(a, r, d, addr) opt_addr_allowed_dir(a, r, d, addr)
    CHECK(OK(allow, "", "/", "192.168.11.4"));
    CHECK(OK(allow, "", NULL, "192.168.10.4"));
    CHECK(!OK(allow, "", "/", "192.168.1.4"));
    CHECK(OK(allow, "", "/sub1", "192.168.1.4"));
    CHECK(!OK(allow, "", "/sub1", "192.168.10.4")); /* the whole volume's entry is not sub1's */
    CHECK(!OK(allow, "", "/sub1/deeper", "192.168.1.4")); /* exactly the directory named */
    CHECK(OK(allow, "", "/sub2", "10.9.9.9"));
    CHECK(!OK(allow, "", "/sub3", "10.9.9.9"));
    CHECK(!opt_addr_allowed(allow, "", "192.168.1.4"));
    CHECK(opt_addr_allowed(allow, "", "192.168.11.4"));
    /* a bare entry applies to every directory */
    CHECK(OK("10.0.0.1,/s(10.0.0.2)", "", "/s", "10.0.0.1"));
    CHECK(OK("10.0.0.1,/s(10.0.0.2)", "", "/t", "10.0.0.1"));
    CHECK(OK("10.0.0.1,/s(10.0.0.2)", "", "/s", "10.0.0.2"));
    CHECK(!OK("10.0.0.1,/s(10.0.0.2)", "", "/", "10.0.0.2"));
    CHECK(OK("*", "", "/a/b", "1.2.3.4"));
    /* reject per directory, and bare */
    CHECK(!OK("*", "/s(10.0.0.2)", "/s", "10.0.0.2"));
    CHECK(OK("*", "/s(10.0.0.2)", "/", "10.0.0.2"));
    CHECK(!OK("*", "10.0.0.2", "/s", "10.0.0.2"));
    CHECK(OK(" /s( 10.0.0.2 | 10.0.0.3 ) ", "", "/s", "10.0.0.3"));
#undef OK
    char norm[256], err[256];
    CHECK_EQ(opt_validate("auth.allow", allow, norm, sizeof(norm), err, sizeof(err)), 0);
    CHECK_STR(norm, allow);
    CHECK_EQ(
        opt_validate("auth.reject", "10.0.0.1,/a/b(1.2.3.4)", norm, sizeof(norm), err, sizeof(err)),
        0);
    const char *bad[] = {"/s(1.2.3.4",       "/s1.2.3.4)",   "/s()",
                         "/s(1.2.3.4|)",     "/s(|1.2.3.4)", "/s(a b)",
                         "/a/../b(1.2.3.4)", "/a/(1.2.3.4)", "//a(1.2.3.4)",
                         "/s((1.2.3.4))",    "/s(1.2.3.4)x", NULL};
    for (int i = 0; bad[i]; i++) {
        CHECK_EQ(opt_validate("auth.allow", bad[i], norm, sizeof(norm), err, sizeof(err)), -EINVAL);
        CHECK(strstr(err, "auth.allow") != NULL);
    }
    CHECK(opt_dir_valid("/", 1));
    CHECK(opt_dir_valid("/a/b", 4));
    CHECK(!opt_dir_valid("/a/", 3));
    CHECK(!opt_dir_valid("a", 1));
    CHECK(!opt_dir_valid("", 0));
}

static void test_help(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    opt_print_help(f);
    fclose(f);
    for (const struct opt_def *d = opt_table; d->name; d++)
        CHECK(strstr(buf, d->name) != NULL);
    CHECK(strstr(buf, "Range: 1 - 1800") != NULL);
    free(buf);
}

int main(void)
{
    test_bool();
    test_size_time();
    test_space();
    test_validate();
    test_gluster_names();
    test_addr_pattern();
    test_set();
    test_addr();
    test_addr_dir();
    test_help();
    return check_summary("test_options");
}
