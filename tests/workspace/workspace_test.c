/*
 * The workspace contract end to end (docs/workspace.md): prepare-only planning,
 * admission of the whole plan before the first kernel, carving of views in the
 * declared layout, typed refusal of short views, STEP and SESSION lifetimes on
 * success, error and cancellation, and per-region attribution in the governor's
 * snapshot. Kernels come from the workspace mock provider (tests/mock/
 * ws_mock_provider.c) running tests/models/ws_*.onnx:
 *
 *   x [1,S,8] -> attn_0 -> proj -> attn_1 -> norm -> y = x + 4
 *
 *   node    region    class    align  bytes (numel = 8S)
 *   attn_0  q_bnsh    STEP       64   4*numel, only when S >= 2
 *           out_bnsh  STEP       64   4*numel, only when S >= 2
 *           scores    STEP      256   8*S*S,   only when S >= 2
 *           kv_stage  SESSION   256   4*numel
 *   proj    acc       STEP     4096   8*numel
 *           packed    SESSION   128   1000
 *   attn_1  q_bnsh    STEP       64   4*numel, only when S >= 2
 *           out_bnsh  STEP       64   4*numel, only when S >= 2
 *           kv_stage  SESSION    64   8*numel
 *   norm    tiny      STEP       16   16
 *           unused    STEP       64   0
 *
 * S = 4: STEP peak 384 (attn_0: 128 @0, 128 @128, 128 @256), SESSION 128+1000+256.
 * S = 2: STEP peak 288 (attn_0: 64 @0, 64 @64, 32 @256 after 128 bytes of padding).
 * S = 1: STEP peak 64 (proj), SESSION 32+1000+64.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../core/test_support.h"
#include "memory_impl.h"
#include "onyx.h"
#include "onyx_governor.h"
#include "provider_impl.h"
#include "ws_mock.h"

enum {
  STEP_S4 = 384,
  SESSION_S4 = 128 + 1000 + 256,
  STEP_S2 = 288,
  STEP_S1 = 64,
  SESSION_S1 = 32 + 1000 + 64
};

static void *mock_lib;
static const ws_mock_stats *(*mock_stats)(void);
static void (*mock_reset)(void);
static void (*mock_fail_at)(const char *);

/* ------------------------------------------------------------ helpers */

static void assert_contains_(const char *hay, const char *needle, const char *file, int line) {
  if (hay == NULL || strstr(hay, needle) == NULL) {
    print_error("%s:%d: expected to find\n  %s\nin\n  %s\n", file, line, needle,
                hay ? hay : "(null)");
    _fail(file, line);
  }
}
#define assert_contains(hay, needle) assert_contains_((hay), (needle), __FILE__, __LINE__)

static void assert_lacks_(const char *hay, const char *needle, const char *file, int line) {
  if (hay != NULL && strstr(hay, needle) != NULL) {
    print_error("%s:%d: did not expect\n  %s\nin\n  %s\n", file, line, needle, hay);
    _fail(file, line);
  }
}
#define assert_lacks(hay, needle) assert_lacks_((hay), (needle), __FILE__, __LINE__)

static int setup_mock(void **state) {
  (void)state;
  mock_lib = dlopen(MOCK_WS, RTLD_NOW | RTLD_LOCAL);
  if (mock_lib == NULL) return -1;
  *(void **)&mock_stats = dlsym(mock_lib, "ws_mock_get_stats");
  *(void **)&mock_reset = dlsym(mock_lib, "ws_mock_reset");
  *(void **)&mock_fail_at = dlsym(mock_lib, "ws_mock_fail_at");
  return mock_stats && mock_reset && mock_fail_at ? 0 : -1;
}

static int teardown_mock(void **state) {
  (void)state;
  dlclose(mock_lib);
  return 0;
}

