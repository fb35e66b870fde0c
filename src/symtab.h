/* Names of functions in this process, static ones included (symtab.c):
 * read from the ELF symbol tables (.symtab, else .dynsym) of the program
 * and the libraries /proc/self/maps lists, not from dladdr, which sees
 * only exported symbols. For the trace writer and the stall report, off
 * every hot path. Uses only open, read, mmap and the caller's arena, so
 * that the trace may be written from a signal handler or an abort.
 */
#ifndef GMP_SYMTAB_H
#define GMP_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

#include "tracejson.h"

typedef struct gmp__symtab gmp__symtab;

/* What this process has mapped now; NULL if /proc/self/maps cannot be
 * read (or the arena is exhausted). */
gmp__symtab *gmp__symtab_load(gmp__arena *a);

/* The function containing addr, and addr's offset in it; NULL if no
 * symbol covers it. The name lives until gmp__symtab_unload. */
const char *gmp__symtab_find(gmp__symtab *t, uintptr_t addr, uintptr_t *off);

/* Unmaps the files (the arena holds the rest). */
void gmp__symtab_unload(gmp__symtab *t);

/* The name of the function at addr into buf ("name", "name+0x1c", or
 * "0x..." when no symbol covers it). Reads the tables afresh each time:
 * for rare reports, not for signal handlers (it uses snprintf). */
void gmp__symbolize(uintptr_t addr, char *buf, size_t size);

#endif
