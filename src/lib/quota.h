/* Directory quota's limits as the volume option features.quota-limits holds
 * them (docs/quota.md): one entry per limited directory, separated by ';',
 * each "HARD:SOFT:OBJECTS:OBJSOFT:PATH" with HARD the byte limit (0: none),
 * OBJECTS the object limit (0: none) and SOFT, OBJSOFT the soft limits in
 * percent of them (0: features.default-soft-limit). The path comes last
 * and may hold ':' but not ';'. Wire-visible through cairnd's stored
 * volumes: change only by appending fields. */
#ifndef CAIRN_LIB_QUOTA_H
#define CAIRN_LIB_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#define QUOTA_LIMITS_MAX 256

struct quota_limit {
    char *path; /* "/a/b", normalised (no trailing '/', no "//", "." or "..") */
    int64_t hard, objects;
    int soft, obj_soft;
};

struct quota_limits {
    int n;
    struct quota_limit *l;
};

/* Parses s into out (which the caller frees with quota_limits_free): 0, or
 * -EINVAL with a one-line reason in err, or -ENOMEM. Pure. */
int quota_limits_parse(const char *s, struct quota_limits *out, char *err, size_t errlen);
void quota_limits_free(struct quota_limits *q);
/* The option value for q, malloc'd; NULL when out of memory. */
char *quota_limits_format(const struct quota_limits *q);
/* The entry for path, or NULL. */
struct quota_limit *quota_limits_find(const struct quota_limits *q, const char *path);
/* Checks a path given to `volume quota`: absolute, no empty, "." or ".."
 * component, no ';' or control character, shorter than 4096. Copies it to
 * out without a trailing '/'. 0 or -EINVAL. */
int quota_path_norm(const char *in, char *out, size_t outlen);
/* Whether path is dir or below it. */
int quota_path_under(const char *dir, const char *path);
/* Parses a quota size: bytes or a number with B, KB, MB, GB, TB, PB (also
 * K/M/G/T/P, powers of 1024, as GlusterFS takes them), a fraction allowed
 * ("1.5GB"). 0 or -EINVAL (negative, zero, unknown unit, too large). */
int quota_parse_size(const char *s, int64_t *out);
/* Prints bytes as GlusterFS's quota list does: "10.0MB", "512Bytes". */
void quota_format_size(int64_t bytes, char *out, size_t outlen);

#endif
