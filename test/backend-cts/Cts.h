// The backend conformance suite (in the spirit of IREE's hal/cts): every
// test runs once per registered backend, through the Backend interface only
// (allocate, copyFromHost, prepare, run, synchronize, copyToHost, release),
// against reference values computed here with plain loops.
//
// A test names the kernels it exercises with CTS_TEST(Name, "k1", "k2"):
//  - a backend without one of them skips the test (partial backends, such
//    as the CUDA skeleton, are checked for what they claim);
//  - running an undeclared kernel fails the test, and a declared kernel that
//    never ran successfully fails it too, so the declarations are honest;
//  - EveryKernelHasAConformanceTest fails when a backend's kernelNames()
//    has a kernel no test declares.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/Backend.h"

namespace cts {

namespace plan = ds::plan;
using ds::rt::DType;
using Shape = std::vector<int64_t>;

int64_t numel(const Shape &s);
/// Row-major strides of `s`, in elements.
Shape stridesOf(const Shape &s);
/// Coordinates of flat index `flat` in `s`.
Shape unravel(int64_t flat, const Shape &s);
/// Flat index, in a tensor of shape `in`, of the element that numpy
/// broadcasting reads for element `flat` of the result shape `out`.
int64_t broadcastSource(const Shape &out, const Shape &in, int64_t flat);
/// The numpy broadcast of two shapes (the tests only use compatible ones).
Shape broadcastShape(const Shape &a, const Shape &b);
/// `n` deterministic values in [lo, hi).
std::vector<double> sample(int64_t n, double lo, double hi, unsigned seed);

/// A host array with its element type: test inputs, and results read back.
struct HostTensor {
  DType dtype = plan::F32;
  Shape shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const { return cts::numel(shape); }
  /// Values converted to the dtype's C++ type (f32, f64, integers, bool).
  static HostTensor of(DType dtype, Shape shape, const std::vector<double> &values);
  /// Raw 16-bit patterns, for f16/bf16.
  static HostTensor bits16(DType dtype, Shape shape, const std::vector<uint16_t> &bits);
  /// A result buffer, filled with a poison byte pattern so that elements a
  /// kernel forgets to write never pass for computed ones.
  static HostTensor result(DType dtype, Shape shape);
  /// The elements as doubles (exact for every integer the tests use).
  std::vector<double> values() const;
  template <typename T> std::vector<T> as() const {
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }
};

inline HostTensor f32(Shape s, const std::vector<double> &v) { return HostTensor::of(plan::F32, std::move(s), v); }
inline HostTensor f64(Shape s, const std::vector<double> &v) { return HostTensor::of(plan::F64, std::move(s), v); }
inline HostTensor i32(Shape s, const std::vector<double> &v) { return HostTensor::of(plan::I32, std::move(s), v); }
inline HostTensor i64(Shape s, const std::vector<double> &v) { return HostTensor::of(plan::I64, std::move(s), v); }
inline HostTensor boolean(Shape s, const std::vector<double> &v) { return HostTensor::of(plan::BOOL, std::move(s), v); }

/// A plan step under construction: Step("softmax").i("axis", 1).
class Step {
public:
  explicit Step(const std::string &kernel) { step_.set_kernel(kernel); }
  Step &i(const std::string &name, int64_t v);
  Step &f(const std::string &name, double v);
  Step &s(const std::string &name, const std::string &v);
  Step &ints(const std::string &name, const std::vector<int64_t> &v);
  /// The source location errors must name.
  Step &at(const std::string &location) {
    step_.set_location(location);
    return *this;
  }
  const plan::Step &proto() const { return step_; }

private:
  plan::Step step_;
};

/// Records at static-initialization time which kernels test `test` runs.
bool declareKernels(const char *test, std::initializer_list<const char *> kernels);
/// Every declaration: test name -> kernels.
const std::map<std::string, std::set<std::string>> &declaredKernels();

class BackendCts : public ::testing::TestWithParam<std::string> {
public:
  void SetUp() override;
  void TearDown() override;
  ds::rt::Backend &backend() { return *backend_; }

  /// Runs `step` with `ins` uploaded and `outs` as result buffers (their
  /// current contents are uploaded first, then replaced by the results).
  /// outAliasesIn[k] >= 0 binds output k to that input's buffer (in-place
  /// updates). Returns the first error of prepare, the run, or a copy.
  absl::Status run(const Step &step, const std::vector<HostTensor> &ins,
                   std::vector<HostTensor> &outs, const std::vector<int> &outAliasesIn = {});
  /// run() with one result, which it returns; failures are test failures.
  HostTensor run1(const Step &step, const std::vector<HostTensor> &ins, DType outType,
                  const Shape &outShape);

private:
  std::unique_ptr<ds::rt::Backend> backend_;
  std::set<std::string> declared_, ran_;
};

/// Element-wise comparison with |got - want| <= atol + rtol * |want|; NaNs
/// and infinities must match exactly. Reports the first few mismatches.
void expectClose(const std::vector<double> &got, const std::vector<double> &want, double rtol,
                 double atol, const std::string &what);
/// Rounds reference values to what `dtype` can hold (f32: to float).
std::vector<double> roundTo(DType dtype, std::vector<double> v);
/// Exact comparison (integers, bools, data movement).
void expectEqualValues(const std::vector<double> &got, const std::vector<double> &want,
                       const std::string &what);
/// A failed status whose message contains `needle`.
void expectError(const absl::Status &st, const std::string &needle, const std::string &what = "");

std::string shapeStr(const Shape &s);

} // namespace cts

/// A conformance test of the kernels listed after its name.
#define CTS_TEST(Name, ...)                                                                       \
  [[maybe_unused]] static const bool ds_cts_declared_##Name =                                     \
      ::cts::declareKernels(#Name, {__VA_ARGS__});                                                \
  TEST_P(BackendCts, Name)