/* A runtime with the workspace mock and `governor` lines (may be ""). */
static onyx_runtime *runtime_with(const char *governor) {
  char ini[2048];
  snprintf(ini, sizeof ini, "[governor]\n%s\n[provider.wsmock]\npath = %s\n", governor, MOCK_WS);
  char *path = write_temp_file(".ini", ini);
  assert_non_null(path);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_error("runtime: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  remove_temp_file(path);
  assert_int_equal(st, ONYX_STATUS_OK);
  mock_reset();
  return rt;
}

static onyx_session *session_of(onyx_runtime *rt, const char *model) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", MODELS_DIR, model);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create(rt, path, NULL, &s, &e);
  if (st != ONYX_STATUS_OK) print_error("session: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

/* x [1, S, 8] with fresh random values (never zeros). */
typedef struct input {
  float data[1 * 64 * 8];
  onyx_tensor t;
} input;

static void make_input(input *in, int64_t seq) {
  assert_true(seq <= 64);
  for (int64_t i = 0; i < seq * 8; ++i) in->data[i] = (float)(rand() % 2000 - 1000) / 250.0f + 0.5f;
  in->t =
      (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = 3, .dims = {1, seq, 8}, .data = in->data};
}

/* Runs with options; keeps the error message (or "") in msg. */
static onyx_status run(onyx_session *s, const onyx_run_options *ro, const input *in, float *y,
                       char *msg, size_t cap) {
  onyx_tensor out;
  memset(&out, 0, sizeof out);
  onyx_error *e = NULL;
  onyx_status st = onyx_session_run(s, ro, &in->t, 1, &out, &e);
  snprintf(msg, cap, "%s", e ? onyx_error_message(e) : "");
  onyx_error_free(e);
  if (st == ONYX_STATUS_OK) {
    if (y) memcpy(y, out.data, (size_t)onyx_tensor_numel(&out) * sizeof(float));
    onyx_tensor_data_free(out.data);
  }
  return st;
}

static uint64_t used_of(const onyx_runtime *rt, uint32_t requester) {
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, NULL);
  return used[requester];
}

static uint64_t peak_of(const onyx_runtime *rt, uint32_t requester) {
  uint64_t peak[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, NULL, peak);
  return peak[requester];
}

/* The governor's snapshot as a string (caller frees). */
static char *snapshot(const onyx_runtime *rt) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  onyx_runtime_write_memory_json(rt, f);
  fclose(f);
  return buf;
}

/* The governor's books balance (recomputed from its live grants). */
static void assert_audit(const onyx_runtime *rt) {
  char msg[512] = "";
  onyx_status st = onyx_gov_audit(onyx__memory_governor(rt->memory), msg, sizeof msg);
  if (st != ONYX_STATUS_OK) print_error("audit: %s\n", msg);
  assert_int_equal(st, ONYX_STATUS_OK);
}

/* Everything a run may hold is back: no STEP workspace, no activations. */
static void assert_run_books_clear(const onyx_runtime *rt) {
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_STEP), 0);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_ACTIVATIONS), 0);
  assert_audit(rt);
}

/* A snapshot grant entry: `"bytes":N,"owner":"LABEL"`. */
static void grant_text(char *buf, size_t cap, uint64_t bytes, const char *label) {
  snprintf(buf, cap, "\"bytes\":%llu,\"owner\":\"%s\"", (unsigned long long)bytes, label);
}

static void assert_grant(const char *json, uint64_t bytes, const char *label) {
  char want[256];
  grant_text(want, sizeof want, bytes, label);
  assert_contains(json, want);
}

static char *plan_text(const onyx_plan *p) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  onyx_plan_print(p, f);
  fclose(f);
  return buf;
}

