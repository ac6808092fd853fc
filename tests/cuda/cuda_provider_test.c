/*
 * The CUDA provider through its table alone, loaded with dlopen as the core loads it:
 * negotiation and table shape, options, probe (declining cleanly without a device),
 * device memory and copies, the VMM table round trip (reserve, create + map +
 * access per granule, write and read, unmap, regrow in place, release), and the graph
 * table (capture, replay against fresh inputs, an invalidated capture, a discard).
 *
 * The v3 factory (devices, one instance, its kernels and extensions) beside it.
 * The table and option tests run everywhere; the device tests print
 * "skipped: no CUDA device" and skip when cudaGetDeviceCount finds none.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "onyx_abi.h"
#include "test_util.h"

static void *g_lib;
static const onyx_provider_table *g_table;
static char g_log[4096];

static void host_log(void *host_data, uint32_t level, const char *message) {
  (void)host_data;
  size_t n = strlen(g_log);
  snprintf(g_log + n, sizeof g_log - n, "[%u] %s\n", level, message);
}

static const onyx_host_table g_host = {
    .struct_size = sizeof(onyx_host_table),
    .version = ONYX_ABI_VERSION,
    .host_data = NULL,
    .log = host_log,
    .num_threads = 1,
};

static int load_provider(void **state) {
  (void)state;
  g_lib = dlopen(ONYX_CUDA_SO, RTLD_NOW | RTLD_LOCAL);
  if (g_lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", ONYX_CUDA_SO, dlerror());
    return -1;
  }
  void *sym = dlsym(g_lib, ONYX_PROVIDER_ENTRY_SYMBOL);
  if (sym == NULL) return -1;
  onyx_provider_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  uint32_t abi = 0;
  if (entry(ONYX_ABI_VERSION, &abi, &g_table) != ONYX_STATUS_OK) return -1;
  return 0;
}

static int unload_provider(void **state) {
  (void)state;
  if (g_lib) dlclose(g_lib);
  return 0;
}

static void *open_with(const char *key, const char *value, onyx_status want) {
  onyx_option opt = {key, value};
  void *p = NULL;
  char err[512] = "";
  onyx_status st = g_table->open(&g_host, &opt, key ? 1 : 0, &p, err, sizeof err);
  if (st != want) print_message("open(%s = %s): %s: %s\n", key, value, onyx_status_str(st), err);
  assert_int_equal(st, want);
  if (st != ONYX_STATUS_OK) {
    assert_null(p);
    assert_true(err[0] != '\0');
    print_message("open(%s = %s) refused as expected: %s\n", key, value, err);
  }
  return p;
}

/* ------------------------------------------------------------------ everywhere */

static void negotiation_and_table(void **state) {
  (void)state;
  void *sym = dlsym(g_lib, ONYX_PROVIDER_ENTRY_SYMBOL);
  onyx_provider_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  uint32_t abi = 0;
  const onyx_provider_table *t = NULL;
  assert_int_equal(entry(0, &abi, &t), ONYX_STATUS_ABI_MISMATCH);
  assert_int_equal(abi, ONYX_ABI_VERSION);
  assert_int_equal(entry(ONYX_ABI_VERSION + 5, &abi, &t), ONYX_STATUS_OK);
  assert_int_equal(abi, ONYX_ABI_VERSION);
  /* Nothing but the entry point is exported. */
  assert_null(dlsym(g_lib, "onyx__cuda_device_alloc"));
  assert_null(dlsym(g_lib, "onyx__cuda_launch_binary"));

  assert_int_equal(t->struct_size, sizeof(onyx_provider_table));
  assert_string_equal(t->name, "cuda");
  assert_int_equal(t->device, ONYX_DEVICE_CUDA);
  assert_non_null(t->probe);
  assert_non_null(t->device_alloc);
  assert_non_null(t->device_free);
  assert_non_null(t->copy);
  assert_non_null(t->sync);
  assert_non_null(t->vmm);
  assert_non_null(t->memory_capacity);
  assert_non_null(t->stream);
  const onyx_vmm_table *v = t->vmm;
  assert_true(v->granularity && v->reserve && v->unreserve && v->create && v->release && v->map &&
              v->set_access && v->unmap);
  const onyx_graph_table *gt = t->graphs;
  assert_non_null(gt);
  assert_int_equal(gt->struct_size, sizeof(onyx_graph_table));
  assert_true(gt->begin && gt->end && gt->launch && gt->destroy);
  for (size_t i = 0; i < t->kernel_count; ++i) {
    const onyx_kernel_table *a = t->kernels[i];
    assert_non_null(a->domain);
    assert_non_null(a->compute);
    if (a->infer == NULL) fail_msg("%s has no infer callback", a->op_type);
    assert_true(a->since_opset >= 1);
    assert_true(a->until_opset == 0 || a->until_opset >= a->since_opset);
    assert_true(a->destroy != NULL || a->create == NULL);
    for (size_t j = i + 1; j < t->kernel_count; ++j) {
      const onyx_kernel_table *b = t->kernels[j];
      if (strcmp(a->domain, b->domain) != 0 || strcmp(a->op_type, b->op_type) != 0) continue;
      int64_t a_end = a->until_opset ? a->until_opset : INT64_MAX;
      int64_t b_end = b->until_opset ? b->until_opset : INT64_MAX;
      if (a->since_opset <= b_end && b->since_opset <= a_end)
        fail_msg("%s::%s: overlapping opset ranges", a->domain, a->op_type);
    }
  }
  print_message("%zu kernel tables\n", t->kernel_count);
}

