/* The pool runs every index of every loop exactly once, whatever the loop sizes, thread counts
 * and the pace of consecutive loops (spin and sleep paths). */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "core/threadpool.h"

typedef struct counts {
    atomic_int *hits;
    int sleep_us;
} counts;

static void hit(void *p, int64_t i) {
    counts *c = p;
    atomic_fetch_add(&c->hits[i], 1);
    if (c->sleep_us) usleep((useconds_t)c->sleep_us);
}

static void every_index_runs_once(void) {
    uint32_t sizes[] = {1, 2, 3, 8};
    int64_t loops[] = {0, 1, 2, 7, 1000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        halo_threadpool *p = halo_threadpool_create(sizes[s]);
        CHECK(p != NULL);
        CHECK_INT(halo_threadpool_size(p), sizes[s]);
        for (int round = 0; round < 200; round++) {
            int64_t n = loops[round % 5];
            atomic_int *hits = calloc((size_t)n + 1, sizeof *hits);
            counts c = {hits, round == 3 ? 2000 : 0}; /* one slow loop: workers go to sleep */
            halo_threadpool_run(p, n, hit, &c);
            for (int64_t i = 0; i < n; i++)
                CHECK_INT(atomic_load(&hits[i]), 1);
            free(hits);
            if (round == 100) usleep(20000); /* idle long enough for every worker to sleep */
        }
        halo_threadpool_free(p);
    }
    halo_threadpool_free(NULL);
}

/* The default size is the cores this process may run on (its affinity, not every online core:
 * `taskset -c 0` gives one). */
static void default_size_is_the_cores_available(void) {
    uint32_t cores = halo_threadpool_cores();
    cpu_set_t set;
    CHECK_INT(sched_getaffinity(0, sizeof set, &set), 0);
    CHECK_INT(cores, CPU_COUNT(&set));
    halo_threadpool *p = halo_threadpool_create(0);
    CHECK(p != NULL);
    if (p) CHECK_INT(halo_threadpool_size(p), cores);
    halo_threadpool_free(p);
}

int main(void) {
    RUN(every_index_runs_once);
    RUN(default_size_is_the_cores_available);
    return check_report();
}
