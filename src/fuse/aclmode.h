/* The permission bits a POSIX access ACL gives a file (aclmode.c). */
#ifndef CAIRN_FUSE_ACLMODE_H
#define CAIRN_FUSE_ACLMODE_H

#include <stddef.h>

/* value, len: a system.posix_acl_access value in the kernel's xattr format
 * (u32 version 2, then entries of u16 tag, u16 perm, u32 id, all little
 * endian). Returns the permission bits (0-0777) a file system gives the
 * file when the ACL is set: owner from user::, group from mask:: (group::
 * when there is no mask), other from other::. -1 when value is not such
 * an ACL. Any bytes are safe. */
int cf_acl_mode(const void *value, size_t len);
/* 1 when value is such an ACL holding only the user::, group:: and other::
 * entries: it says no more than the mode, and a file system stores none
 * (setting it is a chmod). 0 otherwise. */
int cf_acl_minimal(const void *value, size_t len);

#endif
