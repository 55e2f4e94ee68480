//===- MatMulOps.cpp - ONNX matrix products -------------------------------===//
//
// MatMul, Gemm and Einsum: the float matrix products. Gemm stores
// transposed weights transposed at import; Einsum is lowered to
// transposes, reshapes, reductions and batched matmuls. The integer
// products (MatMulInteger, QLinearMatMul) are in QuantizationOps.cpp.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"
#include "llvm/ADT/StringSet.h"

#include <cctype>
#include <map>
#include <optional>

#include "ds/Plan/HostEvaluator.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

/// One einsum operand (or partial product): a value and a label per axis.
struct EinsumTerm {
  Value v;
  std::string labels;
};

/// An einsum equation without its spaces: each operand's subscripts, and
/// the output's when the equation has "->".
struct EinsumEquation {
  SmallVector<std::string> specs;
  std::optional<std::string> output;
};

/// A checked einsum: the operands with one label per axis ("..." expanded),
/// the output's labels and every label's extent.
struct EinsumProblem {
  SmallVector<EinsumTerm> terms;
  std::string out;
  std::map<char, int64_t> size;
};

class MatMulImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult matmul(const onnx::NodeProto &n);
  LogicalResult gemm(const onnx::NodeProto &n);
  LogicalResult einsum(const onnx::NodeProto &n);
  LogicalResult det(const onnx::NodeProto &n);

private:
  // Einsum's steps, in the order they run.
  FailureOr<EinsumProblem> parseEinsum(const onnx::NodeProto &n);
  LogicalResult einsumOperands(const onnx::NodeProto &n, ArrayRef<std::string> specs,
                               SmallVector<EinsumTerm> &terms, int64_t &ellipsisRank);
  LogicalResult expandSubscripts(const onnx::NodeProto &n, StringRef eq0, const std::string &spec,
                                 int64_t ellipsisRank, int64_t count, std::string &out);
  LogicalResult einsumExtents(const onnx::NodeProto &n, EinsumProblem &p);
  LogicalResult takeDiagonals(const onnx::NodeProto &n, SmallVector<EinsumTerm> &terms);
  FailureOr<EinsumTerm> contractEinsum(const EinsumProblem &p);
  FailureOr<EinsumTerm> multiplyPair(EinsumTerm acc, EinsumTerm rhs,
                                     llvm::function_ref<bool(char)> keepLater,
                                     const std::map<char, int64_t> &size);
  LogicalResult widenBatch(EinsumTerm &t, size_t batchRank, const std::map<char, int64_t> &size);
  LogicalResult finishEinsum(EinsumTerm &acc, const std::string &out);
  LogicalResult permuteTerm(EinsumTerm &t, const std::string &order);
  LogicalResult sumOutTerm(EinsumTerm &t, llvm::function_ref<bool(char)> keep);
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
      // Its name must not be another initializer's (a module's `W` and its
      // `W.T` attribute both exist): W.T, else W.T1, W.T2, ...
      // Another Gemm's transposed copy of the same weight is that one.
      Operation *scope = b_.getInsertionBlock()->getParentOp();
      llvm::StringSet<> taken;
      ParameterOp same;
      scope->walk([&](ParameterOp q) {
        taken.insert(q.getSymName());
        if (auto of = q->getAttrOfType<StringAttr>("ds.transpose_of");
            of && of.getValue() == p.getSymName() && q->getBlock() == b_.getInsertionBlock())
          same = q;
      });
      if (same) return same.getResult();
      std::string name = (p.getSymName() + ".T").str();
      for (int i = 1; taken.contains(name); ++i) name = (p.getSymName() + ".T" + Twine(i)).str();
      auto np = ParameterOp::create(b_, loc_, name, (*folded)[0]);
      // The same weight: what the importer marked on it (a buffer, an
      // untied copy never tied by value, a trained one) holds for it too.
      for (NamedAttribute a : p->getDiscardableAttrs())
        if (a.getName().strref().starts_with("ds.")) np->setAttr(a.getName(), a.getValue());
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

