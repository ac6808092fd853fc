/*
 * The memory governor's mapped zones on the CUDA provider's device virtual memory:
 *
 *   - growth in place, granule by granule: the base never moves, data written before
 *     a growth is intact after it, the governor's books equal the mapped bytes, and
 *     destroying the zone gives every byte back (governor and device);
 *   - rollback: a failure injected at every step (create, map, set access) of every
 *     granule of a 4-granule growth leaves the books exactly as they were, nothing
 *     new mapped, no device memory held, and the zone usable;
 *   - the KV cache on the device through the public API: in-place growth (0 bytes
 *     moved, views fixed) and growth by copy (bytes moved per the bucket formula,
 *     data preserved), booked as kv_cache.
 *
 * The zones here run over onyx__vmm_backend_create on the provider a runtime opened
 * from a temporary plugins.ini. Without a CUDA device every test prints
 * "skipped: no CUDA device" and skips.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "onyx.h"
#include "onyx_governor.h"
#include "provider_impl.h"
#include "test_util.h"
#include "zone_backends_impl.h"

#define MiB ((uint64_t)1 << 20)

#define assert_ok(expr) assert_int_equal(ONYX_STATUS_OK, (expr))
#define assert_cuda(expr) assert_int_equal(cudaSuccess, (expr))

/* ------------------------------------------------------------------ fixture */

typedef struct fixture {
  onyx_runtime *rt;
  onyx__provider *cuda; /* inside rt */
} fixture;

static fixture g_fx;

static int setup(void **state) {
  (void)state;
  memset(&g_fx, 0, sizeof g_fx);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return 0; /* every test prints its skip line */
  }
  char ini[2048];
  snprintf(ini, sizeof ini,
           "[onyx]\nstrict = true\n[provider.cuda]\npath = %s\noption.device = 0\n"
           "[provider.cpu]\npath = %s\n",
           ONYX_CUDA_SO, ONYX_CPU_SO);
  char *path = tu_write_temp(ini);
  if (path == NULL) return -1;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &g_fx.rt, &e);
  unlink(path);
  free(path);
  if (st != ONYX_STATUS_OK) {
    fprintf(stderr, "runtime: %s\n", e ? onyx_error_message(e) : onyx_status_str(st));
    onyx_error_free(e);
    return -1;
  }
  for (size_t i = 0; i < g_fx.rt->provider_count; ++i)
    if (!strcmp(g_fx.rt->providers[i].name, "cuda")) g_fx.cuda = &g_fx.rt->providers[i];
  if (g_fx.cuda == NULL) {
    fprintf(stderr, "runtime has no cuda provider\n");
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  onyx_runtime_destroy(g_fx.rt);
  memset(&g_fx, 0, sizeof g_fx);
  return 0;
}

