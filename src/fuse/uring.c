/* FUSE requests over io_uring (kernel FUSE protocol 7.42+).
 *
 * Why: on a small machine most of a metadata request's cost is waking
 * threads on other CPUs (the application's request wakes a libfuse
 * worker somewhere, the reply wakes the application back). With io_uring
 * the kernel queues each request on the queue of the CPU the application
 * runs on; one thread per CPU, pinned there, serves that queue, so both
 * wake-ups stay on one CPU.
 *
 * How it fits libfuse 3.14, which predates the ring: the session gets a
 * custom I/O (fuse_session_custom_io). Its read passes /dev/fuse reads
 * through and notes the kernel's INIT offer; its writev passes replies
 * through, except that the INIT reply is amended to ask for the ring and a
 * reply to a request that came over the ring is copied into that ring
 * entry and committed. A request from the ring is rebuilt as the byte
 * layout /dev/fuse would have delivered (in header, per-op header,
 * payload) and handed to fuse_session_process_buf, so every handler runs
 * unchanged. FORGET and INTERRUPT still come over /dev/fuse, served by
 * libfuse's loop (read again only 2 ms after a FORGET, so that they come
 * in batches: gather_forgets), as does everything until every CPU's queue
 * has registered. When the kernel does not offer the ring (module parameter
 * enable_uring off, older kernel) or setting it up fails, requests keep
 * coming over /dev/fuse: the ring is an optimization, never a dependency.
 *
 * A handler that waits (write-back settling before a request that needs a
 * brick) holds up the other requests of its CPU's queue, not those of
 * other CPUs; a reply made later by another thread commits under the
 * queue's lock. */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "bridge.h"

/* The ABI (include/uapi/linux/fuse.h, 7.42): Debian 12's kernel headers
 * predate it. */
#define FUSE_INIT_OP 26
#define FUSE_FORGET_OP 2
#define FUSE_BATCH_FORGET_OP 42
#define INIT_EXT (1u << 30)
#define PARALLEL_DIROPS (1u << 18)
#define HANDLE_KILLPRIV_V2 (1u << 28)
#define OVER_IO_URING_HI (1u << (41 - 32))  /* FUSE_OVER_IO_URING in flags2 */
#define DIO_ALLOW_MMAP_HI (1u << (36 - 32)) /* FUSE_DIRECT_IO_ALLOW_MMAP (7.39) in flags2 */
#define CMD_REGISTER 1
#define CMD_COMMIT_AND_FETCH 2
#define HDR_SZ 128
#define OP_SZ 128

struct in_header {
    uint32_t len, opcode;
    uint64_t unique, nodeid;
    uint32_t uid, gid, pid;
    uint16_t total_extlen, padding;
};

struct out_header {
    uint32_t len;
    int32_t error;
    uint64_t unique;
};

struct ent_in_out {
    uint64_t flags, commit_id;
    uint32_t payload_sz, padding;
    uint64_t reserved;
};

struct req_header {
    char in_out[HDR_SZ];
    char op_in[OP_SZ];
    struct ent_in_out ent;
};

