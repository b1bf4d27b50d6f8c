/* crypto.h: SHA-256, HMAC-SHA256, random ids (OpenSSL's libcrypto). */
#ifndef SANDBOX_CRYPTO_H
#define SANDBOX_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>

void sha256_hex(const void *data, size_t len, char out[65]);
void hmac_sha256_hex(const void *key, size_t keylen, const void *data,
		     size_t len, char out[65]);
/* Fill buf from the kernel's CSPRNG; aborts if that is impossible. */
void random_bytes(void *buf, size_t n);
void hex_encode(const unsigned char *in, size_t n, char *out /* 2n+1 */);
/* Random (version 4) UUID, lowercase. */
void uuid_v4(char out[37]);
bool uuid_valid(const char *s);
/* Constant-time comparison of two NUL-terminated strings. */
bool secure_streq(const char *a, const char *b);

#endif
