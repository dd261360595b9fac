/* Fuzz target: the pool handshake's decoders (src/mgmt/pool_auth.h), fed
 * what a stranger on the network sends: a hello to the acceptor, an answer
 * to the connector, a proof to the acceptor. Nothing a fuzzer can make
 * without the key may be accepted. The first byte picks the message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/mgmt/pool_auth.h"

static const uint8_t key[POOL_SECRET_LEN] = {0x63, 0x61, 0x69, 0x72, 0x6e};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pool_auth a;
    uint8_t hello[POOL_HELLO_LEN], answer[POOL_ANSWER_LEN], proof[POOL_PROOF_LEN];
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 3) {
    case 0: /* a hello; then the rest as its proof */
        if (pool_auth_accept(&a, key, p, n < POOL_HELLO_LEN ? n : POOL_HELLO_LEN, answer) == 0 &&
            pool_auth_proved(&a, p + POOL_HELLO_LEN, n - POOL_HELLO_LEN) == 0)
            abort();
        break;
    case 1: /* an answer to our hello */
        if (pool_auth_connect(&a, key, hello) == 0 && pool_auth_answered(&a, p, n, proof) == 0)
            abort();
        break;
    default: /* a proof after a well-formed hello of ours */
        if (pool_auth_connect(&a, key, hello) == 0 &&
            pool_auth_accept(&a, key, hello, sizeof(hello), answer) == 0 &&
            pool_auth_proved(&a, p, n) == 0)
            abort();
    }
    pool_auth_clear(&a);
    return 0;
}
