/* hif8_tables.c: the constant table the vector HiF8 paths (hif8_avx2.c,
 * hif8_avx512.c) gather from when they turn a rounded value into a code
 * (layout in hif8_impl.h).  It lives in its own file so the dispatcher
 * (hif8.c), which calls the vector paths, is not also their data source:
 * hif8.c -> hif8_avx2.c / hif8_avx512.c -> hif8_tables.c, no cycle. */
#include "hif8_impl.h"

const int32_t hif8_code_base_impl[HIF8_CODE_TABLE_LEN] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x7E, 0x7C, /* 0, 2^-22..2^-16, 2^-15, 2^-14 */
    0x7A, 0x78, 0x76, 0x74, 0x72, 0x70, 0x5C, 0x58, 0x54, 0x50, /* 2^-13 .. 2^-4 */
    0x38, 0x30, 0x18, 0x08, 0x10, 0x20, 0x28, 0x40, 0x44, 0x48, /* 2^-3 .. 2^6 */
    0x4C, 0x60, 0x62, 0x64, 0x66, 0x68, 0x6A, 0x6C, 0x6E, 0x6F, /* 2^7 .. 2^15, 2^16 (Inf) */
};