/// Letters in one operand's subscripts: the axes it names outside "...".
int64_t letterCount(const std::string &spec) {
  int64_t letters = 0;
  for (char ch : spec) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
  return letters;
}

bool hasLabel(const EinsumTerm &t, char ch) { return t.labels.find(ch) != std::string::npos; }

// Spaces are allowed anywhere in an equation; "->" and "," are its only structure.
EinsumEquation splitEquation(StringRef eq0) {
  std::string eq;
  for (char ch : eq0)
    if (ch != ' ') eq.push_back(ch);
  size_t arrow = eq.find("->");
  EinsumEquation e;
  for (StringRef part : llvm::split(StringRef(eq.substr(0, arrow)), ','))
    e.specs.push_back(part.str());
  if (arrow != std::string::npos) e.output = eq.substr(arrow + 2);
  return e;
}

// Without "->" the output is implied: the ellipsis, then letters used once,
// alphabetically.
std::string implicitOutput(ArrayRef<EinsumTerm> terms, int64_t ellipsisRank) {
  std::string out;
  for (int64_t e = 0; e < ellipsisRank; ++e) out.push_back(char(1 + e));
  std::map<char, int> uses;
  for (auto &t : terms)
    for (char ch : t.labels)
      if (std::isalpha(static_cast<unsigned char>(ch))) ++uses[ch];
  for (auto [ch, count] : uses)
    if (count == 1) out.push_back(ch);
  return out;
}

// Einsum: diagonals (mask and sum), labels summed early where nothing else
// needs them, then a batched matmul per pair of operands ([batch, left,
// contracted] x [batch, contracted, right]) and a final transpose. Every
// step is an existing ds op, so Einsum runs and differentiates without a
// kernel of its own. "..." becomes labels \x01, \x02, ... (right-aligned).
LogicalResult MatMulImporter::einsum(const onnx::NodeProto &n) {
  DS_TRY(p, parseEinsum(n));
  if (failed(takeDiagonals(n, p.terms))) return failure();
  DS_TRY(acc, contractEinsum(p));
  if (failed(finishEinsum(acc, p.out))) return failure();
  setOutput(n, 0, acc.v);
  return success();
}

// The equation is untrusted input: everything later relies on the labels,
// ranks and extents checked here.
FailureOr<EinsumProblem> MatMulImporter::parseEinsum(const onnx::NodeProto &n) {
  DS_TRY(eq0, stringAttr(n, "equation", ""));
  EinsumEquation eq = splitEquation(eq0);
  if (static_cast<int>(eq.specs.size()) != n.input_size())
    return nodeError(n) << "equation '" << eq0 << "' names " << eq.specs.size()
                        << " operands, the node has " << n.input_size();
  EinsumProblem p;
  int64_t ellipsisRank = 0;
  if (failed(einsumOperands(n, eq.specs, p.terms, ellipsisRank))) return failure();
  for (auto [i, spec] : llvm::enumerate(eq.specs))
    if (failed(expandSubscripts(n, eq0, spec, ellipsisRank,
                                typeOf(p.terms[i].v).getRank() - letterCount(spec),
                                p.terms[i].labels)))
      return failure();
  if (eq.output) {
    if (failed(expandSubscripts(n, eq0, *eq.output, ellipsisRank, ellipsisRank, p.out)))
      return failure();
  } else {
    p.out = implicitOutput(p.terms, ellipsisRank);
  }
  if (failed(einsumExtents(n, p))) return failure();
  return p;
}