static size_t device_free(void) {
  size_t free_b = 0, total = 0;
  assert_cuda(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

static void assert_balanced(onyx_gov *gov) {
  char msg[256];
  if (onyx_gov_audit(gov, msg, sizeof msg) != ONYX_STATUS_OK)
    fail_msg("governor books out of balance: %s", msg);
}

static onyx_gov_tier_usage tier_usage(onyx_gov *gov, onyx_gov_tier t) {
  onyx_gov_tier_usage u;
  assert_ok(onyx_gov_tier_usage_get(gov, t, &u));
  return u;
}

static onyx_gov_requester_usage req_usage(onyx_gov *gov, onyx_gov_tier t, onyx_requester r) {
  onyx_gov_requester_usage u;
  assert_ok(onyx_gov_requester_usage_get(gov, t, r, &u));
  return u;
}

static onyx_gov_zone_info zone_info(onyx_gov_zone *zone) {
  onyx_gov_zone_info info;
  onyx_gov_zone_info_get(zone, &info);
  return info;
}

static onyx_gov_counters counters(onyx_gov *gov) {
  onyx_gov_counters c;
  onyx_gov_counters_get(gov, &c);
  return c;
}

static onyx_gov_zone_desc zone_desc(onyx_gov_tier tier, onyx_requester requester,
                                    const onyx_gov_backend *backend, uint64_t max_bytes,
                                    uint64_t allowance, const char *label) {
  onyx_gov_zone_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = (uint32_t)sizeof d;
  d.version = 1;
  d.tier = tier;
  d.requester = (uint32_t)requester;
  d.backend = backend;
  d.max_bytes = max_bytes;
  d.allowance_bytes = allowance;
  d.label = label;
  return d;
}

/* A recognisable byte pattern for `bytes` from `seed`. */
static void pattern(uint8_t *out, size_t bytes, uint32_t seed) {
  uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
  for (size_t i = 0; i < bytes; ++i) out[i] = (uint8_t)tu_rand(&s);
}

/* Reads `bytes` at device address `at` and compares them with `want`. */
static void expect_device(const void *at, const uint8_t *want, size_t bytes, const char *what) {
  uint8_t *back = malloc(bytes);
  assert_non_null(back);
  memset(back, 0, bytes);
  assert_cuda(cudaMemcpy(back, at, bytes, cudaMemcpyDeviceToHost));
  if (memcmp(back, want, bytes) != 0) {
    free(back);
    fail_msg("%s: device bytes differ from what was written", what);
  }
  free(back);
}

/* ------------------------------------------------------------------ 1. growth */

static void zone_grows_in_place_on_vmm(void **state) {
  (void)state;
  if (!cuda_device_present("zone_grows_in_place_on_vmm")) {
    skip();
    return;
  }
  enum { GRANULES = 8 };
  onyx_gov_backend *vmm = onyx__vmm_backend_create(g_fx.cuda);
  assert_non_null(vmm);
  uint64_t g = 0;
  assert_ok(vmm->granularity(vmm->state, &g));
  print_message("VMM granularity %llu bytes\n", (unsigned long long)g);
  assert_true(g >= 4096 && (g & (g - 1)) == 0);

  onyx_gov *gov = NULL;
  assert_ok(onyx_gov_create(&gov));
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 64 * g, &t));
  size_t free0 = device_free();
  onyx_gov_zone_desc d =
      zone_desc(t, ONYX_REQUESTER_KV_CACHE, vmm, GRANULES * g, 0, "vmm growth test");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(gov, &d, &zone, NULL));
  onyx_gov_zone_info info = zone_info(zone);
  void *base = info.base;
  assert_non_null(base);
  assert_int_equal(info.mapped, 0);
  assert_int_equal(info.granularity, g);
  assert_int_equal(info.max_bytes, GRANULES * g);

  uint8_t *first = malloc(g), *fresh = malloc(g);
  assert_true(first && fresh);
  pattern(first, g, 1);
  for (uint64_t n = 1; n <= GRANULES; ++n) {
    assert_ok(onyx_gov_zone_grow(zone, n * g, "granule", NULL));
    info = zone_info(zone);
    assert_ptr_equal(info.base, base);
    assert_int_equal(info.mapped, n * g);
    onyx_gov_tier_usage u = tier_usage(gov, t);
    onyx_gov_requester_usage r = req_usage(gov, t, ONYX_REQUESTER_KV_CACHE);
    assert_int_equal(u.used, n * g);
    assert_int_equal(u.reserved, 0);
    assert_int_equal(u.pending, 0);
    assert_int_equal(u.unassigned, 64 * g - n * g);
    assert_int_equal(r.used, n * g);
    assert_int_equal(r.reserved, 0);
    assert_int_equal(r.pending, 0);
    assert_int_equal(counters(gov).growth_events, n);
    assert_balanced(gov);
    if (n == 1) {
      assert_cuda(cudaMemcpy(base, first, g, cudaMemcpyHostToDevice));
    } else {
      /* The new granule is mapped and accessible; the first keeps its bytes. */
      char *at = (char *)base + (n - 1) * g;
      pattern(fresh, g, (uint32_t)n);
      assert_cuda(cudaMemcpy(at, fresh, g, cudaMemcpyHostToDevice));
      expect_device(at, fresh, g, "new granule");
      expect_device(base, first, g, "first granule after growth");
    }
    size_t free_n = device_free();
    if ((uint64_t)(free0 - free_n) < n * g)
      fail_msg("device free memory fell by %zu bytes for %llu mapped", free0 - free_n,
               (unsigned long long)(n * g));
  }
  print_message("grew 1..%d granules in place at %p; free device memory %zu -> %zu\n", GRANULES,
                base, free0, device_free());
  /* Growing to what is mapped is a no-op; past max_bytes is refused by the zone. */
  assert_ok(onyx_gov_zone_grow(zone, GRANULES * g, NULL, NULL));
  onyx_gov_refusal refusal;
  assert_int_not_equal(ONYX_STATUS_OK,
                       onyx_gov_zone_grow(zone, (GRANULES + 1) * g, NULL, &refusal));
  assert_int_equal(tier_usage(gov, t).used, GRANULES * g);

  /* Trim back to two granules: the first still holds its data, the books follow. */
  assert_ok(onyx_gov_zone_trim(zone, 2 * g));
  assert_int_equal(zone_info(zone).mapped, 2 * g);
  assert_int_equal(tier_usage(gov, t).used, 2 * g);
  assert_int_equal(req_usage(gov, t, ONYX_REQUESTER_KV_CACHE).used, 2 * g);
  expect_device(base, first, g, "first granule after trim");
  assert_balanced(gov);

  assert_ok(onyx_gov_zone_destroy(zone));
  onyx_gov_tier_usage u = tier_usage(gov, t);
  assert_int_equal(u.used, 0);
  assert_int_equal(u.reserved, 0);
  assert_int_equal(u.pending, 0);
  assert_int_equal(req_usage(gov, t, ONYX_REQUESTER_KV_CACHE).used, 0);
  onyx_gov_counters k = counters(gov);
  assert_int_equal(k.bytes_mapped, k.bytes_unmapped);
  assert_int_equal(k.bytes_mapped, GRANULES * g);
  assert_balanced(gov);
  onyx_gov_destroy(gov);
  onyx__vmm_backend_destroy(vmm);
  size_t free1 = device_free();
  print_message("free device memory %zu before, %zu after destroy\n", free0, free1);
  assert_true(free1 + 2 * MiB >= free0);
  free(first);
  free(fresh);
}

