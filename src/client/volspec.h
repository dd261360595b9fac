/* Naming a volume the way users write it: "HOST[:PORT]:/VOLNAME[/DIR]" (as mount
 * takes it) and a list of backup cairnd servers "HOST[:PORT]:HOST[:PORT]..."
 * (mount's -o backup-servers=, libcairn's backup-servers= option). Shared
 * by the FUSE client and libcairn so both read them alike. Pure functions. */
#ifndef CAIRN_CLIENT_VOLSPEC_H
#define CAIRN_CLIENT_VOLSPEC_H

#include <stddef.h>

#include "../lib/net.h"

/* Splits spec into the cairnd address (port CAIRN_MGMT_PORT when none is
 * given; a host may be an [IPv6] literal) and the volume name (non-empty,
 * no '/', shorter than vollen). 0, or -EINVAL with *why (may be NULL) set
 * to "not HOST[:PORT]:/VOLNAME" or "bad server address". */
int cl_volspec_parse(const char *spec, struct net_addr *server, char *volume, size_t vollen,
                     const char **why);
/* The same, also taking "HOST[:PORT]:/VOLNAME/DIR" (GlusterFS's mount of a
 * directory of the volume): subdir gets "/DIR" with trailing slashes
 * dropped, or "/" for the whole volume. A DIR with empty, "." or ".."
 * components, or longer than sublen, is -EINVAL with *why "bad
 * directory". */
int cl_volspec_parse_dir(const char *spec, struct net_addr *server, char *volume, size_t vollen,
                         char *subdir, size_t sublen, const char **why);

/* Parses "HOST[:PORT]:HOST[:PORT]..." into out[0..max); a numeric field
 * after a host is its port. *n is the count. 0, or -EINVAL (malformed,
 * empty, or more than max servers). */
int cl_servers_parse(const char *list, struct net_addr *out, int max, int *n);

#endif
