/* libfuzzer_main.c: the libFuzzer entry point for one target, chosen at compile
 * time with -DFUZZ_TARGET=<target> (make fuzz builds one binary per target). */
#include "fuzz.h"

#ifndef FUZZ_TARGET
#error "compile with -DFUZZ_TARGET=<target>"
#endif

#define FUZZ_CAT_(a, b) a##b
#define FUZZ_CAT(a, b) FUZZ_CAT_(a, b)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* the scratch directory goes when libFuzzer exits (after its time budget) */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atexit(fuzz_scratch_remove);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return FUZZ_CAT(fuzz_, FUZZ_TARGET)(data, size);
}