/* ------------------------------------------------------------------ 2. rollback */

enum { OP_CREATE, OP_MAP, OP_SET_ACCESS, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"create", "map", "set_access"};

/* Delegates to the real VMM backend, failing the nth call of one operation on
 * request (before delegating, so the failed call did nothing), and counts what is
 * live so that leaks show without asking the driver. */
typedef struct flaky {
  onyx_gov_backend table;
  const onyx_gov_backend *real;
  uint32_t countdown[OP_COUNT]; /* 0: no failure pending */
  uint64_t failures;
  int64_t live_handles;
  int64_t mapped_bytes;
} flaky;

static bool flaky_fails(flaky *f, int op) {
  if (f->countdown[op] == 0 || --f->countdown[op] != 0) return false;
  f->failures++;
  return true;
}

static onyx_status fl_granularity(void *s, uint64_t *out) {
  const flaky *f = s;
  return f->real->granularity(f->real->state, out);
}
static onyx_status fl_reserve(void *s, uint64_t bytes, void **out) {
  const flaky *f = s;
  return f->real->reserve(f->real->state, bytes, out);
}
static void fl_unreserve(void *s, void *base, uint64_t bytes) {
  const flaky *f = s;
  f->real->unreserve(f->real->state, base, bytes);
}
static onyx_status fl_create(void *s, uint64_t bytes, void **out) {
  flaky *f = s;
  if (flaky_fails(f, OP_CREATE)) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = f->real->create(f->real->state, bytes, out);
  if (st == ONYX_STATUS_OK) f->live_handles++;
  return st;
}
static void fl_release(void *s, void *handle, uint64_t bytes) {
  flaky *f = s;
  f->live_handles--;
  f->real->release(f->real->state, handle, bytes);
}
static onyx_status fl_map(void *s, void *base, uint64_t off, uint64_t bytes, void *handle) {
  flaky *f = s;
  if (flaky_fails(f, OP_MAP)) return ONYX_STATUS_PROVIDER_ERROR;
  onyx_status st = f->real->map(f->real->state, base, off, bytes, handle);
  if (st == ONYX_STATUS_OK) f->mapped_bytes += (int64_t)bytes;
  return st;
}
static onyx_status fl_set_access(void *s, void *base, uint64_t off, uint64_t bytes) {
  flaky *f = s;
  if (flaky_fails(f, OP_SET_ACCESS)) return ONYX_STATUS_PROVIDER_ERROR;
  return f->real->set_access(f->real->state, base, off, bytes);
}
static void fl_unmap(void *s, void *base, uint64_t off, uint64_t bytes) {
  flaky *f = s;
  f->mapped_bytes -= (int64_t)bytes;
  f->real->unmap(f->real->state, base, off, bytes);
}
static onyx_status fl_sync(void *s) {
  const flaky *f = s;
  return f->real->sync ? f->real->sync(f->real->state) : ONYX_STATUS_OK;
}

