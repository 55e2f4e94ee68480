// OpenMPI communicator. Collectives are nonblocking MPI calls polled
// against a deadline, so a peer that died or hangs is an error here rather
// than a wait forever; errors return (MPI_ERRORS_RETURN) instead of MPI's
// default abort, so the message names the collective first.
// The C API only: OpenMPI's deprecated C++ bindings need another library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/comm/Comm.h"
#include "runtime/kernels/ElementMath.h"

namespace ds::rt {
namespace {

/// bf16 and f16 for reductions: MPI has no 16-bit floats, so each is its own
/// 2-byte datatype, reduced by user operations that add (or compare) in f32
/// and round back to nearest even, as NCCL's bf16/half reductions do.
struct HalfTypes {
  MPI_Datatype bf16, f16;
  MPI_Op sum, max, min;
};

const HalfTypes &halfTypes();

template <int kOp> void reduceHalf(void *in, void *inout, int *len, MPI_Datatype *type) {
  const bool bf16 = *type == halfTypes().bf16;
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = bf16 ? math::bf16ToFloat(a[i]) : math::halfToFloat(a[i]);
    float y = bf16 ? math::bf16ToFloat(b[i]) : math::halfToFloat(b[i]);
    float r = kOp == 0 ? x + y : kOp == 1 ? math::Max()(x, y) : math::Min()(x, y);
    b[i] = bf16 ? math::floatToBf16(r) : math::floatToHalf(r);
  }
}

/// Created on first use (after MPI_Init), never freed: they live as long
/// as MPI does.
const HalfTypes &halfTypes() {
  static const HalfTypes types = [] {
    HalfTypes t;
    MPI_Type_contiguous(2, MPI_BYTE, &t.bf16);
    MPI_Type_commit(&t.bf16);
    MPI_Type_contiguous(2, MPI_BYTE, &t.f16);
    MPI_Type_commit(&t.f16);
    MPI_Op_create(&reduceHalf<0>, /*commute=*/1, &t.sum);
    MPI_Op_create(&reduceHalf<1>, 1, &t.max);
    MPI_Op_create(&reduceHalf<2>, 1, &t.min);
    return t;
  }();
  return types;
}

absl::StatusOr<MPI_Datatype> mpiType(DType t, bool reduce) {
  switch (t) {
  case plan::F32: return MPI_FLOAT;
  case plan::F64: return MPI_DOUBLE;
  case plan::I8: return MPI_INT8_T;
  case plan::I16: return MPI_INT16_T;
  case plan::I32: return MPI_INT32_T;
  case plan::I64: return MPI_INT64_T;
  case plan::U8: return MPI_UINT8_T;
  case plan::U16: return MPI_UINT16_T;
  case plan::U32: return MPI_UINT32_T;
  case plan::U64: return MPI_UINT64_T;
  case plan::BOOL: return MPI_UINT8_T;
  case plan::F16:
    return reduce ? halfTypes().f16 : MPI_UINT16_T;
  case plan::BF16:
    return reduce ? halfTypes().bf16 : MPI_UINT16_T;
  default:
    return absl::UnimplementedError(
        absl::StrCat("MPI cannot ", reduce ? "reduce " : "move ", dtypeName(t), " tensors"));
  }
}

/// 16-bit floats reduce by sum, max or min only.
absl::Status checkHalfOp(ReduceOp op, DType t) {
  if ((t == plan::BF16 || t == plan::F16) && op == ReduceOp::Prod)
    return absl::UnimplementedError(absl::StrCat("MPI cannot multiply-reduce ", dtypeName(t),
                                                 " tensors"));
  return absl::OkStatus();
}

MPI_Op mpiOp(ReduceOp op, DType t) {
  if (t == plan::BF16 || t == plan::F16) {
    switch (op) {
    case ReduceOp::Max: return halfTypes().max;
    case ReduceOp::Min: return halfTypes().min;
    default: return halfTypes().sum; // Prod is refused in checkHalfOp
    }
  }
  switch (op) {
  case ReduceOp::Sum: return MPI_SUM;
  case ReduceOp::Max: return MPI_MAX;
  case ReduceOp::Min: return MPI_MIN;
  case ReduceOp::Prod: return MPI_PROD;
  }
  return MPI_SUM;
}

std::string mpiError(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, len);
}

