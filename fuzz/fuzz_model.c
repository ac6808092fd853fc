/*
 * Fuzz target: model bytes, as a caller of onyx_session_create_from_bytes hands them
 * over — the protobuf parse, the loader's checks, the inlining of model functions,
 * the opset check, the graph optimizations (which run host kernels on folded
 * constants), placement and kernel creation on the CPU provider — and, when the
 * model's inputs are small and fully declared, a plan and one run on inputs derived
 * from the bytes. Every input must load or be refused with a message; nothing may
 * crash, hang, leak or trip a sanitizer.
 *
 * The runtime is made once (LLVMFuzzerInitialize) from ONYX_FUZZ_CONFIG: the CPU
 * provider alone, one thread (deterministic), a host tier of 64 MiB (a hostile
 * model's folded constants or outputs are refused by the governor, not allocated).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "fuzz_target.h"
#include "onyx.h"

/* Inputs of more than this many bytes in all are not run. */
#define RUN_MAX_BYTES 65536

static onyx_runtime *runtime;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  onyx_error *e = NULL;
  if (onyx_runtime_create(ONYX_FUZZ_CONFIG, &runtime, &e) != ONYX_STATUS_OK) {
    fprintf(stderr, "fuzz_model: %s\n", onyx_error_message(e));
    abort();
  }
  return 0;
}

/* Element value v (0..3) in `dtype`: small values, so that index, shape and count
 * inputs (Range's limit, Expand's shape) stay small and a run stays quick. */
static void put_small(uint8_t *p, uint32_t dtype, int v) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32: {
    float f = (float)v - 1.5f;
    memcpy(p, &f, sizeof f);
    return;
  }
  case ONYX_DTYPE_FLOAT64: {
    double d = (double)v - 1.5;
    memcpy(p, &d, sizeof d);
    return;
  }
  case ONYX_DTYPE_FLOAT16: /* 0.5, 1, 1.5, 2 */
  case ONYX_DTYPE_BFLOAT16: {
    static const uint16_t half[4] = {0x3800, 0x3c00, 0x3e00, 0x4000};
    static const uint16_t bf[4] = {0x3f00, 0x3f80, 0x3fc0, 0x4000};
    uint16_t h = dtype == ONYX_DTYPE_FLOAT16 ? half[v] : bf[v];
    memcpy(p, &h, sizeof h);
    return;
  }
  case ONYX_DTYPE_BOOL:
    p[0] = (uint8_t)(v & 1);
    return;
  default: { /* integers, little-endian */
    size_t esz = onyx_dtype_size(dtype);
    memset(p, 0, esz);
    p[0] = (uint8_t)v;
    return;
  }
  }
}

/* Inputs from the model's declarations, filled from the fuzz bytes; false when a
 * dtype or dim is not declared or the total passes RUN_MAX_BYTES. */
static bool make_inputs(const onyx_session *s, const uint8_t *data, size_t size,
                        onyx_tensor *inputs, size_t n) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    onyx_value_info v = onyx_session_input_info(s, i);
    uint64_t bytes = 0;
    if (v.rank < 0 || v.rank > ONYX_MAX_RANK || onyx_dtype_size(v.dtype) == 0) return false;
    inputs[i] = (onyx_tensor){.dtype = v.dtype, .rank = (uint32_t)v.rank};
    for (int32_t d = 0; d < v.rank; ++d) inputs[i].dims[d] = v.dims[d];
    if (onyx__ckd_tensor_bytes(&bytes, &inputs[i]) || onyx__ckd_add_u64(&total, total, bytes) ||
        total > RUN_MAX_BYTES)
      return false;
  }
  for (size_t i = 0; i < n; ++i) {
    uint64_t bytes = 0;
    onyx__ckd_tensor_bytes(&bytes, &inputs[i]);
    uint8_t *p = malloc(bytes ? (size_t)bytes : 1);
    if (p == NULL) return false;
    inputs[i].data = p;
    size_t esz = onyx_dtype_size(inputs[i].dtype);
    for (uint64_t e = 0; e < bytes / esz; ++e)
      put_small(p + e * esz, inputs[i].dtype, size ? data[(e * 7 + i) % size] & 3 : 1);
  }
  return true;
}

static void plan_and_run(onyx_session *s, const uint8_t *data, size_t size) {
  size_t n = onyx_session_input_count(s), nout = onyx_session_output_count(s);
  onyx_tensor *inputs = calloc(n + 1, sizeof *inputs);
  onyx_tensor *outputs = calloc(nout + 1, sizeof *outputs);
  if (inputs && outputs && make_inputs(s, data, size, inputs, n)) {
    onyx_plan *plan = NULL;
    onyx_error *e = NULL;
    if (onyx_session_plan(s, inputs, n, &plan, &e) == ONYX_STATUS_OK) {
      (void)onyx_plan_check(plan, NULL);
      onyx_plan_destroy(plan);
    } else if (onyx_error_message(e)[0] == '\0') {
      abort(); /* a refusal without a message */
    }
    onyx_error_free(e);
    e = NULL;
    if (onyx_session_run(s, NULL, inputs, n, outputs, &e) == ONYX_STATUS_OK) {
      for (size_t k = 0; k < nout; ++k) onyx_tensor_data_free(outputs[k].data);
    } else if (onyx_error_message(e)[0] == '\0') {
      abort();
    }
    onyx_error_free(e);
  }
  for (size_t i = 0; inputs && i < n; ++i) free(inputs[i].data);
  free(inputs);
  free(outputs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (runtime == NULL) LLVMFuzzerInitialize(NULL, NULL);
  static const uint8_t empty = 0;
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_session_options so = {.struct_size = sizeof so};
  onyx_status st = onyx_session_create_from_bytes(runtime, size ? data : &empty, size, &so, &s, &e);
  /* ONYX_FUZZ_VERBOSE=1 says what became of each input (corpus upkeep). */
  if (getenv("ONYX_FUZZ_VERBOSE"))
    fprintf(stderr, "fuzz_model: %zu bytes: %s%s%s\n", size, onyx_status_str(st), e ? ": " : "",
            e ? onyx_error_message(e) : "");
  if (st == ONYX_STATUS_OK) {
    plan_and_run(s, data, size);
    onyx_session_destroy(s);
  } else if (s != NULL || onyx_error_message(e)[0] == '\0') {
    abort(); /* a failed call leaves nothing behind and says why */
  }
  onyx_error_free(e);
  return 0;
}
