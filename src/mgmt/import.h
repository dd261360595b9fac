/* `volume import`: turning the bricks of a stopped GlusterFS replicate
 * volume into Cairn bricks in place (docs/migrating.md). The server that
 * owns a brick does the work on it; nothing here copies file data. */
#ifndef CAIRN_MGMT_IMPORT_H
#define CAIRN_MGMT_IMPORT_H

#include <stddef.h>

#include "../lib/gfid.h"

/* One brick to import. The caller owns the struct and the path. */
struct mgmt_import_brick {
    const char *path; /* the brick directory, absolute */
    int index;        /* its place in the volume: GlusterFS's client-N */
    int replica;      /* bricks per replica set (1 for none) */
    int n_bricks;     /* bricks in the volume */
    int force;        /* import unmappable marks as dirty, unfinished heals kept aside */
    int keep;         /* keep .glusterfs as .cairn/glusterfs instead of removing it */
};

/* Reads the brick without changing it: refuses a brick a glusterfsd
 * serves, one without GlusterFS's volume id, a sharded or dispersed one,
 * and (without force) one holding GlusterFS pending marks Cairn cannot map
 * to a member of the brick's replica set or unfinished entry heals.
 * volid gets the GlusterFS volume id (also from an earlier, interrupted
 * import's report). 0, or -errno with the reason in err. */
int mgmt_import_check(const struct mgmt_import_brick *ib, char volid[GFID_STRLEN], char *err,
                      size_t errlen);

/* Converts the brick (see docs/migrating.md for every step) and writes
 * BRICK/.cairn/import-report. Can be run again on a brick it stopped
 * half-way through. summary gets one line of counts. 0, or -errno with the
 * reason in err. */
int mgmt_import_convert(const struct mgmt_import_brick *ib, const char *volid, char *summary,
                        size_t slen, char *err, size_t errlen);

/* For a volume of several subvolumes (replica sets, or single bricks),
 * after every brick is converted: GlusterFS placed each file by its own
 * name hash, Cairn looks a name up where Cairn's hash puts it
 * (docs/replication.md, Distribute). Every file, symlink or special file
 * whose name Cairn hashes to another subvolume gets a Cairn link-to file
 * there (on each brick of that set holding the directory, one id for
 * all), as a rename across hash ranges leaves; no data moves. paths: every
 * brick in volume order. *made counts the names linked. 0, or -errno with
 * err. */
int mgmt_import_place(char *const *paths, int n_bricks, int replica, unsigned long *made, char *err,
                      size_t errlen);

#endif
