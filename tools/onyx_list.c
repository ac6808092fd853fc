/*
 * onyx-list: the providers a plugins.ini loads, in placement order, and the kernels
 * each registers (domain, op, opset range, dtypes). First, every provider discovery
 * found — plugins.ini's sections, providers.d/ fragments, $ONYX_PROVIDER_PATH — with
 * where it came from and, for one not loaded, why.
 *
 *   onyx-list [--config plugins.ini] [--kernels]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_lookup.h"
#include "onyx.h"
#include "tensor_compare.h"

static void print_types(uint64_t mask) {
  if (mask == 0) {
    printf("any");
    return;
  }
  bool first = true;
  for (uint32_t d = 0; d < 64; ++d) {
    if (!(mask & ONYX_DTYPE_BIT(d))) continue;
    printf("%s%s", first ? "" : ",", dtype_to_string(d));
    first = false;
  }
}

static const char *origin_name(uint32_t origin) {
  switch (origin) {
  case ONYX_PROVIDER_ORIGIN_CONFIG:
    return "plugins.ini";
  case ONYX_PROVIDER_ORIGIN_DROP_IN:
    return "providers.d";
  case ONYX_PROVIDER_ORIGIN_PATH:
    return "ONYX_PROVIDER_PATH";
  default:
    return "?";
  }
}

static const char *state_name(uint32_t state) {
  switch (state) {
  case ONYX_PROVIDER_STATE_LOADED:
    return "loaded";
  case ONYX_PROVIDER_STATE_DISABLED:
    return "disabled";
  case ONYX_PROVIDER_STATE_DECLINED:
    return "declined";
  case ONYX_PROVIDER_STATE_FAILED:
    return "failed";
  case ONYX_PROVIDER_STATE_SHADOWED:
    return "shadowed";
  default:
    return "?";
  }
}

/* What discovery found: one line each, the reason on the next for one not loaded. */
static void print_found(const onyx_runtime *rt, const char *config) {
  size_t n = onyx_runtime_found_count(rt);
  printf("config %s: found %zu provider%s\n", config, n, n == 1 ? "" : "s");
  for (size_t i = 0; i < n; ++i) {
    onyx_provider_found f = {.struct_size = sizeof f};
    if (onyx_runtime_found(rt, i, &f) != ONYX_STATUS_OK) continue;
    printf("  %-12s %-9s %s %s", f.name, state_name(f.state), origin_name(f.origin), f.file);
    if (f.line > 0) printf(":%d", (int)f.line);
    printf(" -> %s\n", f.library);
    if (f.reason[0]) printf("    skipped: %s\n", f.reason);
  }
  printf("loaded, in placement order:\n");
}

static void usage(void) {
  fprintf(stderr, "usage: onyx-list [--config plugins.ini] [--kernels]\n");
}

/* Prints why the arguments were refused (`fmt` names `arg` with one %s), then the
 * usage; returns the exit status 2. */
static int refuse(const char *fmt, const char *arg) {
  fprintf(stderr, "onyx-list: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  usage();
  return 2;
}

int main(int argc, char **argv) {
  const char *given = NULL;
  bool kernels = false;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--config")) {
      if (i + 1 >= argc) return refuse("%s needs a value", a);
      if (argv[i + 1][0] == '\0') return refuse("--config wants a plugins.ini path, got '%s'", "");
      given = argv[++i];
    } else if (!strcmp(a, "--kernels")) {
      kernels = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    } else {
      return refuse(a[0] == '-' ? "unknown option '%s'" : "takes no PATH, got '%s'", a);
    }
  }
  char config[4096], why[8192];
  if (onyx_tool_find_config(given, config, sizeof config, why, sizeof why) != 0) {
    fprintf(stderr, "onyx-list: %s\n", why);
    return 2;
  }
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  if (onyx_runtime_create(config, &rt, &e) != ONYX_STATUS_OK) {
    fprintf(stderr, "onyx-list: %s\n", onyx_error_message(e));
    onyx_error_free(e);
    return 1;
  }
  print_found(rt, config);
  for (size_t p = 0; p < onyx_runtime_provider_count(rt); ++p) {
    size_t n = onyx_runtime_kernel_count(rt, p);
    printf("%s: %zu kernels on %s\n", onyx_runtime_provider_name(rt, p), n,
           onyx_runtime_provider_device(rt, p));
    for (size_t k = 0; kernels && k < n; ++k) {
      const onyx_kernel_table *kt = onyx_runtime_kernel(rt, p, k);
      const onyx_kernel_def *kd = kt ? NULL : onyx_runtime_kernel_def(rt, p, k);
      if (kd) { /* a v3 registration: its type constraints are a list */
        printf("  %s%s%-28s opset %lld.. (v3, %zu type constraints)%s\n", kd->domain,
               kd->domain[0] ? "::" : "", kd->op_type, (long long)kd->since_opset, kd->type_count,
               kd->workspace ? "  [workspace]" : "");
        continue;
      }
      if (kt == NULL) continue;
      printf("  %s%s%-28s opset %lld..", kt->domain, kt->domain[0] ? "::" : "", kt->op_type,
             (long long)kt->since_opset);
      if (kt->until_opset)
        printf("%-4lld", (long long)kt->until_opset);
      else
        printf("    ");
      printf(" input %u: ", kt->type_input);
      print_types(kt->type_mask);
      printf("%s\n", kt->workspace ? "  [workspace]" : "");
    }
  }
  onyx_runtime_destroy(rt);
  return 0;
}
