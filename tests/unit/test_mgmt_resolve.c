/* What volume set stores for auth.allow / auth.reject: address patterns as
 * given, host names as the addresses they resolve to, and a refusal naming
 * each entry that can never match a client. */
#include <errno.h>
#include <string.h>

#include "../../src/lib/net.h"
#include "../../src/mgmt/mgmt.h"
#include "check.h"

static int resolve(const char *list, char *out, size_t outlen, char *err, size_t errlen)
{
    return mgmt_resolve_addr_list("auth.allow", list, out, outlen, err, errlen);
}

int main(void)
{
    char out[1024], err[1024];
    CHECK_EQ(resolve("127.0.0.*,10.0.0.0/8,*", out, sizeof(out), err, sizeof(err)), 0);
    CHECK_STR(out, "127.0.0.*,10.0.0.0/8,*");
    /* one spelling of an IPv6 address, the one peers are printed in */
    CHECK_EQ(resolve("0:0:0::1", out, sizeof(out), err, sizeof(err)), 0);
    CHECK_STR(out, "::1");
    /* a name that resolves becomes its addresses (localhost is in
     * /etc/hosts, so this works without a network) */
    CHECK_EQ(resolve("localhost", out, sizeof(out), err, sizeof(err)), 0);
    CHECK(strstr(out, "127.0.0.1") != NULL);
    CHECK(strstr(out, "localhost") == NULL);
    /* what can never match is refused, every such entry named */
    uint64_t t0 = net_now_ms();
    CHECK_EQ(resolve("on,10.1.2.3,*.example.com,cairn-no-such-host.invalid", out, sizeof(out), err,
                     sizeof(err)),
             -EINVAL);
    CHECK(net_now_ms() - t0 < MGMT_RESOLVE_MS + 1000);
    CHECK(strstr(err, "'on'") != NULL);
    CHECK(strstr(err, "'*.example.com'") != NULL);
    CHECK(strstr(err, "'cairn-no-such-host.invalid'") != NULL);
    CHECK(strstr(err, "10.1.2.3") == NULL);
    /* empty entries are left for opt_validate to refuse */
    CHECK_EQ(resolve("", out, sizeof(out), err, sizeof(err)), 0);
    CHECK_STR(out, "");
    return check_summary("test_mgmt_resolve");
}
