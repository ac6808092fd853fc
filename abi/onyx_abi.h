/*
 * Onyx ABI (v1, v2, v3) — umbrella header: include this from a provider.
 */
#ifndef ONYX_ABI_H
#define ONYX_ABI_H

#include "onyx_factory.h"
#include "onyx_provider.h"
#include "onyx_status.h"
#include "onyx_tensor.h"

#endif /* ONYX_ABI_H */