// "..." stands for as many axes as the operand that gives it the most, so
// every operand's rank is checked (and that count found) before expanding.
LogicalResult MatMulImporter::einsumOperands(const onnx::NodeProto &n,
                                             ArrayRef<std::string> specs,
                                             SmallVector<EinsumTerm> &terms,
                                             int64_t &ellipsisRank) {
  for (auto [i, spec] : llvm::enumerate(specs)) {
    DS_TRY(v, required(n, i));
    int64_t letters = letterCount(spec);
    int64_t rank = typeOf(v).getRank();
    bool dots = spec.find("...") != std::string::npos;
    if (dots ? letters > rank : letters != rank)
      return nodeError(n) << "operand " << i << " has rank " << rank << " but its subscripts '"
                          << spec << "' name " << letters << " axes";
    if (dots) ellipsisRank = std::max(ellipsisRank, rank - letters);
    terms.push_back({v, ""});
  }
  return success();
}

// One label per axis lets the later steps treat "..." like letters: it
// expands to the last `count` of the ellipsis labels (right-aligned).
LogicalResult MatMulImporter::expandSubscripts(const onnx::NodeProto &n, StringRef eq0,
                                               const std::string &spec, int64_t ellipsisRank,
                                               int64_t count, std::string &out) {
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
}

// A label has one extent across operands (1 broadcasts), and the output may
// only use labels some operand has.
LogicalResult MatMulImporter::einsumExtents(const onnx::NodeProto &n, EinsumProblem &p) {
  for (auto &t : p.terms)
    for (auto [i, ch] : llvm::enumerate(t.labels)) {
      int64_t d = typeOf(t.v).getDimSize(i);
      auto [it, fresh] = p.size.insert({ch, d});
      if (!fresh && it->second != d && it->second != 1 && d != 1)
        return nodeError(n) << "subscript '" << (ch < 32 ? std::string("...") : std::string(1, ch))
                            << "' is " << it->second << " in one operand and " << d
                            << " in another";
      if (!fresh && it->second == 1) it->second = d;
    }
  for (auto [i, ch] : llvm::enumerate(p.out)) {
    if (!p.size.count(ch))
      return nodeError(n) << "output subscript '" << ch << "' appears in no operand";
    // numpy and onnxruntime refuse it too: an output axis is one label.
    if (ch >= 32 && p.out.find(ch) != i)
      return nodeError(n) << "output subscript '" << ch << "' appears more than once";
  }
  return success();
}

// A label repeated within one operand keeps only the elements where its axes
// agree (mask with an identity, sum one axis), so later labels are unique.
LogicalResult MatMulImporter::takeDiagonals(const onnx::NodeProto &n,
                                            SmallVector<EinsumTerm> &terms) {
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
  return success();
}

// Operands multiply left to right; a label is summed as soon as neither a
// later operand nor the output needs it, which keeps every product small.
FailureOr<EinsumTerm> MatMulImporter::contractEinsum(const EinsumProblem &p) {
  auto usedAfter = [&](size_t from, char ch) {
    if (p.out.find(ch) != std::string::npos) return true;
    for (size_t j = from; j < p.terms.size(); ++j)
      if (hasLabel(p.terms[j], ch)) return true;
    return false;
  };
  EinsumTerm acc = p.terms[0];
  if (failed(sumOutTerm(acc, [&](char ch) { return usedAfter(1, ch); }))) return failure();
  for (size_t ti = 1; ti < p.terms.size(); ++ti) {
    EinsumTerm rhsTerm = p.terms[ti];
    auto keepLater = [&](char ch) { return usedAfter(ti + 1, ch); };
    if (failed(sumOutTerm(rhsTerm, [&](char ch) { return keepLater(ch) || hasLabel(acc, ch); })))
      return failure();
    DS_TRY(product, multiplyPair(acc, rhsTerm, keepLater, p.size));
    acc = product;
  }
  return acc;
}

