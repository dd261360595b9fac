/* The pool secret and its challenge-response (pool_auth.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "../lib/gfid.h"
#include "pool_auth.h"

#define MAGIC "CRNA"
/* Labels of the two proofs: never the same, so that an acceptor's answer
 * is no connector's proof. */
#define LABEL_ACCEPTOR "cairn pool acceptor"
#define LABEL_CONNECTOR "cairn pool connector"

enum { S_NONE, S_HELLO_SENT, S_ANSWERED, S_ANSWER_SENT, S_PROVED };

static int random_bytes(uint8_t *p, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(p + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO;
        got += (size_t)n;
    }
    return 0;
}

static int proof(const struct pool_auth *a, const char *label, uint8_t out[POOL_PROOF_LEN])
{
    uint8_t msg[sizeof(LABEL_CONNECTOR) + 2 * POOL_NONCE_LEN];
    size_t n = strlen(label) + 1; /* with its NUL: no label is another's prefix */
    memcpy(msg, label, n);
    memcpy(msg + n, a->nc, POOL_NONCE_LEN);
    memcpy(msg + n + POOL_NONCE_LEN, a->ns, POOL_NONCE_LEN);
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), a->key, POOL_SECRET_LEN, msg, n + 2 * POOL_NONCE_LEN, out, &len) ||
        len != POOL_PROOF_LEN)
        return -EIO;
    return 0;
}

static int check(const struct pool_auth *a, const char *label, const uint8_t *got)
{
    uint8_t want[POOL_PROOF_LEN];
    if (proof(a, label, want) < 0)
        return -EIO;
    int bad = CRYPTO_memcmp(want, got, POOL_PROOF_LEN);
    OPENSSL_cleanse(want, sizeof(want));
    return bad ? -EACCES : 0;
}

int pool_auth_connect(struct pool_auth *a, const uint8_t key[POOL_SECRET_LEN],
                      uint8_t hello[POOL_HELLO_LEN])
{
    memset(a, 0, sizeof(*a));
    memcpy(a->key, key, POOL_SECRET_LEN);
    if (random_bytes(a->nc, POOL_NONCE_LEN) < 0)
        return -EIO;
    memcpy(hello, MAGIC, 4);
    hello[4] = POOL_AUTH_VERSION;
    hello[5] = hello[6] = hello[7] = 0;
    memcpy(hello + 8, a->nc, POOL_NONCE_LEN);
    a->state = S_HELLO_SENT;
    return 0;
}

int pool_auth_answered(struct pool_auth *a, const uint8_t *answer, size_t len,
                       uint8_t out[POOL_PROOF_LEN])
{
    if (a->state != S_HELLO_SENT || len != POOL_ANSWER_LEN)
        return -EPROTO;
    memcpy(a->ns, answer, POOL_NONCE_LEN);
    a->state = S_NONE; /* one answer per hello, right or wrong */
    int rc = check(a, LABEL_ACCEPTOR, answer + POOL_NONCE_LEN);
    if (rc < 0)
        return rc;
    if (proof(a, LABEL_CONNECTOR, out) < 0)
        return -EIO;
    a->state = S_ANSWERED;
    return 0;
}

int pool_auth_accept(struct pool_auth *a, const uint8_t key[POOL_SECRET_LEN], const uint8_t *hello,
                     size_t len, uint8_t answer[POOL_ANSWER_LEN])
{
    memset(a, 0, sizeof(*a));
    if (len != POOL_HELLO_LEN || memcmp(hello, MAGIC, 4) != 0 || hello[4] != POOL_AUTH_VERSION ||
        hello[5] || hello[6] || hello[7])
        return -EPROTO;
    memcpy(a->key, key, POOL_SECRET_LEN);
    memcpy(a->nc, hello + 8, POOL_NONCE_LEN);
    if (random_bytes(a->ns, POOL_NONCE_LEN) < 0)
        return -EIO;
    memcpy(answer, a->ns, POOL_NONCE_LEN);
    if (proof(a, LABEL_ACCEPTOR, answer + POOL_NONCE_LEN) < 0)
        return -EIO;
    a->state = S_ANSWER_SENT;
    return 0;
}

int pool_auth_proved(struct pool_auth *a, const uint8_t *p, size_t len)
{
    if (a->state != S_ANSWER_SENT || len != POOL_PROOF_LEN)
        return -EPROTO;
    a->state = S_NONE; /* one try per answer */
    int rc = check(a, LABEL_CONNECTOR, p);
    if (rc == 0)
        a->state = S_PROVED;
    return rc;
}

