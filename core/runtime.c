/* onyx_runtime: a plugins.ini turned into opened providers, a thread pool and memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "memory_impl.h"
#include "provider_impl.h"
#include "thread_pool_impl.h"

static void warn_sink(const char *message) { onyx__log(ONYX_LOG_WARN, "%s", message); }

void onyx_runtime_destroy(onyx_runtime *rt) {
  if (rt == NULL) return;
  /* Close providers first (they may return memory through the host table), then
   * drop the memory books, and unload the libraries last. */
  for (size_t i = rt->provider_count; i-- > 0;) onyx__provider_close(&rt->providers[i]);
  onyx__memory_destroy(rt->memory);
  for (size_t i = rt->provider_count; i-- > 0;) onyx__provider_unload(&rt->providers[i]);
  free(rt->providers);
  onyx__kernel_index_free(rt->index);
  onyx__thread_pool_destroy(rt->pool);
  onyx__config_free(rt->config);
  free(rt);
}

/* Loads the enabled providers: every non-fallback one in file order, then the
 * fallback, so that placement can simply walk the array — one entry per opened
 * instance (a v3 provider opens one per device). Entries never move: each instance's
 * host table points at its own. */
static onyx_status load_providers(onyx_runtime *rt, char *err, size_t err_cap) {
  onyx__config *c = rt->config;
  size_t cap = (c->provider_count ? c->provider_count : 1) * ONYX__MAX_DEVICES;
  rt->providers = calloc(cap, sizeof *rt->providers);
  if (rt->providers == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < c->provider_count; ++i) {
      onyx__provider_config *pc = &c->providers[i];
      bool is_fallback = c->fallback && !strcmp(pc->name, c->fallback);
      if (!pc->enabled || is_fallback != (pass == 1)) continue;
      onyx__provider *slot = &rt->providers[rt->provider_count];
      size_t opened = 0;
      /* Messages name config->path and the section's line: for a drop-in, its own file. */
      onyx__config where = *c;
      where.path = pc->file ? pc->file : c->path;
      onyx_status st =
          onyx__provider_load(rt, &where, pc, slot, ONYX__MAX_DEVICES, &opened, err, err_cap);
      /* A declined device, or a drop-in that does not load (unless strict): carry on
       * without it, and say why (onyx_runtime_found). */
      if (st != ONYX_STATUS_OK && onyx__config_may_skip(c, pc, st)) {
        onyx__log(st == ONYX_STATUS_DEVICE_UNAVAILABLE ? ONYX_LOG_INFO : ONYX_LOG_WARN,
                  "%s; placing its nodes elsewhere", err);
        onyx__config_note_skip(pc, st, err);
        err[0] = '\0';
        continue;
      }
      if (st != ONYX_STATUS_OK) return st;
      rt->provider_count += opened;
      err[0] = '\0';
    }
  }
  if (rt->provider_count == 0) {
    onyx__errf(err, err_cap, "%s: no enabled provider could be loaded", c->path);
    return ONYX_STATUS_INVALID_CONFIG;
  }
  return onyx__kernel_index_build(rt);
}

onyx_status onyx_runtime_create(const char *config_path, onyx_runtime **out_runtime,
                                onyx_error **out_error) {
  if (config_path == NULL || out_runtime == NULL)
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                           "onyx_runtime_create: config_path and out_runtime are required");
  char err[ONYX_ERR_CAP] = "";
  onyx_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
  onyx_status st = onyx__config_load(config_path, warn_sink, &rt->config, err, sizeof err);
  if (st == ONYX_STATUS_OK) {
    rt->pool = onyx__thread_pool_create(rt->config->threads);
    if (rt->pool == NULL) st = ONYX_STATUS_OUT_OF_MEMORY;
  }
  if (st == ONYX_STATUS_OK) st = onyx__memory_create(rt->config, &rt->memory, err, sizeof err);
  if (st == ONYX_STATUS_OK) st = load_providers(rt, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    onyx_runtime_destroy(rt);
    return onyx__error_set(out_error, st, err[0] ? err : NULL);
  }
  *out_runtime = rt;
  return ONYX_STATUS_OK;
}

size_t onyx_runtime_provider_count(const onyx_runtime *rt) { return rt ? rt->provider_count : 0; }

const char *onyx_runtime_provider_name(const onyx_runtime *rt, size_t i) {
  return rt && i < rt->provider_count ? rt->providers[i].name : NULL;
}

size_t onyx_runtime_kernel_count(const onyx_runtime *rt, size_t p) {
  return rt && p < rt->provider_count ? rt->providers[p].kernel_count : 0;
}

const onyx_kernel_table *onyx_runtime_kernel(const onyx_runtime *rt, size_t p, size_t i) {
  if (rt == NULL || p >= rt->provider_count || i >= rt->providers[p].kernel_count) return NULL;
  return rt->providers[p].kernels[i].v2; /* NULL for a v3 definition */
}

const onyx_kernel_def *onyx_runtime_kernel_def(const onyx_runtime *rt, size_t p, size_t i) {
  if (rt == NULL || p >= rt->provider_count || i >= rt->providers[p].kernel_count) return NULL;
  return rt->providers[p].kernels[i].v3;
}

const char *onyx_runtime_provider_device(const onyx_runtime *rt, size_t i) {
  return rt && i < rt->provider_count ? rt->providers[i].tier : NULL;
}

void onyx_runtime_write_memory_json(const onyx_runtime *rt, void *stream) {
  if (rt && stream) {
    onyx__memory_write_json(rt->memory, stream);
    fputc('\n', stream);
  }
}

void onyx_runtime_memory_usage(const onyx_runtime *rt, uint64_t used[ONYX_REQUESTER_COUNT_],
                               uint64_t peak[ONYX_REQUESTER_COUNT_]) {
  if (rt) onyx__memory_usage(rt->memory, used, peak);
}

const char *onyx_requester_name(uint32_t requester) { return onyx__requester_name(requester); }
