/*
 * The checks of the C tests (test_capi.c, test_dp.c): CHECK counts and reports a failed
 * condition with cf_last_error(), OK expects CF_OK, FAILS expects a status and a message.
 * Each test program includes this once, after cornflakes.h, and prints `checks - failures`.
 */
#ifndef CF_TEST_CHECK_H
#define CF_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int failures = 0, checks = 0;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,   \
                    __LINE__, #cond, cf_last_error());                                 \
        }                                                                              \
    } while (0)
#define OK(call) CHECK((call) == CF_OK)
#define FAILS(call, status) CHECK((call) == (status) && strlen(cf_last_error()) > 0)

#endif
