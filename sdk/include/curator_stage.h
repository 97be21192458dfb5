/*
 * curator_stage.h: the native stage contract, ABI 0.4.
 *
 * This header is the source of the contract's constants: the SDK's `abi/mod.rs`, `curator-core`
 * and the WIT package `sdk/wit/stage.wit` mirror them, and a test (`sdk/tests/contract.rs`)
 * fails when one of them differs. While the major is 0 every minor is a breaking change (the
 * host accepts only its own minor); from 1.0 on, a minor only adds (fields at the end of the
 * vtable, found through `struct_size`).
 *
 * A native stage is a shared library (.so / .dylib) exporting one symbol,
 *
 *     const CuratorStageVTable *curator_stage_entry(void);
 *
 * that returns a pointer to a static vtable. The host loads the library in a worker
 * process (`curator-host worker`), never in its own process, and never unloads it.
 *
 * Batches cross the boundary through the Arrow C Data Interface
 * (https://arrow.apache.org/docs/format/CDataInterface.html): a batch is a struct array,
 * one child per column, with its schema. Nothing is copied on the way in: the input's
 * buffers lie in memory the worker shares with the host (read-only to the plugin) and stay
 * valid until `process` returns, whenever `release` is called; a plugin that keeps input data
 * past the call copies it. The output may point into the input (a column passed through is
 * not copied); the host reads it before the next call. Column types a stage may send and
 * receive: utf8 ("u"), binary ("z", since 0.3), int64 ("l"), float64 ("g"), boolean ("b"),
 * and vectors of float32 ("+w:N" with one child "f", no nulls in the child; since 0.4).
 *
 * Rust authors get all of this from `curator_sdk` (`#[stage(name = "...", native)]`).
 */
#ifndef CURATOR_STAGE_H
#define CURATOR_STAGE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CURATOR_ABI_MAJOR 0
#define CURATOR_ABI_MINOR 4
#define CURATOR_STAGE_ENTRY "curator_stage_entry"

/* Arrow C Data Interface (verbatim from the Arrow specification). */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

/* Return codes of `create` and `process`. */
#define CURATOR_OK 0
#define CURATOR_ERR_INVALID_PARAMS 1
#define CURATOR_ERR_FAILED 2
/* The batch did not fit (e.g. CUDA out of memory): the host retries it in halves. */
#define CURATOR_ERR_OUT_OF_MEMORY 3

/*
 * What the output of `process` means, from the top-level schema's name:
 *   "selection": one uint32 ("I") column, the ascending indices of the rows to keep;
 *   "columns":   columns to replace (same name) or add, one value per input row;
 *   "batch":     a whole new batch;
 *   "scored":    columns as for "columns", plus a boolean column "_keep": the columns are
 *                added to every row, then only the rows where _keep is true are kept.
 * A NULL or empty name means "columns".
 */
#define CURATOR_OUTPUT_SELECTION "selection"
#define CURATOR_OUTPUT_COLUMNS "columns"
#define CURATOR_OUTPUT_BATCH "batch"
#define CURATOR_OUTPUT_SCORED "scored"
#define CURATOR_SCORED_KEEP "_keep"

typedef struct CuratorStageVTable {
    /* The ABI the plugin was built for. The host refuses a different major (and, while the
     * major is 0, a different minor). */
    uint32_t abi_major;
    uint32_t abi_minor;
    /* sizeof(CuratorStageVTable) as the plugin was compiled: later minors add fields at the
     * end, and the host reads only those that a plugin's struct_size covers. */
    uint32_t struct_size;
    uint32_t reserved; /* 0 */
    /* The plugin's manifest (JSON, NUL-terminated, static). Its "kind" is "native". */
    const char *manifest_json;

    /*
     * Build an instance. `params_json`: the pipeline's params (checked against the
     * manifest's schema). `context_json`: what the host decided for this worker, e.g.
     * {"worker": 0, "gpu_memory_budget_bytes": 21474836480, "cuda_visible_devices": "0",
     *  "dirs": {"models": "/data/models"}, "cache_dir": "/home/u/.cache/curator"};
     * "check_only": true marks the throw-away instance that checks the set-up while a run is
     * planned (validate params and inputs; devices need not be touched);
     * a GPU framework should cap its allocator at the budget; "cache_dir" (absent with
     * --no-cache) is where it may keep what it compiles at start-up. On success store the
     * instance in *state and return CURATOR_OK; on failure return an error code and store a
     * message in *error (owned by the plugin, freed with `free_error`).
     */
    int32_t (*create)(const char *params_json, const char *context_json, void **state, char **error);

    /*
     * Process one batch. The plugin takes ownership of `input` and `input_schema` (it must
     * call their `release` callbacks, now or later). On success it fills `output` and
     * `output_schema`, which the host owns from then on; on failure it returns an error code
     * and a message in *error.
     */
    int32_t (*process)(void *state, struct ArrowArray *input, struct ArrowSchema *input_schema,
                       struct ArrowArray *output, struct ArrowSchema *output_schema, char **error);

    /* Free an instance. */
    void (*destroy)(void *state);

    /* Free an error message returned by `create` or `process`. */
    void (*free_error)(char *error);
} CuratorStageVTable;

typedef const CuratorStageVTable *(*CuratorStageEntry)(void);

#ifdef __cplusplus
}
#endif

#endif /* CURATOR_STAGE_H */
