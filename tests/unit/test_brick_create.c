/* CREATE's reply carries the attributes the new file has after every change
 * the brick made to it (id, owner, set-id bits), without asking the disk
 * again: they must equal what a LOOKUP then reports. */
#include <dirent.h>
#include <stdio.h>
#include <sys/xattr.h>

#include "test_brick_util.h"

/* A request making path with a new gfid (left in g), mode, umask 022 and
 * the given owner. */
static struct rpc_msg new_object(const char *path, gfid_t *g, unsigned mode, uint64_t uid,
                                 uint64_t gid)
{
    struct rpc_msg m = tb_msg(path);
    gfid_generate(g);
    tb_set_gfid(&m, g);
    RPC_SET(&m, mode, RPC_T_MODE, mode);
    RPC_SET(&m, umask, RPC_T_UMASK, 022);
    RPC_SET(&m, uid, RPC_T_UID, uid);
    RPC_SET(&m, gid, RPC_T_GID, gid);
    return m;
}

static void create_as(struct tb *t, const char *path, unsigned mode, uint64_t uid, uint64_t gid)
{
    gfid_t g;
    struct rpc_msg m = new_object(path, &g, S_IFREG | mode, uid, gid);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_CREATE, &m, &rep), 0);
    struct rpc_attr made = rep.m.attr, seen;
    uint64_t fh = rep.m.fh;
    CHECK(rpc_has(&rep.m, RPC_T_ATTR));
    tb_free(&rep);
    CHECK_EQ(tb_lookup(t, path, &seen), 0);
    CHECK(!memcmp(made.gfid.b, g.b, GFID_LEN));
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK_EQ(made.nlink, seen.nlink);
    CHECK_EQ(made.mode, seen.mode);
    CHECK_EQ(made.mode & 07777, mode & ~022u);
    CHECK_EQ(made.uid, uid);
    CHECK_EQ(made.gid, gid);
    CHECK_EQ(made.uid, seen.uid);
    CHECK_EQ(made.gid, seen.gid);
    CHECK_EQ(made.size, seen.size);
    CHECK_EQ(made.ctime, seen.ctime);
    CHECK_EQ(made.ctime_ns, seen.ctime_ns);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASE, fh), 0);
}

/* MAKE_FILE: a whole file in one request, or nothing at all. */
static void make_file(struct tb *t)
{
    gfid_t g;
    struct rpc_msg m = new_object("/d/made", &g, S_IFREG | 0644, 1234, 5678);
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, "hello", 5);
    RPC_SET(&m, size, RPC_T_SIZE, 8192);
    struct rpc_buf x;
    rpc_buf_init(&x);
    rpc_put_str(&x, RPC_T_NAME, "user.k");
    rpc_put_bytes(&x, RPC_T_DATA, "v", 1);
    rpc_set_bytes(&m, RPC_T_XATTRS, &m.xattrs, x.data, (uint32_t)x.len);
    m.mtime.sec = 1500000000;
    m.mtime.nsec = 7;
    m.present |= 1ull << RPC_T_MTIME;
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_MTIME | RPC_SET_MODE);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | 0600);
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_MAKE_FILE, &m, &rep), 0);
    struct rpc_attr made = rep.m.attr, seen;
    tb_free(&rep);
    CHECK_EQ(tb_lookup(t, "/d/made", &seen), 0);
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK_EQ(made.size, 8192);
    CHECK_EQ(seen.size, 8192);
    CHECK_EQ(seen.mode & 07777, 0600);
    CHECK_EQ(seen.uid, 1234);
    CHECK_EQ(seen.gid, 5678);
    CHECK_EQ(seen.mtime, 1500000000);
    CHECK_EQ(seen.mtime_ns, 7);
    char path[PATH_MAX], buf[16] = "";
    snprintf(path, sizeof(path), "%s/d/made", t->dir);
    CHECK_EQ(getxattr(path, "user.k", buf, sizeof(buf)), 1);
    FILE *fp = fopen(path, "rb");
    CHECK(fp && fread(buf, 1, 5, fp) == 5 && !memcmp(buf, "hello", 5));
    if (fp)
        fclose(fp);
    /* the name is taken */
    CHECK_EQ(tb_do(t, RPC_OP_MAKE_FILE, &m), -EEXIST);
    /* a refused attribute leaves nothing behind */
    rpc_buf_reset(&x);
    rpc_put_str(&x, RPC_T_NAME, "trusted.cairn.gfid");
    rpc_put_bytes(&x, RPC_T_DATA, "v", 1);
    struct rpc_msg bad = m;
    rpc_set_str(&bad, RPC_T_PATH, &bad.path, "/d/refused");
    gfid_generate(&bad.gfid);
    rpc_set_bytes(&bad, RPC_T_XATTRS, &bad.xattrs, x.data, (uint32_t)x.len);
    CHECK_EQ(tb_do(t, RPC_OP_MAKE_FILE, &bad), -EPERM);
    CHECK_EQ(tb_lookup(t, "/d/refused", &seen), -ENOENT);
    rpc_buf_free(&x);
}