static void flaky_init(flaky *f, const onyx_gov_backend *real) {
  memset(f, 0, sizeof *f);
  f->real = real;
  f->table = (onyx_gov_backend){.struct_size = sizeof(onyx_gov_backend),
                                .version = 1,
                                .name = "flaky-vmm",
                                .state = f,
                                .granularity = fl_granularity,
                                .reserve = fl_reserve,
                                .unreserve = fl_unreserve,
                                .create = fl_create,
                                .release = fl_release,
                                .map = fl_map,
                                .set_access = fl_set_access,
                                .unmap = fl_unmap,
                                .sync = fl_sync};
}

typedef struct books {
  onyx_gov_tier_usage tier;
  onyx_gov_requester_usage req;
  onyx_gov_zone_info zone;
  onyx_gov_counters k;
} books;

static books books_of(onyx_gov *gov, onyx_gov_tier t, onyx_gov_zone *zone) {
  books b;
  b.tier = tier_usage(gov, t);
  b.req = req_usage(gov, t, ONYX_REQUESTER_WORKSPACE_SESSION);
  b.zone = zone_info(zone);
  b.k = counters(gov);
  return b;
}

static void assert_same_books(const books *want, const books *got, const char *what) {
  if (want->tier.used != got->tier.used || want->tier.reserved != got->tier.reserved ||
      want->tier.pending != got->tier.pending || want->tier.unassigned != got->tier.unassigned ||
      want->req.used != got->req.used || want->req.reserved != got->req.reserved ||
      want->req.pending != got->req.pending || want->zone.base != got->zone.base ||
      want->zone.mapped != got->zone.mapped || want->zone.allowance != got->zone.allowance)
    fail_msg("%s: books changed: tier used %llu->%llu reserved %llu->%llu pending %llu->%llu; "
             "zone mapped %llu->%llu",
             what, (unsigned long long)want->tier.used, (unsigned long long)got->tier.used,
             (unsigned long long)want->tier.reserved, (unsigned long long)got->tier.reserved,
             (unsigned long long)want->tier.pending, (unsigned long long)got->tier.pending,
             (unsigned long long)want->zone.mapped, (unsigned long long)got->zone.mapped);
  /* What the failed growth claimed from the pool it gave back, all of it. */
  uint64_t claimed = got->k.unassigned_claimed - want->k.unassigned_claimed;
  uint64_t returned = got->k.unassigned_returned - want->k.unassigned_returned;
  if (claimed != returned)
    fail_msg("%s: claimed %llu from the pool, returned %llu", what, (unsigned long long)claimed,
             (unsigned long long)returned);
  assert_int_equal(got->k.growth_events, want->k.growth_events);
  assert_int_equal(got->k.bytes_mapped - want->k.bytes_mapped,
                   got->k.bytes_unmapped - want->k.bytes_unmapped);
}

/* Zone of 2 granules mapped (and 3 granules of weights booked on the tier); growth
 * to 6 granules is 4 granules, each with create, map and set access. */
