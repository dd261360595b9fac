/* libcairn internals: the volume and handle objects and the one request
 * type every call goes through.
 *
 * Each call builds a cairn__req (a cl_op plus what its completion needs),
 * submits it to the top of the volume's client stack and returns; the
 * request's completion (req.c) turns the reply into a result with the
 * call's finish function and hands it to the caller's callback. The
 * synchronous calls are the asynchronous ones plus a wait (cairn__wait).
 * The library holds no caches: what the bricks answer is what the caller
 * gets, and a request is made for every call.
 *
 * Ownership: a request owns copies of its paths (normalized); argument
 * buffers (write data, xattr values) are the caller's until completion.
 * A request counts as in flight on its volume from cairn__submit until
 * after its callback returned; cairn_vol_close waits for none to be left. */
#ifndef CAIRN_LIBCAIRN_INTERNAL_H
#define CAIRN_LIBCAIRN_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "../../include/cairn/cairn.h"
#include "../client/client.h"
#include "../client/volwatch.h"

/* The largest READ or WRITE sent as one request (bodies are at most 8 MiB;
 * the FUSE bridge's max_write is the same). */
#define CAIRN__IO_MAX (1u << 20)

struct cairn_vol {
    char name[256];
    char subdir[4096]; /* "HOST:/VOLUME/DIR": "/DIR", the root of every path; "/": none */
    struct cl_layer *stack;
    struct cl_volwatch *watch;
    struct cl_volinfo info; /* the layout the stack serves; options last applied */
    int ping_ms;            /* ping-timeout= option (0: the volume's) */
    mode_t umask;           /* read and set atomically */
    uint64_t next_owner;    /* lock owners handed to handles (atomic) */
    pthread_mutex_t lock;
    pthread_cond_t idle;
    uint64_t inflight;            /* requests submitted whose callbacks have not returned */
    struct cairn_fd *fds;         /* open handles (closed by cairn_vol_close) */
    struct cairn_dir *dirs;       /* open listings */
    int gone;                     /* cairnd said the volume is not served */
    uint64_t reported_layout_gen; /* a changed layout, logged once */
};

struct cairn_fd {
    struct cairn_vol *vol;
    struct cairn_fd *prev, *next; /* vol->fds, under vol->lock */
    uint64_t fh;                  /* the stack's handle */
    uint64_t owner;               /* lock owner: this handle's own */
    int flags;                    /* open flags */
    int locked;                   /* a lock was asked: FLUSH before RELEASE */
    /* The path it was opened by: changes through the handle name it so that
     * the bricks recall other clients' leases on the file. */
    char *path;
};

struct cairn_dir {
    struct cairn_vol *vol;
    struct cairn_dir *prev, *next; /* vol->dirs, under vol->lock */
    uint64_t fh;
    int plus;
    int eof;                 /* the last reply ended the listing */
    uint64_t cookie;         /* where the next READDIR starts */
    uint64_t asked;          /* the cookie the batch was asked from */
    struct rpc_frame *batch; /* the reply being handed out */
    struct rpc_iter it;
};

struct cairn__req;
/* Turns a successful reply into the call's result (0, a byte count, or
 * -errno when the reply is malformed). May be NULL: the result is 0. */
typedef ssize_t (*cairn__finish_fn)(struct cairn__req *r);

struct cairn__req {
    struct cl_op op;
    struct cairn_vol *vol;
    struct cairn_fd *fd; /* the handle a by-handle call goes through */
    cairn__finish_fn finish;
    cairn_cb cb; /* completion (NULL: none) */
    void *arg;
    void *out; /* where finish puts what it decodes */
    size_t outlen;
    uint64_t aux; /* per-call value for finish */
    char *path, *path2;
    char buf[]; /* room for the paths */
};

/* Normalizes a user path to the volume path the bricks take: leading '/',
 * no empty, "." or ".." components (".." goes up; above the root stays at
 * the root), no trailing '/'. 0, or -EINVAL (NULL), -ENOENT (empty string),
 * -ENAMETOOLONG (a component over 255 bytes, or the result not shorter than
 * RPC_PATH_MAX). out has outlen bytes. Pure. */
int cairn__path_norm(const char *in, char *out, size_t outlen);
/* The parent of a normalized path ("/" for "/a"), written to out. Pure. */
void cairn__path_parent(const char *path, char *out, size_t outlen);

/* A request for opcode on vol with the paths given (NULL: none) normalized
 * into it and set as PATH / PATH2. NULL with *err set on failure. */
struct cairn__req *cairn__req_new(struct cairn_vol *vol, uint16_t opcode, const char *path,
                                  const char *path2, int *err);
/* A request through fd (FH set; PATH too when the call changes the file,
 * change != 0, so that other clients' leases are recalled). */
struct cairn__req *cairn__req_fd(struct cairn_fd *fd, uint16_t opcode, int change, int *err);
/* Sets UID, GID, PID (and UMASK when umask is set) from the caller. */
void cairn__set_creator(struct cairn__req *r, int umask);
/* Submits r; its callback runs once with the result. Returns 0. */
int cairn__submit(struct cairn__req *r);
void cairn__req_free(struct cairn__req *r);

/* Waiting for an asynchronous call: init, pass cairn__wait_cb with the
 * waiter as arg, then cairn__wait_end (unless the call failed to start:
 * then cairn__wait_abandon). */
struct cairn__wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    ssize_t result;
};
void cairn__wait_init(struct cairn__wait *w);
void cairn__wait_cb(ssize_t result, void *arg);
ssize_t cairn__wait_end(struct cairn__wait *w);
void cairn__wait_abandon(struct cairn__wait *w);
/* Runs an async start function's outcome to its end: rc < 0 (it failed
 * to start) is returned; otherwise the waited result. */
ssize_t cairn__wait_for(struct cairn__wait *w, int rc);
/* Submits r and waits for its result (the synchronous calls). */
ssize_t cairn__run(struct cairn__req *r);

/* Handles: registered on their volume (fd.c). */
struct cairn_fd *cairn__fd_new(struct cairn_vol *vol, uint64_t fh, int flags, const char *path);
void cairn__fd_unlink_free(struct cairn_fd *fd);
/* Closes every handle and listing still open (cairn_vol_close). */
void cairn__close_leftovers(struct cairn_vol *vol);
void cairn__dir_release_all(struct cairn_vol *vol);

/* Attribute requests (ns.c), for the setattr shorthands and data.c. */
void cairn__setattr_args(struct rpc_msg *a, const struct stat *attr, unsigned valid);
ssize_t cairn__finish_attr(struct cairn__req *r);

#endif
