# distutils: libraries = crypto
# cython: language_level=3
"""Compiled twin of ``kchannel.security.sasl._scram_py``: PBKDF2-HMAC-SHA-256/512
(SCRAM's Hi()) as a C loop over OpenSSL's SHA-2 compression.

Why it is faster than a generic PBKDF2: the HMAC inner and outer pads depend
only on the password, so their hash states are computed once; each iteration
then costs exactly two runs of the compression function on a block whose
padding is laid out once, with no per-iteration HMAC or digest bookkeeping.  The loop runs
without the GIL, so other threads (the selector) keep running while a SCRAM
key is derived.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy, memset

cdef extern from *:
    """
    #define OPENSSL_SUPPRESS_DEPRECATED 1
    #include <string.h>
    #include <openssl/sha.h>

    /* One PBKDF2 block (dkLen = hLen, i.e. SCRAM's Hi) for a SHA-2 variant.

       Each iteration hashes (pad || U) where pad is one full block, so the
       pad's state is precomputed and only one more block remains: U followed
       by SHA-2 padding for a (BLOCK + HLEN)-byte message.  That block is laid
       out once; each iteration resets the state words and runs the
       compression function (SHAxxx_Transform) on it directly, then writes
       the state back into the block as the next input.  The inner and outer
       hashes both take an HLEN-byte input after a one-block pad, so the same
       padded block serves both. */
    #define KC_DEFINE_PBKDF2(NAME, CTX, WORD, INIT, UPDATE, FINAL, TRANSFORM,        \
                             HLEN, BLOCK, LENBYTES)                                  \
    static void NAME##_store(const CTX *c, unsigned char *dst)                       \
    {                                                                                \
        size_t w, b;                                                                 \
        for (w = 0; w < HLEN / sizeof(WORD); w++)                                    \
            for (b = 0; b < sizeof(WORD); b++)                                       \
                dst[w * sizeof(WORD) + b] =                                          \
                    (unsigned char)(c->h[w] >> (8 * (sizeof(WORD) - 1 - b)));        \
    }                                                                                \
    static int NAME(const unsigned char *pw, size_t pwlen,                           \
                    const unsigned char *salt, size_t saltlen,                       \
                    unsigned long iterations, unsigned char *out)                    \
    {                                                                                \
        unsigned char key[BLOCK], pad[BLOCK], block[BLOCK];                          \
        static const unsigned char one[4] = {0, 0, 0, 1};                            \
        CTX ictx, octx, c;                                                           \
        size_t i;                                                                    \
        unsigned long n;                                                             \
        unsigned long long bits = (unsigned long long)(BLOCK + HLEN) * 8;            \
        memset(key, 0, sizeof key);                                                  \
        if (pwlen > BLOCK) {                                                         \
            INIT(&c); UPDATE(&c, pw, pwlen); FINAL(key, &c);                         \
        } else if (pwlen) {                                                          \
            memcpy(key, pw, pwlen);                                                  \
        }                                                                            \
        for (i = 0; i < BLOCK; i++) pad[i] = key[i] ^ 0x36;                          \
        INIT(&ictx); UPDATE(&ictx, pad, BLOCK);                                      \
        for (i = 0; i < BLOCK; i++) pad[i] = key[i] ^ 0x5c;                          \
        INIT(&octx); UPDATE(&octx, pad, BLOCK);                                      \
        /* U1 = HMAC(pw, salt || INT(1)), through the ordinary API. */               \
        memcpy(&c, &ictx, sizeof c);                                                 \
        UPDATE(&c, salt, saltlen); UPDATE(&c, one, 4); FINAL(block, &c);             \
        memcpy(&c, &octx, sizeof c);                                                 \
        UPDATE(&c, block, HLEN); FINAL(block, &c);                                   \
        memcpy(out, block, HLEN);                                                    \
        /* SHA-2 padding after the HLEN-byte U: 0x80, zeros, bit length. */          \
        memset(block + HLEN, 0, BLOCK - HLEN);                                       \
        block[HLEN] = 0x80;                                                          \
        for (i = 0; i < 8; i++)                                                      \
            block[BLOCK - 1 - i] = (unsigned char)(bits >> (8 * i));                 \
        (void)LENBYTES;                                                              \
        for (n = 1; n < iterations; n++) {                                           \
            memcpy(c.h, ictx.h, sizeof c.h);                                         \
            TRANSFORM(&c, block);                                                    \
            NAME##_store(&c, block);                                                 \
            memcpy(c.h, octx.h, sizeof c.h);                                         \
            TRANSFORM(&c, block);                                                    \
            NAME##_store(&c, block);                                                 \
            for (i = 0; i < HLEN; i++) out[i] ^= block[i];                           \
        }                                                                            \
        memset(key, 0, sizeof key); memset(pad, 0, sizeof pad);                      \
        memset(block, 0, sizeof block);                                              \
        memset(&ictx, 0, sizeof ictx); memset(&octx, 0, sizeof octx);                \
        memset(&c, 0, sizeof c);                                                     \
        return 1;                                                                    \
    }

    KC_DEFINE_PBKDF2(kc_pbkdf2_sha256, SHA256_CTX, SHA_LONG, SHA256_Init, SHA256_Update,
                     SHA256_Final, SHA256_Transform, 32, 64, 8)
    KC_DEFINE_PBKDF2(kc_pbkdf2_sha512, SHA512_CTX, SHA_LONG64, SHA512_Init, SHA512_Update,
                     SHA512_Final, SHA512_Transform, 64, 128, 16)
    """
    int kc_pbkdf2_sha256(const unsigned char *pw, size_t pwlen, const unsigned char *salt,
                         size_t saltlen, unsigned long iterations, unsigned char *out) nogil
    int kc_pbkdf2_sha512(const unsigned char *pw, size_t pwlen, const unsigned char *salt,
                         size_t saltlen, unsigned long iterations, unsigned char *out) nogil


def pbkdf2_hmac(hash_name, password, salt, iterations):
    """Hi(password, salt, iterations) of RFC 5802 = PBKDF2 with dkLen = hLen."""
    cdef bytes pw = bytes(password)
    cdef bytes s = bytes(salt)
    cdef long n = iterations
    cdef Py_ssize_t hlen
    cdef bytes out
    cdef const unsigned char *ppw
    cdef const unsigned char *ps
    cdef unsigned char *pout
    cdef size_t pwlen = len(pw)
    cdef size_t saltlen = len(s)
    cdef int sha512
    if hash_name == "sha256":
        hlen = 32
        sha512 = 0
    elif hash_name == "sha512":
        hlen = 64
        sha512 = 1
    else:
        raise ValueError(f"Unsupported hash {hash_name}")
    if n < 1:
        raise ValueError("iterations must be >= 1")
    out = PyBytes_FromStringAndSize(NULL, hlen)
    ppw = <const unsigned char *> PyBytes_AS_STRING(pw)
    ps = <const unsigned char *> PyBytes_AS_STRING(s)
    pout = <unsigned char *> PyBytes_AS_STRING(out)
    with nogil:
        if sha512:
            kc_pbkdf2_sha512(ppw, pwlen, ps, saltlen, <unsigned long> n, pout)
        else:
            kc_pbkdf2_sha256(ppw, pwlen, ps, saltlen, <unsigned long> n, pout)
    return out


# --- nonces and salts (Kafka's ScramFormatter.secureRandomString) -----------
cdef extern from "openssl/rand.h":
    int RAND_bytes(unsigned char *buf, int num) nogil

cdef extern from *:
    """
    #include <string.h>
    /* Base 36 of the big-endian unsigned integer in src[0:n] (n <= 64)
       shifted right by shift (0-7) bits, written at the end of out[0:160];
       returns where the digits start.  Schoolbook division of the bytes by
       36**4 (each pass gives four digits; a remainder times 256 fits in 32
       bits), leading zeros dropped. */
    static int kc_base36(const unsigned char *src, int n, int shift, char *out)
    {
        static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
        unsigned char num[64];
        unsigned int carry = 0, cur, rem;
        int i, k, start = 0, pos = 160;
        memcpy(num, src, (size_t)n);
        if (shift) {
            for (i = 0; i < n; i++) {
                cur = num[i];
                num[i] = (unsigned char)((carry << (8 - shift)) | (cur >> shift));
                carry = cur & ((1u << shift) - 1u);
            }
        }
        while (start < n && num[start] == 0) start++;
        while (start < n) {
            rem = 0;
            for (i = start; i < n; i++) {
                cur = (rem << 8) | num[i];
                num[i] = (unsigned char)(cur / 1679616u);
                rem = cur % 1679616u;
            }
            for (k = 0; k < 4; k++) {
                out[--pos] = digits[rem % 36u];
                rem /= 36u;
            }
            while (start < n && num[start] == 0) start++;
        }
        while (pos < 159 && out[pos] == '0') pos++;
        if (pos == 160) out[--pos] = '0';
        memset(num, 0, sizeof num);
        return pos;
    }
    """
    int kc_base36(const unsigned char *src, int n, int shift, char *out)


def base36(data, int shift=0):
    """Base 36 (digits and lower-case letters, no leading zeros) of
    ``int.from_bytes(data, "big") >> shift`` for at most 64 bytes of
    ``data`` and a ``shift`` of 0-7."""
    cdef bytes b = data if type(data) is bytes else bytes(data)
    cdef char out[160]
    cdef int pos
    cdef Py_ssize_t n = len(b)
    if n > 64 or not 0 <= shift <= 7:
        raise ValueError("base36: at most 64 bytes and a shift of 0-7")
    if n == 0:
        return "0"
    pos = kc_base36(<const unsigned char *> PyBytes_AS_STRING(b), <int> n, shift, out)
    return out[pos:160].decode("ascii")


# Random bytes drawn from OpenSSL's CSPRNG a block at a time (one RAND_bytes
# call costs more than the nonce's arithmetic); every byte is handed out
# once and wiped as it is taken.  The GIL serialises callers.  A forked
# child starts with an empty pool: parent and child must never hand out the
# same bytes (serve's worker processes are forked).
DEF _POOL = 17 * 60
cdef unsigned char _pool[_POOL]
cdef int _pool_pos = _POOL


def _drop_pool():
    global _pool_pos
    memset(_pool, 0, _POOL)
    _pool_pos = _POOL


import os as _os
_os.register_at_fork(after_in_child=_drop_pool)


def secure_random_string():
    """A 130-bit random number in base 36 (Kafka's
    ``ScramFormatter.secureRandomString``: ``new BigInteger(130,
    secureRandom).toString(36)``), from OpenSSL's CSPRNG."""
    global _pool_pos
    cdef unsigned char buf[17]
    cdef char out[160]
    cdef int pos
    if _pool_pos + 17 > _POOL:
        if RAND_bytes(_pool, _POOL) != 1:
            raise RuntimeError("OpenSSL RAND_bytes failed: no random nonce")
        _pool_pos = 0
    memcpy(buf, &_pool[_pool_pos], 17)
    memset(&_pool[_pool_pos], 0, 17)
    _pool_pos += 17
    # 136 random bits, the top 130 kept
    pos = kc_base36(buf, 17, 6, out)
    memset(buf, 0, 17)
    return out[pos:160].decode("ascii")
