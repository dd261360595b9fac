/* `volume import`: turning the bricks of a stopped GlusterFS replicate
 * volume into Cairn bricks in place (docs/migrating.md). The server that
 * owns a brick does the work on it; nothing here copies file data. */
#ifndef CAIRN_MGMT_IMPORT_H
#define CAIRN_MGMT_IMPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../lib/gfid.h"
#include "../rpc/msg.h"

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

/* ---- a volume of several subvolumes (replica sets, or single bricks) ----
 *
 * After every brick is converted: GlusterFS placed each file by its own
 * name hash, Cairn looks a name up where Cairn's hash puts it
 * (docs/replication.md, Distribute). Every file, symlink or special file
 * whose name Cairn hashes to another subvolume gets a Cairn link-to file
 * there (on each brick of that set holding the directory, one id on all),
 * as a rename across hash ranges leaves; no data moves.
 *
 * The bricks may be on several servers, so the work is split in steps a
 * brick's own server runs (the internal command `__import place-...`,
 * pool_rpc.c) and the server running the import drives them
 * (mgmt_import_place). The steps exchange lines of text:
 *
 *   TO AT ID PATH\n
 *
 * the link-to file PATH (absolute in the volume; a backslash and a newline
 * in it written as two characters, \\ and \n) goes on every brick of set
 * TO, names set AT and has the id ID (36 characters). */

#define MGMT_IMPORT_CHUNK (1u << 20) /* bytes of lines per step, well below RPC_MAX_BODY */

struct mgmt_import_line {
    int to, at;
    gfid_t id;
    char path[RPC_PATH_MAX];
};

/* Decodes one line (n bytes, without its newline) for a volume of sets
 * subvolumes: indices in range and different, a well-formed id, an
 * absolute path of plain components (no "", ".", "..", none longer than
 * NAME_MAX, not under .cairn or .glusterfs). Pure. 0 or -EPROTO. */
int mgmt_import_line_parse(const char *p, size_t n, int sets, struct mgmt_import_line *l);

/* Walks brick (of set `set`) and writes BRICK/.cairn/import-names: a line
 * for every name it holds that Cairn's hash puts on another set. The id of
 * each link-to file is derived from the file's id and path, so every
 * brick and every run gives the same one. *count gets the lines. 0, or
 * -errno with err. */
int mgmt_import_names(const char *brick, int set, int sets, unsigned long *count, char *err,
                      size_t errlen);

/* Writes to out the whole lines of BRICK/.cairn/import-names from byte off,
 * at most MGMT_IMPORT_CHUNK bytes; nothing at its end, and the file is then
 * removed. 0, or -errno with err. */
int mgmt_import_names_read(const char *brick, uint64_t off, FILE *out, char *err, size_t errlen);

/* On brick, of set `set`: the lines of batch (len bytes, each ending in a
 * newline, every one for this set). Check (make 0): writes to out the
 * index (from 0) of each line whose name exists here and is no link-to
 * file (the name is on two sets; logged). Make: makes the missing link-to
 * files, never over an existing name, keeping the directories' times, and
 * writes the count made. A directory this brick lacks is skipped (heal
 * brings it). 0, or -errno with err (-EPROTO for a malformed line). */
int mgmt_import_link(const char *brick, int set, int sets, int make, const char *batch, size_t len,
                     FILE *out, char *err, size_t errlen);

/* Decodes a place-check answer for a batch of `lines` lines: one index a
 * line, each ending in a newline; sets conflict[index]. Pure. 0 or
 * -EPROTO. */
int mgmt_import_check_answer(const char *text, unsigned long lines, char *conflict);

/* One step on the server of brick `brick` (an index into the volume's
 * bricks): argv is the step's words (mgmt_import_cmd). 0 with *text the
 * answer (malloc'd, may be NULL when empty), or -errno with *text the
 * reason. */
typedef int (*mgmt_import_run_fn)(void *arg, int brick, int argc, const char *const *argv,
                                  char **text);

/* Runs a step here: place-names SET SETS PATH | place-list OFFSET PATH |
 * place-check SET SETS PATH LINES | place-make SET SETS PATH LINES. 0 or
 * -errno; *text as for mgmt_import_run_fn. */
int mgmt_import_cmd(int argc, const char *const *argv, char **text);

/* The placement of a volume of n_bricks (paths in volume order): every
 * brick lists its names, and each chunk of lines is checked on every brick
 * of its set and then made there, all through run. A name on two sets is
 * left alone and logged. Repeating it after a failure finishes the work.
 * *made counts the names linked. 0, or -errno with err. */
int mgmt_import_place(char *const *paths, int n_bricks, int replica, mgmt_import_run_fn run,
                      void *arg, unsigned long *made, char *err, size_t errlen);

#endif