struct cmd_req {
    uint64_t flags, commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

/* fuse_init_in / fuse_init_out, the parts read or amended here */
struct init_in {
    uint32_t major, minor, max_readahead, flags, flags2;
};
struct init_out {
    uint32_t major, minor, max_readahead, flags;
    uint16_t max_background, congestion_threshold;
    uint32_t max_write, time_gran;
    uint16_t max_pages, map_alignment;
    uint32_t flags2;
};

/* Ring entries per CPU queue: up to DEPTH, fewer on machines with many
 * CPUs so that all queues together keep at most ENTRIES_MAX payload
 * buffers (each up to max_write, 1 MiB, resident once a large write used
 * it). */
#define DEPTH 16
#define ENTRIES_MAX 128
#define HEADROOM 256          /* before the payload: in header + per-op header */
#define KICK_TAG ((void *)-1) /* user_data of the poll on the queue's eventfd */

struct queue;

struct ent {
    struct queue *q;
    struct req_header *hdr;
    char *buf; /* HEADROOM + payload */
    struct iovec iov[2];
    uint64_t commit_id;
    uint64_t unique; /* request being served (atomic); 0: none */
};

struct queue {
    struct cf_uring *u;
    int qid;
    pthread_t tid;
    int started;
    struct io_uring ring;
    pthread_mutex_t lock; /* the submission queue */
    int efd;              /* other threads wake the queue's thread here */
    int kicked;           /* efd written and not yet seen (atomic) */
    int stop;             /* set before the last kick */
    struct ent ent[DEPTH];
};

struct cf_uring {
    struct fuse_session *se;
    int fd;
    int offered;          /* the kernel's INIT offered the ring */
    uint32_t ask;         /* INIT flags offered that libfuse 3.14 does not ask for */
    int mmap_offered;     /* ... and FUSE_DIRECT_IO_ALLOW_MMAP */
    int dio_mmap;         /* asked for it: direct handles may be shared-mapped (atomic) */
    uint64_t init_unique; /* of the INIT request, to amend its reply */
    size_t payload;       /* per entry: the kernel's max_payload_sz or more */
    int nq;
    struct queue *q;
    int up;             /* queues running (the ones after a failed one never start) */
    int depth;          /* entries per queue */
    uint64_t served;    /* requests that came over the ring (atomic) */
    uint64_t forget_us; /* when /dev/fuse last gave a FORGET (atomic); 0: not since */
};

static _Thread_local struct queue *serving; /* the queue this thread serves */

static int possible_cpus(void)
{
    /* the kernel makes one queue per possible CPU: "0-1", "0", "0-3,5" */
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    int n = 0, a, b;
    if (f) {
        while (fscanf(f, "%d", &a) == 1) {
            b = a;
            if (fscanf(f, "-%d", &b) != 1)
                b = a;
            n = b + 1;
            if (fgetc(f) != ',')
                break;
        }
        fclose(f);
    }
    return n > 0 ? n : (int)sysconf(_SC_NPROCESSORS_CONF);
}

static void prep_cmd(struct queue *q, struct ent *e, uint32_t op)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    if (!sqe) { /* two SQEs per entry: cannot happen */
        log_error("io_uring: queue %d: submission queue full", q->qid);
        return;
    }
    memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128 */
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = q->u->fd;
    sqe->cmd_op = op;
    io_uring_sqe_set_data(sqe, e);
    struct cmd_req *c = (struct cmd_req *)sqe->cmd;
    c->qid = (uint16_t)q->qid;
    c->commit_id = op == CMD_REGISTER ? 0 : e->commit_id;
    if (op == CMD_REGISTER) {
        sqe->addr = (uint64_t)(uintptr_t)e->iov;
        sqe->len = 2;
    }
}

/* Wakes the queue's thread to submit what others prepared. */
static void kick(struct queue *q)
{
    if (!__atomic_exchange_n(&q->kicked, 1, __ATOMIC_ACQ_REL)) {
        uint64_t one = 1;
        if (write(q->efd, &one, sizeof(one)) != sizeof(one))
            log_error("io_uring: queue %d: eventfd: %s", q->qid, strerror(errno));
    }
}

static void arm_kick(struct queue *q)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
    if (sqe) {
        memset(sqe, 0, 2 * sizeof(*sqe));
        io_uring_prep_poll_add(sqe, q->efd, POLLIN);
        io_uring_sqe_set_data(sqe, KICK_TAG);
    }
}

/* Commits e's reply. Only the queue's own thread submits: io_uring runs
 * a command's completion work (here: handing over the next request) on
 * the task that submitted it, which must outlive the ring. A reply made
 * by another thread (after a brick answered) is prepared here and
 * submitted by the queue's thread, woken through its eventfd. */
static void commit(struct ent *e)
{
    struct queue *q = e->q;
    __atomic_store_n(&e->unique, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&q->lock);
    prep_cmd(q, e, CMD_COMMIT_AND_FETCH);
    pthread_mutex_unlock(&q->lock);
    if (serving != q)
        kick(q);
}

static void reply_err(struct ent *e, int err)
{
    struct out_header *oh = (struct out_header *)e->hdr->in_out;
    oh->len = sizeof(*oh);
    oh->error = -err;
    oh->unique = e->commit_id;
    e->hdr->ent.payload_sz = 0;
    commit(e);
}

/* Rebuilds the request as /dev/fuse lays it out, in front of its payload,
 * and hands it to libfuse. */
static void serve(struct queue *q, struct ent *e)
{
    const struct in_header *in = (const struct in_header *)e->hdr->in_out;
    uint32_t psz = e->hdr->ent.payload_sz;
    e->commit_id = e->hdr->ent.commit_id;
    if (in->len < sizeof(*in) + psz || psz > q->u->payload || in->len - sizeof(*in) - psz > OP_SZ) {
        log_error("io_uring: malformed request (opcode %u, length %u, payload %u)", in->opcode,
                  in->len, psz);
        reply_err(e, EIO);
        return;
    }
    size_t oplen = in->len - sizeof(*in) - psz;
    char *start = e->buf + HEADROOM - sizeof(*in) - oplen;
    memcpy(start, in, sizeof(*in));
    memcpy(start + sizeof(*in), e->hdr->op_in, oplen);
    __atomic_store_n(&e->unique, in->unique, __ATOMIC_RELEASE);
    __atomic_fetch_add(&q->u->served, 1, __ATOMIC_RELAXED);
    struct fuse_buf fb = {.mem = start, .size = in->len};
    cf_killpriv_note(start, in->len);
    fuse_session_process_buf(q->u->se, &fb);
}