static void failure_at_every_step_rolls_back(void **state) {
  (void)state;
  if (!cuda_device_present("failure_at_every_step_rolls_back")) {
    skip();
    return;
  }
  onyx_gov_backend *vmm = onyx__vmm_backend_create(g_fx.cuda);
  assert_non_null(vmm);
  uint64_t g = 0;
  assert_ok(vmm->granularity(vmm->state, &g));
  uint8_t *first = malloc(2 * g), *fresh = malloc(4 * g);
  assert_true(first && fresh);
  pattern(first, 2 * g, 7);
  size_t free_start = device_free();
  unsigned cases = 0;
  for (int op = 0; op < OP_COUNT; ++op) {
    for (uint32_t nth = 1; nth <= 4; ++nth) {
      for (int via_commit = 0; via_commit < 2; ++via_commit) {
        char what[96];
        snprintf(what, sizeof what, "%s of granule %u fails (%s)", op_names[op], nth,
                 via_commit ? "prepare + commit" : "grow");
        flaky f;
        flaky_init(&f, vmm);
        onyx_gov *gov = NULL;
        assert_ok(onyx_gov_create(&gov));
        onyx_gov_tier t;
        assert_ok(onyx_gov_tier_add(gov, "cuda:0", 32 * g, &t));
        onyx_gov_grant_id weights;
        assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 3 * g, "weights", &weights, NULL));
        onyx_gov_zone_desc d =
            zone_desc(t, ONYX_REQUESTER_WORKSPACE_SESSION, &f.table, 16 * g, g, "flaky arena");
        onyx_gov_zone *zone = NULL;
        assert_ok(onyx_gov_zone_create(gov, &d, &zone, NULL));
        assert_ok(onyx_gov_zone_grow(zone, 2 * g, NULL, NULL));
        void *base = zone_info(zone).base;
        assert_cuda(cudaMemcpy(base, first, 2 * g, cudaMemcpyHostToDevice));
        assert_cuda(cudaDeviceSynchronize());

        books before = books_of(gov, t, zone);
        size_t free_before = device_free();
        f.countdown[op] = nth;
        if (via_commit) {
          onyx_gov_grant_id plan;
          assert_ok(onyx_gov_zone_prepare(zone, 6 * g, NULL, &plan, NULL));
          books prepared = books_of(gov, t, zone);
          assert_int_equal(prepared.tier.pending + prepared.tier.reserved,
                           before.tier.pending + before.tier.reserved + 4 * g);
          if (onyx_gov_zone_commit(zone, plan, 6 * g, NULL) == ONYX_STATUS_OK)
            fail_msg("%s: commit succeeded", what);
          books failed = books_of(gov, t, zone);
          assert_int_equal(failed.zone.mapped, prepared.zone.mapped);
          assert_int_equal(failed.tier.pending, prepared.tier.pending);
          assert_int_equal(failed.tier.used, prepared.tier.used);
          assert_ok(onyx_gov_release(gov, plan));
        } else if (onyx_gov_zone_grow(zone, 6 * g, NULL, NULL) == ONYX_STATUS_OK) {
          fail_msg("%s: growth succeeded", what);
        }
        assert_int_equal(f.failures, 1);
        books after = books_of(gov, t, zone);
        assert_same_books(&before, &after, what);
        assert_balanced(gov);
        assert_int_equal(f.live_handles, 2);
        assert_int_equal(f.mapped_bytes, (int64_t)(2 * g));
        size_t free_after = device_free();
        if (free_after + g / 2 < free_before)
          fail_msg("%s: %zu bytes of device memory not returned", what, free_before - free_after);
        expect_device(base, first, 2 * g, what);

        /* The zone is still good for the same growth, in place. */
        assert_ok(onyx_gov_zone_grow(zone, 6 * g, NULL, NULL));
        assert_ptr_equal(zone_info(zone).base, base);
        assert_int_equal(zone_info(zone).mapped, 6 * g);
        assert_int_equal(tier_usage(gov, t).used, before.tier.used + 4 * g);
        assert_int_equal(f.live_handles, 6);
        pattern(fresh, 4 * g, nth);
        assert_cuda(cudaMemcpy((char *)base + 2 * g, fresh, 4 * g, cudaMemcpyHostToDevice));
        expect_device((char *)base + 2 * g, fresh, 4 * g, "regrown granules");
        expect_device(base, first, 2 * g, "first granules after regrowth");
        assert_balanced(gov);

        assert_ok(onyx_gov_zone_destroy(zone));
        assert_ok(onyx_gov_release(gov, weights));
        onyx_gov_tier_usage u = tier_usage(gov, t);
        assert_int_equal(u.used, 0);
        assert_int_equal(u.reserved, 0);
        assert_int_equal(u.pending, 0);
        assert_balanced(gov);
        onyx_gov_destroy(gov);
        assert_int_equal(f.live_handles, 0);
        assert_int_equal(f.mapped_bytes, 0);
        ++cases;
      }
    }
  }
  onyx__vmm_backend_destroy(vmm);
  size_t free_end = device_free();
  print_message("%u injected failures rolled back (granularity %llu); free device memory "
                "%zu -> %zu\n",
                cases, (unsigned long long)g, free_start, free_end);
  assert_true(free_end + 2 * MiB >= free_start);
  free(first);
  free(fresh);
}

