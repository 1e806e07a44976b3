/* The shard files of a model for the loaders (shard_files.h). */
#include "mem/shard_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

halo_status halo_shard_files_open(halo_shard_files *f, const halo_gguf *g, bool no_direct,
                                  halo_error *err) {
    *f = (halo_shard_files){.g = g, .n = halo_gguf_shard_count(g)};
    atomic_init(&f->buffered_only, no_direct);
    f->buffered = malloc((f->n ? f->n : 1) * sizeof(int));
    f->direct = malloc((f->n ? f->n : 1) * sizeof(int));
    if (!f->buffered || !f->direct) {
        halo_shard_files_close(f, false);
        return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    for (uint32_t s = 0; s < f->n; s++)
        f->buffered[s] = f->direct[s] = -1;
    for (uint32_t s = 0; s < f->n; s++) {
        const char *path = halo_gguf_shard_path(g, s);
        f->buffered[s] = open(path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        halo_status st = HALO_OK;
        if (f->buffered[s] < 0)
            st = halo_fail(err, HALO_E_IO, "%s: cannot open: %s", path, strerror(errno));
        else if (fstat(f->buffered[s], &sb) == 0 && !S_ISREG(sb.st_mode))
            st = halo_fail(err, HALO_E_IO, "%s: not a regular file", path);
        if (st) {
            halo_shard_files_close(f, false);
            return st;
        }
        posix_fadvise(f->buffered[s], 0, 0, POSIX_FADV_SEQUENTIAL);
        /* tmpfs and some FUSE filesystems refuse O_DIRECT at open: those read buffered. */
        if (!no_direct) f->direct[s] = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (f->direct[s] < 0) atomic_store(&f->buffered_only, true);
    }
    return HALO_OK;
}

int halo_shard_files_read(halo_shard_files *f, uint32_t s, uint64_t off, uint64_t len, void *dst,
                          uint64_t *got) {
    bool direct = f->direct[s] >= 0 && !atomic_load(&f->buffered_only);
    int fd = direct ? f->direct[s] : f->buffered[s];
    uint8_t *out = dst;
    *got = 0;
    while (*got < len) {
        ssize_t n = pread(fd, out + *got, len - *got, (off_t)(off + *got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && direct) {
            /* The filesystem took O_DIRECT at open but not these reads: go buffered. */
            atomic_store(&f->buffered_only, true);
            direct = false;
            fd = f->buffered[s];
            continue;
        }
        if (n < 0) return errno;
        if (n == 0) break; /* end of file */
        *got += (uint64_t)n;
    }
    /* Buffered reads leave pages behind, and the file may have been cached before (just
     * written): drop them, so the page cache never holds the model next to its real place. */
    posix_fadvise(f->buffered[s], (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
    return 0;
}

bool halo_shard_files_all_direct(const halo_shard_files *f) {
    return !atomic_load(&f->buffered_only);
}

void halo_shard_files_close(halo_shard_files *f, bool drop_cache) {
    for (uint32_t s = 0; f->buffered && f->direct && s < f->n; s++) {
        if (f->buffered[s] >= 0 && drop_cache)
            posix_fadvise(f->buffered[s], 0, 0, POSIX_FADV_DONTNEED);
        if (f->buffered[s] >= 0) close(f->buffered[s]);
        if (f->direct[s] >= 0) close(f->direct[s]);
    }
    free(f->buffered);
    free(f->direct);
    f->buffered = f->direct = NULL;
}

uint64_t halo_file_cached_bytes(const char *path, uint64_t *file_bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat sb;
    uint64_t cached = 0;
    const uint64_t window = (uint64_t)1 << 30; /* mincore's vector stays small */
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *vec = malloc((size_t)(window / (uint64_t)page));
    if (fstat(fd, &sb) == 0 && vec) {
        if (file_bytes) *file_bytes = (uint64_t)sb.st_size;
        for (uint64_t off = 0; off < (uint64_t)sb.st_size; off += window) {
            size_t len =
                (size_t)((uint64_t)sb.st_size - off < window ? (uint64_t)sb.st_size - off : window);
            void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
            if (m == MAP_FAILED) break;
            if (mincore(m, len, vec) == 0)
                for (size_t i = 0; i < (len + (size_t)page - 1) / (size_t)page; i++)
                    if (vec[i] & 1) cached += (uint64_t)page;
            munmap(m, len);
        }
    }
    free(vec);
    close(fd);
    return cached;
}
