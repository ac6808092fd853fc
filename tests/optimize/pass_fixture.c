/* The fused-pass tests' shared fixtures (pass_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pass_fixture.h"

uint64_t fx_rng = 1;

uint64_t fx_next(void) {
  fx_rng ^= fx_rng << 13;
  fx_rng ^= fx_rng >> 7;
  fx_rng ^= fx_rng << 17;
  return fx_rng;
}

float fx_frand(void) { return (float)((fx_next() >> 40) * (2.0 / 16777216.0)) - 1.0f; }

void fx_seed(const char *test, const char *env) {
  const char *seed = getenv(env);
  fx_rng = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
  if (fx_rng == 0) fx_rng = 1;
  printf("%s: seed %llu (%s repeats it)\n", test, (unsigned long long)fx_rng, env);
}

onyx_runtime *fx_runtime_from(const char *ini) {
  char tmpl[] = "/tmp/onyx-pass-XXXXXX";
  int fd = mkstemp(tmpl);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, ini, strlen(ini)), (ssize_t)strlen(ini));
  close(fd);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(tmpl, &rt, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "runtime: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  unlink(tmpl);
  assert_int_equal(st, ONYX_STATUS_OK);
  return rt;
}

onyx_runtime *fx_runtime_cpu(void) {
  char text[1024];
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  return fx_runtime_from(text);
}

onyx_session *fx_session(onyx_runtime *rt, lt_arena *a, const Onnx__ModelProto *m,
                         const char *disable) {
  size_t size = 0;
  uint8_t *bytes = lt_pack(a, m, &size);
  onyx_session_options so = {.struct_size = sizeof so, .disable_optimizations = disable};
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create_from_bytes(rt, bytes, size, &so, &s, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "session: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

onyx_optimization_stats fx_pass_stats(const onyx_session *s, const char *pass) {
  for (size_t i = 0; i < onyx_optimization_count(); ++i) {
    if (strcmp(onyx_optimization_name(i), pass) != 0) continue;
    onyx_optimization_stats st = {.struct_size = sizeof st};
    assert_int_equal(onyx_session_optimization_stats(s, i, &st), ONYX_STATUS_OK);
    return st;
  }
  fail_msg("no pass named %s", pass);
  return (onyx_optimization_stats){0};
}

void fx_float_init(lt_arena *a, Onnx__GraphProto *g, const char *name, size_t rank,
                   const int64_t *dims, float scale, float offset) {
  Onnx__TensorProto *t = lt_tensor(a, name, ONYX_DTYPE_FLOAT32, rank, dims);
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) n *= (size_t)dims[d];
  float *v = lt_alloc(a, n * sizeof *v);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * fx_frand();
  lt_floats(a, t, v, n);
  lt_initializer(a, g, t);
}

static onyx_tensor *random_inputs(const onyx_session *s) {
  size_t n = onyx_session_input_count(s);
  onyx_tensor *in = calloc(n + 1, sizeof *in);
  for (size_t i = 0; i < n; ++i) {
    onyx_value_info info = onyx_session_input_info(s, i);
    in[i] = (onyx_tensor){.dtype = info.dtype, .rank = (uint32_t)info.rank};
    for (int32_t d = 0; d < info.rank; ++d) in[i].dims[d] = info.dims[d];
    int64_t count = onyx_tensor_numel(&in[i]);
    in[i].data = malloc((size_t)count * sizeof(float) + 1);
    for (int64_t k = 0; k < count; ++k) ((float *)in[i].data)[k] = 3.0f * fx_frand();
  }
  return in;
}

static onyx_tensor *run(onyx_session *s, const onyx_tensor *in) {
  size_t n = onyx_session_output_count(s);
  onyx_tensor *out = calloc(n + 1, sizeof *out);
  onyx_error *e = NULL;
  onyx_status st = onyx_session_run(s, NULL, in, onyx_session_input_count(s), out, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "run: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  return out;
}

/* Whether a fused output element matches the unfused one: its bits when rel < 0, else
 * within rel · (1 + |unfused|). */
static bool element_matches(float fused, float plain, float rel) {
  if (rel < 0) return memcmp(&fused, &plain, sizeof fused) == 0;
  float tol = rel * (1.0f + (plain < 0 ? -plain : plain));
  return fused - plain <= tol && plain - fused <= tol;
}

static void expect_outputs(onyx_session *opt, onyx_session *plain, float rel) {
  size_t nout = onyx_session_output_count(plain), nin = onyx_session_input_count(plain);
  for (int trial = 0; trial < 3; ++trial) {
    onyx_tensor *in = random_inputs(plain);
    onyx_tensor *x = run(opt, in), *y = run(plain, in);
    for (size_t o = 0; o < nout; ++o) {
      assert_int_equal(x[o].rank, y[o].rank);
      assert_memory_equal(x[o].dims, y[o].dims, sizeof x[o].dims);
      const float *p = x[o].data, *q = y[o].data;
      for (int64_t k = 0; k < onyx_tensor_numel(&x[o]); ++k)
        if (!element_matches(p[k], q[k], rel))
          fail_msg("output %zu [%lld]: fused %.9g, unfused %.9g", o, (long long)k, p[k], q[k]);
      onyx_tensor_data_free(x[o].data);
      onyx_tensor_data_free(y[o].data);
    }
    free(x);
    free(y);
    for (size_t i = 0; i < nin; ++i) free(in[i].data);
    free(in);
  }
}

void fx_expect_same_outputs(onyx_session *opt, onyx_session *plain) {
  expect_outputs(opt, plain, -1.0f);
}

void fx_expect_close_outputs(onyx_session *opt, onyx_session *plain, float rel) {
  expect_outputs(opt, plain, rel);
}

void fx_expect_one_fusion(onyx_session *opt, onyx_session *plain, const char *pass) {
  onyx_optimization_stats st = fx_pass_stats(opt, pass);
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 1);
  assert_int_equal(st.nodes_skipped, 0);
  assert_int_equal(st.bytes_added, 0);
  assert_false(fx_pass_stats(plain, pass).ran);
  fx_expect_same_outputs(opt, plain);
}