/* ------------------------------------------------------------------ 3. KV cache */

static onyx_kv_cache *cuda_cache(uint32_t layout, uint32_t growth, int64_t head_size,
                                 int64_t max_length) {
  onyx_kv_cache_options o = {.struct_size = sizeof o,
                             .layers = 2,
                             .batch = 1,
                             .kv_heads = 2,
                             .head_size = head_size,
                             .dtype = ONYX_DTYPE_FLOAT32,
                             .layout = layout,
                             .max_length = max_length,
                             .growth = growth,
                             .provider = "cuda"};
  onyx_kv_cache *kv = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_kv_cache_create(g_fx.rt, &o, &kv, &e);
  if (st != ONYX_STATUS_OK) fail_msg("kv cache: %s", e ? onyx_error_message(e) : "?");
  return kv;
}

/* The live prefix of a view: `units` blocks (per head in BNSH, per batch row in
 * BSNH) of `tokens` rows each, `pitch` bytes apart. */
typedef struct kv_geom {
  size_t width; /* bytes of the live prefix of one unit */
  size_t pitch; /* bytes between units */
  size_t units;
} kv_geom;

static kv_geom geom_of(const onyx_tensor *view, uint32_t layout, int64_t tokens) {
  size_t es = onyx_dtype_size(view->dtype);
  size_t b = (size_t)view->dims[0], h = (size_t)view->dims[1], len = (size_t)view->dims[2],
         hs = (size_t)view->dims[3];
  size_t row = layout == 0 ? hs * es : h * hs * es;
  kv_geom g = {.width = (size_t)tokens * row, .pitch = len * row, .units = layout == 0 ? b * h : b};
  return g;
}

/* cudaMemcpy that names the failure. */
static void copy_or_fail(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
  if (e != cudaSuccess)
    fail_msg("cudaMemcpy of %zu bytes (%p <- %p): %s", bytes, dst, src, cudaGetErrorString(e));
}

/* Host image of the live prefix of tensor `which`: units × width bytes. */
static uint8_t *kv_image(kv_geom g, uint32_t which) {
  uint8_t *img = malloc(g.units * g.width);
  assert_non_null(img);
  pattern(img, g.units * g.width, 1000 + which);
  return img;
}

/* Writes the live prefix of every key and value tensor through the views. */
static void kv_fill(const onyx_kv_cache *kv, uint32_t layout, int64_t tokens) {
  for (uint32_t layer = 0; layer < 2; ++layer) {
    onyx_tensor k, v;
    assert_ok(onyx_kv_cache_views(kv, layer, &k, &v));
    const onyx_tensor *views[2] = {&k, &v};
    for (uint32_t i = 0; i < 2; ++i) {
      assert_int_equal(views[i]->device, ONYX_DEVICE_CUDA);
      kv_geom g = geom_of(views[i], layout, tokens);
      uint8_t *img = kv_image(g, 2 * layer + i);
      for (size_t u = 0; u < g.units; ++u)
        copy_or_fail((char *)views[i]->data + u * g.pitch, img + u * g.width, g.width,
                     cudaMemcpyHostToDevice);
      free(img);
    }
  }
  assert_cuda(cudaDeviceSynchronize());
}

