/* What the workspace mock provider (ws_mock_provider.c) records, shared with the
 * tests that read it through the library's exported ws_mock_* functions. */
#ifndef ONYX_TESTS_WS_MOCK_H
#define ONYX_TESTS_WS_MOCK_H

#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#define WS_MOCK_MAX_NODES 16

/* One view a kernel was handed, with what its region declared. */
typedef struct ws_mock_view {
  const char *name;
  void *data;
  uint64_t bytes;
  uint32_t alignment; /* as declared, 0 mapped to 64 */
  uint32_t lifetime;  /* onyx_lifetime */
} ws_mock_view;

/* The views of a node's last compute. */
typedef struct ws_mock_record {
  char node[64];
  size_t count;
  ws_mock_view views[ONYX_MAX_WORKSPACE_REGIONS];
  int calls;
} ws_mock_record;

typedef struct ws_mock_stats {
  int compute_calls;   /* every compute call, failed ones included */
  int workspace_calls; /* every workspace() call (planning and runs) */
  int too_small;       /* computes that returned WORKSPACE_TOO_SMALL */
  size_t record_count;
  ws_mock_record records[WS_MOCK_MAX_NODES];
} ws_mock_stats;

/* Exported by the library: */
typedef const ws_mock_stats *(*ws_mock_get_stats_fn)(void);
typedef void (*ws_mock_reset_fn)(void);
typedef void (*ws_mock_fail_at_fn)(const char *node_name); /* NULL or "": none */

#endif /* ONYX_TESTS_WS_MOCK_H */
