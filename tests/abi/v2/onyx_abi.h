/*
 * Onyx ABI v2 — umbrella header: include this from a provider.
 */
#ifndef ONYX_ABI_H
#define ONYX_ABI_H

#include "onyx_provider.h"
#include "onyx_status.h"
#include "onyx_tensor.h"

#endif /* ONYX_ABI_H */