// Two operands' product is one batched matmul once their labels are sorted
// into [batch, left, contracted] and [batch, contracted, right].
FailureOr<EinsumTerm> MatMulImporter::multiplyPair(EinsumTerm acc, EinsumTerm rhs,
                                                   llvm::function_ref<bool(char)> keepLater,
                                                   const std::map<char, int64_t> &size) {
  std::string batch, left, contracted, right;
  for (char ch : acc.labels) {
    if (!hasLabel(rhs, ch)) left.push_back(ch);
    else if (keepLater(ch)) batch.push_back(ch);
    else contracted.push_back(ch);
  }
  for (char ch : rhs.labels)
    if (!hasLabel(acc, ch)) right.push_back(ch);
  if (failed(permuteTerm(acc, batch + left + contracted)) ||
      failed(permuteTerm(rhs, batch + contracted + right)))
    return failure();
  if (failed(widenBatch(acc, batch.size(), size)) || failed(widenBatch(rhs, batch.size(), size)))
    return failure();
  auto prod = [&](const std::string &ls) {
    int64_t p = 1;
    for (char ch : ls) p *= size.at(ch);
    return p;
  };
  int64_t B = prod(batch), L = prod(left), C = prod(contracted), R = prod(right);
  DS_TRY(a3, reshape(acc.v, {B, L, C}));
  DS_TRY(b3, reshape(rhs.v, {B, C, R}));
  DS_TRY(m, build<MatmulOp>({a3, b3}));
  SmallVector<int64_t> shape;
  std::string labels = batch + left + right;
  for (char ch : labels) shape.push_back(size.at(ch));
  DS_TRY(r, reshape(m, shape));
  return EinsumTerm{r, labels};
}

// Batch axes of extent 1 (from "...") broadcast to the full extent, since
// the batched matmul needs equal batches.
LogicalResult MatMulImporter::widenBatch(EinsumTerm &t, size_t batchRank,
                                         const std::map<char, int64_t> &size) {
  SmallVector<int64_t> shape;
  for (auto [i, ch] : llvm::enumerate(t.labels))
    shape.push_back(i < batchRank ? size.at(ch) : typeOf(t.v).getDimSize(i));
  if (ArrayRef<int64_t>(shape) == typeOf(t.v).getShape()) return success();
  auto r = buildTyped<ExpandOp>(RankedTensorType::get(shape, typeOf(t.v).getElementType()), t.v);
  if (failed(r)) return failure();
  t.v = *r;
  return success();
}

// The last product may still hold labels the output drops, and its axes are
// in product order, not the output's.
LogicalResult MatMulImporter::finishEinsum(EinsumTerm &acc, const std::string &out) {
  if (failed(sumOutTerm(acc, [&](char ch) { return out.find(ch) != std::string::npos; })))
    return failure();
  return permuteTerm(acc, out);
}

// Puts a term's axes in the order of `order` (a permutation of its labels).
LogicalResult MatMulImporter::permuteTerm(EinsumTerm &t, const std::string &order) {
  if (t.labels == order) return success();
  SmallVector<int64_t> perm;
  for (char ch : order) perm.push_back(t.labels.find(ch));
  auto r = build<TransposeOp>({t.v}, {arrAttr("permutation", perm)});
  if (failed(r)) return failure();
  t = {*r, order};
  return success();
}

// Sums the axes whose labels `keep` rejects.
LogicalResult MatMulImporter::sumOutTerm(EinsumTerm &t, llvm::function_ref<bool(char)> keep) {
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
}

} // namespace

