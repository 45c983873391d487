/* cpu.c: see include/qs/cpu.h. */
#include "qs/cpu.h"

#include <stdio.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define CPU_AMX_PROBE 1
#endif

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

/* -1 = not asked yet; the answer does not change during the process */
static int cpu_amx_state = -1;

static int cpu_amx_probe(void)
{
#ifdef CPU_AMX_PROBE
    enum { CPU_ARCH_REQ_XCOMP_PERM = 0x1023, CPU_XFEATURE_XTILEDATA = 18 };
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) /* AMX-BF16, AMX-TILE */
        return 0;
    return syscall(SYS_arch_prctl, CPU_ARCH_REQ_XCOMP_PERM, CPU_XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

int cpu_amx_bf16(void)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        return 0;
    if (cpu_amx_state < 0)
        cpu_amx_state = cpu_amx_probe();
    return cpu_amx_state;
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
