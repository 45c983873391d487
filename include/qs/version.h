/* version.h: toolkit version (semantic) and on-disk format versions live with their modules. */
#ifndef QS_VERSION_H
#define QS_VERSION_H
#define QS_VERSION "0.1.0"
#endif
