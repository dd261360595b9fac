/* Root squash's mapping and permission decisions (see squash.h). */
#include "squash.h"

#include <errno.h>
#include <string.h>

#include "options.h"

void squash_from_options(struct squash *s, const struct opt_set *o)
{
    s->root = opt_bool(o, "server.root-squash");
    s->all = opt_bool(o, "server.all-squash");
    s->anonuid = (uid_t)opt_int(o, "server.anonuid");
    s->anongid = (gid_t)opt_int(o, "server.anongid");
}

int squash_ids(const struct squash *s, uid_t *uid, gid_t *gid)
{
    uid_t u = *uid;
    gid_t g = *gid;
    if (s->all) {
        u = s->anonuid;
        g = s->anongid;
    } else if (s->root) {
        if (u == 0)
            u = s->anonuid;
        if (g == 0)
            g = s->anongid;
    }
    int changed = u != *uid || g != *gid;
    *uid = u;
    *gid = g;
    return changed;
}

int squash_cred(const struct squash *s, uid_t uid, gid_t gid, const gid_t *groups, int n,
                struct squash_cred *c)
{
    c->uid = uid;
    c->gid = gid;
    c->n = 0;
    if (!squash_ids(s, &c->uid, &c->gid) || c->uid == 0)
        return 0;
    if (s->all)
        return 1; /* the anonymous group alone */
    for (int i = 0; i < n && c->n < SQUASH_GROUPS; i++)
        c->groups[c->n++] = groups[i] == 0 ? s->anongid : groups[i];
    return 1;
}

int squash_in_group(const struct squash_cred *c, gid_t g)
{
    if (c->gid == g)
        return 1;
    for (int i = 0; i < c->n; i++)
        if (c->groups[i] == g)
            return 1;
    return 0;
}

int squash_may(const struct squash_cred *c, const struct stat *st, int mask)
{
    mode_t m = st->st_mode;
    int bits = c->uid == st->st_uid             ? (int)(m >> 6) & 7
               : squash_in_group(c, st->st_gid) ? (int)(m >> 3) & 7
                                                : (int)m & 7;
    return (bits & mask) == mask ? 0 : -EACCES;
}

int squash_owner(const struct squash_cred *c, const struct stat *st)
{
    return c->uid == st->st_uid ? 0 : -EPERM;
}

int squash_setattr(const struct squash_cred *c, const struct stat *st,
                   const struct squash_change *ch)
{
    int own = squash_owner(c, st) == 0;
    if (ch->mode && !own)
        return -EPERM;
    /* chown: the owner may keep the owner, and give one of its groups */
    if (ch->uid_set && (!own || ch->uid != st->st_uid))
        return -EPERM;
    if (ch->gid_set && (!own || (ch->gid != st->st_gid && !squash_in_group(c, ch->gid))))
        return -EPERM;
    if (ch->size && squash_may(c, st, SQUASH_W) < 0)
        return -EACCES;
    /* times: the owner any; others the current time, with write permission */
    if (ch->times && !own)
        return ch->times_now ? squash_may(c, st, SQUASH_W) : -EPERM;
    return 0;
}

int squash_xattr(const struct squash_cred *c, const struct stat *st, const char *name)
{
    if (!strncmp(name, "trusted.", 8) || !strncmp(name, "security.", 9))
        return -EPERM;
    if (!strncmp(name, "system.posix_acl_", 17))
        return squash_owner(c, st);
    return squash_may(c, st, SQUASH_W);
}

int squash_remove(const struct squash_cred *c, const struct stat *dir, const struct stat *entry)
{
    int rc = squash_may(c, dir, SQUASH_W | SQUASH_X);
    if (rc < 0 || !(dir->st_mode & S_ISVTX) || c->uid == dir->st_uid || !entry)
        return rc;
    return c->uid == entry->st_uid ? 0 : -EPERM;
}