static onyx_plan *plan_of(onyx_session *s, int64_t seq) {
  input in;
  make_input(&in, seq);
  onyx_plan *p = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_plan(s, &in.t, 1, &p, &e);
  if (st != ONYX_STATUS_OK) print_error("plan: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  return p;
}

/* The plan's entry for (node, region name). */
static onyx_plan_region region_of(const onyx_plan *p, size_t node, const char *name) {
  for (size_t i = 0; i < onyx_plan_region_count(p); ++i) {
    onyx_plan_region r = onyx_plan_region_at(p, i);
    if (r.node == node && !strcmp(r.region, name)) return r;
  }
  fail_msg("no region %s on node %zu", name, node);
  onyx_plan_region none;
  memset(&none, 0, sizeof none);
  return none;
}

static const ws_mock_record *record_of(const char *node) {
  const ws_mock_stats *st = mock_stats();
  for (size_t i = 0; i < st->record_count; ++i)
    if (!strcmp(st->records[i].node, node)) return &st->records[i];
  fail_msg("node %s never computed", node);
  return NULL;
}

/* ------------------------------------------------------------ planning */

typedef struct want_region {
  size_t node;
  const char *name;
  uint64_t bytes, offset;
  uint32_t align, lifetime;
} want_region;

static void plan_reports_regions_and_peaks(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_chain.onnx");

  onyx_plan *p = plan_of(s, 4);
  static const want_region want4[] = {
      {0, "q_bnsh", 128, 0, 64, 0},    {0, "out_bnsh", 128, 128, 64, 0},
      {0, "scores", 128, 256, 256, 0}, {0, "kv_stage", 128, 0, 256, 1},
      {1, "acc", 256, 0, 4096, 0},     {1, "packed", 1000, 0, 128, 1},
      {2, "q_bnsh", 128, 0, 64, 0},    {2, "out_bnsh", 128, 128, 64, 0},
      {2, "kv_stage", 256, 0, 64, 1},  {3, "tiny", 16, 0, 16, 0},
      {3, "unused", 0, 16, 64, 0}};
  assert_int_equal(onyx_plan_region_count(p), sizeof want4 / sizeof want4[0]);
  for (size_t i = 0; i < sizeof want4 / sizeof want4[0]; ++i) {
    onyx_plan_region r = onyx_plan_region_at(p, i);
    assert_int_equal(r.node, want4[i].node);
    assert_string_equal(r.region, want4[i].name);
    assert_int_equal(r.bytes, want4[i].bytes);
    assert_int_equal(r.offset, want4[i].offset);
    assert_int_equal(r.alignment, want4[i].align);
    assert_int_equal(r.lifetime, want4[i].lifetime);
    assert_string_equal(r.provider, "wsmock");
    assert_string_equal(r.op_type, "Scratch");
  }
  assert_int_equal(onyx_plan_bytes(p, ONYX_LIFETIME_STEP, NULL), STEP_S4);
  assert_int_equal(onyx_plan_bytes(p, ONYX_LIFETIME_STEP, "host"), STEP_S4);
  assert_int_equal(onyx_plan_bytes(p, ONYX_LIFETIME_STEP, "cuda:0"), 0);
  assert_int_equal(onyx_plan_bytes(p, ONYX_LIFETIME_SESSION, "host"), SESSION_S4);
  char *text = plan_text(p);
  print_message("%s", text);
  assert_contains(text, "workspace plan (11 regions; 4 of 4 nodes declare workspace):");
  assert_contains(text, "  #0 attn_0 (Scratch on wsmock): STEP 384 bytes, SESSION 128 bytes\n");
  assert_contains(text, "  #1 proj (Scratch on wsmock): STEP 256 bytes, SESSION 1000 bytes\n");
  assert_contains(text, "      scores                   STEP             128 bytes @256        "
                        "align 256\n");
  assert_contains(text, "      unused                   STEP               0 bytes @16         "
                        "align 64 (unused on this route)\n");
  assert_contains(text, "  wsmock (host): STEP peak 384 bytes (set by #0 attn_0, block align "
                        "4096), SESSION 1384 bytes (1384 to grant)\n");
  free(text);
  onyx_error *e = NULL;
  assert_int_equal(onyx_plan_check(p, &e), ONYX_STATUS_OK);
  onyx_plan_destroy(p);

  /* S = 2: scores needs 256-byte alignment, so 128 bytes of padding precede it. */
  p = plan_of(s, 2);
  assert_int_equal(region_of(p, 0, "out_bnsh").offset, 64);
  assert_int_equal(region_of(p, 0, "scores").offset, 256);
  assert_int_equal(region_of(p, 0, "scores").bytes, 32);
  assert_int_equal(onyx_plan_bytes(p, ONYX_LIFETIME_STEP, NULL), STEP_S2);
  onyx_plan_destroy(p);

  /* S = 1, the decode route: attention's transpose and score scratch are not used,
   * so the peak moves to proj. */
  p = plan_of(s, 1);
  assert_int_equal(region_of(p, 0, "q_bnsh").bytes, 0);
  assert_int_equal(region_of(p, 0, "scores").bytes, 0);
  assert_int_equal(region_of(p, 2, "out_bnsh").bytes, 0);
  assert_int_equal(onyx_plan_bytes(p, ONYX_LIFETIME_STEP, NULL), STEP_S1);
  assert_int_equal(onyx_plan_bytes(p, ONYX_LIFETIME_SESSION, NULL), SESSION_S1);
  text = plan_text(p);
  assert_contains(text, "  #0 attn_0 (Scratch on wsmock): STEP 0 bytes, SESSION 32 bytes\n");
  assert_contains(text, "STEP peak 64 bytes (set by #1 proj, block align 4096)");
  free(text);
  onyx_plan_destroy(p);

  /* Planning ran no kernel and allocated nothing. */
  assert_int_equal(mock_stats()->compute_calls, 0);
  assert_true(mock_stats()->workspace_calls > 0);
  for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r) assert_int_equal(used_of(rt, r), 0);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* ------------------------------------------------------------ running */

static void success_run_books(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_chain.onnx");
  input in;
  make_input(&in, 4);
  float y[32];
  char msg[2048];
  assert_int_equal(run(s, NULL, &in, y, msg, sizeof msg), ONYX_STATUS_OK);
  for (int i = 0; i < 32; ++i) assert_float_equal(y[i], in.data[i] + 4.0f, 1e-6);
  assert_int_equal(mock_stats()->compute_calls, 4);
  assert_run_books_clear(rt);
  /* The run held exactly the STEP peak, not the sum over nodes. */
  assert_int_equal(peak_of(rt, ONYX_REQUESTER_WORKSPACE_STEP), STEP_S4);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S4);
  char *json = snapshot(rt);
  assert_grant(json, 128, "node 0 wsmock/Scratch region kv_stage (session) [attn_0]");
  assert_grant(json, 1000, "node 1 wsmock/Scratch region packed (session) [proj]");
  assert_grant(json, 256, "node 2 wsmock/Scratch region kv_stage (session) [attn_1]");
  assert_lacks(json, "(step");
  free(json);
  onyx_session_destroy(s);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), 0);
  assert_audit(rt);
  onyx_runtime_destroy(rt);
}

