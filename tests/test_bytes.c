/* test_bytes.c: include/qs/bytes.h, the little-endian get/put every file format uses. */
#include <stdint.h>
#include <string.h>

#include "qs/bytes.h"
#include "test.h"

TEST(bytes, put_writes_least_significant_byte_first)
{
    unsigned char b[9] = {0};
    bytes_put_u32le(b, 0x04030201u);
    ASSERT_TRUE(!memcmp(b, "\x01\x02\x03\x04", 4));
    bytes_put_u64le(b + 1, 0x8877665544332211ull);   /* unaligned */
    ASSERT_TRUE(!memcmp(b, "\x01\x11\x22\x33\x44\x55\x66\x77\x88", 9));
}

TEST(bytes, get_reads_what_put_wrote_at_any_offset)
{
    static const uint64_t v64[] = {0, 1, 0xffull, 0x8000000000000000ull, 0xffffffffffffffffull,
                                   0x0123456789abcdefull};
    unsigned char b[16];
    for (size_t i = 0; i < sizeof v64 / sizeof *v64; i++)
        for (int off = 0; off < 8; off++) {
            memset(b, 0xAA, sizeof b);
            bytes_put_u64le(b + off, v64[i]);
            ASSERT_TRUE(bytes_get_u64le(b + off) == v64[i]);
            bytes_put_u32le(b + off, (uint32_t)v64[i]);
            ASSERT_TRUE(bytes_get_u32le(b + off) == (uint32_t)v64[i]);
            ASSERT_EQ_INT(b[off + 4], (v64[i] >> 32) & 0xff);   /* put_u32 writes 4 bytes only */
        }
    static const unsigned char h[] = {0x34, 0x12, 0xff, 0x80};
    ASSERT_EQ_INT(bytes_get_u16le(h), 0x1234);
    ASSERT_EQ_INT(bytes_get_u16le(h + 2), 0x80ff);
    ASSERT_TRUE(bytes_get_u32le(h) == 0x80ff1234u);
}
