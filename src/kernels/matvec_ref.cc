// Scalar references for Dot/MatVec: obviously correct, slow, used by tests and benchmarks.
#include <vector>

#include "kernels/matvec.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {

double DotRef(DType type, const void* row, const float* x, int64_t n) {
  std::vector<float> w(n);
  DequantizeRowRef(type, row, w.data(), n);
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(w[k]) * x[k];
  return s;
}

void MatVecRef(const MatrixView& w, const float* x, float* y) {
  for (int64_t r = 0; r < w.rows; ++r) y[r] = static_cast<float>(DotRef(w.type, w.row(r), x, w.cols));
}

}  // namespace tarmac::kernels
