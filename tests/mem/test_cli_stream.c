/* `halo logits` with streamed experts, run as a real process: on a machine profile too small
 * for the model it streams by default (auto) and says so, prints the plan's loud line when the
 * cache asked for is more than there is room for, reports hit rate and bytes read, and writes
 * logits byte-identical to the resident run's. HALO_BIN is the built binary's path. */
#include <stdlib.h>
#include <sys/wait.h>

#include "check.h"
#include "gguf/gguf_test_util.h"

#define MODEL "tests/golden/models/tiny-a-f32.gguf"

static char *dir;

/* Runs `[env] halo logits -m MODEL --tokens T --out OUT args 2>&1`; returns its output. */
static char *run_logits(const char *env, const char *out, const char *args, int *status) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s %s logits -m %s --tokens %s/tok.i32 --out %s/%s --chunk 5 %s 2>&1", env ? env : "",
             HALO_BIN, MODEL, dir, dir, out, args);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, len = 0, got;
    char *text = malloc(cap);
    while ((got = fread(text + len, 1, cap - len - 1, p)) > 0)
        len += got;
    text[len] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return text;
}

static long file_bytes(const char *name, char **data) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    if (fread(*data, 1, (size_t)n, f) != (size_t)n) n = -1;
    fclose(f);
    return n;
}

static void logits_stream_on_a_small_machine_and_say_so(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/tok.i32", dir);
    FILE *f = fopen(path, "wb");
    for (int32_t i = 0; i < 30; i++) {
        int32_t t = (i * 7919 + 13) % 200;
        fwrite(&t, sizeof t, 1, f);
    }
    fclose(f);
    /* Machines of 1 GiB (the OS reserve) + a few MiB: the smallest that takes the model at
     * all (1.5 MiB of weights, ~10 MiB of scratch and state) must stream its experts. */
    snprintf(path, sizeof path, "%s/small.json", dir);
    int st;
    char *out = run_logits(NULL, "resident.f32", "", &st);
    CHECK_INT(st, 0);
    CHECK(!strstr(out, "stream"));
    free(out);

    char env[800];
    snprintf(env, sizeof env, "HALO_PROFILE=%s", path);
    out = NULL;
    for (int mib = 1030; mib < 1100; mib++) {
        f = fopen(path, "w");
        fprintf(f,
                "{\"name\": \"small\", \"description\": \"test\", \"sources\": [\"test\"],\n"
                " \"host\": {\"total_mib\": %d, \"available_mib\": %d, \"bandwidth_gbs\": 10},\n"
                " \"disk\": {\"kind\": \"nvme\", \"read_gbs\": 1}}\n",
                mib, mib);
        fclose(f);
        free(out);
        out = run_logits(env, "auto.f32", "", &st);
        if (st == 0) break;
    }
    CHECK_INT(st, 0);
    CHECK_CONTAINS(out, "stream from disk through a");
    CHECK_CONTAINS(out, "experts: ");
    CHECK_CONTAINS(out, "hit rate");
    printf("  %s", out);
    free(out);
    out = run_logits(env, "big.f32", "--weights stream --expert-cache 64M", &st);
    CHECK_INT(st, 0);
    CHECK_CONTAINS(out, "NOTE: expert cache: requested 0.06 GiB");
    CHECK_CONTAINS(out, "the room left");
    printf("  %s", out);
    free(out);

    char *a = NULL, *b = NULL, *c = NULL;
    long na = file_bytes("resident.f32", &a), nb = file_bytes("auto.f32", &b),
         nc = file_bytes("big.f32", &c);
    CHECK(na > 0 && na == nb && na == nc);
    CHECK(na > 0 && na == nb && memcmp(a, b, (size_t)na) == 0);
    CHECK(na > 0 && na == nc && memcmp(a, c, (size_t)na) == 0);
    free(a);
    free(b);
    free(c);
}

int main(void) {
    dir = tmpdir_make();
    RUN(logits_stream_on_a_small_machine_and_say_so);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
    if (system(cmd)) fprintf(stderr, "cannot clean %s\n", dir);
    tmpdir_remove(dir);
    return check_report();
}
