/* Minimal test harness: CHECK* record a failure with file:line and keep going; RUN executes one
 * named test; check_report() is main's return value (non-zero when anything failed). */
#ifndef HALO_TESTS_CHECK_H
#define HALO_TESTS_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_tests;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            check_failures++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                        \
    } while (0)

#define CHECK_INT(a, b)                                                                          \
    do {                                                                                         \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                          \
        if (check_a_ != check_b_) {                                                              \
            check_failures++;                                                                    \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a,    \
                    #b, check_a_, check_b_);                                                     \
        }                                                                                        \
    } while (0)

#define CHECK_STR(a, b)                                                                          \
    do {                                                                                         \
        const char *check_a_ = (a), *check_b_ = (b);                                             \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                         \
            check_failures++;                                                                    \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__,    \
                    #a, #b, check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)");     \
        }                                                                                        \
    } while (0)

/* Asserts that a string contains a fragment (used to pin error messages). */
#define CHECK_CONTAINS(haystack, needle)                                                         \
    do {                                                                                         \
        const char *check_h_ = (haystack), *check_n_ = (needle);                                 \
        if (!check_h_ || !strstr(check_h_, check_n_)) {                                          \
            check_failures++;                                                                    \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,      \
                    check_h_ ? check_h_ : "(null)", check_n_);                                   \
        }                                                                                        \
    } while (0)

#define RUN(test)                                                                                \
    do {                                                                                         \
        int check_before_ = check_failures;                                                      \
        check_tests++;                                                                           \
        test();                                                                                  \
        printf("%s %s\n", check_failures == check_before_ ? "ok  " : "FAIL", #test);             \
    } while (0)

static inline int check_report(void) {
    printf("%d tests, %d failed checks\n", check_tests, check_failures);
    return check_failures ? 1 : 0;
}

#endif