static void options_are_checked(void **state) {
  (void)state;
  open_with("device", "abc", ONYX_STATUS_INVALID_CONFIG);
  open_with("device", "-1", ONYX_STATUS_INVALID_CONFIG);
  open_with("allow_tf32", "maybe", ONYX_STATUS_INVALID_CONFIG);
  g_log[0] = '\0';
  void *p = open_with("colour", "blue", ONYX_STATUS_OK);
  assert_non_null(strstr(g_log, "ignoring unknown option 'colour'"));
  g_table->close(p);
  g_table->close(NULL);
}

/* Without a device the provider opens, and probe declines with one informative line. */
static void probe_declines_or_accepts(void **state) {
  (void)state;
  void *p = open_with("device", "0", ONYX_STATUS_OK);
  char why[256] = "";
  bool ok = g_table->probe(p, why, sizeof why);
  int count = 0;
  bool have = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  if (!have) {
    print_message("probe declined: %s\n", why);
    assert_false(ok);
    assert_non_null(strstr(why, "no CUDA device (cudaGetDeviceCount: "));
    assert_null(strchr(why, '\n'));
    uint64_t cap = 0;
    void *ptr = NULL;
    assert_int_equal(g_table->memory_capacity(p, &cap), ONYX_STATUS_DEVICE_UNAVAILABLE);
    assert_int_equal(g_table->device_alloc(p, 64, &ptr), ONYX_STATUS_DEVICE_UNAVAILABLE);
    assert_null(g_table->stream(p));
    uint64_t gran = 0;
    assert_int_not_equal(g_table->vmm->granularity(p, &gran), ONYX_STATUS_OK);
    g_table->close(p);
    printf("skipped: no CUDA device (device half of probe_declines_or_accepts)\n");
    return;
  }
  assert_true(ok);
  g_table->close(p);
  /* An ordinal past the last device declines and says how many there are. */
  char ordinal[16];
  snprintf(ordinal, sizeof ordinal, "%d", count);
  p = open_with("device", ordinal, ONYX_STATUS_OK);
  assert_false(g_table->probe(p, why, sizeof why));
  print_message("probe declined: %s\n", why);
  assert_non_null(strstr(why, "option device ="));
  g_table->close(p);
}

/* ------------------------------------------------------------------ ABI v3 */

static char g_sink_msg[512];

static void sink_set_error(onyx_sink *sink, const char *fmt, ...) {
  (void)sink;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_sink_msg, sizeof g_sink_msg, fmt, ap);
  va_end(ap);
}

static onyx_sink g_sink = {sizeof(onyx_sink), ONYX_ABI_V3, NULL, sink_set_error};

static size_t g_registered, g_definitions;

/* The attention kernels register as v3 definitions (their infer and workspace speak
 * through the sink), each in its v2 table's place; the rest as v2 tables. */
static onyx_status reg_add(onyx_kernel_registry *reg, const onyx_kernel_def *def) {
  (void)reg;
  assert_int_equal(def->struct_size, sizeof(onyx_kernel_def));
  assert_non_null(def->compute);
  assert_non_null(def->op_type);
  ++g_registered;
  ++g_definitions;
  return ONYX_STATUS_OK;
}

