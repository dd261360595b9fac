/* Object ids (GFIDs): 16 random bytes, made by the client that creates the
 * object, so nothing waits for a server to name a file. The root directory of
 * every volume has the fixed id 00000000-0000-0000-0000-000000000001. */
#ifndef CAIRN_GFID_H
#define CAIRN_GFID_H

#include <stdbool.h>
#include <stdint.h>

#define GFID_LEN 16
#define GFID_STRLEN 37 /* 36 characters and the NUL */

typedef struct {
    uint8_t b[GFID_LEN];
} gfid_t;

void gfid_generate(gfid_t *g);
void gfid_root(gfid_t *g);
bool gfid_is_null(const gfid_t *g);
bool gfid_equal(const gfid_t *a, const gfid_t *b);
/* Formats as the canonical 8-4-4-4-12 lower-case hex form. */
void gfid_format(const gfid_t *g, char out[GFID_STRLEN]);
/* Parses the canonical form; returns 0 or -EINVAL. */
int gfid_parse(const char *s, gfid_t *g);
/* A 64-bit inode number for st_ino, derived from the id (never 0). */
uint64_t gfid_ino(const gfid_t *g);

/* The value of one hex digit (either case), or -1. */
int hex_digit(char c);

#endif
