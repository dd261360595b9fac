/* Reading the mode out of an access ACL. A file written back (wb.c) keeps
 * its ACL here until it goes to the bricks; setting the ACL must change
 * the file's mode then and there, as a file system does, so that a chmod
 * before or after it keeps its place in the order. */
#include <stdint.h>

#include "aclmode.h"

#define ACL_VERSION 2
#define TAG_USER_OBJ 0x01
#define TAG_USER 0x02
#define TAG_GROUP_OBJ 0x04
#define TAG_GROUP 0x08
#define TAG_MASK 0x10
#define TAG_OTHER 0x20

static unsigned le16(const uint8_t *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

int cf_acl_mode(const void *value, size_t len)
{
    const uint8_t *p = value;
    if (!p || len < 4 || (len - 4) % 8 != 0)
        return -1;
    if ((p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24) != ACL_VERSION)
        return -1;
    int user = -1, group = -1, mask = -1, other = -1;
    for (size_t o = 4; o < len; o += 8) {
        unsigned tag = le16(p + o), perm = le16(p + o + 2);
        if (perm > 7)
            return -1;
        switch (tag) {
        case TAG_USER_OBJ:
            user = (int)perm;
            break;
        case TAG_GROUP_OBJ:
            group = (int)perm;
            break;
        case TAG_MASK:
            mask = (int)perm;
            break;
        case TAG_OTHER:
            other = (int)perm;
            break;
        case TAG_USER:
        case TAG_GROUP:
            break;
        default:
            return -1;
        }
    }
    if (user < 0 || group < 0 || other < 0)
        return -1;
    return user << 6 | (mask >= 0 ? mask : group) << 3 | other;
}

int cf_acl_minimal(const void *value, size_t len)
{
    /* Three entries among which user::, group:: and other:: all are: only
     * those three. */
    return len == 4 + 3 * 8 && cf_acl_mode(value, len) >= 0;
}
