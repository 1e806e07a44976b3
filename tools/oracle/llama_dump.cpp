// llama_dump: runs llama.cpp (CPU) on token-id sequences and writes float32 logits.
// Oracle tool for tests/golden (never built by halo's CMake). Build against a llama.cpp
// tree, see tools/oracle/README.md. Settings follow ORACLES.md §4: F32 KV cache, flash
// attention off, all logits of a prompt from one decode call (or chunks of --chunk tokens).
//
// Job file, one job per line:
//   logits NAME T0 T1 ...         -> OUT/NAME.f32   [n, n_vocab] logits of every position
//   greedy NAME STEPS T0 T1 ...   -> OUT/NAME.f32   [STEPS, n_vocab] logits that chose each token,
//                                    OUT/NAME.txt   the STEPS greedy token ids (one decode per token)
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void quiet_log(ggml_log_level level, const char *text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static bool decode_span(llama_context *ctx, const std::vector<llama_token> &toks, int pos0,
                        bool all_logits) {
    llama_batch b = llama_batch_init((int)toks.size(), 0, 1);
    for (size_t i = 0; i < toks.size(); i++) {
        b.token[i] = toks[i];
        b.pos[i] = pos0 + (int)i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all_logits || i + 1 == toks.size();
    }
    b.n_tokens = (int)toks.size();
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) fprintf(stderr, "llama_decode failed: %d\n", rc);
    return rc == 0;
}

int main(int argc, char **argv) {
    const char *model_path = nullptr, *jobs_path = nullptr, *out_dir = nullptr;
    int threads = 4, chunk = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model_path = argv[i + 1];
        else if (!strcmp(argv[i], "--jobs")) jobs_path = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) out_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk")) chunk = atoi(argv[i + 1]);
    }
    if (!model_path || !jobs_path || !out_dir) {
        fprintf(stderr, "usage: llama_dump --model M.gguf --jobs J.txt --out DIR [--threads N] [--chunk C]\n");
        return 2;
    }
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", model_path); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4096;
    cp.n_batch = 4096;
    cp.n_ubatch = 4096;
    cp.n_seq_max = 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create context\n"); return 1; }

    std::ifstream jf(jobs_path);
    std::string line;
    while (std::getline(jf, line)) {
        std::istringstream ss(line);
        std::string kind, name;
        int steps = 0;
        if (!(ss >> kind >> name)) continue;
        if (kind == "greedy") ss >> steps;
        std::vector<llama_token> toks;
        for (int t; ss >> t;) toks.push_back(t);
        llama_memory_clear(llama_get_memory(ctx), true);

        std::vector<float> out;
        std::vector<int> gen;
        if (kind == "logits") {
            const int n = (int)toks.size();
            const int step = chunk > 0 ? chunk : n;
            for (int p = 0; p < n; p += step) {
                int e = p + step < n ? p + step : n;
                std::vector<llama_token> span(toks.begin() + p, toks.begin() + e);
                if (!decode_span(ctx, span, p, true)) return 1;
                for (int i = 0; i < e - p; i++) {
                    const float *l = llama_get_logits_ith(ctx, i);
                    out.insert(out.end(), l, l + n_vocab);
                }
            }
        } else if (kind == "greedy") {
            if (!decode_span(ctx, toks, 0, false)) return 1;
            int pos = (int)toks.size();
            for (int s = 0; s < steps; s++) {
                const float *l = llama_get_logits_ith(ctx, -1);
                out.insert(out.end(), l, l + n_vocab);
                int best = 0;
                for (int v = 1; v < n_vocab; v++) if (l[v] > l[best]) best = v;
                gen.push_back(best);
                if (s + 1 < steps && !decode_span(ctx, {best}, pos++, false)) return 1;
            }
        } else {
            fprintf(stderr, "unknown job kind %s\n", kind.c_str());
            return 2;
        }
        std::string base = std::string(out_dir) + "/" + name;
        FILE *f = fopen((base + ".f32").c_str(), "wb");
        if (!f) { perror(base.c_str()); return 1; }
        fwrite(out.data(), sizeof(float), out.size(), f);
        fclose(f);
        if (!gen.empty()) {
            FILE *g = fopen((base + ".txt").c_str(), "w");
            for (int t : gen) fprintf(g, "%d\n", t);
            fclose(g);
        }
        fprintf(stderr, "%s: %s %zu tokens -> %zu floats\n", model_path, name.c_str(), toks.size(),
                out.size());
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
