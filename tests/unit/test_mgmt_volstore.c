/* cairnd's volume store: format/parse round trip, atomic save and reload,
 * and refusal of damaged files. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/mgmt/mgmt.h"
#include "../../src/rpc/wire.h"
#include "check.h"

static struct mgmt_vol *make_vol(const char *name)
{
    struct mgmt_vol *v = calloc(1, sizeof(*v));
    gfid_t g;
    snprintf(v->name, sizeof(v->name), "%s", name);
    gfid_generate(&g);
    gfid_format(&g, v->id);
    v->status = MGMT_VOL_STARTED;
    v->n_bricks = 2;
    v->bricks = calloc(2, sizeof(*v->bricks));
    for (int i = 0; i < 2; i++) {
        gfid_generate(&g);
        gfid_format(&g, v->bricks[i].id);
        snprintf(v->bricks[i].host, sizeof(v->bricks[i].host), "server-%d.example", i);
        snprintf(v->bricks[i].path, sizeof(v->bricks[i].path), "/data/brick %d/with:colon", i);
        v->bricks[i].port = (uint16_t)(24811 + i);
    }
    opt_set_put(&v->opts, "network.ping-timeout", "42");
    opt_set_put(&v->opts, "auth.allow", "10.0.0.0/8,192.168.1.*");
    return v;
}

static void check_same(const struct mgmt_vol *a, const struct mgmt_vol *b)
{
    CHECK_STR(a->name, b->name);
    CHECK_STR(a->id, b->id);
    CHECK_EQ(a->status, b->status);
    CHECK_EQ(a->n_bricks, b->n_bricks);
    for (int i = 0; i < a->n_bricks && i < b->n_bricks; i++) {
        CHECK_STR(a->bricks[i].id, b->bricks[i].id);
        CHECK_STR(a->bricks[i].host, b->bricks[i].host);
        CHECK_STR(a->bricks[i].path, b->bricks[i].path);
        CHECK_EQ(a->bricks[i].port, b->bricks[i].port);
    }
    CHECK_EQ(a->opts.n, b->opts.n);
    for (size_t i = 0; i < a->opts.n; i++)
        CHECK_STR(opt_set_get(&b->opts, a->opts.kv[i].name), a->opts.kv[i].value);
}

static void test_roundtrip(void)
{
    struct mgmt_vol *v = make_vol("vol-1_a"), *w = NULL;
    char err[256];
    char *text = mgmt_vol_format(v);
    CHECK(text != NULL);
    CHECK_EQ(mgmt_vol_parse(text, strlen(text), &w, err, sizeof(err)), 0);
    if (w)
        check_same(v, w);
    mgmt_vol_free(w);

    /* every single-byte change is caught */
    size_t len = strlen(text);
    int refused = 0;
    for (size_t i = 0; i < len; i++) {
        char *bad = strdup(text);
        bad[i] = bad[i] == 'x' ? 'y' : 'x';
        w = NULL;
        if (mgmt_vol_parse(bad, len, &w, err, sizeof(err)) < 0)
            refused++;
        mgmt_vol_free(w);
        free(bad);
    }
    CHECK_EQ(refused, (long long)len);

    /* truncation anywhere is caught */
    refused = 0;
    for (size_t i = 0; i < len; i++) {
        w = NULL;
        if (mgmt_vol_parse(text, i, &w, err, sizeof(err)) < 0)
            refused++;
        mgmt_vol_free(w);
    }
    CHECK_EQ(refused, (long long)len);
    CHECK(mgmt_vol_parse(text, len - 3, &w, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "truncated") != NULL || strstr(err, "checksum") != NULL);
    free(text);
    mgmt_vol_free(v);
}

/* A file with a valid checksum but bad content is refused with the line. */
static void test_bad_content(void)
{
    const char *body = "version=1\nname=v\nid=00000000-0000-0000-0000-000000000002\n"
                       "status=Sideways\nbrick=00000000-0000-0000-0000-000000000003 0 h:/b\n";
    char text[1024], err[256];
    snprintf(text, sizeof(text), "%schecksum=%08x\n", body, rpc_crc32c(0, body, strlen(body)));
    struct mgmt_vol *w = NULL;
    CHECK_EQ(mgmt_vol_parse(text, strlen(text), &w, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "line 4") != NULL && strstr(err, "Sideways") != NULL);

    const char *nobrick = "version=1\nname=v\nid=00000000-0000-0000-0000-000000000002\n"
                          "status=Created\n";
    snprintf(text, sizeof(text), "%schecksum=%08x\n", nobrick,
             rpc_crc32c(0, nobrick, strlen(nobrick)));
    CHECK_EQ(mgmt_vol_parse(text, strlen(text), &w, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "no bricks") != NULL);

    const char *badbrick = "version=1\nname=v\nid=00000000-0000-0000-0000-000000000002\n"
                           "brick=00000000-0000-0000-0000-000000000003 99999 h:/b\n";
    snprintf(text, sizeof(text), "%schecksum=%08x\n", badbrick,
             rpc_crc32c(0, badbrick, strlen(badbrick)));
    CHECK_EQ(mgmt_vol_parse(text, strlen(text), &w, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "bad brick") != NULL);
}

/* A value this version no longer accepts (client.attribute-timeout above 0,
 * set by an older one) is left out, so the option has its default; the
 * other options of the file stay. */
