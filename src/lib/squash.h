/* Root squash and all squash (server.root-squash, server.all-squash,
 * server.anonuid, server.anongid; docs/security.md, "Root squash"): how a
 * caller's identity is mapped, and what a squashed caller may do, as the
 * kernel decides it for an unprivileged user. The bricks map the owners of
 * what they create with it, the mount its owners and its permission checks
 * (src/fuse/squash.c), so both sides give one answer. Pure functions. */
#ifndef CAIRN_LIB_SQUASH_H
#define CAIRN_LIB_SQUASH_H

#include <sys/stat.h>
#include <sys/types.h>

struct opt_set;

#define SQUASH_GROUPS 64

struct squash {
    int root, all; /* server.root-squash, server.all-squash */
    uid_t anonuid;
    gid_t anongid;
};

/* The credentials a squashed caller acts with. */
struct squash_cred {
    uid_t uid;
    gid_t gid;
    int n; /* supplementary groups */
    gid_t groups[SQUASH_GROUPS];
};

/* The four options of a volume's option set. */
void squash_from_options(struct squash *s, const struct opt_set *o);
/* Maps uid and gid in place: all squash, every caller to the anonymous
 * user and group; root squash, uid 0 and gid 0 each to its anonymous id.
 * 1 when either changed. */
int squash_ids(const struct squash *s, uid_t *uid, gid_t *gid);
/* c for a caller with uid, gid and the n supplementary groups: 1 when the
 * caller is squashed to someone other than root (then c is filled; its
 * groups are the caller's with 0 mapped under root squash, none under all
 * squash), 0 when it acts as itself. */
int squash_cred(const struct squash *s, uid_t uid, gid_t gid, const gid_t *groups, int n,
                struct squash_cred *c);

#define SQUASH_X 1
#define SQUASH_W 2
#define SQUASH_R 4

/* 0 when c may access an object of attributes st for mask (SQUASH_*) by its
 * mode bits, else -EACCES. */
int squash_may(const struct squash_cred *c, const struct stat *st, int mask);
/* 0 when c owns st, else -EPERM. */
int squash_owner(const struct squash_cred *c, const struct stat *st);
int squash_in_group(const struct squash_cred *c, gid_t g);

/* An attribute change, for squash_setattr. */
struct squash_change {
    int mode;             /* chmod */
    int uid_set, gid_set; /* chown to uid, gid */
    uid_t uid;
    gid_t gid;
    int size;      /* truncate by name (an open handle was checked at open) */
    int times;     /* atime or mtime set */
    int times_now; /* ... every one of them to the current time */
};

/* 0, -EPERM or -EACCES: whether c may make the change to st. */
int squash_setattr(const struct squash_cred *c, const struct stat *st,
                   const struct squash_change *ch);
/* Setting or removing extended attribute name: user.* by write permission,
 * ACLs by the owner, trusted.* and security.* never. */
int squash_xattr(const struct squash_cred *c, const struct stat *st, const char *name);
/* Removing a name from directory dir: write and search on dir, and with its
 * sticky bit, ownership of dir or of the entry (entry NULL: not known). */
int squash_remove(const struct squash_cred *c, const struct stat *dir, const struct stat *entry);

#endif