static bool overlaps(const ws_mock_view *a, const ws_mock_view *b) {
  uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
  return a->bytes && b->bytes && a0 < b0 + b->bytes && b0 < a0 + a->bytes;
}

/* Views of one run against the plan for the same geometry. */
static void check_carving(onyx_session *s, int64_t seq) {
  static const char *const nodes[] = {"attn_0", "proj", "attn_1", "norm"};
  onyx_plan *p = plan_of(s, seq);
  uintptr_t step_base = 0;
  const ws_mock_view *session_views[16];
  size_t session_count = 0;
  for (size_t n = 0; n < 4; ++n) {
    const ws_mock_record *rec = record_of(nodes[n]);
    uintptr_t base[2] = {0, 0};
    for (size_t i = 0; i < rec->count; ++i) {
      const ws_mock_view *v = &rec->views[i];
      onyx_plan_region r = region_of(p, n, v->name);
      assert_int_equal(v->bytes, r.bytes);
      if (v->bytes == 0) {
        assert_null(v->data); /* unused on this route */
        continue;
      }
      assert_int_equal((uintptr_t)v->data % v->alignment, 0);
      /* The block of a class starts with its first used region (offset 0). */
      if (base[v->lifetime] == 0) {
        assert_int_equal(r.offset, 0);
        base[v->lifetime] = (uintptr_t)v->data;
      }
      assert_int_equal((uintptr_t)v->data - base[v->lifetime], r.offset);
      for (size_t k = 0; k < i; ++k)
        if (rec->views[k].lifetime == v->lifetime) assert_false(overlaps(&rec->views[k], v));
      if (v->lifetime == ONYX_LIFETIME_SESSION) session_views[session_count++] = v;
    }
    /* One STEP block per provider, reused by every node. */
    if (base[ONYX_LIFETIME_STEP]) {
      if (step_base == 0) step_base = base[ONYX_LIFETIME_STEP];
      assert_int_equal(base[ONYX_LIFETIME_STEP], step_base);
    }
  }
  assert_int_equal(step_base % 4096, 0); /* the block's alignment: the strictest region's */
  /* SESSION blocks persist side by side: no two nodes share bytes. */
  for (size_t i = 0; i < session_count; ++i)
    for (size_t k = 0; k < i; ++k) assert_false(overlaps(session_views[i], session_views[k]));
  onyx_plan_destroy(p);
}

static void carving_follows_the_requirement(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_chain.onnx");
  int64_t seqs[] = {4, 2, 1};
  for (size_t k = 0; k < 3; ++k) {
    input in;
    make_input(&in, seqs[k]);
    char msg[2048];
    assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_OK);
    check_carving(s, seqs[k]);
    assert_run_books_clear(rt);
  }
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* ------------------------------------------------------------ admission */

