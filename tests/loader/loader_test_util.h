/*
 * Helpers for the loader tests: building ONNX messages in C with the generated
 * protobuf-c structs (every allocation tracked by an arena freed in one call), writing
 * files into a scratch folder, and checking the invariants every loaded graph keeps.
 */
#ifndef ONYX_TESTS_LOADER_TEST_UTIL_H
#define ONYX_TESTS_LOADER_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "onnx.pb-c.h"

/* Every allocation a test makes for its messages; freed by lt_arena_free. */
typedef struct lt_arena {
  void **ptrs;
  size_t count;
  size_t cap;
} lt_arena;

void *lt_alloc(lt_arena *a, size_t size); /* zeroed; aborts the test when out of memory */
char *lt_str(lt_arena *a, const char *s);
void lt_arena_free(lt_arena *a);

/* Appends `item` to a protobuf-c repeated message field (`*items`, `*count`). */
void lt_push(lt_arena *a, void *items_field, size_t *count, void *item);

/* A model with ir_version 8, the given ai.onnx opset (0: none) and an empty graph. */
Onnx__ModelProto *lt_model(lt_arena *a, int64_t onnx_opset);
void lt_opset(lt_arena *a, Onnx__ModelProto *m, const char *domain, int64_t version);

/* A tensor value_info: dtype 0 leaves the type unset; rank -1 leaves the shape unset;
 * dims[i] < 0 writes a symbolic dim named "d<i>". */
Onnx__ValueInfoProto *lt_value_info(lt_arena *a, const char *name, int32_t dtype, int rank,
                                    const int64_t *dims);
void lt_input(lt_arena *a, Onnx__GraphProto *g, const char *name, int32_t dtype, int rank,
              const int64_t *dims);
void lt_output(lt_arena *a, Onnx__GraphProto *g, const char *name, int32_t dtype, int rank,
               const int64_t *dims);

/* A tensor with dtype and dims set and no payload. */
Onnx__TensorProto *lt_tensor(lt_arena *a, const char *name, int32_t dtype, size_t rank,
                             const int64_t *dims);
void lt_raw(lt_arena *a, Onnx__TensorProto *t, const void *bytes, size_t size);
void lt_floats(lt_arena *a, Onnx__TensorProto *t, const float *v, size_t n);
void lt_int64s(lt_arena *a, Onnx__TensorProto *t, const int64_t *v, size_t n);
void lt_int32s(lt_arena *a, Onnx__TensorProto *t, const int32_t *v, size_t n);
void lt_external(lt_arena *a, Onnx__TensorProto *t, const char *location, const char *offset,
                 const char *length); /* NULL offset/length are left out */
void lt_initializer(lt_arena *a, Onnx__GraphProto *g, Onnx__TensorProto *t);

/* A node; inputs and outputs are NULL-terminated name lists. */
Onnx__NodeProto *lt_node(lt_arena *a, Onnx__GraphProto *g, const char *op_type, const char *name,
                         const char *const *inputs, const char *const *outputs);
Onnx__AttributeProto *lt_attr(lt_arena *a, Onnx__NodeProto *n, const char *name, int type);

/* Serialises a model (arena-owned bytes). */
uint8_t *lt_pack(lt_arena *a, const Onnx__ModelProto *m, size_t *out_size);
uint8_t *lt_pack_tensor(lt_arena *a, const Onnx__TensorProto *t, size_t *out_size);

/* A small model touching every feature the loader converts: initializers (raw and
 * typed), an input that is also an initializer, two domains, every attribute type the
 * ABI carries, value_info with a symbolic dim. */
Onnx__ModelProto *lt_rich_model(lt_arena *a);

/* Scratch folder under $TMPDIR (or /tmp), removed recursively by lt_rmtree. The
 * returned path is malloc'ed. */
char *lt_mkdtemp(void);
void lt_rmtree(const char *path);
void lt_write_file(const char *path, const void *bytes, size_t size);

/* Asserts what every loaded graph guarantees: indices in range, producers and
 * topological order, name index agreeing with the values, flags consistent. */
void lt_check_graph(const onyx__graph *g);

/* Asserts a failed load: status `want` (or any non-OK when want is OK), a message
 * that starts with `prefix` and contains every needle (NULL-terminated list). */
void lt_check_error(onyx_status got, onyx_status want, const char *err, const char *prefix,
                    const char *const *needles);

#endif /* ONYX_TESTS_LOADER_TEST_UTIL_H */
