// NCCL communicator for the CUDA backend. libnccl is loaded with dlopen, so
// ds-run starts (and --comm=mpi works) where NCCL is absent; the
// communicator is bootstrapped over MPI (rank 0's ncclUniqueId is broadcast
// to the others). Collectives are enqueued on a stream of their own and
// polled against the deadline together with ncclCommGetAsyncError; on an
// error or timeout the communicator is aborted (NCCL's documented recovery,
// what PyTorch's watchdog does) and the error names the collective.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/comm/Comm.h"

namespace ds::rt {

absl::StatusOr<std::unique_ptr<Comm>> createMpiComm(const CommOptions &opts);

namespace {

/// The NCCL entry points ds uses, resolved from libnccl.so.2 at run time.
struct NcclApi {
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRank) commInitRank = nullptr;
  decltype(&ncclCommSplit) commSplit = nullptr;
  decltype(&ncclCommAbort) commAbort = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclCommCount) commCount = nullptr;
  decltype(&ncclCommUserRank) commUserRank = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;

  static absl::StatusOr<const NcclApi *> load() {
    static NcclApi api;
    static std::string error;
    static bool tried = false;
    if (!tried) {
      tried = true;
      void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        error = std::string("cannot load libnccl.so.2 (") + dlerror() +
                "): install NCCL or run with --comm=mpi";
      } else {
        auto sym = [&](auto &fn, const char *name) {
          fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
          if (!fn && error.empty()) error = std::string("libnccl.so.2 lacks ") + name;
        };
        sym(api.getUniqueId, "ncclGetUniqueId");
        sym(api.commInitRank, "ncclCommInitRank");
        sym(api.commSplit, "ncclCommSplit");
        sym(api.commAbort, "ncclCommAbort");
        sym(api.commDestroy, "ncclCommDestroy");
        sym(api.commGetAsyncError, "ncclCommGetAsyncError");
        sym(api.getErrorString, "ncclGetErrorString");
        sym(api.commCount, "ncclCommCount");
        sym(api.commUserRank, "ncclCommUserRank");
        sym(api.allReduce, "ncclAllReduce");
        sym(api.allGather, "ncclAllGather");
        sym(api.reduceScatter, "ncclReduceScatter");
        sym(api.broadcast, "ncclBroadcast");
        sym(api.send, "ncclSend");
        sym(api.recv, "ncclRecv");
        sym(api.groupStart, "ncclGroupStart");
        sym(api.groupEnd, "ncclGroupEnd");
      }
    }
    if (!error.empty()) return absl::UnavailableError(error);
    return &api;
  }
};

absl::StatusOr<ncclDataType_t> ncclType(DType t) {
  switch (t) {
  case plan::F32: return ncclFloat32;
  case plan::F64: return ncclFloat64;
  case plan::F16: return ncclFloat16;
  case plan::BF16: return ncclBfloat16;
  case plan::I8: return ncclInt8;
  case plan::I32: return ncclInt32;
  case plan::I64: return ncclInt64;
  case plan::U8:
  case plan::BOOL: return ncclUint8;
  case plan::U32: return ncclUint32;
  case plan::U64: return ncclUint64;
  default: return absl::UnimplementedError("NCCL cannot move " + dtypeName(t) + " tensors");
  }
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum: return ncclSum;
  case ReduceOp::Max: return ncclMax;
  case ReduceOp::Min: return ncclMin;
  case ReduceOp::Prod: return ncclProd;
  }
  return ncclSum;
}

