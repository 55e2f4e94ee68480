#include "runtime/exec/Session.h"

#include <chrono>

#include "absl/strings/str_join.h"

namespace ds::rt {

Session::~Session() {
  for (auto &[ptr, space] : owned_) backend_.release(ptr, space);
}

absl::StatusOr<std::unique_ptr<Session>>
Session::create(const LoadedPlan &plan, Backend &backend, const std::string &program) {
  std::unique_ptr<Session> s(new Session(plan, backend));
  s->program_ = plan.findProgram(program);
  if (!s->program_) {
    std::vector<std::string> names;
    for (const auto &p : plan.plan().programs()) names.push_back(p.name());
    return absl::NotFoundError(absl::StrCat("plan ", plan.path(), " has no program '",
                                            program, "' (it has: ",
                                            absl::StrJoin(names, ", "), ")"));
  }
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
  for (const auto &step : program_->steps()) {
    std::vector<TensorView> ins, outs;
    for (uint32_t id : step.inputs()) ins.push_back(views_[id]);
    for (uint32_t id : step.outputs()) outs.push_back(views_[id]);
    auto prepared = backend_.prepare(step, ins, outs);
    if (!prepared.ok())
      return absl::Status(prepared.status().code(),
                          absl::StrCat("plan ", plan_.path(), ": ", prepared.status().message()));
    steps_.push_back(std::move(*prepared));
  }
  return absl::OkStatus();
}

absl::StatusOr<NamedArrays> Session::run(const std::map<std::string, HostArray> &inputs) {
  const plan::Plan &p = plan_.plan();
  std::vector<std::string> expected;
  for (uint32_t id : program_->inputs()) expected.push_back(p.buffers(id).io_name());
  for (const auto &[name, arr] : inputs)
    if (std::find(expected.begin(), expected.end(), name) == expected.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown input '", name, "'; the model's inputs are: ", absl::StrJoin(expected, ", ")));
  for (uint32_t id : program_->inputs()) {
    const plan::Buffer &b = p.buffers(id);
    auto it = inputs.find(b.io_name());
    if (it == inputs.end())
      return absl::InvalidArgumentError(absl::StrCat("missing input '", b.io_name(), "' (",
                                                     dtypeName(b.dtype()), " [",
                                                     shapeToString(views_[id].shape), "])"));
    const HostArray &a = it->second;
    if (a.dtype != b.dtype())
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
  for (int i = 0; i < program_->steps_size(); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    absl::Status st = steps_[i]();
    if (!st.ok())
      return absl::Status(st.code(), absl::StrCat("step ", i, ": ", st.message()));
    if (profiling_) {
      DS_RETURN_IF_ERROR(backend_.synchronize());
      const auto &s = program_->steps(i);
      profile_.push_back({s.kernel(), s.location(),
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    }
  }
  DS_RETURN_IF_ERROR(backend_.synchronize());
  NamedArrays out;
  for (uint32_t id : program_->outputs()) {
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

} // namespace ds::rt
