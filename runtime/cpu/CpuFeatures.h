//===- CpuFeatures.h - what this CPU computes natively ----------*- C++ -*-===//
//
// Decisions the CPU backend makes from CPUID (never from timing: a timed
// choice flips under load, and a plan must give the same bits on every
// run), shared with ds-opt so the compiler can say what a plan's precision
// will cost on the machine it runs on.
//
//===----------------------------------------------------------------------===//
#ifndef DS_RUNTIME_CPU_CPUFEATURES_H
#define DS_RUNTIME_CPU_CPUFEATURES_H

#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace ds::rt::cpu {

/// Whether 16-bit matrix products (bf16, or fp16 when `fp16`) beat f32 ones
/// on this CPU: 16-bit dot products run at twice the f32 FMA rate where the
/// CPU has AMX (AMX-BF16, AMX-FP16, with the tile state enabled by the OS)
/// or is an AMD CPU with AVX512-BF16 (Zen 4 and 5: ~1 TFLOP/s bf16 against
/// ~0.5 f32 on 2 cores), and at half of it on an Intel CPU with AVX512-BF16
/// but no AMX (measured: 256x512x512 in 717-761 us bf16 against 381 us
/// f32). Elsewhere 16-bit products are widened to f32. DS_GEMM_16BIT=native
/// or widen overrides it.
inline bool native16BitProducts(bool fp16) {
  if (const char *force = std::getenv("DS_GEMM_16BIT")) return std::string(force) == "native";
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amxBf16 = d & (1u << 22), amxTile = d & (1u << 24);
  __get_cpuid_count(7, 1, &a, &b, &c, &d);
  const bool avx512Bf16 = a & (1u << 5), amxFp16 = a & (1u << 21);
  // AMX state enabled by the OS (XCR0 bits 17 and 18: XTILECFG, XTILEDATA).
  unsigned lo = 0, hi = 0;
  __get_cpuid(1, &a, &b, &c, &d);
  if (c & (1u << 27)) // OSXSAVE
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const bool amx = amxTile && (lo & (3u << 17)) == (3u << 17);
  if (!fp16) return (amx && amxBf16) || (__builtin_cpu_is("amd") && avx512Bf16);
  return amx && amxFp16;
#else
  (void)fp16;
  return false;
#endif
}

} // namespace ds::rt::cpu

#endif // DS_RUNTIME_CPU_CPUFEATURES_H
