/* trainstate.h: the versioned training-state file of a checkpoint (train_state.bin).
 *
 * Layout (little-endian):
 *   "QSTRAIN1" (8 bytes) | u32 version (TRAINSTATE_VERSION) | u32 n_sections
 *   n_sections x { char tag[16] (NUL-padded) | u64 payload_bytes | u64 checksum(payload) | payload }
 * checksum, from seed 1469598103934665603: digest_lanes64 (version 3), FNV-1a 64 (1 and 2).
 * Sections of the trainer (src/train/trainer_ckpt.c has their payloads):
 *   version 1: "meta" (JSON: step, optimizer step count, seed, parameter count,
 *              quantizer count), "adam_m" / "adam_v" (fp32 [n_params]), "data" (the
 *              data loader's position, opaque), "amax" (every quantizer's history);
 *   version 2 adds the log state, so that a resumed run writes the same logs as an
 *              uninterrupted one: "qsnr" (each quantizer's QSNR sample cursor),
 *              "alarm" (each quantizer's saturation episode: consecutive steps) and,
 *              with an in-loop evaluation, "eval" (its state: forgetting baselines);
 *   version 3: the same sections, checksummed with digest_lanes64 (qs/digest.h): FNV-1a
 *              read 0.8 GB/s, 12 s of every 1B checkpoint write and of every --resume.
 * Versions 1 and 2 are still read, their FNV-1a checksums checked.  A version 1
 * file's run resumes with bit-exact weights; its QSNR cursors are rebuilt from
 * the step count and its alarm episodes start from zero, as before version 2.
 * Newer versions are refused by number.  Written atomically (tmp + rename).
 * trainstate_open validates magic, version, every length against the file size
 * and every checksum before handing out a byte; trainstate_open_only checks the
 * named sections' checksums, and trainstate_read_checked checks another's in
 * the pass that copies it (--resume: the optimizer moments).
 *
 * Checklist for a change of layout: bump TRAINSTATE_VERSION, keep reading the old
 * version or refuse it by name, update trainer_ckpt.c's header comment, the README
 * (train_state.bin), tests/test_trainstate.c and the fuzz seeds
 * (tools/gen_fuzz_corpus.py: trainstate).
 */
#ifndef QS_TRAINSTATE_H
#define QS_TRAINSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "qs/digest.h"
#include "qs/err.h"
#include "qs/fileio.h"

#define TRAINSTATE_VERSION 3       /* written */
#define TRAINSTATE_VERSION_MIN 1   /* oldest read */
#define TRAINSTATE_TAG_BYTES 16

typedef struct trainstate_writer {
    afile af;
    long part_pos;          /* streamed section: file offset of its header */
    digest_lanes64 part_hash;   /* the payload's checksum so far */
    size_t part_left;       /* payload bytes still expected */
} trainstate_writer;

/* n_sections must equal the number of trainstate_write_section calls that follow. */
int trainstate_write_begin(trainstate_writer *w, const char *path, int n_sections, qs_diag *d);
int trainstate_write_section(trainstate_writer *w, const char *tag, const void *data,
                             size_t bytes, qs_diag *d);
/* The same section written in pieces (a payload gathered from other ranks):
 * begin declares the size, parts must add up to it exactly, end writes the
 * checksum into the header.  The file is byte-identical to one write_section. */
int trainstate_write_section_begin(trainstate_writer *w, const char *tag, size_t bytes, qs_diag *d);
int trainstate_write_section_part(trainstate_writer *w, const void *data, size_t bytes, qs_diag *d);
int trainstate_write_section_end(trainstate_writer *w, qs_diag *d);
int trainstate_write_commit(trainstate_writer *w, qs_diag *d);
void trainstate_write_abort(trainstate_writer *w);

typedef struct trainstate_reader {
    fileio_map map;
    char path[QS_DIAG_PATH_MAX];
    int n_sections;
    int version;              /* of the file: TRAINSTATE_VERSION_MIN..TRAINSTATE_VERSION */
} trainstate_reader;

int trainstate_open(trainstate_reader *r, const char *path, qs_diag *d);
/* trainstate_open checking the checksums of the sections named in tags only
 * (NULL-terminated; NULL: every section); the others are checked for their
 * sizes alone and their pages are never read.  For readers of a few small
 * sections of a large state: eval's meta and amax histories next to the
 * optimizer moments (9.2 GB at 1B, ~9 s of checksum). */
int trainstate_open_only(trainstate_reader *r, const char *path, const char *const *tags,
                         qs_diag *d);
/* Section by tag: pointer into the mapping + size; QS_ENOTFOUND naming the tag.
 * Payloads are NOT aligned: memcpy them out. */
int trainstate_section(const trainstate_reader *r, const char *tag, const void **data,
                       size_t *bytes, qs_diag *d);
/* memcpy(dst, src, bytes) out of a section (src inside the mapping), whose pages
 * then leave the resident set: a large section costs no more memory than its
 * copy.  trainstate_open reads every payload the same way to check it. */
void trainstate_copy_out(const trainstate_reader *r, void *dst, const void *src, size_t bytes);
/* Section tag read in one pass: its checksum checked over the whole payload
 * while bytes [first, first + bytes) of it are copied to dst, in pieces whose
 * pages then leave the resident set, the next piece read ahead meanwhile.  For
 * a section trainstate_open_only did not check (the optimizer moments on
 * --resume: with the pages of a 9.2 GB state evicted between a checking pass
 * and a copying pass, a 1B resume read it from disk twice, the second time
 * fault by fault).  QS_EFORMAT on a checksum mismatch (dst then holds bytes of
 * a damaged file: the caller must fail), QS_ERANGE when the range is outside
 * the payload, QS_ENOTFOUND without the section. */
int trainstate_read_checked(const trainstate_reader *r, const char *tag, size_t first, void *dst,
                            size_t bytes, qs_diag *d);
void trainstate_close(trainstate_reader *r);

#endif
