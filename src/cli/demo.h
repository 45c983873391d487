/* demo.h: the two parts of `qatscope demo` (src/cli only). */
#ifndef QS_CLI_DEMO_H
#define QS_CLI_DEMO_H

/* demo_hif8.c: the HiF8 codec tour (qatscope demo --hif8); argv[0] = "--hif8". */
int demo_hif8_run(int argc, char **argv);

#endif