static void admission_refused_by_step_cap(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("requester.workspace_step = 256");
  onyx_session *s = session_of(rt, "ws_chain.onnx");
  onyx_plan *p = plan_of(s, 4);
  onyx_error *e = NULL;
  assert_int_equal(onyx_plan_check(p, &e), ONYX_STATUS_TIER_EXHAUSTED);
  assert_contains(onyx_error_message(e), "requested 384 bytes for workspace_step, limit 256");
  onyx_error_free(e);
  onyx_plan_destroy(p);

  input in;
  make_input(&in, 4);
  char msg[2048];
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_TIER_EXHAUSTED);
  print_message("%s\n", msg);
  assert_contains(msg, "admission refused before any kernel ran");
  assert_contains(msg, "tier host: requested 384 bytes for workspace_step, limit 256, used 0");
  assert_contains(msg, "workspace_step's cap");
  assert_contains(msg, "node 0 wsmock/Scratch region q_bnsh (step peak)");
  assert_int_equal(mock_stats()->compute_calls, 0);
  for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r) assert_int_equal(used_of(rt, r), 0);
  assert_audit(rt);

  /* The decode geometry's plan fits under the same cap. */
  make_input(&in, 1);
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(mock_stats()->compute_calls, 4);
  assert_run_books_clear(rt);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S1);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

static void admission_is_all_or_nothing(void **state) {
  (void)state;
  /* host = 1 KiB: the STEP block (384) is granted, then proj's SESSION block (1000)
   * is refused; the STEP block and attn_0's new SESSION block go back. */
  onyx_runtime *rt = runtime_with("host = 1KiB");
  onyx_session *s = session_of(rt, "ws_chain.onnx");
  input in;
  make_input(&in, 4);
  char msg[2048];
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_TIER_EXHAUSTED);
  print_message("%s\n", msg);
  assert_contains(msg, "admission refused before any kernel ran");
  assert_contains(msg, "tier host: requested 1000 bytes for workspace_session, limit 1024, "
                       "used 512");
  assert_int_equal(mock_stats()->compute_calls, 0);
  for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r) assert_int_equal(used_of(rt, r), 0);
  assert_audit(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);

  /* host = 1500: STEP (384) and SESSION (1384) each fit alone, not together; the
   * prepare-only check says so too. */
  rt = runtime_with("host = 1500");
  s = session_of(rt, "ws_chain.onnx");
  onyx_plan *p = plan_of(s, 4);
  onyx_error *e = NULL;
  assert_int_equal(onyx_plan_check(p, &e), ONYX_STATUS_TIER_EXHAUSTED);
  print_message("%s\n", onyx_error_message(e));
  assert_contains(onyx_error_message(e), "tier host: requested 1768 bytes (workspace_step 384 + "
                                         "workspace_session 1384), limit 1500, used 0");
  onyx_error_free(e);
  onyx_plan_destroy(p);
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_TIER_EXHAUSTED);
  assert_int_equal(mock_stats()->compute_calls, 0);
  for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r) assert_int_equal(used_of(rt, r), 0);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* ------------------------------------------------------------ lifetimes */

typedef struct watch {
  onyx_runtime *rt;
  size_t cancel_at; /* SIZE_MAX: never */
  size_t look_at;   /* snapshot before this node */
  uint64_t step_used, act_used;
  char *json;
} watch;

static bool watch_cancel(void *user, size_t next_node) {
  watch *w = user;
  if (next_node == w->look_at) {
    w->step_used = used_of(w->rt, ONYX_REQUESTER_WORKSPACE_STEP);
    w->act_used = used_of(w->rt, ONYX_REQUESTER_ACTIVATIONS);
    w->json = snapshot(w->rt);
  }
  return next_node == w->cancel_at;
}