static onyx_status reg_add_table(onyx_kernel_registry *reg, const onyx_kernel_table *table) {
  (void)reg;
  assert_non_null(table->compute);
  ++g_registered;
  return ONYX_STATUS_OK;
}

/* The v3 factory beside the v2 table: devices are the visible GPUs, one instance each,
 * every v2 kernel table registered per instance, VMM and graphs as extensions. */
static void factory_devices_and_instances(void **state) {
  (void)state;
  void *sym = dlsym(g_lib, ONYX_PROVIDER_FACTORY_SYMBOL);
  assert_non_null(sym);
  onyx_provider_factory_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  uint32_t abi = 0;
  const onyx_provider_factory *f = NULL;
  assert_int_equal(entry(ONYX_ABI_VERSION, &abi, &f), ONYX_STATUS_ABI_MISMATCH);
  assert_int_equal(abi, ONYX_ABI_V3);
  assert_int_equal(entry(ONYX_ABI_LATEST, &abi, &f), ONYX_STATUS_OK);
  assert_int_equal(f->struct_size, sizeof(onyx_provider_factory));
  assert_string_equal(f->name, "cuda");
  const onyx_instance_table *it = f->instance;
  assert_true(it->close && it->kernels && it->device_alloc && it->device_free && it->copy &&
              it->sync && it->stream && it->memory_capacity && it->get_extension);
  assert_ptr_equal(it->get_extension(NULL, ONYX_EXT_VMM), g_table->vmm);
  assert_ptr_equal(it->get_extension(NULL, ONYX_EXT_GRAPHS), g_table->graphs);
  assert_null(it->get_extension(NULL, "onyx.nothing"));

  onyx_option bad = {"device", "abc"};
  uint32_t count = 0;
  g_sink_msg[0] = '\0';
  assert_int_equal(f->device_count(&bad, 1, &count, &g_sink), ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(g_sink_msg, "option device = 'abc'"));
  int visible = 0;
  bool have = cudaGetDeviceCount(&visible) == cudaSuccess && visible > 0;
  (void)cudaGetLastError();
  g_sink_msg[0] = '\0';
  onyx_status st = f->device_count(NULL, 0, &count, &g_sink);
  if (!have) {
    print_message("device_count declined: %s\n", g_sink_msg);
    assert_int_equal(st, ONYX_STATUS_DEVICE_UNAVAILABLE);
    assert_non_null(strstr(g_sink_msg, "no CUDA device (cudaGetDeviceCount: "));
    printf("skipped: no CUDA device (device half of factory_devices_and_instances)\n");
    return;
  }
  assert_int_equal(st, ONYX_STATUS_OK);
  assert_int_equal(count, (uint32_t)visible);
  /* option.device past the last GPU declines, saying how many there are. */
  char past[16];
  snprintf(past, sizeof past, "%d", visible);
  onyx_option beyond = {"device", past};
  assert_int_equal(f->device_count(&beyond, 1, &count, &g_sink), ONYX_STATUS_DEVICE_UNAVAILABLE);
  assert_non_null(strstr(g_sink_msg, "option device ="));
  assert_int_equal(f->device_count(NULL, 0, &count, &g_sink), ONYX_STATUS_OK);
  for (uint32_t i = 0; i < count; ++i) {
    onyx_device_info info = {.struct_size = sizeof info, .version = ONYX_ABI_LATEST};
    assert_int_equal(f->device_info(i, &info, &g_sink), ONYX_STATUS_OK);
    struct cudaDeviceProp prop;
    assert_int_equal(cudaGetDeviceProperties(&prop, (int)i), cudaSuccess);
    print_message("device %u: %s, sm_%u%u, %llu bytes, caps 0x%llx\n", i, info.name,
                  info.capability_major, info.capability_minor,
                  (unsigned long long)info.memory_bytes, (unsigned long long)info.caps);
    assert_string_equal(info.name, prop.name);
    assert_int_equal(info.kind, ONYX_DEVICE_CUDA);
    assert_int_equal(info.ordinal, (int32_t)i);
    assert_int_equal(info.memory_bytes, (uint64_t)prop.totalGlobalMem);
    assert_int_equal(info.capability_major, (uint32_t)prop.major);
    assert_true(info.caps & ONYX_DEVICE_CAP_GRAPHS);
    assert_true(count > 1 || !(info.caps & ONYX_DEVICE_CAP_PEER_COPY));
  }
  onyx_device_info none = {.struct_size = sizeof none, .version = ONYX_ABI_LATEST};
  assert_int_equal(f->device_info(count, &none, &g_sink), ONYX_STATUS_NOT_FOUND);
  /* One instance on the last GPU: its stream, capacity and kernels are its own. */
  void *inst = NULL;
  assert_int_equal(f->open(&g_host, count - 1, NULL, 0, &inst, &g_sink), ONYX_STATUS_OK);
  assert_non_null(inst);
  assert_non_null(it->stream(inst));
  uint64_t cap = 0;
  assert_int_equal(it->memory_capacity(inst, &cap, &g_sink), ONYX_STATUS_OK);
  assert_true(cap > 0);
  onyx_kernel_registry reg = {sizeof reg, ONYX_ABI_V3, NULL, reg_add, reg_add_table};
  g_registered = g_definitions = 0;
  assert_int_equal(it->kernels(inst, &reg, &g_sink), ONYX_STATUS_OK);
  assert_int_equal(g_registered, g_table->kernel_count);
  assert_true(g_definitions >= 2); /* GroupQueryAttention and Attention at least */
  assert_int_equal(it->sync(inst, &g_sink), ONYX_STATUS_OK);
  it->close(inst);
  /* option.device opens that one GPU as device 0. */
  onyx_option only = {"device", "0"};
  assert_int_equal(f->device_count(&only, 1, &count, &g_sink), ONYX_STATUS_OK);
  assert_int_equal(count, 1);
  inst = NULL;
  assert_int_equal(f->open(&g_host, 1, &only, 1, &inst, &g_sink), ONYX_STATUS_NOT_FOUND);
  assert_null(inst);
  it->close(NULL);
}

