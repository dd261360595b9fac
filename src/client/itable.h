/* The inode table of a mount: FUSE node ids -> objects. The protocol is
 * path-based, so each inode remembers its parent and name and a path is built
 * by walking up to the root. Inodes are also hashed by gfid, so every name of
 * a hard-linked file maps to one node id, and by (parent, name), so rename
 * and unlink can find the child they move or detach.
 *
 * Hard links: a file keeps every name the mount met it under, as the kernel
 * keeps a dentry for each on the one inode; removing or renaming one name
 * leaves the others, and paths go through the name met last. A directory
 * has one name.
 *
 * Counting: nlookup is the kernel's lookup count (each successful lookup,
 * create, mknod, mkdir, symlink, link, and readdirplus entry adds one; forget
 * subtracts). A child holds a reference on its parent. An inode is freed when
 * both drop to zero; the root (node id 1) is never freed.
 *
 * Thread-safe: one lock per table. */
#ifndef CAIRN_CLIENT_ITABLE_H
#define CAIRN_CLIENT_ITABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../lib/gfid.h"

#define CL_ROOT_ID 1

struct cl_itable;

struct cl_itable *cl_itable_new(void);
void cl_itable_free(struct cl_itable *t);

/* Records that name in directory parent is the object gfid, of file type
 * `type` (S_IFMT bits; 0: not a directory, type unknown), and counts one
 * lookup of it. Returns its node id (existing or new), or 0 with
 * -ENOMEM / -ENOENT (unknown parent) in *err. Whatever else had that name
 * loses it. A directory already known under another name (renamed by
 * another client) takes the new one; a file adds it to its names (a hard
 * link), first: paths go through it from now on. */
uint64_t cl_itable_link(struct cl_itable *t, uint64_t parent, const char *name, const gfid_t *g,
                        mode_t type, int *err);
/* What nodeid is, as the last cl_itable_link of it said: 1 a directory, 0
 * anything else, -1 unknown. */
int cl_itable_is_dir(struct cl_itable *t, uint64_t nodeid);
/* Its file type (S_IFMT bits) as cl_itable_link was told, 0 when unknown. */
mode_t cl_itable_type(struct cl_itable *t, uint64_t nodeid);
/* Subtracts n lookups. Returns 1 when none is left (or nodeid is unknown). */
int cl_itable_forget(struct cl_itable *t, uint64_t nodeid, uint64_t n);
/* Counts one lookup the kernel does not make: the inode keeps its node id
 * (and its place in paths) after the kernel forgets it, until a matching
 * cl_itable_forget(t, nodeid, 1). Returns 0 or -ENOENT. */
int cl_itable_hold(struct cl_itable *t, uint64_t nodeid);
/* The path of nodeid (through its first name), with "/name" appended when
 * name is not NULL, into buf. Returns 0, -ENOENT (unknown node, or one whose
 * names were all removed), -ENAMETOOLONG. */
int cl_itable_path(struct cl_itable *t, uint64_t nodeid, const char *name, char *buf, size_t len);
/* The length of the path cl_itable_path would make (without its NUL), or
 * -ENOENT; LONG_MAX for a node deeper than any path. */
long cl_itable_path_len(struct cl_itable *t, uint64_t nodeid, const char *name);
/* The gfid of nodeid; 0 or -ENOENT. */
int cl_itable_gfid(struct cl_itable *t, uint64_t nodeid, gfid_t *g);
/* The node id of the directory holding nodeid's (first) name; 0 for the
 * root, an unknown node and one whose names were all removed. */
uint64_t cl_itable_parent(struct cl_itable *t, uint64_t nodeid);
/* After an unlink or rmdir of name in parent: the inode (if known) loses that
 * name, keeping its others (hard links); with none left it stays valid for
 * its open handles until forgotten. */
