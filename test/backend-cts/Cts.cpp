// The suite's fixture and helpers, its instantiation over the registry, and
// the tests of the registry and of the Backend interface itself.
#include "test/backend-cts/Cts.h"

#include <algorithm>
#include <random>
#include <sstream>

#include "runtime/backend/AllBackends.h"
#include "runtime/kernels/ElementMath.h"
#include "runtime/backend/BackendRegistry.h"

namespace cts {

using ds::rt::Backend;
using ds::rt::TensorView;

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape stridesOf(const Shape &s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Shape unravel(int64_t flat, const Shape &s) {
  Shape c(s.size());
  for (size_t i = s.size(); i-- > 0;) {
    c[i] = flat % s[i];
    flat /= s[i];
  }
  return c;
}

int64_t broadcastSource(const Shape &out, const Shape &in, int64_t flat) {
  Shape c = unravel(flat, out), st = stridesOf(in);
  int64_t off = 0;
  for (size_t j = 0; j < in.size(); ++j) {
    size_t d = j + (out.size() - in.size());
    off += (in[j] == 1 ? 0 : c[d]) * st[j];
  }
  return off;
}

Shape broadcastShape(const Shape &a, const Shape &b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<double> sample(int64_t n, double lo, double hi, unsigned seed) {
  // Our own generator: std distributions differ between standard libraries.
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  for (auto &x : v) x = lo + (hi - lo) * (rng() / 4294967296.0);
  return v;
}

std::string shapeStr(const Shape &s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

namespace {

template <typename T> void store(std::vector<uint8_t> &bytes, const std::vector<double> &v) {
  bytes.resize(v.size() * sizeof(T));
  for (size_t i = 0; i < v.size(); ++i) {
    T x = static_cast<T>(v[i]);
    std::memcpy(bytes.data() + i * sizeof(T), &x, sizeof(T));
  }
}
template <typename T> std::vector<double> load(const std::vector<uint8_t> &bytes) {
  std::vector<double> v(bytes.size() / sizeof(T));
  for (size_t i = 0; i < v.size(); ++i) {
    T x;
    std::memcpy(&x, bytes.data() + i * sizeof(T), sizeof(T));
    v[i] = static_cast<double>(x);
  }
  return v;
}

} // namespace

HostTensor HostTensor::of(DType dtype, Shape shape, const std::vector<double> &values) {
  HostTensor t{dtype, std::move(shape), {}};
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel())
      << "test bug: " << values.size() << " values for shape " << shapeStr(t.shape);
  switch (dtype) {
  case plan::F32: store<float>(t.bytes, values); break;
  case plan::F64: store<double>(t.bytes, values); break;
  case plan::I8: store<int8_t>(t.bytes, values); break;
  case plan::I16: store<int16_t>(t.bytes, values); break;
  case plan::I32: store<int32_t>(t.bytes, values); break;
  case plan::I64: store<int64_t>(t.bytes, values); break;
  case plan::U8: store<uint8_t>(t.bytes, values); break;
  case plan::U16: store<uint16_t>(t.bytes, values); break;
  case plan::U32: store<uint32_t>(t.bytes, values); break;
  case plan::U64: store<uint64_t>(t.bytes, values); break;
  case plan::BF16:
  case plan::F16: {
    // Rounded to nearest even, as the kernels' conversions do.
    std::vector<uint16_t> bits;
    for (double v : values)
      bits.push_back(dtype == plan::BF16 ? ds::math::floatToBf16(static_cast<float>(v))
                                         : ds::math::floatToHalf(static_cast<float>(v)));
    t.bytes.resize(bits.size() * 2);
    if (!bits.empty()) std::memcpy(t.bytes.data(), bits.data(), t.bytes.size());
    break;
  }
  case plan::BOOL: {
    std::vector<double> b(values.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = values[i] != 0;
    store<uint8_t>(t.bytes, b);
    break;
  }
  default: ADD_FAILURE() << "test bug: HostTensor::of cannot build " << ds::rt::dtypeName(dtype);
  }
  return t;
}

HostTensor HostTensor::bits16(DType dtype, Shape shape, const std::vector<uint16_t> &bits) {
  HostTensor t{dtype, std::move(shape), {}};
  t.bytes.resize(bits.size() * 2);
  if (!bits.empty()) std::memcpy(t.bytes.data(), bits.data(), t.bytes.size());
  return t;
}

HostTensor HostTensor::result(DType dtype, Shape shape) {
  HostTensor t{dtype, std::move(shape), {}};
  t.bytes.assign(static_cast<size_t>(t.numel()) * ds::rt::dtypeSize(dtype), 0xA5);
  return t;
}

static std::vector<uint16_t> load16(const std::vector<uint8_t> &bytes) {
  std::vector<uint16_t> bits(bytes.size() / 2);
  if (!bits.empty()) std::memcpy(bits.data(), bytes.data(), bits.size() * 2);
  return bits;
}

std::vector<double> HostTensor::values() const {
  switch (dtype) {
  case plan::F32: return load<float>(bytes);
  case plan::F64: return load<double>(bytes);
  case plan::I8: return load<int8_t>(bytes);
  case plan::I16: return load<int16_t>(bytes);
  case plan::I32: return load<int32_t>(bytes);
  case plan::I64: return load<int64_t>(bytes);
  case plan::U8: return load<uint8_t>(bytes);
  case plan::U16: return load<uint16_t>(bytes);
  case plan::U32: return load<uint32_t>(bytes);
  case plan::U64: return load<uint64_t>(bytes);
  case plan::BOOL: return load<uint8_t>(bytes); // 0/1; anything else fails a comparison
  case plan::BF16:
  case plan::F16: {
    std::vector<double> out;
    for (uint16_t h : load16(bytes))
      out.push_back(dtype == plan::BF16 ? ds::math::bf16ToFloat(h) : ds::math::halfToFloat(h));
    return out;
  }
  default: ADD_FAILURE() << "test bug: values() of " << ds::rt::dtypeName(dtype); return {};
  }
}

Step &Step::i(const std::string &name, int64_t v) {
  (*step_.mutable_attrs())[name].set_i(v);
  return *this;
}
Step &Step::f(const std::string &name, double v) {
  (*step_.mutable_attrs())[name].set_f(v);
  return *this;
}
Step &Step::s(const std::string &name, const std::string &v) {
  (*step_.mutable_attrs())[name].set_s(v);
  return *this;
}
Step &Step::ints(const std::string &name, const std::vector<int64_t> &v) {
  auto *list = (*step_.mutable_attrs())[name].mutable_ints();
  list->clear_values();
  for (int64_t x : v) list->add_values(x);
  return *this;
}

namespace {
std::map<std::string, std::set<std::string>> &declarations() {
  static auto *d = new std::map<std::string, std::set<std::string>>();
  return *d;
}
/// "Name/cpu" -> "Name": the declaration key of the running test.
std::string currentTestName() {
  std::string n = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return n.substr(0, n.find('/'));
}
} // namespace

bool declareKernels(const char *test, std::initializer_list<const char *> kernels) {
  for (const char *k : kernels) declarations()[test].insert(k);
  return true;
}

const std::map<std::string, std::set<std::string>> &declaredKernels() { return declarations(); }

void BackendCts::SetUp() {
  absl::Status reg = ds::rt::registerAllBackends();
  ASSERT_TRUE(reg.ok()) << reg.message();
  auto created = ds::rt::createBackend(GetParam(), ds::rt::BackendOptions{});
  if (!created.ok()) {
    // Unavailable: registered, but not usable here (no device, not built in).
    if (created.status().code() == absl::StatusCode::kUnavailable)
      GTEST_SKIP() << GetParam() << ": " << created.status().message();
    FAIL() << "creating backend '" << GetParam() << "': " << created.status().message();
  }
  backend_ = std::move(*created);
  auto it = declaredKernels().find(currentTestName());
  if (it != declaredKernels().end()) declared_ = it->second;
  std::vector<std::string> has = backend_->kernelNames();
  for (const std::string &k : declared_)
    if (std::find(has.begin(), has.end(), k) == has.end())
      GTEST_SKIP() << "backend '" << GetParam() << "' has no kernel '" << k << "'";
}

void BackendCts::TearDown() {
  if (IsSkipped() || HasFatalFailure()) return;
  for (const std::string &k : declared_)
    EXPECT_TRUE(ran_.count(k)) << "the test declares kernel '" << k
                               << "' but never ran it successfully";
}

absl::Status BackendCts::run(const Step &step, const std::vector<HostTensor> &ins,
                             std::vector<HostTensor> &outs, const std::vector<int> &outAliasesIn) {
  const std::string &kernel = step.proto().kernel();
  if (!declared_.count(kernel))
    ADD_FAILURE() << "test runs kernel '" << kernel << "' without declaring it in CTS_TEST";
  Backend &b = *backend_;
  // Owned buffers, released whatever path returns.
  struct Buffers {
    Backend &b;
    std::vector<void *> ptrs;
    ~Buffers() {
      for (void *p : ptrs) b.release(p, plan::DEVICE);
    }
  } owned{b, {}};
  auto upload = [&](const HostTensor &t) -> absl::StatusOr<TensorView> {
    uint64_t bytes = static_cast<uint64_t>(t.numel()) * ds::rt::dtypeSize(t.dtype);
    if (bytes != t.bytes.size())
      return absl::InternalError("test bug: tensor bytes do not match its shape");
    DS_ASSIGN_OR_RETURN(void *p, b.allocate(bytes, plan::DEVICE));
    owned.ptrs.push_back(p);
    DS_RETURN_IF_ERROR(b.copyFromHost(p, t.bytes.data(), bytes));
    return TensorView{t.dtype, t.shape, p, t.numel()};
  };
  std::vector<TensorView> inViews, outViews;
  for (const HostTensor &t : ins) {
    DS_ASSIGN_OR_RETURN(TensorView v, upload(t));
    inViews.push_back(v);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    int alias = k < outAliasesIn.size() ? outAliasesIn[k] : -1;
    if (alias >= 0) {
      TensorView v = inViews.at(alias);
      v.dtype = outs[k].dtype;
      v.shape = outs[k].shape;
      v.numel = outs[k].numel();
      outViews.push_back(v);
    } else {
      DS_ASSIGN_OR_RETURN(TensorView v, upload(outs[k]));
      outViews.push_back(v);
    }
  }
  DS_ASSIGN_OR_RETURN(ds::rt::PreparedStep prepared, b.prepare(step.proto(), inViews, outViews));
  DS_RETURN_IF_ERROR(prepared());
  DS_RETURN_IF_ERROR(b.synchronize());
  for (size_t k = 0; k < outs.size(); ++k)
    DS_RETURN_IF_ERROR(b.copyToHost(outs[k].bytes.data(), outViews[k].data, outs[k].bytes.size()));
  DS_RETURN_IF_ERROR(b.synchronize());
  ran_.insert(kernel);
  return absl::OkStatus();
}

HostTensor BackendCts::run1(const Step &step, const std::vector<HostTensor> &ins, DType outType,
                            const Shape &outShape) {
  std::vector<HostTensor> outs{HostTensor::result(outType, outShape)};
  absl::Status st = run(step, ins, outs);
  EXPECT_TRUE(st.ok()) << step.proto().kernel() << ": " << st.message();
  return outs[0];
}

void expectClose(const std::vector<double> &got, const std::vector<double> &want, double rtol,
                 double atol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w;
  }
  if (bad > 5) ADD_FAILURE() << what << ": " << bad << " elements differ in all";
}

std::vector<double> roundTo(DType dtype, std::vector<double> v) {
  if (dtype == plan::F32)
    for (double &x : v) x = static_cast<float>(x);
  if (dtype == plan::BF16 || dtype == plan::F16) v = HostTensor::of(dtype, {static_cast<int64_t>(v.size())}, v).values();
  return v;
}

void expectEqualValues(const std::vector<double> &got, const std::vector<double> &want,
                       const std::string &what) {
  expectClose(got, want, 0, 0, what);
}

void expectError(const absl::Status &st, const std::string &needle, const std::string &what) {
  EXPECT_FALSE(st.ok()) << what << ": expected an error mentioning '" << needle << "'";
  if (!st.ok())
    EXPECT_TRUE(std::string(st.message()).find(needle) != std::string::npos)
        << what << ": the error '" << st.message() << "' does not mention '" << needle << "'";
}

} // namespace cts

using namespace cts;

namespace {

std::vector<std::string> backendsUnderTest() {
  // A registration failure leaves the list short; RegistryHasTheBuiltInBackends says why.
  (void)ds::rt::registerAllBackends();
  return ds::rt::registeredBackendNames();
}

} // namespace

INSTANTIATE_TEST_SUITE_P(Backends, BackendCts, ::testing::ValuesIn(backendsUnderTest()),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

// ---- the Backend interface itself -------------------------------------------

TEST_P(BackendCts, NameMatchesTheRegistration) { EXPECT_EQ(backend().name(), GetParam()); }

TEST_P(BackendCts, AllocateAndCopyRoundTrip) {
  for (uint64_t bytes : {uint64_t(0), uint64_t(1), uint64_t(17), uint64_t(4096 + 3), uint64_t(1) << 20}) {
    auto p = backend().allocate(bytes, plan::DEVICE);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_NE(*p, nullptr) << bytes << " bytes";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u) << "alignment of " << bytes << " bytes";
    std::vector<uint8_t> src(bytes), dst(bytes, 0);
    for (uint64_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
    ASSERT_TRUE(backend().copyFromHost(*p, src.data(), bytes).ok());
    ASSERT_TRUE(backend().synchronize().ok());
    ASSERT_TRUE(backend().copyToHost(dst.data(), *p, bytes).ok());
    ASSERT_TRUE(backend().synchronize().ok());
    EXPECT_EQ(src, dst) << bytes << " bytes";
    backend().release(*p, plan::DEVICE);
  }
}

TEST_P(BackendCts, DistinctAllocationsDoNotOverlap) {
  // Two live zero-byte allocations must still be distinct pointers: the
  // executor keys buffers by address.
  auto a = backend().allocate(0, plan::DEVICE), b = backend().allocate(0, plan::DEVICE);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  backend().release(*a, plan::DEVICE);
  backend().release(*b, plan::DEVICE);
}

TEST_P(BackendCts, UnknownKernelIsAnErrorNamingIt) {
  plan::Step step;
  step.set_kernel("no_such_kernel");
  step.set_location("model.onnx:3");
  auto p = backend().prepare(step, {}, {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(std::string(p.status().message()).find("no_such_kernel"), std::string::npos)
      << p.status().message();
}

TEST_P(BackendCts, KernelNamesAreSortedAndUnique) {
  std::vector<std::string> names = backend().kernelNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

// Kernels that no CTS_TEST can cover through the Backend interface, each
// with the reason. None today: every kernel is a pure function of its
// buffers. Keep this list short and justified.
static const std::set<std::string> kUntestableKernels = {};

TEST_P(BackendCts, EveryKernelHasAConformanceTest) {
  std::set<std::string> covered;
  for (const auto &[test, kernels] : declaredKernels()) covered.insert(kernels.begin(), kernels.end());
  std::vector<std::string> missing;
  for (const std::string &k : backend().kernelNames())
    if (!covered.count(k) && !kUntestableKernels.count(k)) missing.push_back(k);
  EXPECT_TRUE(missing.empty()) << "kernels of '" << GetParam() << "' without a conformance test: "
                               << ::testing::PrintToString(missing);
  for (const std::string &k : kUntestableKernels)
    EXPECT_EQ(covered.count(k), 0u) << "'" << k << "' is allow-listed but has a test now";
}

// ---- the registry -------------------------------------------------------------

TEST(BackendRegistry, HasTheBuiltInBackends) {
  absl::Status st = ds::rt::registerAllBackends();
  ASSERT_TRUE(st.ok()) << st.message();
  // "cuda" is registered in every build: without the toolkit, its factory
  // says it is not built in.
  EXPECT_EQ(ds::rt::registeredBackendNames(), (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_TRUE(ds::rt::registerAllBackends().ok()) << "a second call must be a no-op";
  for (const std::string &n : ds::rt::registeredBackendNames()) {
    auto info = ds::rt::findBackend(n);
    ASSERT_TRUE(info.has_value()) << n;
    EXPECT_FALSE(info->description.empty()) << n;
    EXPECT_EQ(info->description.find('\n'), std::string::npos) << "one line: " << n;
  }
}

TEST(BackendRegistry, UnknownNameListsTheRegisteredOnes) {
  ASSERT_TRUE(ds::rt::registerAllBackends().ok());
  auto b = ds::rt::createBackend("tpu", {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "unknown backend 'tpu' (registered: cpu, cuda)");
  expectError(ds::rt::probeBackend("tpu"), "unknown backend 'tpu'");
  EXPECT_FALSE(ds::rt::findBackend("tpu").has_value());
}

TEST(BackendRegistry, RefusesDuplicateAndIncompleteRegistrations) {
  ASSERT_TRUE(ds::rt::registerAllBackends().ok());
  auto info = ds::rt::findBackend("cpu");
  ASSERT_TRUE(info.has_value());
  absl::Status st = ds::rt::registerBackend(*info);
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists) << st.message();
  expectError(st, "'cpu' is already registered");
  expectError(ds::rt::registerBackend({"", "nameless", info->create, nullptr}), "needs a name");
  expectError(ds::rt::registerBackend({"nofactory", "no factory", nullptr, nullptr}), "factory");
  EXPECT_EQ(ds::rt::registeredBackendNames(), (std::vector<std::string>{"cpu", "cuda"}));
}

TEST(BackendRegistry, ProbeAgreesWithCreate) {
  ASSERT_TRUE(ds::rt::registerAllBackends().ok());
  for (const std::string &n : ds::rt::registeredBackendNames()) {
    absl::Status probe = ds::rt::probeBackend(n);
    auto created = ds::rt::createBackend(n, {});
    EXPECT_EQ(probe.ok(), created.ok()) << n << ": probe '" << probe.message() << "', create '"
                                        << created.status().message() << "'";
    if (!probe.ok()) {
      // The user-facing advice ds-run prints for a backend it cannot use.
      EXPECT_EQ(probe.code(), absl::StatusCode::kUnavailable) << n;
      expectError(created.status(), "--backend=cpu", n);
    }
  }
}

TEST(BackendRegistry, DeclaredKernelsExistInSomeBackend) {
  // Guards the declarations against typos: a CTS_TEST naming a kernel no
  // usable backend has would be skipped everywhere and test nothing.
  ASSERT_TRUE(ds::rt::registerAllBackends().ok());
  std::set<std::string> known;
  bool any = false;
  for (const std::string &n : ds::rt::registeredBackendNames()) {
    auto b = ds::rt::createBackend(n, {});
    if (!b.ok()) continue;
    any = true;
    for (const std::string &k : (*b)->kernelNames()) known.insert(k);
  }
  ASSERT_TRUE(any) << "no registered backend can run here";
  for (const auto &[test, kernels] : declaredKernels())
    for (const std::string &k : kernels)
      EXPECT_TRUE(known.count(k)) << test << " declares '" << k << "', which no backend has";
}