/* Entries in the brick's .cairn/tmp/<sub> directories: what a create
 * staged there and never named. */
static int staged_count(struct tb *t)
{
    int n = 0;
    for (int i = 0; i < BRICK_TMP_DIRS; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/" BRICK_PRIVATE "/tmp/%02x", t->dir, i);
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));)
            n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        if (d)
            closedir(d);
    }
    return n;
}

/* MKDIR: the directory appears under its name complete, with its id,
 * layout, owner and (in a setgid parent) group and setgid bit; a taken
 * name leaves nothing staged; a brick restart removes what a crash left
 * staged. */
static void make_dir(struct tb *t)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/d/sg", t->dir);
    CHECK_EQ(mkdir(path, 0755), 0);
    CHECK_EQ(chown(path, 0, 4321), 0);
    CHECK_EQ(chmod(path, 02775), 0);
    gfid_t g;
    struct rpc_msg m = new_object("/d/sg/sub", &g, S_IFDIR | 0777, 1234, 5678);
    rpc_set_bytes(&m, RPC_T_LAYOUT, &m.layout, "LAYOUT", 6);
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_MKDIR, &m, &rep), 0);
    struct rpc_attr made = rep.m.attr, seen;
    tb_free(&rep);
    CHECK_EQ(tb_lookup(t, "/d/sg/sub", &seen), 0);
    CHECK(!memcmp(made.gfid.b, g.b, GFID_LEN));
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK(S_ISDIR(seen.mode));
    CHECK_EQ(seen.mode & 07777, 02755);
    CHECK_EQ(made.mode, seen.mode);
    CHECK_EQ(seen.uid, 1234);
    CHECK_EQ(seen.gid, 4321); /* the setgid parent's group */
    char v[16] = "";
    snprintf(path, sizeof(path), "%s/d/sg/sub", t->dir);
    CHECK_EQ(getxattr(path, BRICK_XATTR_LAYOUT, v, sizeof(v)), 6);
    CHECK(!memcmp(v, "LAYOUT", 6));
    CHECK_EQ(staged_count(t), 0);
    /* the name is taken: refused, the existing one kept, nothing staged */
    gfid_generate(&m.gfid);
    CHECK_EQ(tb_do(t, RPC_OP_MKDIR, &m), -EEXIST);
    CHECK_EQ(tb_lookup(t, "/d/sg/sub", &seen), 0);
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK_EQ(staged_count(t), 0);
    /* a crash's leftovers: a staged directory and file, gone after a restart */
    snprintf(path, sizeof(path), "%s/" BRICK_PRIVATE "/tmp/07/leftover", t->dir);
    CHECK_EQ(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/" BRICK_PRIVATE "/tmp/08/leftover", t->dir);
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    if (fp)
        fclose(fp);
    CHECK_EQ(staged_count(t), 2);
    tb_close(t, 0);
    CHECK_EQ(tb_open_at(t, t->dir, "testvol", NULL), 0);
    CHECK_EQ(staged_count(t), 0);
    CHECK_EQ(tb_lookup(t, "/d/sg/sub", &seen), 0);
}

