/* `halo logits` run as a real process: its output file holds transformers' logits for a golden
 * sequence (whole and in chunks), and bad arguments or input fail with a clear message. */
#include <sys/wait.h>

#include "check.h"
#include "golden/golden.h"
#include "gguf/gguf_test_util.h"

static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static halo_golden *golden;

static void writes_the_reference_logits(void) {
    const halo_golden_variant *v = NULL;
    halo_error err = {0};
    CHECK_INT(halo_golden_variant_get(golden, "tiny-a", "f32", &v, &err), HALO_OK);
    const halo_golden_seq *seq = halo_golden_seq_find(golden, "L129");
    if (!v || !seq) return;
    char *dir = tmpdir_make(), in[600], out[600], cmd[2400], msg[4096];
    snprintf(in, sizeof in, "%s/in.i32", dir);
    snprintf(out, sizeof out, "%s/out.f32", dir);
    FILE *f = fopen(in, "wb");
    fwrite(seq->tokens, sizeof(int32_t), (size_t)seq->length, f);
    fclose(f);
    const char *chunks[] = {"", "--chunk 10"};
    for (int c = 0; c < 2; c++) {
        snprintf(cmd, sizeof cmd, "%s logits -m '%s' --tokens '%s' --out '%s' %s 2>&1", HALO_BIN,
                 v->gguf_path, in, out, chunks[c]);
        CHECK_INT(run(cmd, msg, sizeof msg), 0);
        size_t n = (size_t)seq->length * (size_t)v->n_vocab;
        float *got = malloc(n * sizeof *got);
        f = fopen(out, "rb");
        CHECK(f && fread(got, sizeof *got, n, f) == n);
        CHECK(f && fgetc(f) == EOF); /* exactly n_tokens x n_vocab floats */
        if (f) fclose(f);
        halo_golden_cmp cmp;
        halo_golden_compare_seq(v, seq, got, 1e-3, &cmp);
        CHECK(cmp.first_bad < 0);
        CHECK_INT(cmp.top1_agree, seq->length);
        free(got);
    }
    tmpdir_remove(dir);
}

static void bad_arguments_and_input_fail_clearly(void) {
    char cmd[4096], msg[4096];
    snprintf(cmd, sizeof cmd, "%s logits -m x.gguf --tokens t.i32 2>&1", HALO_BIN);
    CHECK_INT(run(cmd, msg, sizeof msg), 2); /* no --out */
    snprintf(cmd, sizeof cmd, "%s logits -m x --tokens t --out o --chunk -3 2>&1", HALO_BIN);
    CHECK_INT(run(cmd, msg, sizeof msg), 2);
    CHECK_CONTAINS(msg, "'--chunk' needs a non-negative integer");
    char *dir = tmpdir_make(), in[600];
    snprintf(in, sizeof in, "%s/in.i32", dir);
    FILE *f = fopen(in, "wb");
    int32_t toks[2] = {1, 999};
    fwrite(toks, sizeof toks[0], 2, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s logits -m tests/golden/models/tiny-a-f32.gguf --tokens '%s' "
             "--out '%s/o.f32' 2>&1", HALO_BIN, in, dir);
    CHECK_INT(run(cmd, msg, sizeof msg), 1);
    CHECK_CONTAINS(msg, "token 999 at index 1 is outside the vocabulary of 256");
    snprintf(cmd, sizeof cmd, "%s logits -m '%s' --tokens '%s' --out '%s/o.f32' 2>&1", HALO_BIN,
             in, in, dir);
    CHECK_INT(run(cmd, msg, sizeof msg), 1);
    CHECK_CONTAINS(msg, "not a GGUF file");
    tmpdir_remove(dir);
}

int main(void) {
    halo_error err = {0};
    if (halo_golden_open("tests/golden", &golden, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    RUN(writes_the_reference_logits);
    RUN(bad_arguments_and_input_fail_clearly);
    halo_golden_close(golden);
    return check_report();
}
