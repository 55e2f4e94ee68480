//===- MatMulOps.cpp - ONNX matrix products -------------------------------===//
//
// MatMul, Gemm and Einsum: the float matrix products. Gemm stores
// transposed weights transposed at import; Einsum is lowered to
// transposes, reshapes, reductions and batched matmuls. The integer
// products (MatMulInteger, QLinearMatMul) are in QuantizationOps.cpp.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <cctype>
#include <map>

#include "ds/Plan/HostEvaluator.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class MatMulImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult matmul(const onnx::NodeProto &n);
  LogicalResult gemm(const onnx::NodeProto &n);
  LogicalResult einsum(const onnx::NodeProto &n);
};

LogicalResult MatMulImporter::matmul(const onnx::NodeProto &n) { return binary<MatmulOp>(n); }

LogicalResult MatMulImporter::gemm(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(bm, required(n, 1));
  DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
  DS_TRY(beta, floatAttr(n, "beta", 1.0f));
  DS_TRY(transA, intAttr(n, "transA", 0));
  DS_TRY(transB, intAttr(n, "transB", 0));
  if (typeOf(a).getRank() != 2 || typeOf(bm).getRank() != 2)
    return nodeError(n) << "Gemm needs 2-D operands";
  auto transposed = [&](Value v) -> FailureOr<Value> {
    // A transposed weight is stored transposed: done once here, not per run.
    if (auto p = v.getDefiningOp<ParameterOp>()) {
      auto t = RankedTensorType::get({typeOf(v).getDimSize(1), typeOf(v).getDimSize(0)},
                                     typeOf(v).getElementType());
      auto tr = TransposeOp::create(b_, loc_, t, v, b_.getDenseI64ArrayAttr({1, 0}));
      FailureOr<SmallVector<DenseElementsAttr>> folded =
          evaluateOnHost(tr, {p.getValue()});
      tr->erase();
      if (failed(folded)) return failure();
      auto np = ParameterOp::create(b_, loc_, (p.getSymName() + ".T").str(), (*folded)[0]);
      np->setAttr("ds.transpose_of", b_.getStringAttr(p.getSymName()));
      return np.getResult();
    }
    return build<TransposeOp>({v}, {arrAttr("permutation", {1, 0})});
  };
  if (transA) {
    DS_TRY(t, transposed(a));
    a = t;
  }
  if (transB) {
    DS_TRY(t, transposed(bm));
    bm = t;
  }
  DS_TRY(y, build<MatmulOp>({a, bm}));
  Type elem = typeOf(y).getElementType();
  if (alpha != 1.0f) {
    DS_TRY(s, build<MulOp>({y, scalar(elem, alpha)}));
    y = s;
  }
  if (Value c = input(n, 2)) {
    if (beta != 1.0f) {
      DS_TRY(s, build<MulOp>({c, scalar(elem, beta)}));
      c = s;
    }
    DS_TRY(s, build<AddOp>({y, c}));
    if (typeOf(s).getShape() != typeOf(y).getShape())
      return nodeError(n) << "C does not broadcast to the [M, N] result";
    y = s;
  }
  setOutput(n, 0, y);
  return success();
}

/// One einsum operand (or partial product): a value and a label per axis.
struct EinsumTerm {
  Value v;
  std::string labels;
};

