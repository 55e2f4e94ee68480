#include "runtime/exec/Session.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_join.h"
#include "runtime/io/Npy.h"

namespace ds::rt {

Session::~Session() {
  for (auto &[ptr, space] : owned_) backend_.release(ptr, space);
}

absl::StatusOr<std::unique_ptr<Session>> Session::create(const LoadedPlan &plan,
                                                         Backend &backend) {
  std::unique_ptr<Session> s(new Session(plan, backend));
  DS_RETURN_IF_ERROR(s->bind());
  return s;
}

absl::Status Session::bind() {
  const plan::Plan &p = plan_.plan();
  DS_ASSIGN_OR_RETURN(arena_, backend_.allocate(p.arena_bytes(), plan::DEVICE));
  owned_.push_back({arena_, plan::DEVICE});
  views_.resize(p.buffers_size());
  for (const auto &b : p.buffers()) {
    TensorView &v = views_[b.id()];
    v.dtype = b.dtype();
    v.shape.assign(b.shape().begin(), b.shape().end());
    v.numel = static_cast<int64_t>(b.size_bytes() / dtypeSize(b.dtype()));
    switch (b.kind()) {
    case plan::Buffer::ARENA:
      v.data = static_cast<uint8_t *>(arena_) + b.offset();
      break;
    case plan::Buffer::WEIGHT: {
      if (backend_.sharesHostMemory()) {
        // Kernels never write WEIGHT buffers (the loader rejects such plans).
        v.data = const_cast<uint8_t *>(plan_.weightData(b));
      } else {
        DS_ASSIGN_OR_RETURN(v.data, backend_.allocate(b.size_bytes(), plan::DEVICE));
        owned_.push_back({v.data, plan::DEVICE});
        DS_RETURN_IF_ERROR(backend_.copyFromHost(v.data, plan_.weightData(b), b.size_bytes()));
      }
      break;
    }
    case plan::Buffer::STATE: {
      // State is written by programs: its own memory, initialized once.
      DS_ASSIGN_OR_RETURN(v.data, backend_.allocate(b.size_bytes(), plan::DEVICE));
      owned_.push_back({v.data, plan::DEVICE});
      if (b.state_init() == plan::Buffer::STATE_INIT_WEIGHTS) {
        DS_RETURN_IF_ERROR(backend_.copyFromHost(v.data, plan_.weightData(b), b.size_bytes()));
      } else {
        std::vector<uint8_t> zeros(b.size_bytes(), 0);
        DS_RETURN_IF_ERROR(backend_.copyFromHost(v.data, zeros.data(), zeros.size()));
      }
      break;
    }
    case plan::Buffer::INPUT:
    case plan::Buffer::OUTPUT: {
      DS_ASSIGN_OR_RETURN(v.data, backend_.allocate(b.size_bytes(), plan::DEVICE));
      owned_.push_back({v.data, plan::DEVICE});
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("buffer ", b.id(), " has no kind"));
    }
  }
  for (const auto &prog : p.programs()) {
    auto &prepared = steps_[prog.name()];
    for (const auto &step : prog.steps()) {
      std::vector<TensorView> ins, outs;
      for (uint32_t id : step.inputs()) ins.push_back(views_[id]);
      for (uint32_t id : step.outputs()) outs.push_back(views_[id]);
      auto ps = backend_.prepare(step, ins, outs);
      if (!ps.ok())
        return absl::Status(ps.status().code(),
                            absl::StrCat("plan ", plan_.path(), ", program '", prog.name(),
                                         "': ", ps.status().message()));
      prepared.push_back(std::move(*ps));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NamedArrays> Session::run(const std::string &name,
                                         const std::map<std::string, HostArray> &inputs) {
  const plan::Program *prog = plan_.findProgram(name);
  if (!prog) {
    std::vector<std::string> names;
    for (const auto &q : plan_.plan().programs()) names.push_back(q.name());
    return absl::NotFoundError(absl::StrCat("plan ", plan_.path(), " has no program '", name,
                                            "' (it has: ", absl::StrJoin(names, ", "), ")"));
  }
  const plan::Plan &p = plan_.plan();
  std::vector<std::string> expected;
  for (uint32_t id : prog->inputs()) expected.push_back(p.buffers(id).io_name());
  for (const auto &[n, arr] : inputs)
    if (std::find(expected.begin(), expected.end(), n) == expected.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown input '", n, "'; the model's inputs are: ", absl::StrJoin(expected, ", ")));
  for (uint32_t id : prog->inputs()) {
    const plan::Buffer &b = p.buffers(id);
    auto it = inputs.find(b.io_name());
    if (it == inputs.end())
      return absl::InvalidArgumentError(absl::StrCat("missing input '", b.io_name(), "' (",
                                                     dtypeName(b.dtype()), " [",
                                                     shapeToString(views_[id].shape), "])"));
    const HostArray &a = it->second;
    if (!npyHolds(a.dtype, b.dtype()))
      return absl::InvalidArgumentError(absl::StrCat("input '", b.io_name(), "' must be ",
                                                     dtypeName(b.dtype()), ", got ",
                                                     dtypeName(a.dtype)));
    if (a.shape != views_[id].shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", b.io_name(), "' must have shape [", shapeToString(views_[id].shape),
          "], got [", shapeToString(a.shape), "] (recompile with --input-shape to change it)"));
    DS_RETURN_IF_ERROR(backend_.copyFromHost(views_[id].data, a.data.data(), b.size_bytes()));
  }
  profile_.clear();
  auto &steps = steps_[name];
  for (size_t i = 0; i < steps.size(); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    absl::Status st = steps[i]();
    if (!st.ok())
      return absl::Status(st.code(), absl::StrCat("program '", name, "', step ", i, ": ",
                                                  st.message()));
    if (profiling_) {
      DS_RETURN_IF_ERROR(backend_.synchronize());
      const auto &s = prog->steps(static_cast<int>(i));
      profile_.push_back({s.kernel(), s.location(),
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    }
  }
  DS_RETURN_IF_ERROR(backend_.synchronize());
  NamedArrays out;
  for (uint32_t id : prog->outputs()) {
    const plan::Buffer &b = p.buffers(id);
    HostArray a;
    a.dtype = b.dtype();
    a.shape = views_[id].shape;
    a.data.resize(b.size_bytes());
    DS_RETURN_IF_ERROR(backend_.copyToHost(a.data.data(), views_[id].data, b.size_bytes()));
    out.emplace_back(b.io_name(), std::move(a));
  }
  return out;
}

const plan::Buffer *Session::stateBuffer(const std::string &name) const {
  for (const auto &b : plan_.plan().buffers())
    if (b.kind() == plan::Buffer::STATE && b.io_name() == name) return &b;
  return nullptr;
}

std::vector<std::string> Session::stateNames() const {
  std::vector<std::string> names;
  for (const auto &b : plan_.plan().buffers())
    if (b.kind() == plan::Buffer::STATE) names.push_back(b.io_name());
  return names;
}

absl::StatusOr<HostArray> Session::readState(const std::string &name) {
  const plan::Buffer *b = stateBuffer(name);
  if (!b) return absl::NotFoundError(absl::StrCat("no state buffer '", name, "'"));
  HostArray a;
  a.dtype = b->dtype();
  a.shape = views_[b->id()].shape;
  a.data.resize(b->size_bytes());
  DS_RETURN_IF_ERROR(backend_.synchronize());
  DS_RETURN_IF_ERROR(backend_.copyToHost(a.data.data(), views_[b->id()].data, b->size_bytes()));
  return a;
}

absl::Status Session::writeState(const std::string &name, const HostArray &value) {
  const plan::Buffer *b = stateBuffer(name);
  if (!b) return absl::NotFoundError(absl::StrCat("no state buffer '", name, "' in the plan"));
  if (!npyHolds(value.dtype, b->dtype()) || value.shape != views_[b->id()].shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "state '", name, "' is ", dtypeName(b->dtype()), " [",
        shapeToString(views_[b->id()].shape), "], the value given is ", dtypeName(value.dtype),
        " [", shapeToString(value.shape), "]"));
  return backend_.copyFromHost(views_[b->id()].data, value.data.data(), b->size_bytes());
}

} // namespace ds::rt