static void *queue_main(void *arg)
{
    struct queue *q = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(q->qid, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0)
        log_debug("io_uring: queue %d not pinned to its CPU: %s", q->qid, strerror(errno));
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < q->u->depth; i++)
        prep_cmd(q, &q->ent[i], CMD_REGISTER);
    arm_kick(q);
    pthread_mutex_unlock(&q->lock);
    serving = q;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        io_uring_submit(&q->ring);
        pthread_mutex_unlock(&q->lock);
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(&q->ring, &cqe);
        if (rc == -EINTR)
            continue;
        if (rc < 0) {
            log_error("io_uring: queue %d: %s", q->qid, strerror(-rc));
            return NULL;
        }
        unsigned head, n = 0;
        int stop = 0, refused = 0;
        io_uring_for_each_cqe(&q->ring, head, cqe)
        {
            n++;
            struct ent *e = io_uring_cqe_get_data(cqe);
            if ((void *)e == KICK_TAG) {
                uint64_t v;
                if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    log_error("io_uring: queue %d: eventfd: %s", q->qid, strerror(errno));
                __atomic_exchange_n(&q->kicked, 0, __ATOMIC_ACQ_REL);
                if (__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE))
                    stop = 1;
                pthread_mutex_lock(&q->lock);
                arm_kick(q);
                pthread_mutex_unlock(&q->lock);
            } else if (cqe->res == -EAGAIN || cqe->res == -EINTR) {
                pthread_mutex_lock(&q->lock); /* not ready yet: again */
                prep_cmd(q, e, CMD_REGISTER);
                pthread_mutex_unlock(&q->lock);
            } else if (cqe->res == -ENOTCONN || cqe->res == -ECANCELED) {
                stop = 1; /* unmounted */
            } else if (cqe->res < 0) {
                /* the kernel refused this entry; the others may serve */
                if (!refused++)
                    log_warn("io_uring: queue %d: %s; requests use /dev/fuse", q->qid,
                             strerror(-cqe->res));
            } else {
                serve(q, e);
            }
        }
        io_uring_cq_advance(&q->ring, n);
        if (stop)
            return NULL;
    }
}

static void queue_free(struct queue *q)
{
    if (q->efd > 0)
        close(q->efd);
    for (int i = 0; i < q->u->depth; i++) {
        free(q->ent[i].hdr);
        free(q->ent[i].buf);
    }
    pthread_mutex_destroy(&q->lock);
}

static int queue_init(struct cf_uring *u, struct queue *q, int qid)
{
    q->u = u;
    q->qid = qid;
    pthread_mutex_init(&q->lock, NULL);
    if ((q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return -errno;
    for (int i = 0; i < u->depth; i++) {
        struct ent *e = &q->ent[i];
        e->q = q;
        if (posix_memalign((void **)&e->hdr, 4096, 4096) != 0 ||
            !(e->buf = malloc(HEADROOM + u->payload)))
            return -ENOMEM;
        memset(e->hdr, 0, sizeof(*e->hdr));
        e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
        e->iov[1] = (struct iovec){e->buf + HEADROOM, u->payload};
    }
    struct io_uring_params p = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE,
                                .cq_entries = 4 * (unsigned)u->depth};
    return io_uring_queue_init_params(2 * (unsigned)u->depth, &q->ring, &p);
}

/* After the INIT reply asked for the ring: one pinned thread per CPU
 * registers its queue's entries. */
static void start(struct cf_uring *u)
{
    int nq = possible_cpus();
    u->depth = ENTRIES_MAX / nq < 1 ? 1 : ENTRIES_MAX / nq > DEPTH ? DEPTH : ENTRIES_MAX / nq;
    struct queue *qs = calloc((size_t)nq, sizeof(*qs));
    if (!qs) {
        log_error("io_uring: out of memory; requests use /dev/fuse");
        return;
    }
    /* published before any queue registers: find() sees every entry */
    __atomic_store_n(&u->q, qs, __ATOMIC_RELEASE);
    __atomic_store_n(&u->nq, nq, __ATOMIC_RELEASE);
    for (int i = 0; i < nq; i++) {
        struct queue *q = &u->q[i];
        int rc = queue_init(u, q, i);
        if (rc < 0) {
            log_warn("io_uring: queue %d: %s; requests use /dev/fuse", i, strerror(-rc));
            queue_free(q);
            break;
        }
        if (pthread_create(&q->tid, NULL, queue_main, q) != 0) {
            io_uring_queue_exit(&q->ring);
            queue_free(q);
            break;
        }
        q->started = 1;
        __atomic_fetch_add(&u->up, 1, __ATOMIC_RELAXED);
    }
    log_info("FUSE requests over io_uring: %d of %d CPU queues, %d entries each, %zu-byte payloads",
             u->up, u->nq, u->depth, u->payload);
}

static struct ent *find(struct cf_uring *u, uint64_t unique)
{
    int nq = __atomic_load_n(&u->nq, __ATOMIC_ACQUIRE);
    struct queue *qs = __atomic_load_n(&u->q, __ATOMIC_ACQUIRE);
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < u->depth; j++)
            if (__atomic_load_n(&qs[i].ent[j].unique, __ATOMIC_ACQUIRE) == unique)
                return &qs[i].ent[j];
    return NULL;
}

