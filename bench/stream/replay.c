/* Replays a routing trace (HALO_STREAM_TRACE: one line per resolve, "layer id id ...") through
 * the expert cache's policies (src/mem/expert_slots.c, the code the cache runs) at several
 * cache sizes, and prints the hit rates. usage: bench_stream_replay TRACE N_EXPERT [PERCENT...]
 * (default percents: 10 25 50 75). Every line is a request for its experts; a resolve the
 * cache could only partly serve appears again for the rest, and counts again, as in the cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/expert_slots.h"

typedef struct req {
    uint32_t layer, n;
    int32_t *ids;
} req;

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TRACE N_EXPERT [PERCENT...]\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    uint32_t n_expert = (uint32_t)atoi(argv[2]), n_layer = 0;
    req *reqs = NULL;
    size_t n_req = 0, cap = 0;
    char line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        if (n_req == cap) reqs = realloc(reqs, (cap = cap ? 2 * cap : 1024) * sizeof *reqs);
        req *r = &reqs[n_req];
        char *p = line, *end;
        r->layer = (uint32_t)strtoul(p, &end, 10);
        r->ids = malloc(n_expert * sizeof *r->ids);
        r->n = 0;
        for (p = end;; p = end) {
            long v = strtol(p, &end, 10);
            if (end == p) break;
            r->ids[r->n++] = (int32_t)v;
        }
        if (r->layer + 1 > n_layer) n_layer = r->layer + 1;
        n_req++;
    }
    fclose(f);
    double pcts[16] = {10, 25, 50, 75};
    int n_pct = 4;
    if (argc > 3) {
        n_pct = 0;
        for (int i = 3; i < argc && n_pct < 16; i++)
            pcts[n_pct++] = atof(argv[i]);
    }
    printf("%zu requests over %u layers of %u experts\n", n_req, n_layer, n_expert);
    printf("%-8s", "cache");
    for (int k = 0; k < HALO_EXPERT_POLICY_COUNT; k++)
        printf("  %14s", halo_expert_policy_name((halo_expert_policy)k));
    printf("\n");
    for (int pi = 0; pi < n_pct; pi++) {
        uint32_t slots = (uint32_t)((double)n_layer * n_expert * pcts[pi] / 100.0);
        printf("%5.0f %% ", pcts[pi]);
        for (int k = 0; k < HALO_EXPERT_POLICY_COUNT; k++) {
            halo_expert_slots s;
            halo_expert_slots_init(&s, n_layer, n_expert, slots ? slots : 1, (halo_expert_policy)k);
            uint64_t hits = 0, total = 0;
            int32_t ids[1024];
            for (size_t i = 0; i < n_req; i++) {
                uint32_t n = reqs[i].n < 1024 ? reqs[i].n : 1024, ready = 0;
                memcpy(ids, reqs[i].ids, n * sizeof *ids);
                while (ready < n) { /* rounds, as the cache serves them */
                    halo_expert_slots_new_round(&s);
                    uint32_t r0 = ready;
                    for (uint32_t j = ready; j < n; j++) {
                        int32_t slot = halo_expert_slots_find(&s, reqs[i].layer, (uint32_t)ids[j]);
                        if (slot < 0) continue;
                        int32_t t = ids[ready];
                        ids[ready++] = ids[j];
                        ids[j] = t;
                        halo_expert_slots_use(&s, slot);
                        hits++;
                    }
                    for (; ready < n; ready++) {
                        int32_t slot = halo_expert_slots_victim(&s, reqs[i].layer);
                        if (slot < 0) break;
                        halo_expert_slots_assign(&s, slot, reqs[i].layer, (uint32_t)ids[ready]);
                    }
                    total += ready - r0;
                }
            }
            printf("  %13.1f%%", total ? 100.0 * (double)hits / (double)total : 0);
            halo_expert_slots_free(&s);
        }
        printf("\n");
    }
    for (size_t i = 0; i < n_req; i++)
        free(reqs[i].ids);
    free(reqs);
    return 0;
}