class NcclComm final : public Comm {
public:
  NcclComm(const NcclApi *api, ncclComm_t comm, cudaStream_t stream, int rank, int size,
           double timeout, std::shared_ptr<Comm> bootstrap)
      : api_(api), comm_(comm), stream_(stream), rank_(rank), size_(size), timeout_(timeout),
        bootstrap_(std::move(bootstrap)) {}
  ~NcclComm() override {
    if (comm_) api_->commDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::StatusOr<std::unique_ptr<Comm>> split(int color, int key) override {
    ncclComm_t sub = nullptr;
    DS_RETURN_IF_ERROR(check(api_->commSplit(comm_, color, key, &sub, nullptr), "ncclCommSplit"));
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
      return absl::UnavailableError("cannot create a CUDA stream for NCCL");
    int r = 0, n = 0;
    DS_RETURN_IF_ERROR(check(api_->commUserRank(sub, &r), "ncclCommUserRank"));
    DS_RETURN_IF_ERROR(check(api_->commCount(sub, &n), "ncclCommCount"));
    return std::unique_ptr<Comm>(new NcclComm(api_, sub, s, r, n, timeout_, bootstrap_));
  }
  absl::Status allReduce(void *buf, int64_t count, DType dtype, ReduceOp op) override {
    DS_ASSIGN_OR_RETURN(ncclDataType_t t, ncclType(dtype));
    return finish(api_->allReduce(buf, buf, count, t, ncclOp(op), comm_, stream_), "all_reduce",
                  count, dtype);
  }
  absl::Status allGather(const void *send, void *recv, int64_t count, DType dtype) override {
    DS_ASSIGN_OR_RETURN(ncclDataType_t t, ncclType(dtype));
    return finish(api_->allGather(send, recv, count, t, comm_, stream_), "all_gather", count,
                  dtype);
  }
  absl::Status reduceScatter(const void *send, void *recv, int64_t count, DType dtype,
                             ReduceOp op) override {
    DS_ASSIGN_OR_RETURN(ncclDataType_t t, ncclType(dtype));
    return finish(api_->reduceScatter(send, recv, count, t, ncclOp(op), comm_, stream_),
                  "reduce_scatter", count, dtype);
  }
  absl::Status broadcast(void *buf, int64_t count, DType dtype, int root) override {
    DS_ASSIGN_OR_RETURN(ncclDataType_t t, ncclType(dtype));
    if (root < 0 || root >= size_)
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank"));
    return finish(api_->broadcast(buf, buf, count, t, root, comm_, stream_), "broadcast", count,
                  dtype);
  }
  absl::Status allToAll(const void *send, void *recv, int64_t count, DType dtype) override {
    DS_ASSIGN_OR_RETURN(ncclDataType_t t, ncclType(dtype));
    DS_ASSIGN_OR_RETURN(uint64_t bytes, commBytes(count, dtype));
    ncclResult_t rc = api_->groupStart();
    for (int p = 0; p < size_ && rc == ncclSuccess; ++p) {
      rc = api_->send(static_cast<const char *>(send) + p * bytes, count, t, p, comm_, stream_);
      if (rc == ncclSuccess)
        rc = api_->recv(static_cast<char *>(recv) + p * bytes, count, t, p, comm_, stream_);
    }
    ncclResult_t end = api_->groupEnd();
    return finish(rc != ncclSuccess ? rc : end, "all_to_all", count, dtype);
  }
  absl::Status barrier() override {
    // An all_reduce of one element is NCCL's barrier.
    void *one = nullptr;
    if (cudaMalloc(&one, sizeof(float)) != cudaSuccess)
      return absl::UnavailableError("cudaMalloc for the barrier failed");
    absl::Status st = allReduce(one, 1, plan::F32, ReduceOp::Sum);
    cudaFree(one);
    return st;
  }
  [[noreturn]] void abort(int code) override {
    if (comm_) api_->commAbort(comm_);
    comm_ = nullptr;
    bootstrap_->abort(code);
  }

private:
  absl::Status check(ncclResult_t rc, const char *what) const {
    if (rc == ncclSuccess) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(what, ": ", api_->getErrorString(rc)));
  }

  absl::Status finish(ncclResult_t rc, const char *what, int64_t count, DType dtype) {
    maybeInjectFault(bootstrap_->rank());
    auto describe = [&] {
      return absl::StrCat(what, " of ", count, " x ", dtypeName(dtype), " over ", size_,
                          " ranks (NCCL)");
    };
    if (rc != ncclSuccess) return check(rc, describe().c_str());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (;;) {
      cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady)
        return absl::UnavailableError(describe() + ": " + cudaGetErrorString(q));
      ncclResult_t async = ncclSuccess;
      api_->commGetAsyncError(comm_, &async);
      if (async != ncclSuccess) {
        api_->commAbort(comm_);
        comm_ = nullptr;
        return check(async, describe().c_str());
      }
      if (std::chrono::steady_clock::now() > deadline) {
        api_->commAbort(comm_);
        comm_ = nullptr;
        return absl::DeadlineExceededError(absl::StrCat(
            describe(), " did not complete within ", timeout_,
            " s (--collective-timeout): a peer rank exited, crashed or hangs"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const NcclApi *api_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, size_;
  double timeout_;
  std::shared_ptr<Comm> bootstrap_;
};

} // namespace

absl::StatusOr<std::unique_ptr<Comm>> createNcclComm(const CommOptions &opts) {
  DS_ASSIGN_OR_RETURN(const NcclApi *api, NcclApi::load());
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return absl::UnavailableError(
        "--comm=nccl needs a CUDA device and none is usable here; run with --comm=mpi");
  DS_ASSIGN_OR_RETURN(std::unique_ptr<Comm> mpi, createMpiComm(opts));
  std::shared_ptr<Comm> bootstrap(std::move(mpi));
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  int device = (local ? std::atoi(local) : bootstrap->rank()) % devices;
  if (cudaSetDevice(device) != cudaSuccess)
    return absl::UnavailableError(absl::StrCat("cudaSetDevice(", device, ") failed"));
  ncclUniqueId id{};
  if (bootstrap->rank() == 0 && api->getUniqueId(&id) != ncclSuccess)
    return absl::UnavailableError("ncclGetUniqueId failed");
  DS_RETURN_IF_ERROR(bootstrap->broadcast(&id, sizeof(id), plan::U8, 0));
  ncclComm_t comm = nullptr;
  ncclResult_t rc = api->commInitRank(&comm, bootstrap->size(), id, bootstrap->rank());
  if (rc != ncclSuccess)
    return absl::UnavailableError(std::string("ncclCommInitRank: ") + api->getErrorString(rc));
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return absl::UnavailableError("cannot create a CUDA stream for NCCL");
  return std::unique_ptr<Comm>(new NcclComm(api, comm, stream, bootstrap->rank(),
                                            bootstrap->size(), opts.timeout_seconds, bootstrap));
}

} // namespace ds::rt
