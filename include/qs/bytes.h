/* bytes.h: little-endian integers in byte buffers, the byte order of every file
 * format we write (token shards, train_state.bin, safetensors, data positions).
 *
 * Portable (byte by byte, any host order, any alignment); static inline, so the
 * compiler turns each into one load or store on x86-64.  The arrays of floats,
 * bf16 and token ids in those files (tensor data, Adam moments, amax histories)
 * are copied as they lie in memory, so the project builds for little-endian
 * hosts only, and says so at compile time.
 */
#ifndef QS_BYTES_H
#define QS_BYTES_H

#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "qatscope's files hold float arrays in little-endian order, copied as they lie in memory: little-endian hosts only"
#endif

static inline uint16_t bytes_get_u16le(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t bytes_get_u32le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t bytes_get_u64le(const unsigned char *p)
{
    return (uint64_t)bytes_get_u32le(p) | (uint64_t)bytes_get_u32le(p + 4) << 32;
}

static inline void bytes_put_u32le(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void bytes_put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

#endif
