/*
 * Pins the ABI layout (LP64): offsets of every v1 field, of the fields v2
 * appended, and of every v3 struct (onyx_factory.h). A change here breaks every provider built
 * against an earlier header, so these asserts must only ever gain lines.
 */
#include <stddef.h>
#include <stdio.h>

#include "onyx_abi.h"

#define PIN(type, field, offset) _Static_assert(offsetof(type, field) == (offset), #type "." #field)

PIN(onyx_tensor, dtype, 0);
PIN(onyx_tensor, device, 4);
PIN(onyx_tensor, device_id, 8);
PIN(onyx_tensor, rank, 12);
PIN(onyx_tensor, dims, 16);
PIN(onyx_tensor, data, 80);
_Static_assert(sizeof(onyx_tensor) == 88, "onyx_tensor is frozen");

PIN(onyx_workspace_region, name, 0);
PIN(onyx_workspace_region, bytes, 8);
PIN(onyx_workspace_region, alignment, 16);
PIN(onyx_workspace_region, lifetime, 20);
PIN(onyx_workspace_requirement, count, 8);
PIN(onyx_workspace_requirement, regions, 16);
PIN(onyx_workspace_view, data, 8);
PIN(onyx_workspace_view, bytes, 16);

PIN(onyx_node_info, name, 8);
PIN(onyx_node_info, domain, 16);
PIN(onyx_node_info, op_type, 24);
PIN(onyx_node_info, opset, 32);
PIN(onyx_node_info, input_count, 40);
PIN(onyx_node_info, output_count, 48);
PIN(onyx_node_info, input_present, 56);
PIN(onyx_node_info, output_present, 64);
PIN(onyx_node_info, input_dtypes, 72);
PIN(onyx_node_info, attrs, 80);
PIN(onyx_node_info, attr_count, 88);

PIN(onyx_compute_ctx, core_data, 8);
PIN(onyx_compute_ctx, stream, 16);
PIN(onyx_compute_ctx, alloc_output, 24);
PIN(onyx_compute_ctx, alias_output, 32);
PIN(onyx_compute_ctx, set_error, 40);
PIN(onyx_compute_ctx, workspace, 48);
PIN(onyx_compute_ctx, workspace_count, 56);

PIN(onyx_kernel_table, domain, 8);
PIN(onyx_kernel_table, op_type, 16);
PIN(onyx_kernel_table, since_opset, 24);
PIN(onyx_kernel_table, until_opset, 32);
PIN(onyx_kernel_table, type_input, 40);
PIN(onyx_kernel_table, type_mask, 48);
PIN(onyx_kernel_table, supports, 56);
PIN(onyx_kernel_table, create, 64);
PIN(onyx_kernel_table, destroy, 72);
PIN(onyx_kernel_table, workspace, 80);
PIN(onyx_kernel_table, compute, 88);
PIN(onyx_kernel_table, infer, 96);
PIN(onyx_kernel_table, host_inputs, 104);

PIN(onyx_host_table, host_data, 8);
PIN(onyx_host_table, log, 16);
PIN(onyx_host_table, mem_alloc, 24);
PIN(onyx_host_table, mem_free, 32);
PIN(onyx_host_table, parallel_for, 40);
PIN(onyx_host_table, num_threads, 48);

PIN(onyx_provider_table, name, 8);
PIN(onyx_provider_table, device, 16);
PIN(onyx_provider_table, open, 24);
PIN(onyx_provider_table, close, 32);
PIN(onyx_provider_table, probe, 40);
PIN(onyx_provider_table, kernels, 48);
PIN(onyx_provider_table, kernel_count, 56);
PIN(onyx_provider_table, device_alloc, 64);
PIN(onyx_provider_table, device_free, 72);
PIN(onyx_provider_table, copy, 80);
PIN(onyx_provider_table, sync, 88);
PIN(onyx_provider_table, vmm, 96);
PIN(onyx_provider_table, memory_capacity, 104);
PIN(onyx_provider_table, stream, 112);
PIN(onyx_provider_table, graphs, 120);
PIN(onyx_kernel_table, geometry_inputs, 112);
PIN(onyx_graph_table, begin, 8);
PIN(onyx_graph_table, destroy, 32);
PIN(onyx_vmm_table, granularity, 8);
PIN(onyx_vmm_table, unmap, 64);

/* v2: appended to onyx_node_info after its v1 tail (96 bytes). */
PIN(onyx_node_info, input_constants, 96);
PIN(onyx_node_info, input_constant_copied, 104);
_Static_assert(sizeof(onyx_node_info) == 112, "onyx_node_info v2 ends after input_constant_copied");
/* v2: appended to onyx_host_table after its v1 tail (num_threads, padded to 56). */
PIN(onyx_host_table, set_error, 56);
_Static_assert(sizeof(onyx_host_table) == 64, "onyx_host_table v2 ends after set_error");
_Static_assert(ONYX_ABI_VERSION == 2, "the provider-table contract is frozen at v2");