/* ------------------------------------------------------------------ device */

static void memory_and_copies(void **state) {
  (void)state;
  if (!cuda_device_present("memory_and_copies")) {
    skip();
    return;
  }
  void *p = open_with(NULL, NULL, ONYX_STATUS_OK);
  assert_true(g_table->probe(p, NULL, 0));
  uint64_t cap = 0;
  assert_int_equal(g_table->memory_capacity(p, &cap), ONYX_STATUS_OK);
  size_t free_b = 0, total_b = 0;
  assert_int_equal(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  assert_int_equal(cap, total_b);
  assert_non_null(g_table->stream(p));

  enum { N = 1 << 20 };
  uint64_t seed = 12345;
  int64_t dims[1] = {N};
  onyx_tensor host = tu_random_tensor(&seed, ONYX_DTYPE_FLOAT32, 1, dims, -1.0f, 1.0f);
  float *back = malloc(N * sizeof(float));
  assert_non_null(back);
  memset(back, 0xff, N * sizeof(float)); /* poisoned */
  void *d0 = NULL, *d1 = NULL;
  assert_int_equal(g_table->device_alloc(p, N * sizeof(float), &d0), ONYX_STATUS_OK);
  assert_int_equal(g_table->device_alloc(p, N * sizeof(float), &d1), ONYX_STATUS_OK);
  assert_int_equal((uintptr_t)d0 % 256, 0);
  onyx_tensor dev0 = host, dev1 = host, out = host;
  dev0.device = dev1.device = ONYX_DEVICE_CUDA;
  dev0.data = d0;
  dev1.data = d1;
  out.data = back;
  assert_int_equal(g_table->copy(p, &dev0, &host), ONYX_STATUS_OK); /* H2D */
  assert_int_equal(g_table->copy(p, &dev1, &dev0), ONYX_STATUS_OK); /* D2D */
  assert_int_equal(g_table->copy(p, &out, &dev1), ONYX_STATUS_OK);  /* D2H */
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);
  assert_memory_equal(back, host.data, N * sizeof(float));
  /* Mismatched geometry is refused before anything moves. */
  dev1.dims[0] = N / 2;
  assert_int_equal(g_table->copy(p, &dev1, &dev0), ONYX_STATUS_INVALID_ARGUMENT);
  g_table->device_free(p, d0);
  g_table->device_free(p, d1);
  g_table->device_free(p, NULL);
  /* An impossible allocation fails cleanly and leaves nothing sticky behind. */
  void *huge = NULL;
  assert_int_equal(g_table->device_alloc(p, (uint64_t)1 << 50, &huge), ONYX_STATUS_OUT_OF_MEMORY);
  assert_null(huge);
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);
  free(back);
  free(host.data);
  g_table->close(p);
}

