/* The volume options registry: one table naming every option Cairn knows,
 * with its type, default, range, whether it applies live, and one line of
 * help. `cairn volume set help` prints it; `volume set` validates against it;
 * clients and bricks read typed values through it. GlusterFS's names are used
 * where the meaning is the same. */
#ifndef CAIRN_OPTIONS_H
#define CAIRN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* OPT_SPACE: a share of a file system, as a percentage ("1", "1%", at most
 * 100) or a size ("10GB"; min/max bound the size). */
enum opt_type { OPT_BOOL, OPT_INT, OPT_SIZE, OPT_TIME, OPT_ENUM, OPT_STRING, OPT_SPACE };

struct opt_def {
    const char *name;
    enum opt_type type;
    const char *def;     /* default, as a string in the option's syntax */
    int64_t min, max;    /* OPT_INT/OPT_SIZE/OPT_TIME range (bytes, seconds) */
    const char *choices; /* OPT_ENUM: '|'-separated */
    bool live;           /* takes effect on running clients/bricks without restart */
    const char *help;    /* one line; for a no_effect option, why it has none */
    /* GlusterFS options Cairn takes so that pasted settings and scripts work:
     * no_effect: stored and shown, read by nothing in Cairn (help says why).
     * only: the normalized values accepted, '|'-separated ("": none); others
     * are refused with refused, which says what Cairn does instead. */
    bool no_effect;
    const char *only;
    const char *refused;
    /* set for the whole pool (`volume set all NAME VALUE`), not per volume */
    bool pool;
};

/* Another name for an option of the table, with the same meaning. */
struct opt_alias {
    const char *name, *target;
};
extern const struct opt_alias opt_aliases[];

/* The table, terminated by a NULL name. */
extern const struct opt_def opt_table[];

/* The option of that name, following opt_aliases (the result's name is the
 * one to store and show). Any "user.*" name is found, as a free-form string
 * GlusterFS also lets administrators set: its opt_def is shared, so its name
 * is "user.*". */
const struct opt_def *opt_find(const char *name);
/* name, or the option it is another name for. */
const char *opt_canonical(const char *name);
/* Validates value for the option; on success writes the normalized form
 * (e.g. "on" for true) into norm. On failure returns -EINVAL and a one-line
 * reason in err. Unknown option: -ENOENT. */
int opt_validate(const char *name, const char *value, char *norm, size_t normlen, char *err,
                 size_t errlen);
/* Parsers shared by validation and typed readers; 0 or -EINVAL. */
int opt_parse_bool(const char *s, bool *out);
int opt_parse_size(const char *s, int64_t *out); /* 4KB, 1MB, 2GB, plain bytes */
int opt_parse_time(const char *s, int64_t *out); /* seconds; accepts "42", "42s", "2m" */
/* OPT_SPACE: *percent (0-100) and *bytes 0, or *percent -1 and *bytes. */
int opt_parse_space(const char *s, int *percent, int64_t *bytes);
/* Bytes a space value leaves of a file system of total bytes. */
uint64_t opt_space_bytes(int percent, int64_t bytes, uint64_t total);

/* A set of option values (name=value) as a volume holds them. */
struct opt_set {
    size_t n;
    struct {
        char *name, *value;
    } * kv;
};
void opt_set_free(struct opt_set *s);
/* Sets (replacing) or, with value NULL, removes; 0 or -ENOMEM. */
int opt_set_put(struct opt_set *s, const char *name, const char *value);
/* dst becomes a copy of src (dst's old contents are not freed); 0 or
 * -ENOMEM (dst then empty). */
int opt_set_copy(struct opt_set *dst, const struct opt_set *src);
/* Whether the effective value (opt_value) of any option differs. */
bool opt_set_differ(const struct opt_set *a, const struct opt_set *b);
/* The value set, or NULL. */
const char *opt_set_get(const struct opt_set *s, const char *name);
/* The effective value: the one set, else the registry default. */
const char *opt_value(const struct opt_set *s, const char *name);
bool opt_bool(const struct opt_set *s, const char *name);
int64_t opt_int(const struct opt_set *s, const char *name); /* INT, SIZE (bytes), TIME (s) */
/* OPT_SPACE: as opt_parse_space (the default when the value does not parse). */
void opt_space(const struct opt_set *s, const char *name, int *percent, int64_t *bytes);

/* Address check for auth.allow / auth.reject: both are comma-separated lists
 * of shell globs ("192.168.1.*", "*") or IPv4 CIDR blocks ("10.0.0.0/8").
 * addr is the peer's numeric address (an IPv4-mapped IPv6 form is treated as
 * IPv4). A match in reject wins over allow. allow NULL means "*", reject NULL
 * means "". Pure. */
bool opt_addr_allowed(const char *allow, const char *reject, const char *addr);
/* The same for a mount of directory dir of the volume ("/" or NULL: the
 * whole volume), GlusterFS's form: an entry "/DIR(P|P...)" of either list
 * applies to mounts of DIR exactly (not to its subdirectories, not to its
 * parents), with P address patterns as above; a bare pattern applies to
 * every mount. So "/(10.0.0.*),/s(10.0.1.5)" lets 10.0.1.5 mount /s and
 * nothing else, and refuses a mount of any directory not listed. Pure. */
bool opt_addr_allowed_dir(const char *allow, const char *reject, const char *dir, const char *addr);
/* Whether d[0..n) names a directory of a volume: "/" or "/a/b", without
 * empty, "." or ".." components or a trailing '/', components of at most
 * 255 bytes, under 4,096 bytes in all. Pure. */
bool opt_dir_valid(const char *d, size_t n);
/* Whether e[0..n) is an entry that can match a numeric address: "*", an IPv4
 * or IPv6 address, a glob over their characters, or an IPv4 CIDR block.
 * Host names are not (volume set resolves them to addresses first). */
bool opt_addr_pattern(const char *e, size_t n);

/* Prints every option (name, type, default, range or choices, live or not,
 * help) as `volume set help` shows it. */
void opt_print_help(FILE *out);

#endif
