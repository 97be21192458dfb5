/*
 * A native stage written in C against sdk/include/curator_stage.h, for the tests.
 *
 * It passes the input's "text" column back without copying it, and adds "seen_ptr": the
 * address of the text bytes as this plugin saw them, so a test can check that neither
 * direction copied. Build with -DPROBE_ABI_MAJOR=99 to get a plugin built for another ABI.
 */
#include <stdlib.h>
#include <string.h>
#include "curator_stage.h"

#ifndef PROBE_ABI_MAJOR
#define PROBE_ABI_MAJOR CURATOR_ABI_MAJOR
#endif

#define STR2(x) #x
#define STR(x) STR2(x)

static const char MANIFEST[] =
    "{\"name\":\"c_passthrough\",\"version\":\"0.1.0\",\"kind\":\"native\","
    "\"abi\":{\"major\":" STR(CURATOR_ABI_MAJOR) ",\"minor\":" STR(CURATOR_ABI_MINOR) "},\"resources\":{\"cpus\":1.0},"
    "\"input_columns\":[\"text\"],\"output_columns\":[\"text\",\"seen_ptr\"],"
    "\"params_schema\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{}}}";

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int32_t create(const char *params, const char *context, void **state, char **error) {
    (void)params; (void)context; (void)error;
    *state = malloc(1);
    return CURATOR_OK;
}

static void destroy(void *state) { free(state); }
static void free_error(char *e) { free(e); }

/* Output: a struct array of two children, the moved text column and seen_ptr. */
struct out_private {
    struct ArrowArray *children[2];
    struct ArrowArray text, ptr;
    const void *parent_buffers[1];
    const void *ptr_buffers[2];
    int64_t ptr_value;
};

struct schema_private {
    struct ArrowSchema *children[2];
    struct ArrowSchema text, ptr;
};

static void release_ptr_child(struct ArrowArray *a) {
    free(a->private_data);
    a->release = NULL;
}
static void release_ptr_schema(struct ArrowSchema *s) { s->release = NULL; }

static void release_out(struct ArrowArray *a) {
    struct out_private *p = a->private_data;
    if (p->text.release) p->text.release(&p->text);
    if (p->ptr.release) p->ptr.release(&p->ptr);
    free(p);
    a->release = NULL;
}

static void release_out_schema(struct ArrowSchema *s) {
    struct schema_private *p = s->private_data;
    if (p->text.release) p->text.release(&p->text);
    free(p);
    s->release = NULL;
}

static int32_t process(void *state, struct ArrowArray *in, struct ArrowSchema *in_schema,
                       struct ArrowArray *out, struct ArrowSchema *out_schema, char **error) {
    (void)state;
    int64_t text = -1;
    for (int64_t i = 0; i < in_schema->n_children; i++)
        if (in_schema->children[i]->name && strcmp(in_schema->children[i]->name, "text") == 0) text = i;
    if (text < 0) {
        *error = dup_str("no text column");
        in->release(in);
        in_schema->release(in_schema);
        return CURATOR_ERR_FAILED;
    }
    struct out_private *p = calloc(1, sizeof *p);
    struct schema_private *sp = calloc(1, sizeof *sp);
    /* Move the text child out of the input (the input's release then skips it). */
    p->text = *in->children[text];
    in->children[text]->release = NULL;
    sp->text = *in_schema->children[text];
    in_schema->children[text]->release = NULL;
    /* utf8 buffers: validity, offsets, data. */
    p->ptr_value = (int64_t)(intptr_t)p->text.buffers[2];
    int64_t rows = in->length;
    int64_t *values = calloc(rows > 0 ? rows : 1, sizeof(int64_t));
    for (int64_t i = 0; i < rows; i++) values[i] = p->ptr_value;
    p->ptr_buffers[0] = NULL;
    p->ptr_buffers[1] = values;
    p->ptr = (struct ArrowArray){rows, 0, 0, 2, 0, p->ptr_buffers, NULL, NULL, release_ptr_child, values};
    p->children[0] = &p->text;
    p->children[1] = &p->ptr;
    p->parent_buffers[0] = NULL;
    *out = (struct ArrowArray){rows, 0, 0, 1, 2, p->parent_buffers, p->children, NULL, release_out, p};

    sp->ptr = (struct ArrowSchema){"l", "seen_ptr", NULL, ARROW_FLAG_NULLABLE, 0, NULL, NULL, release_ptr_schema, NULL};
    sp->children[0] = &sp->text;
    sp->children[1] = &sp->ptr;
    *out_schema = (struct ArrowSchema){"+s", CURATOR_OUTPUT_COLUMNS, NULL, 0, 2, sp->children, NULL, release_out_schema, sp};

    in->release(in);
    in_schema->release(in_schema);
    return CURATOR_OK;
}

static const CuratorStageVTable VTABLE = {
    PROBE_ABI_MAJOR, CURATOR_ABI_MINOR, sizeof(CuratorStageVTable), 0, MANIFEST, create, process, destroy, free_error,
};

const CuratorStageVTable *curator_stage_entry(void) { return &VTABLE; }
