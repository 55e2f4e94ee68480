//===- TorchParameters.cpp - the parameters PyTorch trains, from an export ===//
//
// See the header for why. The evidence, in order of strength:
//  1. ONNX training_info update bindings: exactly the tensors to train.
//  2. PyTorch 2's graph signature (graph metadata
//     "pkg.torch.export.ExportedProgram.graph_signature"): one line per
//     placeholder, `p_x: PARAMETER target='x'`, BUFFER, CONSTANT_TENSOR.
//  3. Each node's FX node (node metadata "pkg.torch.onnx.fx_node"), e.g.
//     `%linear = call_function[target=aten.linear.default](args = (%x,
//     %p_q_proj_weight))`: the placeholders that fed the ONNX node, so an
//     initializer read there holds that parameter (or a fold of it).
//  4. Without either: the roles of an initializer's readers (normalization
//     scale/bias, a bias add), for merged initializers only.
//
//===----------------------------------------------------------------------===//
#include "ds/Import/TorchParameters.h"

#include "ds/Import/OnnxModelFile.h"

#include <algorithm>
#include <optional>
#include <regex>
#include <set>

#include "google/protobuf/unknown_field_set.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir::ds;

namespace {

using Metadata = std::vector<std::pair<std::string, std::string>>;

/// `metadata_props` (field `number`) of a message, from its descriptor when
/// the linked ONNX knows the field, else from the unknown fields.
Metadata messageMetadata(const google::protobuf::Message &m, int number) {
  Metadata out;
  const auto *refl = m.GetReflection();
  auto add = [&](const std::string &bytes) {
    onnx::StringStringEntryProto e;
    if (e.ParseFromString(bytes)) out.emplace_back(e.key(), e.value());
  };
  const auto *f = m.GetDescriptor()->FindFieldByNumber(number);
  if (f && f->name() == "metadata_props") {
    for (int i = 0; i < refl->FieldSize(m, f); ++i)
      add(refl->GetRepeatedMessage(m, f, i).SerializeAsString());
    return out;
  }
  const google::protobuf::UnknownFieldSet &unknown = refl->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &u = unknown.field(i);
    if (u.number() == number && u.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      add(u.length_delimited());
  }
  return out;
}

/// A placeholder of the exported program: PARAMETER, BUFFER,
/// CONSTANT_TENSOR or USER_INPUT, and the module path it stands for.
struct Placeholder {
  std::string kind, target;
};

std::map<std::string, Placeholder> readSignature(const onnx::GraphProto &g) {
  std::map<std::string, Placeholder> out;
  for (const auto &[key, value] : graphMetadata(g)) {
    if (key != "pkg.torch.export.ExportedProgram.graph_signature") continue;
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(value).split(lines, '\n');
    for (llvm::StringRef line : lines) {
      auto [name, rest] = line.trim().split(": ");
      if (name.empty() || rest.empty()) continue;
      auto [kind, tail] = rest.split(' ');
      size_t at = tail.find("target='");
      if (at == llvm::StringRef::npos) continue;
      llvm::StringRef target = tail.drop_front(at + 8).take_until([](char c) { return c == '\''; });
      out[name.str()] = {kind.str(), target.str()};
    }
  }
  return out;
}

/// The FX node an ONNX node came from: its result name, the ATen op and the
/// names of the values it read (`%name` tokens of its args and kwargs).
struct FxNode {
  std::string result, op;
  std::vector<std::string> args;
};

std::optional<FxNode> readFxNode(const onnx::NodeProto &n) {
  for (const auto &[key, value] : nodeMetadata(n)) {
    if (key != "pkg.torch.onnx.fx_node") continue;
    llvm::StringRef s(value);
    if (!s.consume_front("%")) return std::nullopt;
    FxNode fx;
    fx.result = s.take_until([](char c) { return c == ' '; }).str();
    size_t t = s.find("target=");
    size_t call = s.find("](");
    if (t == llvm::StringRef::npos || call == llvm::StringRef::npos || call < t)
      return std::nullopt;
    fx.op = s.slice(t + 7, call).str();
    llvm::StringRef args = s.drop_front(call + 2);
    while (true) {
      size_t p = args.find('%');
      if (p == llvm::StringRef::npos) break;
      args = args.drop_front(p + 1);
      llvm::StringRef name = args.take_while([](char c) { return llvm::isAlnum(c) || c == '_'; });
      if (!name.empty()) fx.args.push_back(name.str());
    }
    return fx;
  }
  return std::nullopt;
}

/// What an input position holds by convention: a weight (matrix, table,
/// normalization scale) or a bias.
enum class Role { None, Weight, Bias };

Role roleOf(const onnx::NodeProto &n, int input) {
  const std::string &op = n.op_type();
  if (op == "Gemm" || op == "Conv" || op == "ConvTranspose")
    return input == 1 ? Role::Weight : input == 2 ? Role::Bias : Role::None;
  if (op == "MatMul") return Role::Weight;
  if (op == "Gather") return input == 0 ? Role::Weight : Role::None;
  if (op == "LayerNormalization" || op == "BatchNormalization" ||
      op == "InstanceNormalization" || op == "GroupNormalization" ||
      op == "SimplifiedLayerNormalization")
    return input == 1 ? Role::Weight : input == 2 ? Role::Bias : Role::None;
  if (op == "Add") return Role::Bias;
  if (op == "Mul") return Role::Weight;
  return Role::None;
}

llvm::StringRef lastComponent(llvm::StringRef target) { return target.rsplit('.').second; }

bool isFloatType(int32_t t) {
  return t == onnx::TensorProto_DataType_FLOAT || t == onnx::TensorProto_DataType_DOUBLE ||
         t == onnx::TensorProto_DataType_FLOAT16 || t == onnx::TensorProto_DataType_BFLOAT16;
}

/// Element count, or -1 for a negative or overflowing shape (the model is
/// untrusted; the importer reports such shapes).
int64_t elementsOf(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

/// A node reading initializer `input` at position `index`.
struct Use {
  int node, index;
};

class Recovery {
public:
  Recovery(onnx::ModelProto &model, const ParameterRecoveryOptions &options)
      : model_(model), g_(*model.mutable_graph()), options_(options) {}

  llvm::Expected<ParameterRecovery> run();

private:
  void indexGraph();
  void readTrainingInfo();
  void attribute();
  std::string attributeUse(const std::string &init, const Use &u);
  void untieByProvenance();
  void renameFoldedCopies();
  void restoreDroppedBiases();
  void splitMergedNodes();
  std::vector<std::string> missingParameters();
  llvm::Error foldedTables();
  void untieIdentityCopies();
  void untieByRole();
  void untieNamed();
  void markRunningStatistics();
  void splitPerUse(const std::string &init, const std::vector<Use> &uses, const std::string &why);
  std::string freshName(const std::string &want);
  void addCopy(const std::string &from, const std::string &name);
  void rename(const std::string &from, const std::string &to);
  onnx::TensorProto *initializer(const std::string &name) {
    auto it = inits_.find(name);
    return it == inits_.end() ? nullptr : g_.mutable_initializer(it->second);
  }
  bool isParameterTarget(const std::string &name) const {
    return parameterTargets_.count(name) > 0;
  }

  onnx::ModelProto &model_;
  onnx::GraphProto &g_;
  const ParameterRecoveryOptions &options_;
  ParameterRecovery r_;

  std::map<std::string, Placeholder> signature_;
  std::set<std::string> parameterTargets_;
  std::map<std::string, int> inits_;          // initializer name -> index
  std::map<std::string, std::vector<Use>> uses_; // float initializer -> readers
  std::vector<std::optional<FxNode>> fx_;
  bool haveFx_ = false;
  /// Per float initializer, the parameter each use was attributed to ("" if
  /// none), in `uses_` order.
  std::map<std::string, std::vector<std::string>> attributed_;
  std::set<std::string> exactTrained_; // training_info
  bool exact_ = false;
};

void Recovery::indexGraph() {
  inits_.clear();
  uses_.clear();
  for (int i = 0; i < g_.initializer_size(); ++i) inits_[g_.initializer(i).name()] = i;
  for (int n = 0; n < g_.node_size(); ++n) {
    const auto &node = g_.node(n);
    for (int j = 0; j < node.input_size(); ++j) {
      const onnx::TensorProto *t = initializer(node.input(j));
      if (t && isFloatType(t->data_type())) uses_[node.input(j)].push_back({n, j});
    }
  }
}

void Recovery::readTrainingInfo() {
  for (const auto &info : model_.training_info())
    for (const auto &b : info.update_binding()) {
      exact_ = true;
      exactTrained_.insert(b.key());
    }
}

/// The parameter the FX node of `u`'s reader says `init` holds: the one of
/// that name, else the only parameter the node read, else the one whose
/// role (weight/bias) matches the input position.
std::string Recovery::attributeUse(const std::string &init, const Use &u) {
  const auto &fx = fx_[u.node];
  if (!fx) return "";
  std::vector<std::string> candidates;
  for (const std::string &a : fx->args) {
    auto it = signature_.find(a);
    if (it != signature_.end() && it->second.kind == "PARAMETER" &&
        llvm::find(candidates, it->second.target) == candidates.end())
      candidates.push_back(it->second.target);
  }
  if (llvm::find(candidates, init) != candidates.end()) return init;
  if (candidates.size() == 1) return candidates[0];
  Role role = roleOf(g_.node(u.node), u.index);
  if (role == Role::None) return "";
  std::string match;
  int matches = 0;
  for (const std::string &c : candidates) {
    llvm::StringRef last = lastComponent(c);
    if ((role == Role::Weight && last == "weight") || (role == Role::Bias && last == "bias")) {
      match = c;
      ++matches;
    }
  }
  return matches == 1 ? match : "";
}

void Recovery::attribute() {
  attributed_.clear();
  if (!haveFx_) return;
  for (const auto &[init, uses] : uses_) {
    std::vector<std::string> &a = attributed_[init];
    for (const Use &u : uses) a.push_back(attributeUse(init, u));
  }
}

std::string Recovery::freshName(const std::string &want) {
  std::string name = want;
  for (int k = 1; inits_.count(name) || uses_.count(name); ++k) name = want + "#" + std::to_string(k);
  return name;
}

void Recovery::addCopy(const std::string &from, const std::string &name) {
  onnx::TensorProto copy = *initializer(from);
  copy.set_name(name);
  *g_.add_initializer() = std::move(copy);
  inits_[name] = g_.initializer_size() - 1;
  r_.neverTie.insert(name);
  r_.neverTie.insert(from);
}

/// One initializer feeding several parameters (the exporter merged equal
/// values: all-ones scales, zero biases) becomes one tensor per parameter.
void Recovery::untieByProvenance() {
  std::set<std::string> tie(options_.tie.begin(), options_.tie.end());
  for (auto &[init, targets] : attributed_) {
    std::vector<std::string> distinct;
    for (const std::string &t : targets)
      if (!t.empty() && llvm::find(distinct, t) == distinct.end()) distinct.push_back(t);
    if (distinct.size() < 2 || tie.count(init)) continue;
    // The initializer keeps its own parameter's uses (or the first's).
    std::string keep = llvm::find(distinct, init) != distinct.end() ? init : distinct[0];
    std::vector<std::string> made;
    for (const std::string &t : distinct) {
      if (t == keep) continue;
      std::string name = freshName(t);
      addCopy(init, name);
      made.push_back(name);
      const std::vector<Use> &uses = uses_[init];
      for (size_t i = 0; i < uses.size(); ++i)
        if (targets[i] == t) g_.mutable_node(uses[i].node)->set_input(uses[i].index, name);
    }
    r_.notes.push_back("initializer '" + init + "' holds " + std::to_string(distinct.size()) +
                       " parameters (the exporter merged equal values): untied into one tensor "
                       "each (" +
                       llvm::join(made, ", ") + "); --tie " + init + " keeps it one");
    // Its remaining uses may all be one other parameter's.
    for (std::string &t : targets)
      if (t != keep) t.clear();
  }
  indexGraph();
  attribute();
}

void Recovery::rename(const std::string &from, const std::string &to) {
  for (auto &n : *g_.mutable_node())
    for (auto &in : *n.mutable_input())
      if (in == from) in = to;
  for (auto *list : {g_.mutable_input(), g_.mutable_output(), g_.mutable_value_info()})
    for (auto &vi : *list)
      if (vi.name() == from) vi.set_name(to);
  initializer(from)->set_name(to);
  r_.renamed[from] = to;
  if (r_.neverTie.erase(from)) r_.neverTie.insert(to);
  indexGraph();
}

/// An initializer that is not a parameter by name but whose every reader
/// says it holds one parameter (a weight the exporter transposed and
/// folded: `val_110`) takes that parameter's name, unless the parameter is
/// an initializer of its own (a transposed copy of a tied weight, which
/// training ties by value).
void Recovery::renameFoldedCopies() {
  std::vector<std::pair<std::string, std::string>> todo;
  for (const auto &[init, targets] : attributed_) {
    if (isParameterTarget(init) || targets.empty()) continue;
    const std::string &t = targets[0];
    if (t.empty() || inits_.count(t) ||
        !std::all_of(targets.begin(), targets.end(), [&](const std::string &x) { return x == t; }))
      continue;
    todo.emplace_back(init, t);
  }
  // Two folds of one parameter: the first takes the name.
  std::set<std::string> taken;
  std::vector<std::string> said;
  for (auto &[from, to] : todo) {
    if (!taken.insert(to).second) continue;
    rename(from, to);
    said.push_back(from + " -> " + to);
  }
  if (!said.empty())
    r_.notes.push_back(std::to_string(said.size()) +
                       " initializers the exporter folded (transposed weights) renamed to the "
                       "parameters they hold: " +
                       llvm::join(said, ", "));
  indexGraph();
  attribute();
}

/// aten.addmm / aten.linear with a bias parameter exported as a Gemm
/// without C: the exporter's optimizer dropped an all-zero bias, which
/// PyTorch trains. It comes back as a zero initializer of its name.
void Recovery::restoreDroppedBiases() {
  std::vector<std::string> said;
  for (int n = 0; n < g_.node_size(); ++n) {
    onnx::NodeProto &node = *g_.mutable_node(n);
    const auto &fx = fx_[n];
    if (!fx || node.op_type() != "Gemm" || (node.input_size() > 2 && !node.input(2).empty()))
      continue;
    std::string bias;
    if (fx->op.find("aten.addmm") != std::string::npos && !fx->args.empty())
      bias = fx->args[0];
    else if (fx->op.find("aten.linear") != std::string::npos && fx->args.size() > 2)
      bias = fx->args[2];
    auto it = signature_.find(bias);
    if (it == signature_.end() || it->second.kind != "PARAMETER") continue;
    const std::string &target = it->second.target;
    if (inits_.count(target)) continue;
    const onnx::TensorProto *b = node.input_size() > 1 ? initializer(node.input(1)) : nullptr;
    if (!b || b->dims_size() != 2) continue;
    bool transB = false;
    for (const auto &a : node.attribute())
      if (a.name() == "transB") transB = a.i() != 0;
    int64_t cols = transB ? b->dims(0) : b->dims(1);
    onnx::TensorProto zero;
    zero.set_name(target);
    zero.set_data_type(b->data_type());
    zero.add_dims(cols);
    size_t bytes = onnxElementBytes(b->data_type());
    if (bytes == 0) continue;
    zero.set_raw_data(std::string(static_cast<size_t>(cols) * bytes, '\0'));
    while (node.input_size() < 3) node.add_input("");
    node.set_input(2, target);
    *g_.add_initializer() = std::move(zero);
    inits_[target] = g_.initializer_size() - 1;
    said.push_back(target);
  }
  if (!said.empty())
    r_.notes.push_back(std::to_string(said.size()) +
                       " zero biases the exporter dropped from Gemm nodes restored as "
                       "parameters: " +
                       llvm::join(said, ", "));
  indexGraph();
  attribute();
}

/// PARAMETER targets neither an initializer nor read through one.
std::vector<std::string> Recovery::missingParameters() {
  std::set<std::string> covered;
  for (const auto &[name, index] : inits_) covered.insert(name);
  for (const auto &[init, targets] : attributed_)
    for (const std::string &t : targets)
      if (!t.empty()) covered.insert(t);
  std::vector<std::string> missing;
  for (const std::string &t : parameterTargets_)
    if (!covered.count(t)) missing.push_back(t);
  return missing;
}

/// The optimizer merges equal nodes: GPT-NeoX's two LayerNorms of one input
/// (equal scales and biases at initialization) become one, and the second
/// one's parameters vanish. A reader whose FX node names a value no node
/// produces any more (`%layer_norm_1`), where it reads another of that op
/// (`layer_norm`), was given the merged node's output: the node is cloned
/// back for it, with the parameters the signature lists but the graph lost,
/// picked by role (weight/bias) and by the reader's module path.
void Recovery::splitMergedNodes() {
  std::set<std::string> fxProduced;
  std::map<std::string, int> producer; // ONNX value -> node
  for (int n = 0; n < g_.node_size(); ++n) {
    if (fx_[n]) fxProduced.insert(fx_[n]->result);
    for (const auto &o : g_.node(n).output()) producer[o] = n;
  }
  auto stem = [](llvm::StringRef v) {
    auto [head, tail] = v.rsplit('_');
    return !tail.empty() && llvm::all_of(tail, llvm::isDigit) ? head : v;
  };
  auto commonPrefix = [](const std::string &a, const std::string &b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return i;
  };
  std::vector<std::string> missing = missingParameters();
  std::map<std::string, std::string> clones; // merged-away FX value -> its clone's output
  std::vector<std::string> said;
  for (int n = 0; n < g_.node_size(); ++n) {
    if (!fx_[n]) continue;
    for (int j = 0; j < g_.node(n).input_size(); ++j) {
      const std::string v = g_.node(n).input(j);
      auto pit = producer.find(v);
      if (pit == producer.end() || llvm::is_contained(fx_[n]->args, v)) continue;
      std::vector<std::string> gone;
      for (const std::string &a : fx_[n]->args)
        if (!fxProduced.count(a) && !producer.count(a) && !inits_.count(a) &&
            !signature_.count(a) && stem(a) == stem(v) && !llvm::is_contained(gone, a))
          gone.push_back(a);
      if (gone.size() != 1) continue;
      const std::string &a = gone[0];
      if (auto c = clones.find(a); c != clones.end()) {
        g_.mutable_node(n)->set_input(j, c->second);
        continue;
      }
      // The reader's module path, from the parameters its FX node read.
      std::vector<std::string> readerTargets;
      for (const std::string &arg : fx_[n]->args)
        if (auto it = signature_.find(arg); it != signature_.end() && it->second.kind == "PARAMETER")
          readerTargets.push_back(it->second.target);
      onnx::NodeProto clone = g_.node(pit->second);
      bool complete = true;
      std::vector<std::pair<int, std::string>> params; // input -> missing target
      for (int k = 0; k < clone.input_size() && complete; ++k) {
        const onnx::TensorProto *t = initializer(clone.input(k));
        if (!t || !isFloatType(t->data_type()) || elementsOf(*t) <= 1) continue;
        Role role = roleOf(clone, k);
        std::string best;
        size_t bestLen = 0;
        int ties = 0;
        for (const std::string &m : missing) {
          llvm::StringRef last = lastComponent(m);
          if ((role == Role::Weight && last != "weight") || (role == Role::Bias && last != "bias") ||
              role == Role::None)
            continue;
          size_t len = 0;
          for (const std::string &r : readerTargets) len = std::max(len, commonPrefix(m, r));
          if (best.empty() || len > bestLen) {
            best = m;
            bestLen = len;
            ties = 0;
          } else if (len == bestLen) {
            ++ties;
          }
        }
        if (best.empty() || ties > 0) complete = false;
        else params.emplace_back(k, best);
      }
      if (!complete || params.empty()) continue;
      for (auto &[k, target] : params) {
        addCopy(clone.input(k), target);
        clone.set_input(k, target);
        missing.erase(llvm::find(missing, target));
      }
      std::string out = a;
      for (int i = 1; producer.count(out) || inits_.count(out); ++i) out = a + "#" + std::to_string(i);
      clone.set_output(0, out);
      for (int o = 1; o < clone.output_size(); ++o) clone.set_output(o, ""); // the first output only
      clone.set_name(clone.name() + "/" + a);
      clones[a] = out;
      producer[out] = -1;
      g_.mutable_node(n)->set_input(j, out);
      // Right after the merged node: its inputs are defined there.
      g_.mutable_node()->Add(std::move(clone));
      int at = pit->second + 1;
      for (int i = g_.node_size() - 1; i > at; --i) g_.mutable_node()->SwapElements(i, i - 1);
      fx_.insert(fx_.begin() + at, std::nullopt);
      if (n >= at) ++n;
      for (auto &[value, index] : producer)
        if (index >= at) ++index;
      std::vector<std::string> names;
      for (auto &[k, target] : params) names.push_back(target);
      said.push_back(a + " (" + llvm::join(names, ", ") + ")");
    }
  }
  if (!said.empty())
    r_.notes.push_back(std::to_string(said.size()) +
                       " nodes the exporter merged with an equal one are split back, with the "
                       "parameters they had: " +
                       llvm::join(said, "; "));
  indexGraph();
  attribute();
}

/// Float tables the exporter computed and folded: an embedding lookup of a
/// parameter (named after the FX `embedding` node that made it) is trained,
/// over its distinct rows; anything else was computed from buffers and
/// constants (RoPE's cos/sin, causal masks) and is held constant.
llvm::Error Recovery::foldedTables() {
  std::vector<std::string> missing = missingParameters();

  static const std::regex embedding("embedding(_[0-9]+)?");
  // `x @ w.T` (Falcon's FalconLinear): the transpose of a parameter,
  // folded and named after its FX node.
  static const std::regex transpose("(permute|t|transpose|numpy_T)(_[0-9]+)?");
  // `x * (1 + w)` (Gemma's RMSNorm): the optimizer folds every layer's
  // `1 + w` (equal at initialization) into one table, each reader's FX node
  // still naming its own `add`. Each becomes the table plus a zero offset
  // trained in w's place (the same gradient and update; AdamW's decay acts
  // on the offset, which is w itself when w starts at zero).
  static const std::regex shifted("add(_[0-9]+)?");
  std::vector<std::string> weightsMissing;
  for (const std::string &m : missing)
    if (lastComponent(m) == "weight") weightsMissing.push_back(m);
  std::vector<std::string> offsets;
  struct ShiftedScale {
    std::string table;
    std::vector<Use> uses;
    std::vector<std::string> perUse, distinct;
  };
  std::vector<ShiftedScale> plans;
  for (auto &[init, uses] : uses_) {
    if (!std::regex_match(init, shifted) || signature_.count(init) || isParameterTarget(init) ||
        elementsOf(*initializer(init)) <= 1)
      continue;
    const std::vector<std::string> &targets = attributed_[init];
    if (std::any_of(targets.begin(), targets.end(), [](const std::string &t) { return !t.empty(); }))
      continue;
    // Each reader: a Mul whose FX node reads one value that is none of its
    // ONNX inputs, an `add`: the reader's own folded `1 + w`.
    std::vector<std::string> perUse;
    for (const Use &u : uses) {
      const onnx::NodeProto &n = g_.node(u.node);
      std::string f;
      if (n.op_type() == "Mul" && fx_[u.node] && n.input_size() == 2) {
        const std::string &other = n.input(1 - u.index);
        for (const std::string &a : fx_[u.node]->args)
          if (std::regex_match(a, shifted) && a != other) f = f.empty() ? a : "?";
      }
      if (f.empty() || f == "?") break;
      perUse.push_back(f);
    }
    if (perUse.size() != uses.size()) continue;
    std::vector<std::string> distinct;
    for (const std::string &f : perUse)
      if (!llvm::is_contained(distinct, f)) distinct.push_back(f);
    if (distinct.size() > weightsMissing.size()) continue;
    plans.push_back({init, uses, perUse, distinct});
  }
  // Apply: per FX value a zero offset and `table + offset`, the Adds first
  // in the graph (they read initializers only), readers rewired.
  std::set<std::string> values;
  for (const auto &n : g_.node())
    for (const auto &o : n.output()) values.insert(o);
  std::vector<onnx::NodeProto> adds;
  for (ShiftedScale &plan : plans) {
    const onnx::TensorProto &t = *initializer(plan.table);
    std::map<std::string, std::string> sumOf;
    for (const std::string &f : plan.distinct) {
      std::string name = freshName(f + ".offset");
      onnx::TensorProto zero;
      zero.set_name(name);
      zero.set_data_type(t.data_type());
      for (int64_t d : t.dims()) zero.add_dims(d);
      zero.set_raw_data(std::string(
          static_cast<size_t>(elementsOf(t)) * onnxElementBytes(t.data_type()), '\0'));
      *g_.add_initializer() = std::move(zero);
      inits_[name] = g_.initializer_size() - 1;
      std::string sum = f + ".scale";
      for (int i = 1; values.count(sum) || inits_.count(sum); ++i)
        sum = f + ".scale#" + std::to_string(i);
      values.insert(sum);
      onnx::NodeProto add;
      add.set_op_type("Add");
      add.set_name(f + ".restored");
      add.add_input(plan.table);
      add.add_input(name);
      add.add_output(sum);
      adds.push_back(std::move(add));
      sumOf[f] = sum;
      offsets.push_back(f);
    }
    for (size_t i = 0; i < plan.uses.size(); ++i)
      g_.mutable_node(plan.uses[i].node)->set_input(plan.uses[i].index, sumOf[plan.perUse[i]]);
    r_.heldConstant.insert(plan.table);
  }
  if (!adds.empty()) {
    for (onnx::NodeProto &a : adds) *g_.add_node() = std::move(a);
    std::rotate(g_.mutable_node()->begin(), g_.mutable_node()->end() - adds.size(),
                g_.mutable_node()->end());
    fx_.insert(fx_.begin(), adds.size(), std::nullopt);
  }
  if (!offsets.empty()) {
    indexGraph();
    attribute();
    r_.notes.push_back(std::to_string(offsets.size()) +
                       " folded `1 + w` scales (one table the exporter shared) are trained as "
                       "the table plus a zero offset each (" +
                       llvm::join(offsets, ", ") + "), in place of parameters the signature lists "
                       "but the graph does not read (" + llvm::join(weightsMissing, ", ") +
                       "); AdamW's weight decay acts on the offset, exactly as on w when w starts "
                       "at zero");
  }

  std::vector<std::string> lookups, transposes, held;
  for (const auto &[init, uses] : uses_) {
    if (signature_.count(init) || isParameterTarget(init)) continue;
    const std::vector<std::string> &targets = attributed_[init];
    if (std::any_of(targets.begin(), targets.end(), [](const std::string &t) { return !t.empty(); }))
      continue;
    bool placeholderTarget = false;
    for (const auto &[p, ph] : signature_) placeholderTarget |= ph.target == init;
    if (placeholderTarget || elementsOf(*initializer(init)) <= 1) continue;
    if (r_.heldConstant.count(init) || llvm::StringRef(init).ends_with(".offset")) continue;
    if (std::regex_match(init, embedding) && !missing.empty())
      lookups.push_back(init);
    else if (std::regex_match(init, transpose) && !missing.empty())
      transposes.push_back(init);
    else
      held.push_back(init);
  }
  if (!transposes.empty())
    r_.notes.push_back(std::to_string(transposes.size()) +
                       " initializers are the exporter's folded transposes of parameters its "
                       "signature lists but the graph does not read (" +
                       llvm::join(missing, ", ") + "): trained (" + llvm::join(transposes, ", ") +
                       ")");
  for (const std::string &h : held) r_.heldConstant.insert(h);
  if (!held.empty())
    r_.notes.push_back("held constant: " + std::to_string(held.size()) +
                       " tables the exporter computed from buffers and constants and folded "
                       "(" +
                       llvm::join(held, ", ") + ")");

  for (const std::string &name : lookups) {
    onnx::TensorProto *t = initializer(name);
    if (t->dims_size() < 2 || elementsOf(*t) < 0) continue;
    // A copy without the trained weights' data (the plan's source model)
    // lacks a table trained as it is; a table with repeated rows is not
    // trained as it is, so it still has its data there.
    bool stripped = (!t->has_raw_data() && t->float_data_size() == 0 &&
                     t->double_data_size() == 0 && t->int32_data_size() == 0 &&
                     t->external_data_size() == 0) ||
                    (options_.shapesOnly && t->external_data_size() > 0);
    int64_t width = t->dims(t->dims_size() - 1);
    size_t rowBytes = static_cast<size_t>(width) * onnxElementBytes(t->data_type());
    if (rowBytes == 0) continue;
    std::string bytes;
    if (!stripped) {
      auto payload = readTensorPayload(*t, options_.modelDir);
      if (!payload) return payload.takeError();
      bytes = std::move(payload->bytes);
    }
    size_t rows = static_cast<size_t>(elementsOf(*t) / width);
    if (!stripped && bytes.size() != rows * rowBytes) continue;
    std::map<std::string, int64_t> rowIndex;
    std::vector<int64_t> index;
    std::string distinct;
    for (size_t i = 0; i < rows && !stripped; ++i) {
      std::string row = bytes.substr(i * rowBytes, rowBytes);
      auto [it, fresh] = rowIndex.emplace(row, static_cast<int64_t>(rowIndex.size()));
      if (fresh) distinct += row;
      index.push_back(it->second);
    }
    std::string target = missing.size() == 1 && lookups.size() == 1 ? missing[0] : "";
    if (stripped || rowIndex.size() == rows) {
      // Every row its own: the table is the parameter's rows as they are.
      if (!target.empty()) {
        rename(name, target);
        r_.notes.push_back("initializer '" + name + "' is the exporter's folded lookup of " +
                           target + " (every row used once): trained under that name");
      } else {
        r_.notes.push_back("initializer '" + name +
                           "' is the exporter's folded lookup of one of the parameters its "
                           "signature lists but the graph does not read (" +
                           llvm::join(missing, ", ") + "): trained (every row used once)");
      }
      continue;
    }
    // Repeated rows are one parameter row read several times (BERT's token
    // types): train the distinct rows, read through the lookup, so their
    // gradients add up as PyTorch's embedding backward does.
    std::string rowsName = freshName(target.empty() ? name + ".rows" : target);
    onnx::TensorProto table;
    table.set_name(rowsName);
    table.set_data_type(t->data_type());
    table.add_dims(static_cast<int64_t>(rowIndex.size()));
    table.add_dims(width);
    table.set_raw_data(distinct);
    onnx::TensorProto idx;
    idx.set_name(freshName(name + ".index"));
    idx.set_data_type(onnx::TensorProto_DataType_INT64);
    for (int i = 0; i + 1 < t->dims_size(); ++i) idx.add_dims(t->dims(i));
    idx.set_raw_data(std::string(reinterpret_cast<const char *>(index.data()),
                                 index.size() * sizeof(int64_t)));
    onnx::NodeProto gather;
    gather.set_op_type("Gather");
    gather.set_name(name + ".lookup");
    gather.add_input(rowsName);
    gather.add_input(idx.name());
    gather.add_output(name);
    // The table's own entry goes; the lookup computes it, first in the graph.
    int at = inits_[name];
    g_.mutable_initializer()->DeleteSubrange(at, 1);
    *g_.add_initializer() = std::move(table);
    *g_.add_initializer() = std::move(idx);
    g_.mutable_node()->Add(std::move(gather));
    std::rotate(g_.mutable_node()->rbegin(), g_.mutable_node()->rbegin() + 1,
                g_.mutable_node()->rend());
    fx_.insert(fx_.begin(), std::nullopt);
    indexGraph();
    r_.notes.push_back("initializer '" + name + "' is the exporter's folded lookup of " +
                       std::to_string(rowIndex.size()) + " distinct rows read " +
                       std::to_string(rows) + " times" +
                       (target.empty() ? "" : " (" + target + ")") + ": trained as '" + rowsName +
                       "' [" + std::to_string(rowIndex.size()) + ", " + std::to_string(width) +
                       "] through a Gather, so the repeated rows stay one parameter");
  }
  // What the signature lists but the graph no longer has.
  std::vector<std::string> lost = missingParameters();
  if (!lost.empty() && lookups.empty() && transposes.empty() && offsets.empty())
    r_.notes.push_back("parameters the exporter's signature lists that no node reads: " +
                       llvm::join(lost, ", ") +
                       "; a parameter tied to another (an embedding and its LM head) is read "
                       "as that one, but one the exporter's optimizer folded into arithmetic "
                       "(1 + w) or merged away with its node is not trained: export with "
                       "optimize=False to train it");
  return llvm::Error::success();
}

/// An inference BatchNormalization's mean and variance are running
/// statistics (PyTorch's running_mean / running_var buffers), never trained
/// by gradients; TorchScript exports them as plain initializers. They are
/// held constant. An initializer that is also read in another role (an
/// exporter's merge of equal initial values: a fresh BatchNorm's scale and
/// variance are both ones) gives the statistics a copy of their own in
/// training, so the other role stays a parameter.
void Recovery::markRunningStatistics() {
  bool edited = false;
  for (const auto &[init, uses] : uses_) {
    std::vector<Use> stats, others;
    for (const Use &u : uses) {
      const onnx::NodeProto &n = g_.node(u.node);
      bool stat = n.op_type() == "BatchNormalization" && n.domain().empty() &&
                  (u.index == 3 || u.index == 4);
      (stat ? stats : others).push_back(u);
    }
    if (stats.empty() || r_.heldConstant.count(init)) continue;
    if (others.empty() || !options_.edit) {
      // Inference reads the values either way.
      if (others.empty()) {
        r_.heldConstant.insert(init);
        r_.runningStatistics.insert(init);
      }
      continue;
    }
    std::string copy = freshName(init + "@running_statistics");
    addCopy(init, copy);
    for (const Use &u : stats) g_.mutable_node(u.node)->set_input(u.index, copy);
    r_.heldConstant.insert(copy);
    r_.runningStatistics.insert(copy);
    r_.notes.push_back("initializer '" + init +
                       "' is read as a BatchNormalization's running statistic and in another "
                       "role: the statistic reads a constant copy, '" + copy + "'");
    edited = true;
  }
  if (edited) indexGraph();
}

void Recovery::splitPerUse(const std::string &init, const std::vector<Use> &uses,
                           const std::string &why) {
  std::vector<std::string> made;
  for (size_t i = 1; i < uses.size(); ++i) {
    const onnx::NodeProto &node = g_.node(uses[i].node);
    std::string name = freshName(init + "@" +
                                 (node.name().empty() ? node.op_type() + "_" +
                                                            std::to_string(uses[i].node)
                                                      : node.name()));
    addCopy(init, name);
    g_.mutable_node(uses[i].node)->set_input(uses[i].index, name);
    made.push_back(name);
  }
  r_.notes.push_back("initializer '" + init + "' " + why + ": untied into one tensor per reader (" +
                     llvm::join(made, ", ") + ")");
}

/// PyTorch 1.x's TorchScript exporter writes parameters with equal initial
/// values (LayerNorm scales, zero biases, the layers of a deep-copied
/// stack) as one initializer and Identity nodes named after the others:
/// `lns.1.weight = Identity(lns.0.weight)`. Each such output is a
/// parameter of its own: it becomes an initializer of that name (a copy),
/// and the Identity goes.
void Recovery::untieIdentityCopies() {
  std::set<std::string> tie(options_.tie.begin(), options_.tie.end());
  std::set<std::string> graphNames;
  for (const auto &vi : g_.input()) graphNames.insert(vi.name());
  for (const auto &vi : g_.output()) graphNames.insert(vi.name());
  std::vector<std::string> made;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (const onnx::NodeProto &n : g_.node()) {
    const onnx::TensorProto *t =
        n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1
            ? initializer(n.input(0))
            : nullptr;
    const std::string out = n.output_size() == 1 ? n.output(0) : "";
    if (!t || !isFloatType(t->data_type()) || tie.count(n.input(0)) || inits_.count(out) ||
        graphNames.count(out) || out.empty()) {
      *kept.Add() = n;
      continue;
    }
    addCopy(n.input(0), out);
    made.push_back(out);
  }
  if (made.empty()) return;
  g_.mutable_node()->Swap(&kept);
  r_.notes.push_back(std::to_string(made.size()) +
                     " parameters the exporter wrote as Identity copies of another (equal "
                     "initial values) are tensors of their own: " +
                     llvm::join(made, ", "));
  indexGraph();
}

/// Without the exporter's records: an initializer read only as the scale
/// or bias of several normalizations, or as the bias of several layers, is
/// the exporter's merge of equal initial values; weights read as matrices
/// or tables (an embedding and its LM head) are genuine ties and stay.
void Recovery::untieByRole() {
  std::set<std::string> tie(options_.tie.begin(), options_.tie.end());
  std::map<std::string, std::string> producer; // value -> op type of its node
  for (const auto &n : g_.node())
    for (const auto &o : n.output()) producer[o] = n.op_type();
  std::vector<std::string> todo;
  for (const auto &[init, uses] : uses_) {
    if (uses.size() < 2 || tie.count(init)) continue;
    bool anyFx = false;
    for (const Use &u : uses) anyFx |= fx_[u.node].has_value();
    if (anyFx) continue;
    const onnx::TensorProto &t = *initializer(init);
    bool scaleOrBias = t.dims_size() == 1 && elementsOf(t) > 1;
    for (const Use &u : uses) {
      const onnx::NodeProto &n = g_.node(u.node);
      Role role = roleOf(n, u.index);
      bool norm = n.op_type().find("Normalization") != std::string::npos && role != Role::None;
      bool bias = (n.op_type() == "Gemm" || n.op_type() == "Conv") && role == Role::Bias;
      if (n.op_type() == "Add" && n.input_size() == 2) {
        const std::string &other = n.input(1 - u.index);
        auto p = producer.find(other);
        bias = p != producer.end() && (p->second == "MatMul" || p->second == "Gemm");
      }
      scaleOrBias &= norm || bias;
    }
    if (scaleOrBias) todo.push_back(init);
  }
  for (const std::string &init : todo)
    splitPerUse(init, uses_[init],
                "is the scale or bias of " + std::to_string(uses_[init].size()) +
                    " layers (an exporter's merge of equal initial values; --tie " + init +
                    " keeps it one)");
  indexGraph();
}

void Recovery::untieNamed() {
  for (const std::string &init : options_.untie) {
    r_.neverTie.insert(init);
    auto it = uses_.find(init);
    if (it == uses_.end() || it->second.size() < 2) continue;
    std::vector<Use> uses = it->second;
    splitPerUse(init, uses, "is read by " + std::to_string(uses.size()) + " nodes (--untie)");
    indexGraph();
  }
}

llvm::Expected<ParameterRecovery> Recovery::run() {
  indexGraph();
  for (const std::string &name : options_.tie)
    if (!inits_.count(name))
      return llvm::createStringError("--tie names '" + name +
                                     "', which is not an initializer of the model");
  for (const std::string &name : options_.untie)
    if (!inits_.count(name))
      return llvm::createStringError("--untie names '" + name +
                                     "', which is not an initializer of the model");
  for (const std::string &name : options_.tie)
    if (llvm::find(options_.untie, name) != options_.untie.end())
      return llvm::createStringError("--tie and --untie both name '" + name + "'");

  signature_ = readSignature(g_);
  for (const auto &[name, p] : signature_) {
    if (p.kind == "PARAMETER") parameterTargets_.insert(p.target);
    if ((p.kind == "BUFFER" || p.kind == "CONSTANT_TENSOR") && inits_.count(p.target))
      r_.heldConstant.insert(p.target);
  }
  markRunningStatistics();
  readTrainingInfo();
  if (exact_) {
    for (const auto &t : g_.initializer())
      if (isFloatType(t.data_type()) && !exactTrained_.count(t.name()))
        r_.heldConstant.insert(t.name());
    for (const std::string &name : exactTrained_)
      if (!inits_.count(name))
        return llvm::createStringError("training_info's update_binding names '" + name +
                                       "', which is not an initializer of the model");
    for (const std::string &name : exactTrained_) r_.trained.insert(name);
    r_.notes.push_back("training_info's update bindings name the " +
                       std::to_string(exactTrained_.size()) + " tensors trained");
  }
  if (!options_.edit) return std::move(r_);

  for (const auto &n : g_.node()) {
    fx_.push_back(readFxNode(n));
    haveFx_ |= fx_.back().has_value();
  }
  if (haveFx_ && !signature_.empty() && !exact_) {
    attribute();
    untieByProvenance();
    renameFoldedCopies();
    restoreDroppedBiases();
    splitMergedNodes();
    if (llvm::Error e = foldedTables()) return std::move(e);
  }
  untieIdentityCopies();
  untieByRole();
  untieNamed();
  return std::move(r_);
}

} // namespace

std::optional<int64_t> mlir::ds::torchPaddingIndex(const onnx::NodeProto &n) {
  for (const auto &[key, value] : nodeMetadata(n)) {
    if (key != "pkg.torch.onnx.fx_node") continue;
    llvm::StringRef s(value);
    if (s.find("target=torch.ops.aten.embedding.") == llvm::StringRef::npos) return std::nullopt;
    size_t at = s.find("args = (");
    if (at == llvm::StringRef::npos) return std::nullopt;
    llvm::StringRef args = s.drop_front(at + 8).take_until([](char c) { return c == ')'; });
    llvm::SmallVector<llvm::StringRef> parts;
    args.split(parts, ',');
    int64_t padding;
    if (parts.size() < 3 || parts[2].trim().getAsInteger(10, padding) || padding == -1)
      return std::nullopt;
    return padding;
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> mlir::ds::graphMetadata(const onnx::GraphProto &g) {
  return messageMetadata(g, 16);
}

std::vector<std::pair<std::string, std::string>> mlir::ds::nodeMetadata(const onnx::NodeProto &n) {
  return messageMetadata(n, 9);
}

llvm::Expected<ParameterRecovery>
mlir::ds::recoverParameters(onnx::ModelProto &model, const ParameterRecoveryOptions &options) {
  Recovery r(model, options);
  return r.run();
}
