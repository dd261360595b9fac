/* Locks: POSIX record locks per owner (conflicts between owners, upgrades
 * and downgrades by one owner, GETLK naming the holder, FLUSH and connection
 * close releasing), waiting locks answered later without holding a worker,
 * and flock per handle. */
#include <sys/file.h>

#include "test_brick_util.h"

static pthread_mutex_t rlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rcond = PTHREAD_COND_INITIALIZER;
static int n_replies;
static int last_status;
static struct brick_conn *last_bc;

static void reply_cb(struct brick_conn *bc, uint64_t reqid, int status, const struct rpc_buf *body)
{
    pthread_mutex_lock(&rlock);
    n_replies++;
    last_status = status;
    last_bc = bc;
    pthread_cond_broadcast(&rcond);
    pthread_mutex_unlock(&rlock);
}

/* Waits up to ms for the reply count to reach n. */
static int wait_replies(int n, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&rlock);
    while (n_replies < n)
        if (pthread_cond_timedwait(&rcond, &rlock, &until) != 0)
            break;
    int got = n_replies;
    pthread_mutex_unlock(&rlock);
    return got;
}

static uint64_t open_file(struct tb *t, struct brick_conn *bc, const char *path, int flags)
{
    struct rpc_msg m = tb_msg(path);
    RPC_SET(&m, flags, RPC_T_FLAGS, flags);
    struct tb_reply rep;
    uint64_t fh = 0;
    CHECK_EQ(tb_call_on(t, bc, RPC_OP_OPEN, &m, &rep), 0);
    fh = rep.m.fh;
    tb_free(&rep);
    return fh;
}

static int setlk(struct tb *t, struct brick_conn *bc, uint64_t fh, uint64_t owner, int type,
                 uint64_t start, uint64_t len, int wait, uint64_t pid)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, owner, RPC_T_OWNER, owner);
    RPC_SET(&m, flags, RPC_T_FLAGS, wait);
    m.lock.type = (uint64_t)type;
    m.lock.start = start;
    m.lock.len = len;
    m.lock.pid = pid;
    m.present |= 1ull << RPC_T_LOCK;
    struct tb_reply rep;
    int rc = tb_call_on(t, bc, RPC_OP_SETLK, &m, &rep);
    tb_free(&rep);
    return rc;
}

static int getlk(struct tb *t, uint64_t fh, uint64_t owner, int type, uint64_t start, uint64_t len,
                 struct rpc_lock *out)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, owner, RPC_T_OWNER, owner);
    m.lock.type = (uint64_t)type;
    m.lock.start = start;
    m.lock.len = len;
    m.present |= 1ull << RPC_T_LOCK;
    struct tb_reply rep;
    int rc = tb_call(t, RPC_OP_GETLK, &m, &rep);
    if (rc == 0)
        *out = rep.m.lock;
    tb_free(&rep);
    return rc;
}

static int flock_op(struct tb *t, uint64_t fh, int op)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, owner, RPC_T_OWNER, 1);
    RPC_SET(&m, flags, RPC_T_FLAGS, op);
    return tb_do(t, RPC_OP_FLOCK, &m);
}

enum { RD = 0, WR = 1, UN = 2 };

