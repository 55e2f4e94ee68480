// Which BLAS for ds-run's GEMM? Times single-threaded sgemm (ds splits GEMMs
// across its own OpenMP threads, so one-thread BLAS throughput is what
// counts) at the shapes of transformer layers, for every BLAS Debian ships
// that is installed: OpenBLAS, BLIS, oneDNN, and reference BLAS.
//
//   bash bench/gemm_blas.sh
//
// Prints GFLOP/s per library and shape, and each library's geometric-mean
// ratio to OpenBLAS (above 1 is faster).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace {

enum { RowMajor = 101, NoTrans = 111 };
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float *, int,
                            const float *, int, float, float *, int);
using DnnlSgemm = int (*)(char, char, long, long, long, float, const float *, long,
                          const float *, long, float, float *, long);

struct Lib {
  const char *name;
  const char *path;
  void *handle = nullptr;
  CblasSgemm cblas = nullptr;
  DnnlSgemm dnnl = nullptr;
};

struct Shape {
  int m, n, k;
  const char *what;
};

double timeIt(const Lib &lib, const Shape &s, std::vector<float> &a, std::vector<float> &b,
              std::vector<float> &c) {
  auto once = [&] {
    if (lib.cblas)
      lib.cblas(RowMajor, NoTrans, NoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n,
                0.0f, c.data(), s.n);
    else
      lib.dnnl('N', 'N', s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c.data(), s.n);
  };
  once();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    int iters = 0;
    double elapsed = 0;
    do {
      once();
      ++iters;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < 0.1);
    best = std::min(best, elapsed / iters);
  }
  return 2.0 * s.m * s.n * s.k / best / 1e9;
}

} // namespace

int main() {
  std::vector<Lib> libs = {
      {"OpenBLAS", "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"},
      {"BLIS", "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4"},
      {"oneDNN", "/usr/lib/x86_64-linux-gnu/libdnnl.so.2"},
      {"reference", "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"},
  };
  std::vector<Shape> shapes = {
      {512, 768, 256, "QKV projection d=256"},  {512, 1024, 256, "MLP up d=256"},
      {512, 256, 1024, "MLP down d=256"},       {256, 1536, 512, "QKV projection d=512"},
      {256, 512, 2048, "MLP down d=512"},       {128, 128, 64, "attention scores"},
  };
  std::vector<Lib *> present;
  for (auto &l : libs) {
    l.handle = dlopen(l.path, RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      std::printf("%-10s not installed (%s)\n", l.name, l.path);
      continue;
    }
    l.cblas = reinterpret_cast<CblasSgemm>(dlsym(l.handle, "cblas_sgemm"));
    if (!l.cblas) l.dnnl = reinterpret_cast<DnnlSgemm>(dlsym(l.handle, "dnnl_sgemm"));
    if (!l.cblas && !l.dnnl) {
      std::printf("%-10s has no sgemm entry point\n", l.name);
      continue;
    }
    present.push_back(&l);
  }
  std::printf("%-24s", "shape (MxNxK)");
  for (auto *l : present) std::printf(" %10s", l->name);
  std::printf("   GFLOP/s, one thread\n");
  std::vector<double> logRatio(present.size(), 0.0);
  for (const auto &s : shapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.001f * i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.001f * i);
    char label[64];
    std::snprintf(label, sizeof label, "%dx%dx%d", s.m, s.n, s.k);
    std::printf("%-24s", label);
    double base = 0;
    for (size_t i = 0; i < present.size(); ++i) {
      double g = timeIt(*present[i], s, a, b, c);
      if (i == 0) base = g;
      logRatio[i] += std::log(g / base);
      std::printf(" %10.1f", g);
    }
    std::printf("   %s\n", s.what);
  }
  std::printf("%-24s", "geomean vs OpenBLAS");
  for (size_t i = 0; i < present.size(); ++i)
    std::printf(" %10.2f", std::exp(logRatio[i] / shapes.size()));
  std::printf("\n");
  return 0;
}
