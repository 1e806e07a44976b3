# llama-bench's CSV against halo bench's CSV (same columns): one markdown row per test both ran,
# t/s and halo / llama.cpp. Usage: awk -F'","|^"|"$' -v engine=CUDA -f compare_llama.awk
# llamacpp.csv halo.csv (the llama.cpp file's name must contain "llamacpp").
# A plain header line, then quoted fields (split on "," the first field is empty): columns by name.
FNR == 1 { delete col; nh = split($0, h, ","); for (i = 1; i <= nh; i++) col[h[i]] = i + 1; next }
!("avg_ts" in col) { next }
{
    p = $col["n_prompt"]; g = $col["n_gen"]; d = $col["n_depth"] + 0
    key = (g > 0 ? "tg" g : "pp" p) (d ? " @ d" d : "")
    if (FILENAME ~ /llamacpp/) { lc[key] = $col["avg_ts"]; sd[key] = $col["stddev_ts"]; order[++n] = key }
    else { halo[key] = $col["avg_ts"]; hsd[key] = $col["stddev_ts"] }
}
END {
    printf "| test | llama.cpp %s t/s | halo %s t/s | halo / llama.cpp |\n", engine, engine
    printf "|---|---:|---:|---:|\n"
    for (i = 1; i <= n; i++) {
        k = order[i]
        if (k in halo) printf "| %s | %.2f ± %.2f | %.2f ± %.2f | %.2fx |\n", k, lc[k], sd[k], halo[k], hsd[k], halo[k] / lc[k]
        else printf "| %s | %.2f ± %.2f | - | - |\n", k, lc[k], sd[k]
    }
}