static void cancel_mid_graph(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_chain.onnx");
  input in;
  make_input(&in, 4);
  watch w = {.rt = rt, .cancel_at = 2, .look_at = 1};
  onyx_run_options ro = {.struct_size = sizeof ro, .should_cancel = watch_cancel, .user = &w};
  char msg[2048];
  assert_int_equal(run(s, &ro, &in, NULL, msg, sizeof msg), ONYX_STATUS_CANCELLED);
  assert_contains(msg, "cancelled before node #2");
  assert_int_equal(mock_stats()->compute_calls, 2);
  /* In flight: the STEP peak, booked per region of the node that sets it. */
  assert_int_equal(w.step_used, STEP_S4);
  assert_true(w.act_used > 0);
  assert_grant(w.json, 128, "node 0 wsmock/Scratch region q_bnsh (step peak) [attn_0]");
  assert_grant(w.json, 128, "node 0 wsmock/Scratch region out_bnsh (step peak) [attn_0]");
  assert_grant(w.json, 128, "node 0 wsmock/Scratch region scores (step peak) [attn_0]");
  assert_lacks(w.json, "region acc (step");
  free(w.json);
  /* After: no STEP workspace, no activations; SESSION stays with the session. */
  assert_run_books_clear(rt);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S4);

  /* S = 2: the padding before `scores` is charged to the region before it, and
   * the parts sum to the peak. */
  mock_reset();
  make_input(&in, 2);
  w = (watch){.rt = rt, .cancel_at = 1, .look_at = 1};
  assert_int_equal(run(s, &ro, &in, NULL, msg, sizeof msg), ONYX_STATUS_CANCELLED);
  assert_int_equal(w.step_used, STEP_S2);
  assert_grant(w.json, 64, "node 0 wsmock/Scratch region q_bnsh (step peak) [attn_0]");
  assert_grant(w.json, 192, "node 0 wsmock/Scratch region out_bnsh (step peak) [attn_0]");
  assert_grant(w.json, 32, "node 0 wsmock/Scratch region scores (step peak) [attn_0]");
  free(w.json);
  assert_int_equal(mock_stats()->compute_calls, 1);
  assert_run_books_clear(rt);

  /* S = 1: proj sets the peak. */
  make_input(&in, 1);
  w = (watch){.rt = rt, .cancel_at = 3, .look_at = 2};
  assert_int_equal(run(s, &ro, &in, NULL, msg, sizeof msg), ONYX_STATUS_CANCELLED);
  assert_int_equal(w.step_used, STEP_S1);
  assert_grant(w.json, 64, "node 1 wsmock/Scratch region acc (step peak) [proj]");
  free(w.json);
  assert_run_books_clear(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

static void error_mid_graph(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_chain.onnx");
  input in;
  make_input(&in, 4);
  mock_fail_at("attn_1");
  char msg[2048];
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_PROVIDER_ERROR);
  assert_contains(msg, "node 'attn_1' (#2, onyx.ws::Scratch on wsmock): mock failure injected");
  assert_int_equal(mock_stats()->compute_calls, 3);
  assert_run_books_clear(rt);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S4);
  /* The session runs again once the fault is gone. */
  mock_fail_at(NULL);
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_OK);
  assert_run_books_clear(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

static void session_grows_with_geometry(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_chain.onnx");
  input in;
  char msg[2048];
  make_input(&in, 1);
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S1);
  char *json = snapshot(rt);
  assert_grant(json, 32, "node 0 wsmock/Scratch region kv_stage (session) [attn_0]");
  free(json);

  /* A larger geometry: attn_0 and attn_1 grow (the plan grants their new blocks),
   * proj's block already fits. */
  onyx_plan *p = plan_of(s, 4);
  char *text = plan_text(p);
  assert_contains(text, "SESSION 1384 bytes (384 to grant)");
  free(text);
  onyx_plan_destroy(p);
  make_input(&in, 4);
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S4);
  json = snapshot(rt);
  assert_grant(json, 128, "node 0 wsmock/Scratch region kv_stage (session) [attn_0]");
  assert_lacks(json, "\"bytes\":32,\"owner\":\"node 0 wsmock/Scratch region kv_stage");
  free(json);

  /* Smaller again: SESSION blocks never shrink, nothing to grant. */
  make_input(&in, 2);
  p = plan_of(s, 2);
  text = plan_text(p);
  assert_contains(text, "SESSION 1384 bytes (0 to grant)");
  free(text);
  onyx_plan_destroy(p);
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S4);
  assert_run_books_clear(rt);

  onyx_session_destroy(s);
  for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r) assert_int_equal(used_of(rt, r), 0);
  json = snapshot(rt);
  assert_contains(json, "\"grants\":[]");
  free(json);
  assert_audit(rt);
  onyx_runtime_destroy(rt);
}

/* ------------------------------------------------------------ short views */

static void short_view_is_refused_in_a_run(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_short.onnx");
  input in;
  make_input(&in, 4);
  char msg[2048];
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_WORKSPACE_TOO_SMALL);
  assert_contains(msg, "node 'attn_0' (#0, onyx.ws::Scratch on wsmock): workspace region "
                       "'q_bnsh' has 128 bytes, needs 136");
  assert_int_equal(mock_stats()->too_small, 1);
  assert_int_equal(mock_stats()->compute_calls, 1);
  assert_run_books_clear(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

typedef struct fake_ctx {
  onyx_compute_ctx ctx;
  int alloc_calls;
  char err[256];
} fake_ctx;

static onyx_status fake_alloc(onyx_compute_ctx *ctx, size_t index, uint32_t dtype, uint32_t rank,
                              const int64_t *dims, onyx_tensor **out) {
  (void)index;
  (void)dtype;
  (void)rank;
  (void)dims;
  (void)out;
  ((fake_ctx *)ctx->core_data)->alloc_calls++;
  return ONYX_STATUS_OUT_OF_MEMORY;
}

static void fake_set_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  fake_ctx *f = ctx->core_data;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->err, sizeof f->err, fmt, ap);
  va_end(ap);
}