void pool_auth_clear(struct pool_auth *a)
{
    OPENSSL_cleanse(a, sizeof(*a));
}

/* ---- the secret ---- */

static pthread_mutex_t secret_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t secret[POOL_SECRET_LEN];
static int have_secret;

static void secret_path(const char *workdir, char *out, size_t len)
{
    snprintf(out, len, "%s/raft/secret", workdir);
}

/* Exactly 2 * POOL_SECRET_LEN hex digits, then optional white space. */
static int parse_hex(const char *hex, size_t len, uint8_t out[POOL_SECRET_LEN])
{
    if (len < 2 * POOL_SECRET_LEN)
        return -EINVAL;
    for (size_t i = 2 * POOL_SECRET_LEN; i < len; i++)
        if (hex[i] != '\n' && hex[i] != ' ' && hex[i] != '\r' && hex[i] != '\t')
            return -EINVAL;
    for (int i = 0; i < POOL_SECRET_LEN; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static void to_hex(const uint8_t *b, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < POOL_SECRET_LEN; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * POOL_SECRET_LEN] = 0;
}

static void keep(const uint8_t b[POOL_SECRET_LEN])
{
    pthread_mutex_lock(&secret_lock);
    memcpy(secret, b, POOL_SECRET_LEN);
    have_secret = 1;
    pthread_mutex_unlock(&secret_lock);
}

/* Writes the secret (0600, fsync'd, then renamed into place). */
static int write_secret(const char *workdir, const uint8_t b[POOL_SECRET_LEN])
{
    char path[PATH_MAX], tmp[PATH_MAX + 8], text[2 * POOL_SECRET_LEN + 2];
    secret_path(workdir, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    to_hex(b, text);
    strcat(text, "\n");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int rc = 0;
    size_t len = strlen(text), done = 0;
    while (rc == 0 && done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno != EINTR)
            rc = -errno;
        else if (n > 0)
            done += (size_t)n;
    }
    if (rc == 0 && fchmod(fd, 0600) < 0)
        rc = -errno;
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    OPENSSL_cleanse(text, sizeof(text));
    return rc;
}

int pool_secret_load(const char *workdir)
{
    char path[PATH_MAX], text[2 * POOL_SECRET_LEN + 64];
    secret_path(workdir, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof(text));
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    uint8_t b[POOL_SECRET_LEN];
    int rc = parse_hex(text, (size_t)n, b);
    OPENSSL_cleanse(text, sizeof(text));
    if (rc == 0)
        keep(b);
    OPENSSL_cleanse(b, sizeof(b));
    return rc;
}

int pool_secret_create(const char *workdir)
{
    uint8_t b[POOL_SECRET_LEN];
    int rc = random_bytes(b, sizeof(b));
    if (rc == 0)
        rc = write_secret(workdir, b);
    if (rc == 0)
        keep(b);
    OPENSSL_cleanse(b, sizeof(b));
    return rc;
}

int pool_secret_store_hex(const char *workdir, const char *hex)
{
    uint8_t b[POOL_SECRET_LEN];
    int rc = parse_hex(hex, strlen(hex), b);
    if (rc == 0)
        rc = write_secret(workdir, b);
    if (rc == 0)
        keep(b);
    OPENSSL_cleanse(b, sizeof(b));
    return rc;
}

void pool_secret_forget(void)
{
    pthread_mutex_lock(&secret_lock);
    OPENSSL_cleanse(secret, sizeof(secret));
    have_secret = 0;
    pthread_mutex_unlock(&secret_lock);
}

int pool_secret_get(uint8_t out[POOL_SECRET_LEN])
{
    pthread_mutex_lock(&secret_lock);
    int ok = have_secret;
    if (ok)
        memcpy(out, secret, POOL_SECRET_LEN);
    pthread_mutex_unlock(&secret_lock);
    return ok ? 0 : -ENOKEY;
}

int pool_secret_hex(char *out, size_t len)
{
    uint8_t b[POOL_SECRET_LEN];
    if (len < 2 * POOL_SECRET_LEN + 1 || pool_secret_get(b) < 0)
        return -ENOKEY;
    to_hex(b, out);
    OPENSSL_cleanse(b, sizeof(b));
    return 0;
}
