/* test_grow.c: qs_grow, the one growing-array step (mem.h). */
#include <stdint.h>

#include "qs/mem.h"
#include "test.h"

TEST(mem, grow_doubles_from_first_until_the_need_fits)
{
    size_t cap = 0;
    int *a = qs_grow(NULL, &cap, 1, sizeof *a, 4);
    ASSERT_TRUE(a != NULL);
    ASSERT_EQ_INT(cap, 4);
    a[3] = 7;
    ASSERT_TRUE(qs_grow(a, &cap, 4, sizeof *a, 4) == a);   /* room: unchanged */
    ASSERT_EQ_INT(cap, 4);
    a = qs_grow(a, &cap, 5, sizeof *a, 4);
    ASSERT_TRUE(a != NULL);
    ASSERT_EQ_INT(cap, 8);
    ASSERT_EQ_INT(a[3], 7);   /* contents kept */
    a = qs_grow(a, &cap, 33, sizeof *a, 4);
    ASSERT_TRUE(a != NULL);
    ASSERT_EQ_INT(cap, 64);
    qs_free(a);
}

TEST(mem, grow_failure_leaves_array_and_capacity)
{
    size_t cap = 0;
    char *a = qs_grow(NULL, &cap, 10, 1, 16);
    ASSERT_TRUE(a != NULL);
    ASSERT_TRUE(qs_grow(a, &cap, SIZE_MAX / 2 + 2, 1, 16) == NULL);   /* doubling overflows */
    ASSERT_TRUE(qs_grow(a, &cap, SIZE_MAX / 8, 16, 16) == NULL);      /* bytes overflow */
    qs_mem_fail_after(1);
    ASSERT_TRUE(qs_grow(a, &cap, 17, 1, 16) == NULL);
    qs_mem_fail_after(0);
    ASSERT_EQ_INT(cap, 16);
    a[15] = 'x';   /* still ours, still 16 bytes */
    qs_free(a);
}
