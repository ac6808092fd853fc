/* Where a command-line tool finds plugins.ini. */
#ifndef ONYX_TOOLS_CONFIG_LOOKUP_H
#define ONYX_TOOLS_CONFIG_LOOKUP_H

#include <stddef.h>

/*
 * The plugins.ini a tool loads, first found of:
 *   1. `given` (its --config; NULL when absent) — must exist;
 *   2. $ONYX_CONFIG when set and not empty — must exist;
 *   3. ./plugins.ini;
 *   4. plugins.ini beside the tool's binary;
 *   5. ../plugins.ini from the binary's folder (the build tree: CMake writes
 *      build/plugins.ini with this build's absolute provider paths);
 *   6. ../etc/onyx/plugins.ini from the binary's folder (an install prefix).
 * Writes the path into out (cap bytes) and returns 0; or returns -1 with a message
 * in err (err_cap bytes) that lists every place it looked.
 */
int onyx_tool_find_config(const char *given, char *out, size_t cap, char *err, size_t err_cap);

#endif /* ONYX_TOOLS_CONFIG_LOOKUP_H */