/* v3: the factory contract (onyx_factory.h). */
_Static_assert(ONYX_ABI_LATEST == 3 && ONYX_ABI_V3 == 3, "the header set describes ABI v3");
_Static_assert(ONYX_DEVICE_OTHER == 2, "device kinds are fixed");
PIN(onyx_sink, core_data, 8);
PIN(onyx_sink, set_error, 16);
_Static_assert(sizeof(onyx_sink) == 24, "onyx_sink v3");
PIN(onyx_device_info, name, 8);
PIN(onyx_device_info, kind, 72);
PIN(onyx_device_info, ordinal, 76);
PIN(onyx_device_info, memory_bytes, 80);
PIN(onyx_device_info, capability_major, 88);
PIN(onyx_device_info, capability_minor, 92);
PIN(onyx_device_info, caps, 96);
_Static_assert(sizeof(onyx_device_info) == 104, "onyx_device_info v3");
PIN(onyx_type_constraint, side, 0);
PIN(onyx_type_constraint, index, 4);
PIN(onyx_type_constraint, types, 8);
_Static_assert(sizeof(onyx_type_constraint) == 16, "onyx_type_constraint v3");
PIN(onyx_kernel_def, domain, 8);
PIN(onyx_kernel_def, op_type, 16);
PIN(onyx_kernel_def, since_opset, 24);
PIN(onyx_kernel_def, until_opset, 32);
PIN(onyx_kernel_def, types, 40);
PIN(onyx_kernel_def, type_count, 48);
PIN(onyx_kernel_def, host_inputs, 56);
PIN(onyx_kernel_def, geometry_inputs, 64);
PIN(onyx_kernel_def, supports, 72);
PIN(onyx_kernel_def, create, 80);
PIN(onyx_kernel_def, destroy, 88);
PIN(onyx_kernel_def, infer, 96);
PIN(onyx_kernel_def, workspace, 104);
PIN(onyx_kernel_def, compute, 112);
_Static_assert(sizeof(onyx_kernel_def) == 120, "onyx_kernel_def v3");
PIN(onyx_kernel_registry, core_data, 8);
PIN(onyx_kernel_registry, add, 16);
PIN(onyx_kernel_registry, add_table, 24);
PIN(onyx_instance_table, close, 8);
PIN(onyx_instance_table, kernels, 16);
PIN(onyx_instance_table, device_alloc, 24);
PIN(onyx_instance_table, device_free, 32);
PIN(onyx_instance_table, copy, 40);
PIN(onyx_instance_table, sync, 48);
PIN(onyx_instance_table, stream, 56);
PIN(onyx_instance_table, memory_capacity, 64);
PIN(onyx_instance_table, get_extension, 72);
_Static_assert(sizeof(onyx_instance_table) == 80, "onyx_instance_table v3");
PIN(onyx_provider_factory, abi_version, 4);
PIN(onyx_provider_factory, name, 8);
PIN(onyx_provider_factory, device_count, 16);
PIN(onyx_provider_factory, device_info, 24);
PIN(onyx_provider_factory, open, 32);
PIN(onyx_provider_factory, instance, 40);
_Static_assert(sizeof(onyx_provider_factory) == 48, "onyx_provider_factory v3");
/* The v2 tables are frozen: v3 appended nothing to them. */
_Static_assert(sizeof(onyx_provider_table) == 128, "onyx_provider_table frozen");
_Static_assert(sizeof(onyx_kernel_table) == 120, "onyx_kernel_table frozen");

int main(void) {
  /* Status values are fixed forever. */
  if (ONYX_STATUS_TIER_EXHAUSTED != 10 || ONYX_STATUS_WORKSPACE_TOO_SMALL != 11) return 1;
  /* A v1-sized node info lacks the v2 fields; a v2 one has them. */
  onyx_node_info v1 = {.struct_size = offsetof(onyx_node_info, input_constants)};
  onyx_node_info v2 = {.struct_size = sizeof(onyx_node_info)};
  if (ONYX_HAS_FIELD(&v1, onyx_node_info, input_constants) ||
      !ONYX_HAS_FIELD(&v2, onyx_node_info, input_constant_copied))
    return 1;
  onyx_host_table h1 = {.struct_size = offsetof(onyx_host_table, set_error)};
  onyx_host_table h2 = {.struct_size = sizeof(onyx_host_table)};
  if (ONYX_HAS_FIELD(&h1, onyx_host_table, set_error) ||
      !ONYX_HAS_FIELD(&h2, onyx_host_table, set_error))
    return 1;
  onyx_device_info d = {.struct_size = offsetof(onyx_device_info, caps)};
  if (ONYX_HAS_FIELD(&d, onyx_device_info, caps) ||
      !ONYX_HAS_FIELD(&d, onyx_device_info, capability_minor))
    return 1;
  puts("ABI v1, v2 and v3 layout pinned");
  return 0;
}