/* The kernel driven directly with a fake context: each region in turn is handed
 * one byte short, in poisoned memory; the kernel refuses and writes nothing. */
static void short_view_is_refused_directly(void **state) {
  (void)state;
  onyx_provider_entry_fn entry = NULL;
  *(void **)&entry = dlsym(mock_lib, "onyx_provider_entry");
  assert_non_null(entry);
  uint32_t abi = 0;
  const onyx_provider_table *table = NULL;
  assert_int_equal(entry(1, &abi, &table), ONYX_STATUS_OK);
  const onyx_kernel_table *k = table->kernels[0];
  assert_string_equal(k->op_type, "Scratch");
  void *pstate = NULL;
  char err[256];
  assert_int_equal(table->open(NULL, NULL, 0, &pstate, err, sizeof err), ONYX_STATUS_OK);
  mock_reset();

  static const char *const names[] = {"q_bnsh", "kv_stage"};
  static const int64_t lifetime[] = {0, 1}, align[] = {64, 256}, fixed[] = {100, 40},
                       per_elem[] = {4, 0};
  onyx_attr attrs[] = {{.name = "regions", .type = ONYX_ATTR_STRINGS, .strings = names, .count = 2},
                       {.name = "lifetime", .type = ONYX_ATTR_INTS, .ints = lifetime, .count = 2},
                       {.name = "align", .type = ONYX_ATTR_INTS, .ints = align, .count = 2},
                       {.name = "fixed", .type = ONYX_ATTR_INTS, .ints = fixed, .count = 2},
                       {.name = "per_elem", .type = ONYX_ATTR_INTS, .ints = per_elem, .count = 2}};
  bool present[] = {true};
  uint32_t dtypes[] = {ONYX_DTYPE_FLOAT32};
  onyx_node_info node = {.struct_size = sizeof node,
                         .version = 1,
                         .name = "direct",
                         .domain = "onyx.ws",
                         .op_type = "Scratch",
                         .opset = 1,
                         .input_count = 1,
                         .output_count = 1,
                         .input_present = present,
                         .output_present = present,
                         .input_dtypes = dtypes,
                         .attrs = attrs,
                         .attr_count = 5};
  void *ks = NULL;
  assert_int_equal(k->create(pstate, &node, &ks, err, sizeof err), ONYX_STATUS_OK);

  float x[2 * 3 * 4];
  for (int i = 0; i < 24; ++i) x[i] = (float)i * 0.25f + 1.0f;
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 3, .dims = {2, 3, 4}, .data = x};
  onyx_workspace_requirement req = {.struct_size = sizeof req, .version = 1};
  assert_int_equal(k->workspace(ks, &in, 1, &req), ONYX_STATUS_OK);
  assert_int_equal(req.count, 2);
  assert_int_equal(req.regions[0].bytes, 100 + 4 * 24);
  assert_int_equal(req.regions[1].bytes, 40);

  enum { POISON = 0xCD };
  unsigned char *buf[2];
  for (int r = 0; r < 2; ++r) {
    assert_int_equal(posix_memalign((void **)&buf[r], 4096, 4096), 0);
  }
  const onyx_tensor *inputs[] = {&in};
  for (int shorted = 0; shorted < 2; ++shorted) {
    onyx_workspace_view views[2];
    for (int r = 0; r < 2; ++r) {
      memset(buf[r], POISON, 4096);
      views[r] = (onyx_workspace_view){req.regions[r].name, buf[r],
                                       req.regions[r].bytes - (r == shorted ? 1 : 0)};
    }
    fake_ctx f = {.ctx = {.struct_size = sizeof f.ctx,
                          .version = 1,
                          .alloc_output = fake_alloc,
                          .set_error = fake_set_error,
                          .workspace = views,
                          .workspace_count = 2}};
    f.ctx.core_data = &f;
    assert_int_equal(k->compute(ks, &f.ctx, inputs, 1), ONYX_STATUS_WORKSPACE_TOO_SMALL);
    print_message("refused: %s\n", f.err);
    assert_contains(f.err, names[shorted]);
    assert_int_equal(f.alloc_calls, 0);
    for (int r = 0; r < 2; ++r)
      for (int b = 0; b < 4096; ++b) assert_int_equal(buf[r][b], POISON);
  }
  /* The exact views: accepted (it then asks for its output). */
  onyx_workspace_view views[2] = {{req.regions[0].name, buf[0], req.regions[0].bytes},
                                  {req.regions[1].name, buf[1], req.regions[1].bytes}};
  fake_ctx f = {.ctx = {.struct_size = sizeof f.ctx,
                        .version = 1,
                        .alloc_output = fake_alloc,
                        .set_error = fake_set_error,
                        .workspace = views,
                        .workspace_count = 2}};
  f.ctx.core_data = &f;
  assert_int_equal(k->compute(ks, &f.ctx, inputs, 1), ONYX_STATUS_OUT_OF_MEMORY);
  assert_int_equal(f.alloc_calls, 1);
  k->destroy(ks);
  table->close(pstate);
  free(buf[0]);
  free(buf[1]);
}