// Einsum: diagonals (mask and sum), labels summed early where nothing else
// needs them, then a batched matmul per pair of operands ([batch, left,
// contracted] x [batch, contracted, right]) and a final transpose. Every
// step is an existing ds op, so Einsum runs and differentiates without a
// kernel of its own. "..." becomes labels \x01, \x02, ... (right-aligned).
LogicalResult MatMulImporter::einsum(const onnx::NodeProto &n) {
  DS_TRY(eq0, stringAttr(n, "equation", ""));
  std::string eq;
  for (char ch : eq0)
    if (ch != ' ') eq.push_back(ch);
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), rhs = arrow == std::string::npos ? "" : eq.substr(arrow + 2);
  SmallVector<std::string> specs;
  for (StringRef part : llvm::split(StringRef(lhs), ',')) specs.push_back(part.str());
  if (static_cast<int>(specs.size()) != n.input_size())
    return nodeError(n) << "equation '" << eq0 << "' names " << specs.size()
                        << " operands, the node has " << n.input_size();
  int64_t ellipsisRank = 0;
  SmallVector<EinsumTerm> terms;
  // Expands "..." to `count` labels; checks the rest are letters.
  auto expand = [&](const std::string &spec, int64_t count, std::string &out) -> LogicalResult {
    size_t dots = spec.find("...");
    for (size_t i = 0; i < spec.size(); ++i) {
      if (i == dots) {
        for (int64_t e = ellipsisRank - count; e < ellipsisRank; ++e) out.push_back(char(1 + e));
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(spec[i]))) {
        out.push_back(spec[i]);
      } else {
        return nodeError(n) << "equation '" << eq0 << "' has an invalid character '" << spec[i]
                            << "'";
      }
    }
    return success();
  };
  for (auto [i, spec] : llvm::enumerate(specs)) {
    DS_TRY(v, required(n, i));
    int64_t letters = 0;
    for (char ch : spec) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    int64_t rank = typeOf(v).getRank();
    bool dots = spec.find("...") != std::string::npos;
    if (dots ? letters > rank : letters != rank)
      return nodeError(n) << "operand " << i << " has rank " << rank << " but its subscripts '"
                          << spec << "' name " << letters << " axes";
    if (dots) ellipsisRank = std::max(ellipsisRank, rank - letters);
    terms.push_back({v, ""});
  }
  for (auto [i, spec] : llvm::enumerate(specs)) {
    int64_t letters = 0;
    for (char ch : spec) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    if (failed(expand(spec, typeOf(terms[i].v).getRank() - letters, terms[i].labels)))
      return failure();
  }
  std::string out;
  if (arrow != std::string::npos) {
    if (failed(expand(rhs, ellipsisRank, out))) return failure();
  } else {
    // Implicit output: the ellipsis, then letters used once, alphabetically.
    for (int64_t e = 0; e < ellipsisRank; ++e) out.push_back(char(1 + e));
    std::map<char, int> uses;
    for (auto &t : terms)
      for (char ch : t.labels)
        if (std::isalpha(static_cast<unsigned char>(ch))) ++uses[ch];
    for (auto [ch, count] : uses)
      if (count == 1) out.push_back(ch);
  }
  std::map<char, int64_t> size;
  for (auto &t : terms)
    for (auto [i, ch] : llvm::enumerate(t.labels)) {
      int64_t d = typeOf(t.v).getDimSize(i);
      auto [it, fresh] = size.insert({ch, d});
      if (!fresh && it->second != d && it->second != 1 && d != 1)
        return nodeError(n) << "subscript '" << (ch < 32 ? std::string("...") : std::string(1, ch))
                            << "' is " << it->second << " in one operand and " << d
                            << " in another";
      if (!fresh && it->second == 1) it->second = d;
    }
  for (char ch : out)
    if (!size.count(ch))
      return nodeError(n) << "output subscript '" << ch << "' appears in no operand";

  auto permute = [&](EinsumTerm &t, const std::string &order) -> LogicalResult {
    if (t.labels == order) return success();
    SmallVector<int64_t> perm;
    for (char ch : order) perm.push_back(t.labels.find(ch));
    auto r = build<TransposeOp>({t.v}, {arrAttr("permutation", perm)});
    if (failed(r)) return failure();
    t = {*r, order};
    return success();
  };
  // Sums the axes whose labels `keep` rejects.
  auto sumOut = [&](EinsumTerm &t, llvm::function_ref<bool(char)> keep) -> LogicalResult {
    SmallVector<int64_t> axes;
    std::string rest;
    for (auto [i, ch] : llvm::enumerate(t.labels)) {
      if (keep(ch)) rest.push_back(ch);
      else axes.push_back(i);
    }
    if (axes.empty()) return success();
    auto r = reduceWith<ReduceSumOp>(t.v, axes, false);
    if (failed(r)) return failure();
    t = {*r, rest};
    return success();
  };
  auto usedAfter = [&](size_t from, char ch) {
    if (out.find(ch) != std::string::npos) return true;
    for (size_t j = from; j < terms.size(); ++j)
      if (terms[j].labels.find(ch) != std::string::npos) return true;
    return false;
  };

  // Diagonals: a repeated label keeps only the elements where its axes agree.
  for (auto &t : terms) {
    for (size_t i = 0; i < t.labels.size(); ++i) {
      size_t j = t.labels.find(t.labels[i], i + 1);
      if (j == std::string::npos) continue;
      RankedTensorType tt = typeOf(t.v);
      int64_t d = tt.getDimSize(i);
      if (tt.getDimSize(j) != d)
        return nodeError(n) << "repeated subscript '" << t.labels[i] << "' spans axes of "
                            << d << " and " << tt.getDimSize(j);
      SmallVector<int64_t> maskShape(tt.getRank(), 1);
      maskShape[i] = maskShape[j] = d;
      Type elem = tt.getElementType();
      SmallVector<Attribute> eye;
      for (int64_t r = 0; r < d; ++r)
        for (int64_t c = 0; c < d; ++c)
          eye.push_back(isa<FloatType>(elem) ? Attribute(b_.getFloatAttr(elem, r == c))
                                             : Attribute(b_.getIntegerAttr(elem, r == c)));
      Value mask = constant(DenseElementsAttr::get(RankedTensorType::get(maskShape, elem), eye));
      DS_TRY(masked, build<MulOp>({t.v, mask}));
      DS_TRY(summed, reduceWith<ReduceSumOp>(masked, {static_cast<int64_t>(j)}, false));
      t.v = summed;
      t.labels.erase(j, 1);
      --i; // the same label may repeat again
    }
  }
  EinsumTerm acc = terms[0];
  if (failed(sumOut(acc, [&](char ch) { return usedAfter(1, ch); }))) return failure();
  for (size_t ti = 1; ti < terms.size(); ++ti) {
    EinsumTerm rhsTerm = terms[ti];
    auto keepLater = [&](char ch) { return usedAfter(ti + 1, ch); };
    auto inOther = [](const EinsumTerm &o, char ch) { return o.labels.find(ch) != std::string::npos; };
    if (failed(sumOut(rhsTerm, [&](char ch) { return keepLater(ch) || inOther(acc, ch); })))
      return failure();
    std::string batch, left, contracted, right;
    for (char ch : acc.labels) {
      if (!inOther(rhsTerm, ch)) left.push_back(ch);
      else if (keepLater(ch)) batch.push_back(ch);
      else contracted.push_back(ch);
    }
    for (char ch : rhsTerm.labels)
      if (!inOther(acc, ch)) right.push_back(ch);
    if (failed(permute(acc, batch + left + contracted)) ||
        failed(permute(rhsTerm, batch + contracted + right)))
      return failure();
    auto prod = [&](const std::string &ls) {
      int64_t p = 1;
      for (char ch : ls) p *= size[ch];
      return p;
    };
    // Broadcast batch axes of extent 1 (from "...") to the full extent.
    auto widen = [&](EinsumTerm &t) -> LogicalResult {
      SmallVector<int64_t> shape;
      for (auto [i, ch] : llvm::enumerate(t.labels))
        shape.push_back(i < batch.size() ? size[ch] : typeOf(t.v).getDimSize(i));
      if (ArrayRef<int64_t>(shape) == typeOf(t.v).getShape()) return success();
      auto r = buildTyped<ExpandOp>(RankedTensorType::get(shape, typeOf(t.v).getElementType()), t.v);
      if (failed(r)) return failure();
      t.v = *r;
      return success();
    };
    if (failed(widen(acc)) || failed(widen(rhsTerm))) return failure();
    int64_t B = prod(batch), L = prod(left), C = prod(contracted), R = prod(right);
    DS_TRY(a3, reshape(acc.v, {B, L, C}));
    DS_TRY(b3, reshape(rhsTerm.v, {B, C, R}));
    DS_TRY(m, build<MatmulOp>({a3, b3}));
    SmallVector<int64_t> shape;
    std::string labels = batch + left + right;
    for (char ch : labels) shape.push_back(size[ch]);
    DS_TRY(r, reshape(m, shape));
    acc = {r, labels};
  }
  if (failed(sumOut(acc, [&](char ch) { return out.find(ch) != std::string::npos; })) ||
      failed(permute(acc, out)))
    return failure();
  setOutput(n, 0, acc.v);
  return success();
}

} // namespace

void mlir::ds::importer::registerMatMulHandlers(HandlerTable &t) {
  using I = MatMulImporter;
  t.add<I, &I::matmul>("MatMul");
  t.add<I, &I::gemm>("Gemm");
  t.add<I, &I::einsum>("Einsum");
}