static void kv_expect(const onyx_kv_cache *kv, uint32_t layout, int64_t tokens) {
  for (uint32_t layer = 0; layer < 2; ++layer) {
    onyx_tensor k, v;
    assert_ok(onyx_kv_cache_views(kv, layer, &k, &v));
    const onyx_tensor *views[2] = {&k, &v};
    for (uint32_t i = 0; i < 2; ++i) {
      kv_geom g = geom_of(views[i], layout, tokens);
      uint8_t *want = kv_image(g, 2 * layer + i);
      uint8_t *back = malloc(g.units * g.width);
      assert_non_null(back);
      memset(back, 0, g.units * g.width);
      for (size_t u = 0; u < g.units; ++u)
        copy_or_fail(back + u * g.width, (const char *)views[i]->data + u * g.pitch, g.width,
                     cudaMemcpyDeviceToHost);
      if (memcmp(back, want, g.units * g.width) != 0)
        fail_msg("layer %u %s: KV data not preserved (layout %u, %lld tokens)", layer,
                 i ? "value" : "key", layout, (long long)tokens);
      free(back);
      free(want);
    }
  }
}

static uint64_t kv_booked(void) {
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(g_fx.rt, used, NULL);
  return used[ONYX_REQUESTER_KV_CACHE];
}

static uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

static void kv_cache_grows_in_place_on_device(void **state) {
  (void)state;
  if (!cuda_device_present("kv_cache_grows_in_place_on_device")) {
    skip();
    return;
  }
  onyx_gov_backend *vmm = onyx__vmm_backend_create(g_fx.cuda);
  assert_non_null(vmm);
  uint64_t g = 0;
  assert_ok(vmm->granularity(vmm->state, &g));
  onyx__vmm_backend_destroy(vmm);
  for (uint32_t layout = 0; layout < 2; ++layout) {
    size_t free0 = device_free();
    assert_int_equal(kv_booked(), 0);
    /* head_size 128 float: 512-byte rows (BNSH) or 1 KiB rows (BSNH). */
    const int64_t hs = 128, max_length = 16384, small = 1000, large = 10000;
    onyx_kv_cache *kv = cuda_cache(layout, ONYX_KV_GROWTH_IN_PLACE, hs, max_length);
    const uint64_t row = (uint64_t)hs * 4 * (layout == 0 ? 1 : 2);
    const uint64_t zones = 4 /* 2 layers × key, value */ * (layout == 0 ? 2 : 1);
    assert_ok(onyx_kv_cache_reserve(kv, small, NULL));
    onyx_kv_cache_stats before, after;
    onyx_kv_cache_get_stats(kv, &before);
    assert_true(before.in_place);
    assert_int_equal(before.bytes_moved, 0);
    assert_int_equal(before.committed_bytes, round_up(small * row, g) * zones);
    assert_int_equal(kv_booked(), before.committed_bytes);
    onyx_tensor k0, v0, k1, v1;
    assert_ok(onyx_kv_cache_views(kv, 0, &k0, &v0));
    kv_fill(kv, layout, small);

    assert_ok(onyx_kv_cache_reserve(kv, large, NULL));
    onyx_kv_cache_get_stats(kv, &after);
    assert_ok(onyx_kv_cache_views(kv, 0, &k1, &v1));
    assert_true(after.in_place);
    assert_ptr_equal(k0.data, k1.data);
    assert_ptr_equal(v0.data, v1.data);
    assert_int_equal(k0.dims[2], k1.dims[2]); /* the stride L is fixed */
    assert_int_equal(after.bytes_moved, 0);
    assert_int_equal(after.growth_events, before.growth_events + 1);
    assert_true(after.capacity >= large);
    assert_int_equal(after.committed_bytes, round_up(large * row, g) * zones);
    assert_int_equal(kv_booked(), after.committed_bytes);
    assert_true(device_free() + after.committed_bytes <= free0 + 2 * MiB);
    kv_expect(kv, layout, small);
    /* The grown range is mapped and writable through the same views. */
    kv_fill(kv, layout, large);
    kv_expect(kv, layout, large);
    print_message("layout %s: in place, %lld -> %lld tokens, committed %llu -> %llu bytes, "
                  "base %p unchanged, 0 bytes moved\n",
                  layout ? "BSNH" : "BNSH", (long long)small, (long long)large,
                  (unsigned long long)before.committed_bytes,
                  (unsigned long long)after.committed_bytes, k0.data);
    onyx_kv_cache_destroy(kv);
    assert_int_equal(kv_booked(), 0);
    size_t free1 = device_free();
    print_message("free device memory %zu before, %zu after destroy\n", free0, free1);
    assert_true(free1 + 2 * MiB >= free0);
  }
}