/* ------------------------------------------------------------ unplanned */

static void unplanned_fallback(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("");
  onyx_session *s = session_of(rt, "ws_noinfer.onnx");
  input in;
  make_input(&in, 4);
  onyx_plan *p = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_plan(s, &in.t, 1, &p, &e), ONYX_STATUS_UNSUPPORTED);
  assert_contains(onyx_error_message(e), "planning node 'proj' (#1, ScratchNoInfer on wsmock): "
                                         "its kernel has no infer callback");
  onyx_error_free(e);
  assert_null(p);

  /* The run grants workspace node by node instead: one node's STEP block at a time. */
  watch w = {.rt = rt, .cancel_at = SIZE_MAX, .look_at = 2};
  onyx_run_options ro = {.struct_size = sizeof ro, .should_cancel = watch_cancel, .user = &w};
  float y[32];
  char msg[2048];
  assert_int_equal(run(s, &ro, &in, y, msg, sizeof msg), ONYX_STATUS_OK);
  for (int i = 0; i < 32; ++i) assert_float_equal(y[i], in.data[i] + 4.0f, 1e-6);
  assert_int_equal(w.step_used, 0); /* between nodes, no STEP block is held */
  assert_grant(w.json, 128, "node 0 wsmock/Scratch region kv_stage (session) [attn_0]");
  assert_grant(w.json, 1000, "node 1 wsmock/ScratchNoInfer region packed (session) [proj]");
  free(w.json);
  assert_int_equal(peak_of(rt, ONYX_REQUESTER_WORKSPACE_STEP), STEP_S4);
  assert_run_books_clear(rt);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), SESSION_S4);
  /* Views are laid out and aligned the same way (the kernel checks alignment). */
  const ws_mock_record *rec = record_of("proj");
  assert_int_equal((uintptr_t)rec->views[0].data % 4096, 0);
  assert_int_equal(rec->views[0].bytes, 256);

  /* Unplanned admission is per node: a cap below attn_0's block fails at node 0
   * before its kernel runs, and leaves nothing behind. */
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  rt = runtime_with("requester.workspace_step = 256");
  s = session_of(rt, "ws_noinfer.onnx");
  assert_int_equal(run(s, NULL, &in, NULL, msg, sizeof msg), ONYX_STATUS_TIER_EXHAUSTED);
  assert_contains(msg, "requested 384 bytes for workspace_step, limit 256");
  assert_contains(msg, "region q_bnsh (step unplanned) [attn_0]");
  assert_int_equal(mock_stats()->compute_calls, 0);
  assert_run_books_clear(rt);
  onyx_session_destroy(s);
  assert_int_equal(used_of(rt, ONYX_REQUESTER_WORKSPACE_SESSION), 0);
  onyx_runtime_destroy(rt);
}

int main(void) {
  srand(20240611);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plan_reports_regions_and_peaks),
      cmocka_unit_test(success_run_books),
      cmocka_unit_test(carving_follows_the_requirement),
      cmocka_unit_test(admission_refused_by_step_cap),
      cmocka_unit_test(admission_is_all_or_nothing),
      cmocka_unit_test(cancel_mid_graph),
      cmocka_unit_test(error_mid_graph),
      cmocka_unit_test(session_grows_with_geometry),
      cmocka_unit_test(short_view_is_refused_in_a_run),
      cmocka_unit_test(short_view_is_refused_directly),
      cmocka_unit_test(unplanned_fallback),
  };
  return cmocka_run_group_tests(tests, setup_mock, teardown_mock);
}