static void vmm_round_trip(void **state) {
  (void)state;
  if (!cuda_device_present("vmm_round_trip")) {
    skip();
    return;
  }
  void *p = open_with(NULL, NULL, ONYX_STATUS_OK);
  const onyx_vmm_table *v = g_table->vmm;
  uint64_t g = 0;
  assert_int_equal(v->granularity(p, &g), ONYX_STATUS_OK);
  print_message("VMM granularity %llu bytes\n", (unsigned long long)g);
  assert_true(g >= 4096 && (g & (g - 1)) == 0);

  enum { GRANULES = 3 };
  void *base = NULL;
  assert_int_equal(v->reserve(p, (GRANULES + 1) * g, &base), ONYX_STATUS_OK);
  assert_non_null(base);
  size_t free_before = 0, free_after = 0, total = 0;
  assert_int_equal(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  void *blocks[GRANULES];
  for (int i = 0; i < GRANULES; ++i) {
    assert_int_equal(v->create(p, g, &blocks[i]), ONYX_STATUS_OK);
    assert_non_null(blocks[i]);
    assert_int_equal(v->map(p, base, (uint64_t)i * g, g, blocks[i]), ONYX_STATUS_OK);
  }
  assert_int_equal(v->set_access(p, base, 0, GRANULES * g), ONYX_STATUS_OK);
  assert_int_equal(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  print_message("free device memory %zu -> %zu after mapping %d granules\n", free_before,
                free_after, GRANULES);
  assert_true(free_before - free_after >= GRANULES * g);

  /* Write across the granule boundaries through cudaMemcpy and a memset kernel, read
   * back, and move a range inside the zone with the provider's own copy. */
  size_t bytes = GRANULES * (size_t)g;
  uint8_t *host = malloc(bytes), *back = malloc(bytes);
  assert_true(host && back);
  uint64_t seed = 99;
  for (size_t i = 0; i < bytes; ++i) host[i] = (uint8_t)tu_rand(&seed);
  assert_int_equal(cudaMemcpy(base, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  assert_int_equal(cudaMemset((char *)base + g - 100, 0x5a, 200), cudaSuccess);
  memset(host + g - 100, 0x5a, 200);
  onyx_tensor src = {.dtype = ONYX_DTYPE_UINT8,
                     .device = ONYX_DEVICE_CUDA,
                     .rank = 1,
                     .dims = {(int64_t)g / 2},
                     .data = base};
  onyx_tensor dst = src;
  dst.data = (char *)base + 2 * g + g / 4;
  assert_int_equal(g_table->copy(p, &dst, &src), ONYX_STATUS_OK);
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);
  memmove(host + 2 * g + g / 4, host, g / 2);
  memset(back, 0, bytes);
  assert_int_equal(cudaMemcpy(back, base, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_memory_equal(back, host, bytes);

  /* Return the middle granule and grow back in place with a fresh block: the base
   * address stays, the neighbours keep their bytes. */
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK); /* the governor syncs before unmap */
  v->unmap(p, base, g, g);
  v->release(p, blocks[1], g);
  assert_int_equal(v->create(p, g, &blocks[1]), ONYX_STATUS_OK);
  assert_int_equal(v->map(p, base, g, g, blocks[1]), ONYX_STATUS_OK);
  assert_int_equal(cudaMemset((char *)base + g, 0x33, g), cudaSuccess);
  memset(host + g, 0x33, g);
  assert_int_equal(cudaMemcpy(back, base, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_memory_equal(back, host, bytes);
  /* A fourth granule extends the zone past its old end. */
  void *extra = NULL;
  assert_int_equal(v->create(p, g, &extra), ONYX_STATUS_OK);
  assert_int_equal(v->map(p, base, GRANULES * g, g, extra), ONYX_STATUS_OK);
  assert_int_equal(cudaMemset((char *)base + GRANULES * g, 0x11, g), cudaSuccess);
  assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);

  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);
  for (int i = 0; i < GRANULES; ++i) {
    v->unmap(p, base, (uint64_t)i * g, g);
    v->release(p, blocks[i], g);
  }
  v->unmap(p, base, GRANULES * g, g);
  v->release(p, extra, g);
  v->unreserve(p, base, (GRANULES + 1) * g);
  size_t free_end = 0;
  assert_int_equal(cudaMemGetInfo(&free_end, &total), cudaSuccess);
  print_message("free device memory back to %zu (was %zu)\n", free_end, free_before);
  assert_true(free_end + g / 2 >= free_before);
  /* Mapping into nothing fails cleanly. */
  assert_int_not_equal(v->map(p, NULL, 0, g, extra), ONYX_STATUS_OK);
  free(host);
  free(back);
  g_table->close(p);
}

/* Fills n floats from the seed, copies them to `dev` through the provider, and keeps
 * them in `host` for the comparison. */
static void fill_device(void *p, uint64_t *seed, float *host, onyx_tensor *dev, size_t n) {
  for (size_t i = 0; i < n; ++i) host[i] = tu_uniform(seed, -4.0f, 4.0f);
  onyx_tensor src = *dev;
  src.device = ONYX_DEVICE_HOST;
  src.data = host;
  assert_int_equal(g_table->copy(p, dev, &src), ONYX_STATUS_OK);
}

/* Reads `dev` back into `back` and waits for it. `back` is poisoned first with a
 * pattern (0x3c) other than the device buffers' poison (0xff), so a copy that did not
 * happen cannot pass for a buffer that kept its poison. */
static void read_device(void *p, const onyx_tensor *dev, float *back, size_t n) {
  memset(back, 0x3c, n * sizeof(float));
  onyx_tensor dst = *dev;
  dst.device = ONYX_DEVICE_HOST;
  dst.data = back;
  assert_int_equal(g_table->copy(p, &dst, dev), ONYX_STATUS_OK);
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);
}

static void graph_capture_and_replay(void **state) {
  (void)state;
  if (!cuda_device_present("graph_capture_and_replay")) {
    skip();
    return;
  }
  void *p = open_with(NULL, NULL, ONYX_STATUS_OK);
  const onyx_graph_table *gt = g_table->graphs;
  cudaStream_t stream = (cudaStream_t)g_table->stream(p);
  assert_non_null(stream);

  enum { N = 1 << 16 };
  const size_t bytes = N * sizeof(float);
  uint64_t seed = 4242;
  float *host = malloc(bytes), *back = malloc(bytes), *poison = malloc(bytes);
  assert_true(host && back && poison);
  memset(poison, 0xff, bytes);
  void *d_src = NULL, *d_dst = NULL, *d_set = NULL;
  assert_int_equal(g_table->device_alloc(p, bytes, &d_src), ONYX_STATUS_OK);
  assert_int_equal(g_table->device_alloc(p, bytes, &d_dst), ONYX_STATUS_OK);
  assert_int_equal(g_table->device_alloc(p, bytes, &d_set), ONYX_STATUS_OK);
  onyx_tensor src = {.dtype = ONYX_DTYPE_FLOAT32,
                     .device = ONYX_DEVICE_CUDA,
                     .rank = 1,
                     .dims = {N},
                     .data = d_src};
  onyx_tensor dst = src, set = src;
  dst.data = d_dst;
  set.data = d_set;
  fill_device(p, &seed, host, &src, N);
  assert_int_equal(cudaMemsetAsync(d_dst, 0xff, bytes, stream), cudaSuccess);
  assert_int_equal(cudaMemsetAsync(d_set, 0xff, bytes, stream), cudaSuccess);
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);

  /* Record a device-to-device copy (through the provider) and a memset (on its
   * stream). Recorded work does not run: dst keeps its poison until a launch. */
  assert_int_equal(gt->begin(p), ONYX_STATUS_OK);
  assert_int_equal(g_table->copy(p, &dst, &src), ONYX_STATUS_OK);
  assert_int_equal(cudaMemsetAsync(d_set, 0x5a, bytes, stream), cudaSuccess);
  void *graph = NULL;
  assert_int_equal(gt->end(p, true, &graph), ONYX_STATUS_OK);
  assert_non_null(graph);
  assert_int_equal(cudaGetLastError(), cudaSuccess);
  read_device(p, &dst, back, N);
  assert_memory_equal(back, poison, bytes);

  /* Two replays, each against fresh source contents. */
  for (int round = 0; round < 2; ++round) {
    if (round > 0) {
      fill_device(p, &seed, host, &src, N);
      assert_int_equal(cudaMemsetAsync(d_dst, 0xff, bytes, stream), cudaSuccess);
      assert_int_equal(cudaMemsetAsync(d_set, 0xff, bytes, stream), cudaSuccess);
    }
    assert_int_equal(gt->launch(p, graph), ONYX_STATUS_OK);
    read_device(p, &dst, back, N);
    assert_memory_equal(back, host, bytes);
    read_device(p, &set, back, N);
    for (size_t i = 0; i < bytes; ++i)
      if (((const unsigned char *)back)[i] != 0x5a)
        fail_msg("round %d: byte %zu of the memset destination is 0x%02x, expected 0x5a", round, i,
                 ((const unsigned char *)back)[i]);
  }
  assert_int_equal(gt->launch(p, NULL), ONYX_STATUS_INVALID_ARGUMENT);
  gt->destroy(p, graph);
  gt->destroy(p, NULL);

  /* A synchronisation while capturing is not capturable: the capture is invalidated,
   * end says so (and writes no graph), the thread's last error is cleared, and the
   * stream works again afterwards. */
  g_log[0] = '\0';
  assert_int_equal(gt->begin(p), ONYX_STATUS_OK);
  assert_int_equal(g_table->copy(p, &dst, &src), ONYX_STATUS_OK);
  cudaError_t se = cudaStreamSynchronize(stream);
  print_message("cudaStreamSynchronize while capturing: %s\n", cudaGetErrorName(se));
  assert_int_not_equal(se, cudaSuccess);
  void *sentinel = (void *)&sentinel;
  graph = sentinel;
  onyx_status st = gt->end(p, true, &graph);
  print_message("end after an invalidated capture: %s; log: %s", onyx_status_str(st), g_log);
  assert_int_equal(st, ONYX_STATUS_PROVIDER_ERROR);
  assert_ptr_equal(graph, sentinel);
  assert_non_null(strstr(g_log, "cuda: "));
  assert_int_equal(cudaGetLastError(), cudaSuccess);
  fill_device(p, &seed, host, &src, N);
  assert_int_equal(g_table->copy(p, &dst, &src), ONYX_STATUS_OK);
  read_device(p, &dst, back, N);
  assert_memory_equal(back, host, bytes);

  /* end(keep = false) discards: the recorded copy never runs. */
  assert_int_equal(cudaMemsetAsync(d_dst, 0xff, bytes, stream), cudaSuccess);
  fill_device(p, &seed, host, &src, N);
  assert_int_equal(gt->begin(p), ONYX_STATUS_OK);
  assert_int_equal(g_table->copy(p, &dst, &src), ONYX_STATUS_OK);
  graph = sentinel;
  assert_int_equal(gt->end(p, false, &graph), ONYX_STATUS_OK);
  assert_null(graph);
  read_device(p, &dst, back, N);
  assert_memory_equal(back, poison, bytes);

  /* end without begin fails cleanly, and leaves nothing behind. */
  g_log[0] = '\0';
  graph = sentinel;
  assert_int_not_equal(gt->end(p, true, &graph), ONYX_STATUS_OK);
  assert_ptr_equal(graph, sentinel);
  print_message("end without begin: %s", g_log);
  assert_int_equal(cudaGetLastError(), cudaSuccess);
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);

  g_table->device_free(p, d_src);
  g_table->device_free(p, d_dst);
  g_table->device_free(p, d_set);
  assert_int_equal(g_table->sync(p), ONYX_STATUS_OK);
  free(host);
  free(back);
  free(poison);
  g_table->close(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(negotiation_and_table),     cmocka_unit_test(options_are_checked),
      cmocka_unit_test(probe_declines_or_accepts), cmocka_unit_test(factory_devices_and_instances),
      cmocka_unit_test(memory_and_copies),         cmocka_unit_test(vmm_round_trip),
      cmocka_unit_test(graph_capture_and_replay),
  };
  return cmocka_run_group_tests(tests, load_provider, unload_provider);
}
