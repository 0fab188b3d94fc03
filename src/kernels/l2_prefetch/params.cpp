#include "kernels/l2_prefetch/params.h"

#include <string>

namespace gossamer::kern {

Status L2PrefetchParams::validate() const {
  if (bytes > 0 && ptr == nullptr) {
    return InvalidArgument("l2_prefetch: ptr is null for " + std::to_string(bytes) + " bytes");
  }
  if (blocks < 0) return InvalidArgument("l2_prefetch: blocks < 0: " + std::to_string(blocks));
  if (method == L2Method::kSector && priority == L2Priority::kFirst) {
    return InvalidArgument("l2_prefetch: prefetch.global.L2 has no evict_first form (kSector)");
  }
  return Status::Ok();
}

}  // namespace gossamer::kern
