#include "runtime/exec/Flops.h"

namespace ds::rt {

static int64_t attrInt(const plan::Step &s, const char *name) {
  auto it = s.attrs().find(name);
  return it == s.attrs().end() ? 0 : it->second.i();
}

double stepFlops(const plan::Step &s, const std::vector<TensorView> &ins,
                 const std::vector<TensorView> &outs) {
  if (outs.empty()) return 0;
  if ((s.kernel() == "matmul" || s.kernel() == "fused_matmul") && ins.size() >= 2 &&
      !ins[0].shape.empty()) {
    // Every result element is a dot product over the contraction length.
    const auto &a = ins[0].shape;
    int64_t k = a.size() >= 2 && attrInt(s, "transpose_lhs") ? a[a.size() - 2] : a.back();
    // A strided view (fused_matmul's lhs_shape) is the product's own shape.
    if (auto view = s.attrs().find("lhs_shape");
        view != s.attrs().end() && view->second.ints().values_size() > 0)
      k = view->second.ints().values(view->second.ints().values_size() - 1);
    return 2.0 * static_cast<double>(outs[0].numel) * static_cast<double>(k);
  }
  if (s.kernel() == "attention") {
    // Two products per (query row, key): scores over D, weighted values over Dv.
    auto dims = [&](const char *name) {
      auto it = s.attrs().find(name);
      std::vector<int64_t> v;
      if (it != s.attrs().end()) v.assign(it->second.ints().values().begin(), it->second.ints().values().end());
      return v;
    };
    std::vector<int64_t> q = dims("query_shape"), k = dims("key_shape"), v = dims("value_shape");
    if (q.size() == 4 && k.size() == 4 && v.size() == 4)
      return 2.0 * q[0] * q[1] * q[2] * static_cast<double>(k[2]) * static_cast<double>(q[3] + v[3]);
  }
  if ((s.kernel() == "conv" || s.kernel() == "conv_grad") && ins.size() >= 2) {
    // Each output element of the forward sums C/group x kernel products;
    // the gradient does that twice (input and weight gradients).
    double perElement = 1;
    for (size_t d = 1; d < ins[1].shape.size(); ++d) perElement *= static_cast<double>(ins[1].shape[d]);
    if (s.kernel() == "conv") return 2.0 * static_cast<double>(outs[0].numel) * perElement;
    if (ins.size() == 3) return 4.0 * static_cast<double>(ins[2].numel) * perElement;
  }
  return 0;
}

} // namespace ds::rt
