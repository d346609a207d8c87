/*
 * PMDK baseline for atomfs-bench: N "files" of S bytes each, each one pmemobj allocation in a
 * libpmemobj pool; a transaction updates two ranges with the canonical libpmemobj pattern
 * (pmemobj_tx_begin, pmemobj_tx_add_range_direct = undo-log snapshot, memcpy, commit).
 * The pool lives in /dev/shm; the caller sets PMEM_IS_PMEM_FORCE=1 before the first pool is
 * created so that libpmem treats the mapping as persistent memory and flushes with clwb
 * (clflushopt/clflush when absent) + sfence instead of msync — the same persistence
 * primitives atomfs uses.
 */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct bench_root {
    uint64_t nfiles;
    uint64_t file_size;
    PMEMoid files[];
};

struct bench_pmdk {
    PMEMobjpool *pop;
    uint64_t nfiles;
    uint64_t file_size;
    char **base; /* direct pointers to each file's bytes */
};

const char *bench_pmdk_errormsg(void) { return pmemobj_errormsg(); }

/* Creates the pool at `path` (must not exist) with `nfiles` zeroed files of `file_size`
 * bytes. Returns NULL on failure (see bench_pmdk_errormsg). */
struct bench_pmdk *bench_pmdk_create(const char *path, uint64_t pool_size, uint64_t nfiles,
                                     uint64_t file_size) {
    PMEMobjpool *pop = pmemobj_create(path, "atomfs-bench", (size_t)pool_size, 0600);
    if (pop == NULL) return NULL;
    size_t root_size = sizeof(struct bench_root) + nfiles * sizeof(PMEMoid);
    PMEMoid root_oid = pmemobj_root(pop, root_size);
    if (OID_IS_NULL(root_oid)) goto fail;
    struct bench_root *root = pmemobj_direct(root_oid);
    root->nfiles = nfiles;
    root->file_size = file_size;
    pmemobj_persist(pop, root, sizeof(*root));
    for (uint64_t i = 0; i < nfiles; i++) {
        /* zalloc persists the zeroed object and the oid atomically */
        if (pmemobj_zalloc(pop, &root->files[i], file_size, 1) != 0) goto fail;
    }
    struct bench_pmdk *h = calloc(1, sizeof(*h));
    if (h == NULL) goto fail;
    h->base = calloc(nfiles ? nfiles : 1, sizeof(char *));
    if (h->base == NULL) {
        free(h);
        goto fail;
    }
    h->pop = pop;
    h->nfiles = nfiles;
    h->file_size = file_size;
    for (uint64_t i = 0; i < nfiles; i++) h->base[i] = pmemobj_direct(root->files[i]);
    return h;
fail:
    pmemobj_close(pop);
    return NULL;
}

static int add_and_copy(struct bench_pmdk *h, uint32_t file, uint64_t off, const void *data,
                        size_t len) {
    if (len == 0) return 0;
    if (file >= h->nfiles || off > h->file_size || len > h->file_size - off) return -1;
    char *dst = h->base[file] + off;
    /* undo-log snapshot of the old bytes; libpmemobj persists it before returning */
    if (pmemobj_tx_add_range_direct(dst, len) != 0) return -1;
    memcpy(dst, data, len);
    return 0;
}

/* One failure-atomic, durable two-range update. 0 on success, -1 on failure (aborted). */
int bench_pmdk_tx(struct bench_pmdk *h, uint32_t fa, uint64_t offa, const void *da, size_t la,
                  uint32_t fb, uint64_t offb, const void *db, size_t lb) {
    if (pmemobj_tx_begin(h->pop, NULL, TX_PARAM_NONE) != 0) {
        pmemobj_tx_end();
        return -1;
    }
    if (add_and_copy(h, fa, offa, da, la) != 0 || add_and_copy(h, fb, offb, db, lb) != 0) {
        if (pmemobj_tx_stage() == TX_STAGE_WORK) pmemobj_tx_abort(-1);
        pmemobj_tx_end();
        return -1;
    }
    /* persist: commit flushes every added range, then invalidates the undo log */
    pmemobj_tx_commit();
    return pmemobj_tx_end() == 0 ? 0 : -1;
}

/* Reads back `len` bytes (for the tests). */
int bench_pmdk_read(struct bench_pmdk *h, uint32_t file, uint64_t off, void *buf, size_t len) {
    if (file >= h->nfiles || off > h->file_size || len > h->file_size - off) return -1;
    memcpy(buf, h->base[file] + off, len);
    return 0;
}

void bench_pmdk_close(struct bench_pmdk *h) {
    if (h == NULL) return;
    pmemobj_close(h->pop);
    free(h->base);
    free(h);
}
