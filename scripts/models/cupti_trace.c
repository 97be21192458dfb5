// A CUDA API tracer for GPU machines without Nsight Systems: loaded by the CUDA driver through
// CUDA_INJECTION64_PATH, it times every driver- and runtime-API call of the process (CUPTI
// callbacks) and, at exit, prints per function the calls, the host milliseconds spent inside
// them, and the longest call, longest first, to stderr. A call that blocks the host (a
// synchronisation, cudaFree, a pinned allocation) shows as milliseconds here.
//
//   nvcc -shared -Xcompiler -fPIC -o libcupti_trace.so cupti_trace.c -I$CUPTI/include -L$CUPTI/lib64 -lcupti
//   CUDA_INJECTION64_PATH=$PWD/libcupti_trace.so CUPTI_TRACE_TOP=30 ./program
//
// CUPTI_TRACE_FROM_MS: count only calls that start this many milliseconds after start-up.
// CUPTI_TRACE_CSV=FILE: also write every kernel, copy and memset the device ran (CUPTI's activity
// records), a line each: kind (K, M or S), start ns, end ns, stream id, then the kernel's name or
// the copy's kind and bytes. Build with -DKERNEL_T, -DMEMCPY_T and -DMEMSET_T naming the newest
// CUpti_ActivityKernelN, ...MemcpyN and ...MemsetN of the CUPTI headers at hand.
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_CBID 4096

typedef struct {
    const char *name;
    unsigned long long calls;
    double ms;
    double max_ms;
} Stat;

static Stat stats[2][MAX_CBID];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t start_ns, from_ns;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void CUPTIAPI on_call(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    (void)user;
    const CUpti_CallbackData *info = (const CUpti_CallbackData *)data;
    if (cbid >= MAX_CBID) return;
    if (info->callbackSite == CUPTI_API_ENTER) {
        *info->correlationData = now_ns();
        return;
    }
    uint64_t began = *info->correlationData;
    if (began < from_ns) return;
    double ms = (double)(now_ns() - began) / 1e6;
    int d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 0 : 1;
    pthread_mutex_lock(&lock);
    Stat *s = &stats[d][cbid];
    s->name = info->functionName;
    s->calls += 1;
    s->ms += ms;
    if (ms > s->max_ms) s->max_ms = ms;
    pthread_mutex_unlock(&lock);
}

#if defined(KERNEL_T) && defined(MEMCPY_T) && defined(MEMSET_T)
#define ACTIVITY 1
static FILE *csv;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 1 << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *record = NULL;
    pthread_mutex_lock(&lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            KERNEL_T *k = (KERNEL_T *)record;
            fprintf(csv, "K,%llu,%llu,%u,%s\n", (unsigned long long)k->start, (unsigned long long)k->end, k->streamId, k->name);
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            MEMCPY_T *m = (MEMCPY_T *)record;
            fprintf(csv, "M,%llu,%llu,%u,%u,%llu\n", (unsigned long long)m->start, (unsigned long long)m->end, m->streamId,
                    (unsigned)m->copyKind, (unsigned long long)m->bytes);
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            MEMSET_T *m = (MEMSET_T *)record;
            fprintf(csv, "S,%llu,%llu,%u,%llu\n", (unsigned long long)m->start, (unsigned long long)m->end, m->streamId,
                    (unsigned long long)m->bytes);
        }
    }
    fflush(csv);
    pthread_mutex_unlock(&lock);
    free(buffer);
}
#endif

static int by_ms(const void *a, const void *b) {
    const Stat *x = *(const Stat *const *)a, *y = *(const Stat *const *)b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

static void report(void) {
#ifdef ACTIVITY
    if (csv) {
        cuptiActivityFlushAll(1);
        fclose(csv);
        csv = NULL;
    }
#endif
    static Stat *all[2 * MAX_CBID];
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < MAX_CBID; i++)
            if (stats[d][i].calls) all[n++] = &stats[d][i];
    qsort(all, n, sizeof(all[0]), by_ms);
    const char *top = getenv("CUPTI_TRACE_TOP");
    int k = top ? atoi(top) : 25;
    fprintf(stderr, "cupti_trace: %-40s %10s %12s %10s\n", "function", "calls", "host ms", "max ms");
    for (int i = 0; i < n && i < k; i++)
        fprintf(stderr, "cupti_trace: %-40s %10llu %12.1f %10.2f\n", all[i]->name, all[i]->calls, all[i]->ms, all[i]->max_ms);
}

int InitializeInjection(void) {
    start_ns = now_ns();
    const char *from = getenv("CUPTI_TRACE_FROM_MS");
    from_ns = start_ns + (from ? (uint64_t)(atof(from) * 1e6) : 0);
    static CUpti_SubscriberHandle subscriber;
    if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_call, NULL) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_trace: cuptiSubscribe failed\n");
        return 0;
    }
    cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
#ifdef ACTIVITY
    const char *path = getenv("CUPTI_TRACE_CSV");
    if (path && (csv = fopen(path, "w"))) {
        cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    }
#endif
    atexit(report);
    return 1;
}
