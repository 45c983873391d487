/* cpu.h: run-time CPU feature detection for SIMD dispatch.
 *
 * The default build targets baseline x86-64; files named *_avx2.c, *_avx512.c
 * and *_avx512bf16.c are compiled with their ISA flags and only called when
 * cpu_level() says the CPU has them.  cpu_limit() lowers the level for the whole
 * process (the CLI's QS_CPU environment variable and the tests use it to force
 * the scalar or AVX2 path); it is set once at start-up, never concurrently.
 */
#ifndef QS_CPU_H
#define QS_CPU_H

enum {
    CPU_LEVEL_SCALAR = 0,
    CPU_LEVEL_AVX2 = 1,       /* AVX2 + FMA */
    CPU_LEVEL_AVX512 = 2,     /* AVX-512 F, BW, DQ, VL */
    CPU_LEVEL_AVX512BF16 = 3, /* AVX-512 + AVX512_BF16 */
};

int cpu_level(void);              /* min(detected, limit) */
int cpu_detected_level(void);     /* what the CPU supports */
void cpu_limit(int max_level);    /* cap the level used by dispatch */
const char *cpu_level_name(int level);
const char *cpu_describe(void);   /* e.g. "avx512bf16 (detected avx512bf16)" */
/* Parse "scalar|avx2|avx512|avx512bf16" -> level, or -1. */
int cpu_level_parse(const char *name);
/* 1 when the CPU's vdpbf16ps has less than twice the flop rate of its fp32 FMAs,
 * so bf16 products are faster on the FMA units: Intel cores (measured on a
 * Sapphire/Emerald Rapids: ~0.45 vdpbf16ps zmm per cycle against 2 FMAs); 0 on
 * AMD (Zen 4 and 5 run vdpbf16ps at the FMA instruction rate, twice the flops). */
int cpu_bf16_dot_slow(void);
/* 1 when the AMX bf16 tiles can be used: the CPU has AMX-BF16 and AMX-TILE,
 * Linux granted this process the tile data state (arch_prctl
 * ARCH_REQ_XCOMP_PERM, asked once, on the first call) and cpu_level() is
 * avx512bf16 (a lower cpu_limit() turns AMX off too). */
int cpu_amx_bf16(void);

#endif