// Det: Gaussian elimination with partial pivoting, unrolled over the
// (static) matrix size: per column the pivot row (largest magnitude, found
// by the plan) is swapped up by a GatherElements, the rows below take away
// their multiple of it, and the determinant multiplies the pivots (negated
// per swap). A zero pivot makes the determinant 0.
LogicalResult MatMulImporter::det(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  RankedTensorType xt = typeOf(x);
  int64_t rank = xt.getRank();
  Type elem = xt.getElementType();
  if (rank < 2 || !isa<FloatType>(elem) || xt.getDimSize(rank - 1) != xt.getDimSize(rank - 2))
    return nodeError(n) << "needs float square matrices [..., M, M]";
  int64_t m = xt.getDimSize(rank - 1);
  SmallVector<int64_t> batchShape(xt.getShape().drop_back(2));
  Type f = elem.getIntOrFloatBitWidth() < 32 ? Type(b_.getF32Type()) : elem; // 16-bit in f32
  Type i64 = b_.getI64Type();
  DS_TRY(a0, castTo(x, f));
  Value a = a0;
  auto colShape = [&](int64_t rows) {
    SmallVector<int64_t> s(batchShape);
    s.append({rows, 1});
    return s;
  };
  Value det = scalar(f, 1.0);
  Value rowIota = iota(m, rank - 2, rank, i64); // [.., M, 1]
  for (int64_t k = 0; k < m; ++k) {
    // Pivot: the row >= k whose column-k entry is largest in magnitude.
    DS_TRY(col, sliceAxis(a, rank - 1, k, 1, 1));            // [.., M, 1]
    DS_TRY(below, sliceAxis(col, rank - 2, k, 1, m - k));    // [.., M-k, 1]
    DS_TRY(mag, buildTyped<AbsOp>(below.getType(), below));
    SmallVector<int64_t> argShape(colShape(1));
    DS_TRY(arg, buildTyped<ArgMaxOp>(RankedTensorType::get(argShape, i64), mag,
                                     {i64Attr("axis", rank - 2)}));
    DS_TRY(p, build<AddOp>({arg, scalar(i64, static_cast<double>(k))})); // [.., 1, 1]
    // Swap rows k and p: row i reads row perm(i).
    DS_TRY(isK, build<EqualOp>({rowIota, scalar(i64, static_cast<double>(k))}));
    DS_TRY(isP, build<EqualOp>({rowIota, p}));
    DS_TRY(fromK, build<WhereOp>({isP, scalar(i64, static_cast<double>(k)), rowIota}));
    DS_TRY(perm, build<WhereOp>({isK, p, fromK}));
    DS_TRY(permFull, buildTyped<ExpandOp>(RankedTensorType::get(typeOf(a).getShape(), i64), perm));
    DS_TRY(swapped, buildTyped<GatherElementsOp>(typeOf(a), ValueRange{a, permFull},
                                                 {i64Attr("axis", rank - 2)}));
    a = swapped;
    DS_TRY(moved, build<EqualOp>({p, scalar(i64, static_cast<double>(k))}));
    DS_TRY(sign, build<WhereOp>({moved, scalar(f, 1.0), scalar(f, -1.0)}));
    DS_TRY(pivotRow, sliceAxis(a, rank - 2, k, 1, 1));      // [.., 1, M]
    DS_TRY(pivot, sliceAxis(pivotRow, rank - 1, k, 1, 1));  // [.., 1, 1]
    DS_TRY(signed1, build<MulOp>({pivot, sign}));
    DS_TRY(d, build<MulOp>({det, signed1}));
    det = d;
    if (k + 1 == m) break;
    // Rows below k lose their multiple of the pivot row.
    DS_TRY(zero, build<EqualOp>({pivot, scalar(f, 0.0)}));
    DS_TRY(safe, build<WhereOp>({zero, scalar(f, 1.0), pivot}));
    DS_TRY(colK, sliceAxis(a, rank - 1, k, 1, 1));          // [.., M, 1]
    DS_TRY(factor0, build<DivOp>({colK, safe}));
    DS_TRY(lower, build<GreaterOp>({rowIota, scalar(i64, static_cast<double>(k))}));
    DS_TRY(factor, build<WhereOp>({lower, factor0, scalar(f, 0.0)}));
    DS_TRY(update, build<MulOp>({factor, pivotRow}));       // [.., M, M]
    DS_TRY(next, build<SubOp>({a, update}));
    a = next;
  }
  DS_TRY(flat, reshape(det, batchShape));
  DS_TRY(y, castTo(flat, elem));
  setOutput(n, 0, y);
  return success();
}

void mlir::ds::importer::registerMatMulHandlers(HandlerTable &t) {
  using I = MatMulImporter;
  t.add<I, &I::matmul>("MatMul");
  t.add<I, &I::gemm>("Gemm");
  t.add<I, &I::einsum>("Einsum");
  t.add<I, &I::det>("Det");
}
