// Reference quantizers (F32 -> each block type). Placeholder until implemented.
#include "tensor/quant_ref.h"

namespace tarmac {

Status QuantizeRowRef(DType type, const float* src, void* dst, int64_t n) {
  return Unimplemented("quantize to {} not implemented yet", DTypeName(type));
}

}  // namespace tarmac
