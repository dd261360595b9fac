/* Set-id bits under FUSE_HANDLE_KILLPRIV_V2 (docs/consistency.md, "Data:
 * write-behind", and docs/notes/performance-notes.md, round four).
 *
 * Without it the kernel checks, before every write to a file, whether
 * security.capability must go, which is one GETXATTR request per write.
 * With it the kernel checks once per inode and leaves the clearing of
 * set-user-ID and set-group-ID bits to the file system: a write, truncate
 * or O_TRUNC open by a caller without CAP_FSETID carries a flag, and the
 * brick clears the bits (set-group-ID only with group execute, as the VFS
 * does). libfuse 3.14 neither knows the capability nor passes the flags on,
 * so the session I/O (uring.c) amends the INIT reply and notes each
 * request's flag here, per thread, before libfuse runs its handler on the
 * same thread. Capabilities need nothing: the brick's own kernel drops
 * them when the brick writes or truncates the file. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "../rpc/msg.h"
#include "killpriv.h"

/* include/uapi/linux/fuse.h */
#define OP_SETATTR 4
#define OP_OPEN 14
#define OP_WRITE 16
#define FATTR_KILL_SUIDGID (1u << 11)
#define FUSE_OPEN_KILL_SUIDGID (1u << 0)
#define FUSE_WRITE_KILL_SUIDGID (1u << 2)
#define IN_HEADER_SIZE 40
#define WRITE_FLAGS_AT 20 /* fuse_write_in.write_flags */
#define OPEN_FLAGS_AT 4   /* fuse_open_in.open_flags */
#define SETATTR_VALID_AT 0

static _Thread_local int asked;

static uint32_t u32_at(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

void cf_killpriv_note(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    asked = 0;
    if (len < IN_HEADER_SIZE + 8)
        return;
    uint32_t op = u32_at(p + 4);
    const unsigned char *a = p + IN_HEADER_SIZE;
    size_t n = len - IN_HEADER_SIZE;
    if (op == OP_WRITE && n >= WRITE_FLAGS_AT + 4)
        asked = (u32_at(a + WRITE_FLAGS_AT) & FUSE_WRITE_KILL_SUIDGID) != 0;
    else if (op == OP_OPEN && n >= OPEN_FLAGS_AT + 4)
        asked = (u32_at(a + OPEN_FLAGS_AT) & FUSE_OPEN_KILL_SUIDGID) != 0;
    else if (op == OP_SETATTR)
        asked = (u32_at(a + SETATTR_VALID_AT) & FATTR_KILL_SUIDGID) != 0;
}

int cf_killpriv_asked(void)
{
    return asked;
}

int cf_killpriv_bits(mode_t mode)
{
    return rpc_kill_suidgid_mode(mode) != (mode & 07777);
}
