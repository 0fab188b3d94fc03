#include "kernels/embed/params.h"

namespace gossamer::kern {

Status EmbedParams::validate() const {
  if (!table || !tokens || !x) return InvalidArgument("embed: null pointer argument");
  if (batch <= 0 || vocab <= 0 || hidden <= 0 || hidden % 4 != 0) {
    return InvalidArgument("embed: need batch, vocab > 0 and hidden a positive multiple of 4");
  }
  return Status::Ok();
}

}  // namespace gossamer::kern