void cl_itable_unlink(struct cl_itable *t, uint64_t parent, const char *name);
/* Drops name in parent when it is one of several names of a file (the
 * bricks said it is gone, or may be: a recall naming it), and the kernel's
 * entry for it is expired or gone at the same time (the table's names are
 * every entry the kernel may hold: a recall of their directory expires
 * them): paths take another. Returns 1 when dropped, 0 otherwise (a
 * directory's or a file's only name is kept). */
int cl_itable_forget_alias(struct cl_itable *t, uint64_t parent, const char *name);
/* When nodeid is a file with several names whose path is still path (a
 * request by it failed with ENOENT, a recall of it came), the name that
 * path went through becomes its last: paths take its other names. The name
 * stays known (the kernel may still hold an entry for it). Returns 1 when
 * so moved: a request may go again by the next name. */
int cl_itable_demote_path(struct cl_itable *t, uint64_t nodeid, const char *path);
/* The link count a reply last gave for nodeid (set_nlink; 0 when none
 * did), or the number of names the table holds for it when larger: 1
 * means one name, as far as this mount knows. */
void cl_itable_set_nlink(struct cl_itable *t, uint64_t nodeid, uint64_t nlink);
uint64_t cl_itable_nlink(struct cl_itable *t, uint64_t nodeid);
/* After a rename: the inode at (oldparent, oldname) takes (newparent,
 * newname) in place of that name; whatever was at the target loses that
 * name (keeping its others). With exchange the two swap. Two names of one
 * file stay as they are (rename does nothing then). Moving a directory
 * moves its subtree, whose paths are built from it. */
void cl_itable_rename(struct cl_itable *t, uint64_t oldparent, const char *oldname,
                      uint64_t newparent, const char *newname, int exchange);
/* Open file handles of an inode: the kernel asks for the attributes of an
 * open, unlinked file (fstat, ftruncate) by node id alone, and such an inode
 * has no path left; one of its handles reaches the object instead.
 * open_fh returns 0, -ENOENT or -ENOMEM; any_fh 0 or -ENOENT (none open). */
int cl_itable_open_fh(struct cl_itable *t, uint64_t nodeid, uint64_t fh);
/* Writes, for a statedump, section [client.open]: the table's size and
 * every node with open handles: node id, gfid, path and handle ids. */
void cl_itable_dump_open(struct cl_itable *t, FILE *f);
void cl_itable_close_fh(struct cl_itable *t, uint64_t nodeid, uint64_t fh);
int cl_itable_any_fh(struct cl_itable *t, uint64_t nodeid, uint64_t *fh);

/* POSIX record locks: the bridge marks an inode before its first SETLK is
 * sent; until then no owner of this mount can hold a lock or wait for one on
 * it, so a FLUSH (close) has nothing to release on the brick. was_locked
 * answers 1 for an unknown node (the safe side). */
void cl_itable_mark_locked(struct cl_itable *t, uint64_t nodeid);
int cl_itable_was_locked(struct cl_itable *t, uint64_t nodeid);

/* The node id the path (from the root, "/a/b") names, 0 if some component
 * is not in the table. */
uint64_t cl_itable_resolve(struct cl_itable *t, const char *path);

/* A snapshot of names the kernel may have cached (lease.c drops them). */
struct cl_itable_name {
    uint64_t parent, nodeid;
    char *name;
};
/* The names in parent (a file with two names there comes twice), or with
 * parent 0 every name (and the root, with parent 0 and name NULL). Returns
 * the count (0 on ENOMEM) and an array to free with cl_itable_names_free. */
size_t cl_itable_names(struct cl_itable *t, uint64_t parent, struct cl_itable_name **out);
void cl_itable_names_free(struct cl_itable_name *v, size_t n);

/* Number of inodes (including the root); for tests and statistics. */
size_t cl_itable_count(struct cl_itable *t);
/* The node id of name in parent, 0 if unknown; for tests. */
uint64_t cl_itable_child(struct cl_itable *t, uint64_t parent, const char *name);

#endif
