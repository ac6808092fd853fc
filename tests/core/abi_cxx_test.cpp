// The ABI headers must compile as C++ too (a C++ provider includes them).
#include "onyx_abi.h"

#include <cstdio>

int main() {
  onyx_tensor t{};
  t.rank = 1;
  t.dims[0] = 3;
  onyx_kernel_table k{};
  k.struct_size = sizeof k;
  onyx_kernel_def def{};
  def.struct_size = sizeof def;
  onyx_sink sink{};
  (void)sink;
  onyx_node_info info{};
  info.struct_size = sizeof info;
  if (!ONYX_HAS_FIELD(&info, onyx_node_info, input_constant_copied)) return 1;
  std::printf("%s %lld %zu\n", onyx_status_str(ONYX_STATUS_TIER_EXHAUSTED),
              static_cast<long long>(onyx_tensor_numel(&t)), onyx_dtype_size(ONYX_DTYPE_BFLOAT16));
  return 0;
}
