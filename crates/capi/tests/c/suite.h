/* Shared helpers of the C suite (included by both translation units). */
#ifndef PORIN_SUITE_H
#define PORIN_SUITE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "porin.h"

/* A string literal as (pointer, length) arguments. */
#define S(lit) (lit), (sizeof(lit) - 1)

extern int suite_failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                      \
            suite_failures++;                                                    \
        }                                                                        \
    } while (0)

#define CHECK_RESULT(call, expected)                                             \
    do {                                                                         \
        porin_result got_ = (call);                                              \
        if (got_ != (expected)) {                                                \
            fprintf(stderr, "%s:%d: %s returned %u, expected %s (%u)\n",         \
                    __FILE__, __LINE__, #call, (unsigned)got_, #expected,        \
                    (unsigned)(expected));                                       \
            suite_failures++;                                                    \
        }                                                                        \
    } while (0)

/* Defined in second_tu.c: checks made from another translation unit that
 * includes porin.h too (the header must be includable twice per program
 * and idempotent within one unit). Returns the number of failures. */
int second_tu_checks(void);

#endif
