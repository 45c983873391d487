/* matmul_precision.c: the names of the matmul precisions (see include/qs/matmul.h),
 * parsed in one place for every flag and config key that takes one. */
#include <string.h>

#include "qs/cpu.h"
#include "qs/matmul.h"

int matmul_precision_parse(const char *name, const char *what, int *precision, qs_diag *d)
{
    if (!strcmp(name, "fp32"))
        *precision = MATMUL_FP32;
    else if (!strcmp(name, "bf16"))
        *precision = MATMUL_BF16;
    else if (!strcmp(name, "bf16-amx") && !cpu_amx_bf16())
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "%s bf16-amx: this CPU has no AMX (needs AMX-BF16 and AMX-TILE)", what);
    else if (!strcmp(name, "bf16-amx"))
        *precision = MATMUL_BF16_AMX;
    else
        return diag_set(d, QS_EINVAL, NULL, -1, "%s: expected fp32, bf16 or bf16-amx, got '%s'",
                        what, name);
    return 0;
}

const char *matmul_precision_name(int precision)
{
    return precision == MATMUL_BF16        ? "bf16"
           : precision == MATMUL_FP32_BLAS ? "fp32-blas"
           : precision == MATMUL_BF16_AMX  ? "bf16-amx"
                                           : "fp32";
}

