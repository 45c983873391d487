/* test_digest_lanes.c: digest_lanes64, the section checksum of train_state.bin
 * version 3: the values of an independent implementation (tools/
 * gen_fuzz_corpus.py's lanes64, written from the definition in
 * src/base/digest_lanes.c), the same value for any split into pieces, and the
 * damage it must catch. */
#include <stdint.h>
#include <string.h>

#include "qs/digest.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "test.h"

static void lanes_data(unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(((i * 131 + 7) >> 3) & 255);
}

/* printed by /usr/bin/python3 from tools/gen_fuzz_corpus.py's lanes64 over the
 * same bytes, seed 1469598103934665603 (train_state.bin's) unless noted */
TEST(digest_lanes, values_of_the_python_reference)
{
    static const struct { size_t n; uint64_t want; } v[] = {
        {0, 0x6bc8ef6b3812cea2ull},    {1, 0x58383c3952e46767ull},   {63, 0x7ceaad2119b863c1ull},
        {64, 0xbf791e55acdb6b6full},   {65, 0xce75739abdaaf094ull},  {127, 0xaefa18645144d22aull},
        {128, 0xa7efd8c5b2d1a1f2ull},  {1000, 0xd376ddaecaafacaeull}, {4099, 0xf508aff0caaa6c00ull},
    };
    unsigned char b[4099];
    lanes_data(b, sizeof b);
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        ASSERT_EQ_INT(digest_lanes64_once(1469598103934665603ull, b, v[i].n), v[i].want);
    ASSERT_EQ_INT(digest_lanes64_once(0, b, 200), 0xa67c92df6fa56cfaull);
}

/* No bytes may come as (NULL, 0), e.g. an empty section (`make check`'s
 * UBSan once flagged the memcpy from NULL), at the start or between pieces. */
TEST(digest_lanes, empty_input_may_be_null)
{
    unsigned char b[100];
    lanes_data(b, sizeof b);
    ASSERT_EQ_INT(digest_lanes64_once(1469598103934665603ull, NULL, 0), 0x6bc8ef6b3812cea2ull);
    digest_lanes64 s;
    digest_lanes64_init(&s, 9);
    digest_lanes64_update(&s, NULL, 0);
    digest_lanes64_update(&s, b, 37);
    digest_lanes64_update(&s, NULL, 0);
    digest_lanes64_update(&s, b + 37, 63);
    ASSERT_EQ_INT(digest_lanes64_final(&s), digest_lanes64_once(9, b, 100));
}

TEST(digest_lanes, any_split_into_pieces_gives_the_same_value)
{
    enum { N = 5000 };
    unsigned char b[N];
    lanes_data(b, N);
    rng r;
    rng_seed(&r, 7);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = rng_u64(&r) % N;
        uint64_t want = digest_lanes64_once(42, b, n);
        digest_lanes64 s;
        digest_lanes64_init(&s, 42);
        for (size_t done = 0; done < n;) {
            size_t k = 1 + rng_u64(&r) % (trial % 3 == 0 ? 7 : 300);
            k = k < n - done ? k : n - done;
            digest_lanes64_update(&s, b + done, k);
            done += k;
        }
        ASSERT_EQ_INT(digest_lanes64_final(&s), want);
    }
}

/* Every single-bit flip of a 4 KiB buffer, the top bits of two words of one
 * lane flipped together (xor-multiply alone cancels those), two words of
 * different lanes swapped, a zero byte appended, the buffer cut by a byte:
 * each changes the value. */
TEST(digest_lanes, every_bit_flip_and_the_structured_damage_change_it)
{
    enum { N = 4096 };
    unsigned char *b = qs_malloc(N + 1);
    ASSERT_TRUE(b != NULL);
    rng r;
    rng_seed(&r, 11);
    for (size_t i = 0; i < N; i++)
        b[i] = (unsigned char)rng_u64(&r);
    b[N] = 0;
    const uint64_t seed = 1469598103934665603ull, h0 = digest_lanes64_once(seed, b, N);
    int same = 0;
    for (size_t bit = 0; bit < 8 * (size_t)N; bit++) {
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        same += digest_lanes64_once(seed, b, N) == h0;
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    ASSERT_EQ_INT(same, 0);
    b[7] ^= 0x80, b[64 + 7] ^= 0x80;   /* lane 0, words 0 and 8: bit 63 of each */
    ASSERT_TRUE(digest_lanes64_once(seed, b, N) != h0);
    b[7] ^= 0x80, b[64 + 7] ^= 0x80;
    unsigned char w[8];
    memcpy(w, b, 8), memcpy(b, b + 8, 8), memcpy(b + 8, w, 8);   /* lanes 0 and 1 swap */
    ASSERT_TRUE(memcmp(b, b + 8, 8) == 0 || digest_lanes64_once(seed, b, N) != h0);
    memcpy(b + 8, b, 8), memcpy(b, w, 8);
    ASSERT_EQ_INT(digest_lanes64_once(seed, b, N), h0);
    ASSERT_TRUE(digest_lanes64_once(seed, b, N + 1) != h0);
    ASSERT_TRUE(digest_lanes64_once(seed, b, N - 1) != h0);
    qs_free(b);
}