class MpiComm final : public Comm {
public:
  MpiComm(MPI_Comm comm, bool world, double timeout) : comm_(comm), world_(world),
                                                        timeout_(timeout) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank_);
  }
  ~MpiComm() override {
    if (world_) {
      MPI_Finalize();
    } else {
      MPI_Comm_free(&comm_);
    }
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::StatusOr<std::unique_ptr<Comm>> split(int color, int key) override {
    MPI_Comm sub;
    int rc = MPI_Comm_split(comm_, color, key, &sub);
    if (rc != MPI_SUCCESS) return absl::InternalError("MPI_Comm_split: " + mpiError(rc));
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    return std::unique_ptr<Comm>(new MpiComm(sub, false, timeout_));
  }

  absl::Status allReduce(void *buf, int64_t count, DType dtype, ReduceOp op) override {
    DS_RETURN_IF_ERROR(checkHalfOp(op, dtype));
    DS_ASSIGN_OR_RETURN(MPI_Datatype t, mpiType(dtype, true));
    DS_RETURN_IF_ERROR(checkCount(count, dtype));
    MPI_Request req;
    return finish(MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count), t, mpiOp(op, dtype), comm_,
                                 &req),
                  req, "all_reduce", count, dtype);
  }
  absl::Status allGather(const void *send, void *recv, int64_t count, DType dtype) override {
    DS_ASSIGN_OR_RETURN(MPI_Datatype t, mpiType(dtype, false));
    DS_RETURN_IF_ERROR(checkCount(count * size_, dtype));
    MPI_Request req;
    return finish(MPI_Iallgather(send, static_cast<int>(count), t, recv, static_cast<int>(count),
                                 t, comm_, &req),
                  req, "all_gather", count, dtype);
  }
  absl::Status reduceScatter(const void *send, void *recv, int64_t count, DType dtype,
                             ReduceOp op) override {
    DS_RETURN_IF_ERROR(checkHalfOp(op, dtype));
    DS_ASSIGN_OR_RETURN(MPI_Datatype t, mpiType(dtype, true));
    DS_RETURN_IF_ERROR(checkCount(count * size_, dtype));
    MPI_Request req;
    return finish(MPI_Ireduce_scatter_block(send, recv, static_cast<int>(count), t, mpiOp(op, dtype),
                                            comm_, &req),
                  req, "reduce_scatter", count, dtype);
  }
  absl::Status broadcast(void *buf, int64_t count, DType dtype, int root) override {
    DS_ASSIGN_OR_RETURN(MPI_Datatype t, mpiType(dtype, false));
    DS_RETURN_IF_ERROR(checkCount(count, dtype));
    if (root < 0 || root >= size_)
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ",
                                                     size_));
    MPI_Request req;
    return finish(MPI_Ibcast(buf, static_cast<int>(count), t, root, comm_, &req), req,
                  "broadcast", count, dtype);
  }
  absl::Status allToAll(const void *send, void *recv, int64_t count, DType dtype) override {
    DS_ASSIGN_OR_RETURN(MPI_Datatype t, mpiType(dtype, false));
    DS_RETURN_IF_ERROR(checkCount(count * size_, dtype));
    MPI_Request req;
    return finish(MPI_Ialltoall(send, static_cast<int>(count), t, recv, static_cast<int>(count), t,
                                comm_, &req),
                  req, "all_to_all", count, dtype);
  }
  absl::Status barrier() override {
    MPI_Request req;
    return finish(MPI_Ibarrier(comm_, &req), req, "barrier", 0, plan::U8);
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code); // MPI_Abort does not return; be sure
  }

private:
  static absl::Status checkCount(int64_t count, DType dtype) {
    DS_RETURN_IF_ERROR(commBytes(count, dtype).status());
    if (count > INT32_MAX)
      return absl::UnimplementedError(absl::StrCat("a collective of ", count,
                                                    " elements exceeds MPI's int counts"));
    return absl::OkStatus();
  }

  /// Polls `req` until it completes or the deadline passes. Spins briefly,
  /// then sleeps with growing pauses (ranks may share cores).
  absl::Status finish(int rc, MPI_Request &req, const char *what, int64_t count, DType dtype) {
    maybeInjectFault(worldRank_);
    auto describe = [&] {
      return absl::StrCat(what, " of ", count, " x ", dtypeName(dtype), " over ", size_,
                          " ranks (rank ", worldRank_, " of the job)");
    };
    if (rc != MPI_SUCCESS) return absl::InternalError(describe() + ": " + mpiError(rc));
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::duration<double>(timeout_);
    int done = 0, polls = 0;
    auto pause = std::chrono::microseconds(10);
    for (;;) {
      rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return absl::UnavailableError(describe() + ": " + mpiError(rc));
      if (done) return absl::OkStatus();
      if (std::chrono::steady_clock::now() > deadline)
        return absl::DeadlineExceededError(absl::StrCat(
            describe(), " did not complete within ", timeout_,
            " s (--collective-timeout): a peer rank exited, crashed or hangs"));
      if (++polls > 200) {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
    }
  }

  MPI_Comm comm_;
  bool world_;
  double timeout_;
  int rank_ = 0, size_ = 1, worldRank_ = 0;
};

} // namespace

absl::StatusOr<std::unique_ptr<Comm>> createMpiComm(const CommOptions &opts) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return absl::FailedPreconditionError("MPI is already initialized");
  int provided = 0;
  // Collectives may run on the communication thread while the main thread
  // computes; only one thread calls MPI at a time.
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return absl::UnavailableError("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return absl::UnavailableError("this MPI does not support MPI_THREAD_SERIALIZED");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (!(opts.timeout_seconds > 0)) // NaN too
    return absl::InvalidArgumentError("the collective timeout must be positive");
  return std::unique_ptr<Comm>(new MpiComm(MPI_COMM_WORLD, true, opts.timeout_seconds));
}

} // namespace ds::rt