/* MKNOD (a distribute link-to file, a FIFO) and SYMLINK: made whole before
 * they have their name, like directories. */
static void make_node_and_link(struct tb *t)
{
    gfid_t g;
    struct rpc_msg m = new_object("/d/lt", &g, S_IFREG | S_ISVTX, 1234, 5678);
    rpc_set_bytes(&m, RPC_T_LINKTO, &m.linkto, "2", 1);
    struct rpc_attr seen;
    CHECK_EQ(tb_do(t, RPC_OP_MKNOD, &m), 0);
    CHECK_EQ(tb_lookup(t, "/d/lt", &seen), 0);
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK_EQ(seen.mode, S_IFREG | S_ISVTX);
    CHECK_EQ(seen.uid, 1234);
    char path[PATH_MAX], v[8] = "";
    snprintf(path, sizeof(path), "%s/d/lt", t->dir);
    CHECK_EQ(getxattr(path, BRICK_XATTR_LINKTO, v, sizeof(v)), 1);
    CHECK_EQ(v[0], '2');
    gfid_generate(&m.gfid);
    CHECK_EQ(tb_do(t, RPC_OP_MKNOD, &m), -EEXIST);
    m = new_object("/d/fifo", &g, S_IFIFO | 0640, 0, 0);
    CHECK_EQ(tb_do(t, RPC_OP_MKNOD, &m), 0);
    CHECK_EQ(tb_lookup(t, "/d/fifo", &seen), 0);
    CHECK_EQ(seen.mode, S_IFIFO | 0640);
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    m = new_object("/d/ln", &g, 0, 1234, 5678);
    rpc_set_bytes(&m, RPC_T_NAME, &m.name, "some/target", 11);
    CHECK_EQ(tb_do(t, RPC_OP_SYMLINK, &m), 0);
    CHECK_EQ(tb_lookup(t, "/d/ln", &seen), 0);
    CHECK(S_ISLNK(seen.mode));
    CHECK(!memcmp(seen.gfid.b, g.b, GFID_LEN));
    CHECK_EQ(seen.uid, 1234);
    CHECK_EQ(seen.gid, 5678);
    char target[32] = "";
    snprintf(path, sizeof(path), "%s/d/ln", t->dir);
    CHECK_EQ(readlink(path, target, sizeof(target)), 11);
    CHECK(!memcmp(target, "some/target", 11));
    gfid_generate(&m.gfid);
    CHECK_EQ(tb_do(t, RPC_OP_SYMLINK, &m), -EEXIST);
    CHECK_EQ(staged_count(t), 0);
}

/* CREATE of a taken name: O_EXCL answers EEXIST, without it the existing
 * file is opened (its id kept); nothing is left staged either way. */
static void create_taken(struct tb *t)
{
    gfid_t g, g2;
    struct rpc_attr seen;
    struct tb_reply rep;
    CHECK_EQ(tb_lookup(t, "/d/user", &seen), 0);
    g = seen.gfid;
    struct rpc_msg m = new_object("/d/user", &g2, S_IFREG | 0644, 0, 0);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT | O_EXCL);
    CHECK_EQ(tb_do(t, RPC_OP_CREATE, &m), -EEXIST);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    CHECK_EQ(tb_call(t, RPC_OP_CREATE, &m, &rep), 0);
    CHECK(!memcmp(rep.m.attr.gfid.b, g.b, GFID_LEN));
    uint64_t fh = rep.m.fh;
    tb_free(&rep);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASE, fh), 0);
    CHECK_EQ(staged_count(t), 0);
}

/* MAKE_FILE in dir as uid 1234 gid 5678, mode 0666 less umask 022; the
 * new file's attributes in *seen. */
static void make_in(struct tb *t, const char *path, struct rpc_attr *seen)
{
    gfid_t g;
    struct rpc_msg m = new_object(path, &g, S_IFREG | 0666, 1234, 5678);
    CHECK_EQ(tb_do(t, RPC_OP_MAKE_FILE, &m), 0);
    CHECK_EQ(tb_lookup(t, path, seen), 0);
}

