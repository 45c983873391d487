/* cpu.c: see include/qs/cpu.h. */
#include "qs/cpu.h"

#include <stdio.h>
#include <string.h>

static int cpu_cap = CPU_LEVEL_AVX512BF16;

int cpu_detected_level(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int level = CPU_LEVEL_SCALAR;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        level = CPU_LEVEL_AVX2;
    if (level == CPU_LEVEL_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        level = CPU_LEVEL_AVX512;
    if (level == CPU_LEVEL_AVX512 && __builtin_cpu_supports("avx512bf16"))
        level = CPU_LEVEL_AVX512BF16;
    return level;
#else
    return CPU_LEVEL_SCALAR;
#endif
}

int cpu_level(void)
{
    int d = cpu_detected_level();
    return d < cpu_cap ? d : cpu_cap;
}

void cpu_limit(int max_level) { cpu_cap = max_level; }

int cpu_bf16_dot_slow(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_is("intel");
#else
    return 0;
#endif
}

static const char *const cpu_names[] = {"scalar", "avx2", "avx512", "avx512bf16"};

const char *cpu_level_name(int level)
{
    return level >= 0 && level <= CPU_LEVEL_AVX512BF16 ? cpu_names[level] : "unknown";
}

int cpu_level_parse(const char *name)
{
    for (int i = 0; i <= CPU_LEVEL_AVX512BF16; i++)
        if (!strcmp(name, cpu_names[i]))
            return i;
    return -1;
}

const char *cpu_describe(void)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "%s (detected %s)", cpu_level_name(cpu_level()),
             cpu_level_name(cpu_detected_level()));
    return buf;
}