static void test_stale_option_value(void)
{
    const char *body = "version=1\nname=v\nid=00000000-0000-0000-0000-000000000002\n"
                       "status=Created\nbrick=00000000-0000-0000-0000-000000000003 0 h:/b\n"
                       "option.client.attribute-timeout=600\noption.client.entry-timeout=0\n"
                       "option.network.ping-timeout=7\n";
    char text[1024], err[256];
    snprintf(text, sizeof(text), "%schecksum=%08x\n", body, rpc_crc32c(0, body, strlen(body)));
    struct mgmt_vol *w = NULL;
    CHECK_EQ(mgmt_vol_parse(text, strlen(text), &w, err, sizeof(err)), 0);
    if (!w)
        return;
    CHECK(opt_set_get(&w->opts, "client.attribute-timeout") == NULL);
    CHECK_STR(opt_set_get(&w->opts, "client.entry-timeout"), "0");
    CHECK_STR(opt_set_get(&w->opts, "network.ping-timeout"), "7");
    mgmt_vol_free(w);
}

static void test_save_load(void)
{
    char dir[] = "/tmp/cairn-test-volstore-XXXXXX", path[512], err[512];
    CHECK(mkdtemp(dir) != NULL);
    struct mgmt_vol *v = make_vol("alpha"), *v2 = make_vol("beta");
    CHECK_EQ(mgmt_vol_save(dir, v), 0);
    CHECK_EQ(mgmt_vol_save(dir, v2), 0);
    /* replace: a later save wins and leaves no temporary file */
    v->status = MGMT_VOL_STOPPED;
    opt_set_put(&v->opts, "performance.io-thread-count", "8");
    CHECK_EQ(mgmt_vol_save(dir, v), 0);
    snprintf(path, sizeof(path), "%s/vols/alpha/info.tmp", dir);
    CHECK(access(path, F_OK) < 0);

    struct mgmt m = {0};
    snprintf(m.workdir, sizeof(m.workdir), "%s", dir);
    CHECK_EQ(mgmt_store_load(&m, err, sizeof(err)), 0);
    struct mgmt_vol *a = mgmt_vol_find(&m, "alpha"), *b = mgmt_vol_find(&m, "beta");
    CHECK(a && b);
    if (a && b) {
        check_same(v, a);
        check_same(v2, b);
        CHECK(m.vols == a && a->next == b); /* sorted */
    }
    while (m.vols) {
        struct mgmt_vol *x = m.vols;
        mgmt_vol_unlink(&m, x);
        mgmt_vol_free(x);
    }

    /* damage beta's file: the load refuses, naming the file */
    snprintf(path, sizeof(path), "%s/vols/beta/info", dir);
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0);
    CHECK_EQ(pwrite(fd, "#", 1, 60), 1);
    close(fd);
    CHECK_EQ(mgmt_store_load(&m, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "vols/beta/info is corrupted") != NULL);
    while (m.vols) {
        struct mgmt_vol *x = m.vols;
        mgmt_vol_unlink(&m, x);
        mgmt_vol_free(x);
    }

    /* a file that names another volume than its directory is refused */
    CHECK_EQ(mgmt_vol_remove(dir, "beta"), 0);
    snprintf(path, sizeof(path), "%s/vols/beta", dir);
    CHECK(access(path, F_OK) < 0);
    char *text = mgmt_vol_format(v); /* names alpha */
    snprintf(path, sizeof(path), "%s/vols/gamma", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/vols/gamma/info", dir);
    fd = open(path, O_WRONLY | O_CREAT, 0600);
    CHECK_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
    close(fd);
    free(text);
    CHECK_EQ(mgmt_store_load(&m, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "names volume alpha") != NULL);
    while (m.vols) {
        struct mgmt_vol *x = m.vols;
        mgmt_vol_unlink(&m, x);
        mgmt_vol_free(x);
    }
    unlink(path);
    snprintf(path, sizeof(path), "%s/vols/gamma", dir);
    rmdir(path);
    CHECK_EQ(mgmt_vol_remove(dir, "alpha"), 0);
    snprintf(path, sizeof(path), "%s/vols", dir);
    rmdir(path);
    CHECK_EQ(rmdir(dir), 0);
    mgmt_vol_free(v);
    mgmt_vol_free(v2);
}

static void test_volname(void)
{
    char err[256];
    CHECK_EQ(mgmt_check_volname("gv0", err, sizeof(err)), 0);
    CHECK_EQ(mgmt_check_volname("a-b_C9", err, sizeof(err)), 0);
    CHECK_EQ(mgmt_check_volname("", err, sizeof(err)), -EINVAL);
    CHECK_EQ(mgmt_check_volname("all", err, sizeof(err)), -EINVAL);
    CHECK_EQ(mgmt_check_volname("-x", err, sizeof(err)), -EINVAL);
    CHECK_EQ(mgmt_check_volname("a/b", err, sizeof(err)), -EINVAL);
    CHECK_EQ(mgmt_check_volname("a.b", err, sizeof(err)), -EINVAL);
    char longname[80];
    memset(longname, 'a', 65);
    longname[65] = 0;
    CHECK_EQ(mgmt_check_volname(longname, err, sizeof(err)), -EINVAL);
    longname[64] = 0;
    CHECK_EQ(mgmt_check_volname(longname, err, sizeof(err)), 0);
}

int main(void)
{
    test_roundtrip();
    test_bad_content();
    test_stale_option_value();
    test_save_load();
    test_volname();
    return check_summary("test_mgmt_volstore");
}
