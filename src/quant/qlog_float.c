/* qlog_float.c: the text of a float in quant.jsonl.zst (qlog_float_format, see
 * include/qs/qlog.h): 9 significant digits without printf, so that every finite
 * float reads back to the same float (make test-exhaustive) and a replay makes
 * the run's decisions bit for bit. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qs/qlog.h"

/* 10^k for k in [-64, 64]: decimal literals, each the nearest double */
static const double qlog_pow10_table[129] = {
    1e-64, 1e-63, 1e-62, 1e-61, 1e-60, 1e-59, 1e-58, 1e-57, 1e-56, 1e-55, 1e-54, 1e-53, 1e-52,
    1e-51, 1e-50, 1e-49, 1e-48, 1e-47, 1e-46, 1e-45, 1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39,
    1e-38, 1e-37, 1e-36, 1e-35, 1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26,
    1e-25, 1e-24, 1e-23, 1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13,
    1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3,
    1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36,
    1e37, 1e38, 1e39, 1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 1e50, 1e51, 1e52,
    1e53, 1e54, 1e55, 1e56, 1e57, 1e58, 1e59, 1e60, 1e61, 1e62, 1e63, 1e64
};

static double qlog_pow10(int k) { return qlog_pow10_table[k + 64]; }

int qlog_float_format(char *buf, float f)
{
    char *p = buf;
    double v = f;
    if (!isfinite(v))
        return (int)(memcpy(buf, "null", 5), 4);
    if (v == 0.0) {
        *p++ = '0';
        *p = 0;
        return 1;
    }
    if (v < 0) {
        *p++ = '-';
        v = -v;
    }
    /* m = the 9 significant digits, e = decimal exponent of the first one.  Double
     * arithmetic is off by at most one unit in the 9th digit, which is < 1/6 of a
     * float's spacing, so the text reads back to the same float (as %.9g does). */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    int e2 = (int)((bits >> 23) & 0xffu) - 127;     /* v in [2^e2, 2^(e2+1)) for normals */
    if (e2 == -127)
        e2 = -149 + 31 - __builtin_clz(bits & 0x7fffffu);   /* subnormal */
    /* floor(e2 * log10(2)) (78913 / 2^18 ~ log10 2, exact floor for |e2| < 1000),
     * the decimal exponent or one less */
    int e = e2 >= 0 ? (e2 * 78913) >> 18 : -((-e2 * 78913 + (1 << 18) - 1) >> 18);
    if (v >= qlog_pow10(e + 1))
        e++;
    double scaled = v * qlog_pow10(8 - e);
    unsigned long long m = (unsigned long long)(scaled + 0.5);
    if (m >= 1000000000ull) {
        m = (m + 5) / 10;
        e++;
    } else if (m < 100000000ull) {
        m = (unsigned long long)(v * qlog_pow10(9 - e) + 0.5);
        e--;
    }
    static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                                "25262728293031323334353637383940414243444546474849"
                                "50515253545556575859606162636465666768697071727374"
                                "75767778798081828384858687888990919293949596979899";
    char dig[10];
    uint32_t m32 = (uint32_t)m;
    for (int i = 8; i > 0; i -= 2) {
        uint32_t r = m32 % 100;
        m32 /= 100;
        dig[i - 1] = pairs[2 * r];
        dig[i] = pairs[2 * r + 1];
    }
    dig[0] = (char)('0' + m32);
    int nd = 9;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    if (e >= -5 && e < 9) {
        if (e < 0) {
            *p++ = '0';
            *p++ = '.';
            for (int i = 0; i < -e - 1; i++)
                *p++ = '0';
            for (int i = 0; i < nd; i++)
                *p++ = dig[i];
        } else {
            for (int i = 0; i <= e; i++)
                *p++ = i < nd ? dig[i] : '0';
            if (nd > e + 1) {
                *p++ = '.';
                for (int i = e + 1; i < nd; i++)
                    *p++ = dig[i];
            }
        }
    } else {
        *p++ = dig[0];
        if (nd > 1) {
            *p++ = '.';
            for (int i = 1; i < nd; i++)
                *p++ = dig[i];
        }
        *p++ = 'e';
        *p++ = e < 0 ? '-' : '+';
        int ae = e < 0 ? -e : e;
        if (ae >= 10)
            *p++ = (char)('0' + ae / 10);
        *p++ = (char)('0' + ae % 10);
    }
    *p = 0;
    return (int)(p - buf);
}