static void test_posix(struct tb *t)
{
    const uint64_t A = 0xa, B = 0xb;
    CHECK_EQ(tb_create(t, "/lk", 0644, NULL, NULL), 0);
    uint64_t fa = open_file(t, t->bc, "/lk", O_RDWR);
    uint64_t fb = open_file(t, t->bc, "/lk", O_RDWR);
    uint64_t fro = open_file(t, t->bc, "/lk", O_RDONLY);
    struct rpc_lock l;

    CHECK_EQ(setlk(t, t->bc, fa, A, WR, 0, 100, 0, 111), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 50, 10, 0, 222), -EAGAIN);
    CHECK_EQ(setlk(t, t->bc, fb, B, RD, 99, 1, 0, 222), -EAGAIN);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 100, 10, 0, 222), 0); /* adjacent: fine */
    /* the same owner through another handle of the file does not conflict */
    CHECK_EQ(setlk(t, t->bc, fb, A, WR, 10, 10, 0, 111), 0);
    CHECK_EQ(getlk(t, fb, B, WR, 50, 10, &l), 0);
    CHECK_EQ(l.type, WR);
    CHECK_EQ(l.start, 0);
    CHECK_EQ(l.len, 100);
    CHECK_EQ(l.pid, 111);
    CHECK_EQ(getlk(t, fa, A, WR, 0, 100, &l), 0);
    CHECK_EQ(l.type, UN); /* its own locks never conflict */
    CHECK_EQ(getlk(t, fa, A, WR, 0, 0, &l), 0);
    CHECK_EQ(l.type, WR); /* B's [100, 110) */
    CHECK_EQ(l.start, 100);
    CHECK_EQ(l.pid, 222);

    /* one owner upgrades and downgrades its own range */
    CHECK_EQ(setlk(t, t->bc, fa, A, RD, 200, 100, 0, 111), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, RD, 200, 100, 0, 222), 0); /* read locks share */
    CHECK_EQ(setlk(t, t->bc, fa, A, WR, 200, 100, 0, 111), -EAGAIN);
    CHECK_EQ(setlk(t, t->bc, fb, B, UN, 200, 100, 0, 222), 0);
    CHECK_EQ(setlk(t, t->bc, fa, A, WR, 200, 100, 0, 111), 0);
    CHECK_EQ(setlk(t, t->bc, fa, A, RD, 0, 100, 0, 111), 0); /* downgrade */
    CHECK_EQ(setlk(t, t->bc, fb, B, RD, 50, 10, 0, 222), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, UN, 50, 10, 0, 222), 0);
    /* splitting: unlock the middle, keep both ends */
    CHECK_EQ(setlk(t, t->bc, fa, A, WR, 0, 100, 0, 111), 0);
    CHECK_EQ(setlk(t, t->bc, fa, A, UN, 40, 20, 0, 111), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 45, 10, 0, 222), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 30, 10, 0, 222), -EAGAIN);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 60, 10, 0, 222), -EAGAIN);
    /* a write lock needs a handle open for writing */
    CHECK_EQ(setlk(t, t->bc, fro, B, WR, 5000, 1, 0, 222), -EBADF);
    CHECK_EQ(setlk(t, t->bc, fro, B, RD, 5000, 1, 0, 222), 0);
    /* bad ranges */
    CHECK_EQ(setlk(t, t->bc, fa, A, 7, 0, 1, 0, 111), -EINVAL);
    CHECK_EQ(setlk(t, t->bc, fa, A, WR, 1ull << 63, 1, 0, 111), -EINVAL);

    /* a waiting lock is answered when the holder lets go */
    int base = wait_replies(0, 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 0, 10, 1, 222), BRICK_DEFERRED);
    usleep(50 * 1000);
    CHECK_EQ(wait_replies(base + 1, 0), base); /* still waiting */
    CHECK_EQ(setlk(t, t->bc, fa, A, UN, 0, 40, 0, 111), 0);
    CHECK_EQ(wait_replies(base + 1, 2000), base + 1);
    CHECK_EQ(last_status, 0);
    CHECK_EQ(setlk(t, t->bc, fa, A, WR, 5, 1, 0, 111), -EAGAIN); /* B has it now */

    /* FLUSH of an owner drops all its locks on the file */
    CHECK_EQ(setlk(t, t->bc, fa, A, WR, 1000, 10, 0, 111), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 1000, 10, 0, 222), -EAGAIN);
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fa);
    RPC_SET(&m, owner, RPC_T_OWNER, A);
    CHECK_EQ(tb_do(t, RPC_OP_FLUSH, &m), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 1000, 10, 0, 222), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 60, 10, 0, 222), 0); /* A's [60,100) went too */

    /* a second connection: its locks and waits go with it */
    struct brick_conn *bc2 = brick_conn_new(t->b, NULL, "second");
    bc2->handshaken = 1;
    uint64_t f2 = open_file(t, bc2, "/lk", O_RDWR);
    CHECK_EQ(setlk(t, bc2, f2, A, WR, 1000, 10, 0, 333), -EAGAIN); /* B holds it */
    CHECK_EQ(setlk(t, bc2, f2, A, WR, 9000, 10, 0, 333), 0);
    base = wait_replies(0, 0);
    CHECK_EQ(setlk(t, bc2, f2, A, WR, 1000, 10, 1, 333), BRICK_DEFERRED);
    brick_conn_shutdown(bc2);
    brick_conn_put(bc2);
    CHECK_EQ(setlk(t, t->bc, fb, B, UN, 0, 0, 0, 222), 0);
    usleep(50 * 1000);
    CHECK_EQ(wait_replies(base + 1, 0), base); /* the cancelled wait is never granted */
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 9000, 10, 0, 222), 0);
    CHECK_EQ(setlk(t, t->bc, fb, B, WR, 1000, 10, 0, 222), 0);

    tb_fh_op(t, RPC_OP_RELEASE, fa);
    tb_fh_op(t, RPC_OP_RELEASE, fb);
    tb_fh_op(t, RPC_OP_RELEASE, fro);
}

static void test_flock(struct tb *t)
{
    CHECK_EQ(tb_create(t, "/fl", 0644, NULL, NULL), 0);
    uint64_t f1 = open_file(t, t->bc, "/fl", O_RDWR);
    uint64_t f2 = open_file(t, t->bc, "/fl", O_RDWR);
    CHECK_EQ(flock_op(t, f1, LOCK_SH | LOCK_NB), 0);
    CHECK_EQ(flock_op(t, f2, LOCK_SH | LOCK_NB), 0);
    CHECK_EQ(flock_op(t, f2, LOCK_EX | LOCK_NB), -EWOULDBLOCK);
    CHECK_EQ(flock_op(t, f2, LOCK_UN), 0);
    CHECK_EQ(flock_op(t, f1, LOCK_EX | LOCK_NB), 0);
    CHECK_EQ(flock_op(t, f2, 0), -EINVAL);
    int base = wait_replies(0, 0);
    CHECK_EQ(flock_op(t, f2, LOCK_EX), BRICK_DEFERRED);
    usleep(30 * 1000);
    CHECK_EQ(wait_replies(base + 1, 0), base);
    /* the holder's handle going away releases its flock */
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASE, f1), 0);
    CHECK_EQ(wait_replies(base + 1, 2000), base + 1);
    CHECK_EQ(last_status, 0);
    uint64_t f3 = open_file(t, t->bc, "/fl", O_RDONLY);
    CHECK_EQ(flock_op(t, f3, LOCK_SH | LOCK_NB), -EWOULDBLOCK);
    tb_fh_op(t, RPC_OP_RELEASE, f2);
    CHECK_EQ(flock_op(t, f3, LOCK_SH | LOCK_NB), 0);
    tb_fh_op(t, RPC_OP_RELEASE, f3);
}

int main(void)
{
    log_init("test", LOG_WARN);
    brick_local_reply_cb = reply_cb;
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    test_posix(&t);
    test_flock(&t);
    tb_close(&t, 1);
    return check_summary("test_brick_locks");
}
