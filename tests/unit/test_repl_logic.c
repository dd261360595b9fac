/* The replicate layer's decisions: quorum, which error a failed fan-out
 * reports, and which replica serves a read. */
#include <errno.h>

#include "../../src/client/replicate.h"
#include "check.h"

static void test_quorum(void)
{
    /* replica 3, quorum auto: two of three */
    CHECK(cl_repl_quorum_met(3, 0, 0, 1, 0x7));
    CHECK(cl_repl_quorum_met(3, 0, 0, 1, 0x3));
    CHECK(cl_repl_quorum_met(3, 0, 0, 1, 0x6));
    CHECK(!cl_repl_quorum_met(3, 0, 0, 1, 0x1));
    CHECK(!cl_repl_quorum_met(3, 0, 0, 1, 0x4));
    CHECK(!cl_repl_quorum_met(3, 0, 0, 1, 0x0));
    /* replica 2: exactly half counts only with the first brick */
    CHECK(cl_repl_quorum_met(2, 0, 0, 1, 0x1));
    CHECK(!cl_repl_quorum_met(2, 0, 0, 1, 0x2));
    CHECK(cl_repl_quorum_met(2, 0, 0, 1, 0x3));
    /* arbiter (child 2): a data change needs a data brick besides quorum */
    CHECK(cl_repl_quorum_met(3, 1, 0, 1, 0x5));
    CHECK(cl_repl_quorum_met(3, 1, 0, 1, 0x3));
    CHECK(!cl_repl_quorum_met(3, 1, 0, 1, 0x4)); /* the arbiter alone */
    CHECK(cl_repl_quorum_met(3, 1, 0, 0, 0x6));  /* metadata: arbiter + one data brick */
    /* replica 4: three of four, or two including the first */
    CHECK(cl_repl_quorum_met(4, 0, 0, 1, 0x7));
    CHECK(cl_repl_quorum_met(4, 0, 0, 1, 0x9));
    CHECK(!cl_repl_quorum_met(4, 0, 0, 1, 0xc));
    /* fixed: at least need children, whichever they are */
    CHECK(cl_repl_quorum_met(3, 0, 2, 1, 0x6));
    CHECK(!cl_repl_quorum_met(3, 0, 2, 1, 0x4));
    CHECK(!cl_repl_quorum_met(3, 0, 3, 1, 0x3));
    CHECK(cl_repl_quorum_met(4, 0, 2, 1, 0xc)); /* half, without the first */
    /* none (need 1): any one child, but data still needs a data child */
    CHECK(cl_repl_quorum_met(3, 0, 1, 1, 0x4));
    CHECK(!cl_repl_quorum_met(3, 0, 1, 1, 0x0));
    CHECK(!cl_repl_quorum_met(3, 1, 1, 1, 0x4));
    CHECK(cl_repl_quorum_met(3, 1, 1, 0, 0x4));
    /* what the options ask for */
    CHECK_EQ(cl_repl_quorum_need("auto", 2, 3), 0);
    CHECK_EQ(cl_repl_quorum_need("none", 0, 3), 1);
    CHECK_EQ(cl_repl_quorum_need("fixed", 2, 3), 2);
    CHECK_EQ(cl_repl_quorum_need("fixed", 0, 3), 0); /* no count: auto */
    CHECK_EQ(cl_repl_quorum_need("fixed", 5, 3), 3); /* more than the set: all of it */
}

static void test_merge_error(void)
{
    int errs[3] = {0, -ENOENT, -ENOENT};
    CHECK_EQ(cl_repl_merge_error(3, 0x7, errs), -ENOENT);
    int mixed[3] = {-EEXIST, -ENOSPC, -ENOSPC};
    CHECK_EQ(cl_repl_merge_error(3, 0x7, mixed), -ENOSPC);
    /* transport errors never outvote a real answer */
    int tr[3] = {-ENOTCONN, -ENOTCONN, -EACCES};
    CHECK_EQ(cl_repl_merge_error(3, 0x7, tr), -EACCES);
    int down[3] = {-ENOTCONN, -ETIMEDOUT, 0};
    CHECK_EQ(cl_repl_merge_error(3, 0x3, down), -ENOTCONN);
    /* children not asked do not count */
    int unasked[3] = {-EIO, -EIO, -EPERM};
    CHECK_EQ(cl_repl_merge_error(3, 0x4, unasked), -EPERM);
}

static void test_pick(void)
{
    CHECK_EQ(cl_repl_pick(3, 0, 0, 0x7), 0);
    CHECK_EQ(cl_repl_pick(3, 1, 0, 0x7), 1);
    CHECK_EQ(cl_repl_pick(3, 5, 0, 0x7), 2);
    CHECK_EQ(cl_repl_pick(3, 0, 0, 0x6), 1);   /* child 0 down */
    CHECK_EQ(cl_repl_pick(3, 2, 0, 0x3), 0);   /* wraps around */
    CHECK_EQ(cl_repl_pick(3, 0, 0x4, 0x7), 2); /* preferred first */
    CHECK_EQ(cl_repl_pick(3, 0, 0x4, 0x3), 0); /* preferred but not usable */
    CHECK_EQ(cl_repl_pick(3, 0, 0, 0), -1);
    /* reads spread: every child serves some hash */
    int seen[3] = {0};
    for (uint64_t h = 0; h < 30; h++)
        seen[cl_repl_pick(3, h, 0, 0x7)]++;
    CHECK(seen[0] == 10 && seen[1] == 10 && seen[2] == 10);
}

int main(void)
{
    test_quorum();
    test_merge_error();
    test_pick();
    return check_summary("test_repl_logic");
}
