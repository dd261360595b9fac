/* Set-id bits under FUSE_HANDLE_KILLPRIV_V2 (killpriv.c): the part of the
 * kernel request format read outside libfuse. */
#ifndef CAIRN_FUSE_KILLPRIV_H
#define CAIRN_FUSE_KILLPRIV_H

#include <stddef.h>
#include <sys/types.h>

/* Notes whether the raw request in buf (len bytes, as read from the kernel)
 * asks to clear set-id bits; the handler libfuse runs next on this thread
 * reads it with cf_killpriv_asked. Any bytes are safe. */
void cf_killpriv_note(const void *buf, size_t len);
int cf_killpriv_asked(void);
/* Whether mode has bits such a caller's write clears (which ones:
 * rpc_kill_suidgid_mode). */
int cf_killpriv_bits(mode_t mode);

#endif