static void kv_cache_grows_by_copy_on_device(void **state) {
  (void)state;
  if (!cuda_device_present("kv_cache_grows_by_copy_on_device")) {
    skip();
    return;
  }
  for (uint32_t layout = 0; layout < 2; ++layout) {
    size_t free0 = device_free();
    const uint64_t booked0 = kv_booked(); /* 0 unless an earlier test failed midway */
    onyx_kv_cache *kv = cuda_cache(layout, ONYX_KV_GROWTH_REALLOC, 32, 1000);
    assert_ok(onyx_kv_cache_reserve(kv, 50, NULL));
    onyx_kv_cache_stats s1, s2;
    onyx_kv_cache_get_stats(kv, &s1);
    assert_false(s1.in_place);
    assert_int_equal(s1.capacity, 64);
    assert_int_equal(s1.view_length, 64);
    assert_int_equal(s1.bytes_moved, 0); /* nothing to move from an empty cache */
    assert_int_equal(kv_booked() - booked0, s1.committed_bytes);
    kv_fill(kv, layout, 50);
    assert_ok(onyx_kv_cache_reserve(kv, 65, NULL));
    onyx_kv_cache_get_stats(kv, &s2);
    assert_int_equal(s2.capacity, 128);
    assert_int_equal(s2.view_length, 128);
    /* 4 tensors × (2 heads × 32 floats) × 64 tokens of the old bucket. */
    assert_int_equal(s2.bytes_moved, 4u * 2 * 32 * 4 * 64);
    assert_int_equal(s2.growth_events, s1.growth_events + 1);
    assert_int_equal(s2.committed_bytes, 4u * 2 * 32 * 4 * 128);
    assert_int_equal(kv_booked() - booked0, s2.committed_bytes);
    kv_expect(kv, layout, 50); /* views taken again: L is now 128 */
    print_message("layout %s: by copy, capacity 64 -> 128, %llu bytes moved, data intact\n",
                  layout ? "BSNH" : "BNSH", (unsigned long long)s2.bytes_moved);
    onyx_kv_cache_destroy(kv);
    assert_int_equal(kv_booked(), booked0);
    /* The buffers went back with cudaFreeAsync; the stream-ordered pool returns them
     * to the device at the provider's next synchronisation (cuda_memory.c). */
    assert_ok(onyx__dev_sync_raw(g_fx.cuda)); /* whichever contract the provider speaks */
    size_t free1 = device_free();
    print_message("free device memory %zu before, %zu after destroy and sync\n", free0, free1);
    assert_true(free1 + 2 * MiB >= free0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(zone_grows_in_place_on_vmm),
      cmocka_unit_test(failure_at_every_step_rolls_back),
      cmocka_unit_test(kv_cache_grows_in_place_on_device),
      cmocka_unit_test(kv_cache_grows_by_copy_on_device),
  };
  return cmocka_run_group_tests_name("governor on CUDA VMM", tests, setup, teardown);
}