static ssize_t ring_reply(struct ent *e, const struct iovec *iov, int count)
{
    struct out_header *oh = (struct out_header *)e->hdr->in_out;
    size_t len = 0;
    for (int i = 1; i < count; i++) {
        if (len + iov[i].iov_len > e->q->u->payload) {
            log_error("io_uring: reply of %zu+ bytes exceeds the %zu-byte payload",
                      len + iov[i].iov_len, e->q->u->payload);
            reply_err(e, EIO);
            errno = EINVAL;
            return -1;
        }
        memmove(e->buf + HEADROOM + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
    }
    memcpy(oh, iov[0].iov_base, sizeof(*oh));
    e->hdr->ent.payload_sz = (uint32_t)len;
    commit(e);
    return (ssize_t)(len + sizeof(*oh));
}

/* Once the ring serves requests, /dev/fuse carries only FORGETs and
 * INTERRUPTs. rm -rf makes a FORGET per file; read at once, each wakes a
 * thread here, a context switch on a CPU the application needs. Reading
 * again only FORGET_GATHER_US after a FORGET lets the kernel gather the
 * next ones into one BATCH_FORGET; an INTERRUPT waits as long at most. */
#define FORGET_GATHER_US 2000

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void gather_forgets(struct cf_uring *u)
{
    uint64_t last = __atomic_load_n(&u->forget_us, __ATOMIC_RELAXED);
    if (!last || !__atomic_load_n(&u->served, __ATOMIC_RELAXED))
        return;
    uint64_t now = mono_us();
    if (now < last + FORGET_GATHER_US)
        usleep((useconds_t)(last + FORGET_GATHER_US - now));
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
    struct cf *cf = userdata;
    struct cf_uring *u = cf->uring;
    if (u)
        gather_forgets(u);
    ssize_t n = read(fd, buf, len);
    const struct in_header *in = buf;
    if (u && n >= (ssize_t)sizeof(*in))
        __atomic_store_n(
            &u->forget_us,
            in->opcode == FUSE_FORGET_OP || in->opcode == FUSE_BATCH_FORGET_OP ? mono_us() : 0,
            __ATOMIC_RELAXED);
    if (n > 0)
        cf_killpriv_note(buf, (size_t)n);
    if (u && n >= (ssize_t)(sizeof(*in) + sizeof(struct init_in)) && in->opcode == FUSE_INIT_OP) {
        const struct init_in *ii = (const void *)(in + 1);
        u->init_unique = in->unique;
        /* HANDLE_KILLPRIV_V2 (killpriv.c): the kernel stops asking for
         * security.capability before every write and leaves set-id bits to
         * the bricks. PARALLEL_DIROPS: lookups and listings of one
         * directory may run side by side; without it a kernel may take a
         * per-directory mutex around each (docs/notes/performance-notes.md, round
         * thirty-four; libfuse 3.14 wants it but never sets the flag). */
        u->ask = ii->major != 7 ? 0
                                : (ii->minor >= 33 ? ii->flags & HANDLE_KILLPRIV_V2 : 0) |
                                      (ii->minor >= 25 ? ii->flags & PARALLEL_DIROPS : 0);
        u->mmap_offered = ii->major == 7 && ii->minor >= 39 && (ii->flags & INIT_EXT) &&
                          (ii->flags2 & DIO_ALLOW_MMAP_HI);
        u->offered = ii->major == 7 && ii->minor >= 42 && (ii->flags & INIT_EXT) &&
                     (ii->flags2 & OVER_IO_URING_HI);
        if (!u->offered)
            log_info("FUSE %u.%u: the kernel does not offer io_uring (fuse module parameter "
                     "enable_uring); requests use /dev/fuse",
                     ii->major, ii->minor);
    }
    return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    struct cf *cf = userdata;
    struct cf_uring *u = cf->uring;
    const struct out_header *oh = iov[0].iov_base;
    if (u && oh->unique) {
        struct ent *e = find(u, oh->unique);
        if (e)
            return ring_reply(e, iov, count);
        /* the INIT reply, amended to ask for what libfuse 3.14 does not know */
        struct init_out *io = oh->unique == u->init_unique && !oh->error && count > 1 &&
                                      iov[1].iov_len >= sizeof(struct init_out)
                                  ? iov[1].iov_base
                                  : NULL;
        if (io)
            io->flags |= u->ask;
        if (io && u->mmap_offered) {
            /* A handle opened with FOPEN_DIRECT_IO may then be mapped
             * shared (cf_set_direct): the kernel keeps the mapping's pages
             * and drops those a direct write covers. */
            io->flags |= INIT_EXT;
            io->flags2 |= DIO_ALLOW_MMAP_HI;
            __atomic_store_n(&u->dio_mmap, 1, __ATOMIC_RELEASE);
        }
        if (io && u->offered) {
            io->flags |= INIT_EXT;
            io->flags2 |= OVER_IO_URING_HI;
            size_t p = io->max_write;
            if ((size_t)io->max_pages * 4096 > p)
                p = (size_t)io->max_pages * 4096;
            u->payload = p > 8192 ? p : 8192;
            ssize_t n = writev(fd, iov, count);
            if (n >= 0)
                start(u);
            return n;
        }
    }
    return writev(fd, iov, count);
}

int cf_uring_attach(struct cf *cf, struct fuse_session *se)
{
    static const struct fuse_custom_io io = {.read = io_read, .writev = io_writev};
    struct cf_uring *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    u->se = se;
    u->fd = fuse_session_fd(se);
    if (fuse_session_custom_io(se, &io, u->fd) != 0) {
        free(u);
        return -EINVAL;
    }
    cf->uring = u;
    return 0;
}

void cf_uring_stop(struct cf *cf)
{
    struct cf_uring *u = cf->uring;
    if (!u)
        return;
    for (int i = 0; i < u->nq && u->q; i++) {
        struct queue *q = &u->q[i];
        if (!q->started)
            continue;
        __atomic_store_n(&q->stop, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&q->kicked, 0, __ATOMIC_RELEASE);
        kick(q);
        pthread_join(q->tid, NULL);
        io_uring_queue_exit(&q->ring);
        queue_free(q);
    }
    free(u->q);
    free(u);
    cf->uring = NULL;
}

/* The kernel offers the ring only while the fuse module's enable_uring
 * parameter is on (it is off by default while the interface is new). It
 * only lets FUSE servers that ask for the ring use it, so a mount turns it
 * on when it can (as root) and says so. */
void cf_uring_enable_kernel(void)
{
    static const char *param = "/sys/module/fuse/parameters/enable_uring";
    char v = 0;
    FILE *f = fopen(param, "r");
    if (!f)
        return; /* kernel without FUSE over io_uring */
    if (fread(&v, 1, 1, f) != 1)
        v = 0;
    fclose(f);
    if (v == 'Y' || v == '1')
        return;
    if (!(f = fopen(param, "w")) || fputs("Y\n", f) < 0 || fclose(f) != 0) {
        if (f)
            fclose(f);
        log_info("cannot turn on %s (%s): requests use /dev/fuse", param, strerror(errno));
        return;
    }
    log_info("turned on %s (FUSE requests over io_uring)", param);
}

int cf_uring_dio_mmap(struct cf *cf)
{
    return cf->uring && __atomic_load_n(&cf->uring->dio_mmap, __ATOMIC_ACQUIRE);
}

size_t cf_uring_format(struct cf *cf, char *buf, size_t n)
{
    struct cf_uring *u = cf->uring;
    int len;
    if (!u)
        len = snprintf(buf, n, "FUSE requests over io_uring: off\n");
    else
        len = snprintf(buf, n, "FUSE requests over io_uring: %llu (%d of %d CPU queues)\n",
                       (unsigned long long)__atomic_load_n(&u->served, __ATOMIC_RELAXED),
                       __atomic_load_n(&u->up, __ATOMIC_RELAXED),
                       __atomic_load_n(&u->nq, __ATOMIC_RELAXED));
    return cf_fmt_len(len, n);
}