/* What of a directory shapes a new file (set-group-ID bit and group,
 * default ACL) is kept with the cached directory between files: a change
 * of those through the brick shows in the very next file. */
static void dir_shape_follows_changes(struct tb *t)
{
    struct rpc_attr seen;
    CHECK_EQ(tb_mkdir(t, "/shape", 0777), 0);
    make_in(t, "/shape/f1", &seen);
    CHECK_EQ(seen.gid, 5678);
    CHECK_EQ(seen.mode & 07777, 0644);
    make_in(t, "/shape/f2", &seen); /* from what was kept */
    CHECK_EQ(seen.gid, 5678);
    struct rpc_msg m = tb_msg("/shape");
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_MODE | RPC_SET_GID);
    RPC_SET(&m, mode, RPC_T_MODE, 02777);
    RPC_SET(&m, gid, RPC_T_GID, 4321);
    CHECK_EQ(tb_do(t, RPC_OP_SETATTR, &m), 0);
    make_in(t, "/shape/f3", &seen);
    CHECK_EQ(seen.gid, 4321); /* the setgid parent's group */
    /* a default ACL granting everything: the umask no longer applies */
    static const uint8_t acl[] = {2,    0, 0, 0,                          /* version */
                                  1,    0, 7, 0, 0xff, 0xff, 0xff, 0xff,  /* user:: rwx */
                                  4,    0, 7, 0, 0xff, 0xff, 0xff, 0xff,  /* group:: rwx */
                                  0x20, 0, 7, 0, 0xff, 0xff, 0xff, 0xff}; /* other:: rwx */
    m = tb_msg("/shape");
    rpc_set_str(&m, RPC_T_NAME, &m.name, "system.posix_acl_default");
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, acl, sizeof(acl));
    CHECK_EQ(tb_do(t, RPC_OP_SETXATTR, &m), 0);
    make_in(t, "/shape/f4", &seen);
    CHECK_EQ(seen.mode & 07777, 0666);
    m = tb_msg("/shape");
    rpc_set_str(&m, RPC_T_NAME, &m.name, "system.posix_acl_default");
    CHECK_EQ(tb_do(t, RPC_OP_REMOVEXATTR, &m), 0);
    make_in(t, "/shape/f5", &seen);
    CHECK_EQ(seen.mode & 07777, 0644);
    CHECK_EQ(seen.gid, 4321);
    /* the same for the root, which the directory cache does not hold */
    struct rpc_attr root;
    CHECK_EQ(tb_lookup(t, "/", &root), 0);
    make_in(t, "/rootf1", &seen);
    CHECK_EQ(seen.gid, 5678);
    m = tb_msg("/");
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_MODE | RPC_SET_GID);
    RPC_SET(&m, mode, RPC_T_MODE, (root.mode & 07777) | S_ISGID);
    RPC_SET(&m, gid, RPC_T_GID, 4321);
    CHECK_EQ(tb_do(t, RPC_OP_SETATTR, &m), 0);
    make_in(t, "/rootf2", &seen);
    CHECK_EQ(seen.gid, 4321);
    RPC_SET(&m, mode, RPC_T_MODE, root.mode & 07777);
    RPC_SET(&m, gid, RPC_T_GID, root.gid);
    CHECK_EQ(tb_do(t, RPC_OP_SETATTR, &m), 0);
    make_in(t, "/rootf3", &seen);
    CHECK_EQ(seen.gid, 5678);
}

int main(void)
{
    struct tb t;
    log_init("test_brick_create", LOG_WARN);
    CHECK_EQ(tb_open(&t, NULL), 0);
    CHECK_EQ(tb_mkdir(&t, "/d", 0777), 0);
    create_as(&t, "/d/root", 0644, 0, 0);
    create_as(&t, "/d/user", 0640, 1234, 5678);
    create_as(&t, "/d/setid", 06755, 1234, 5678); /* chown drops them; they come back */
    make_file(&t);
    create_taken(&t);
    make_dir(&t);
    make_node_and_link(&t);
    dir_shape_follows_changes(&t);
    tb_close(&t, 1);
    return check_summary("test_brick_create");
}
