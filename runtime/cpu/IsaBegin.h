// Opens a kernel file's instruction-set region; IsaEnd.h closes it. No
// include guard: every kernel file includes it once, after all its includes.
//
// CMake compiles each kernel file twice, with DS_CPU_ISA=generic (the
// compiler's default target: any x86-64, or any CPU of another
// architecture) and, on x86-64, DS_CPU_ISA=avx512 (x86-64-v4's
// instructions: AVX-512F/BW/CD/DQ/VL with AVX2, FMA, BMI), each into
// namespace ds::rt::cpu::DS_CPU_ISA;
// cpuKernels() registers the set this CPU runs (KernelRegistry.cpp). The
// target applies only to functions defined from here on, so what the
// headers define (std, absl, the shared element math) keeps the default
// target in both objects: the linker may merge those copies safely, and
// the AVX-512 kernels still inline and vectorize them for AVX-512. (The
// target names instructions, not an `arch=`: GCC inlines a default-target
// function only into callers of the same arch and tuning.)
#ifndef DS_CPU_ISA
#error "kernel files are compiled with -DDS_CPU_ISA=generic or -DDS_CPU_ISA=avx512"
#endif
// The standard headers kernel code uses, defined before the region so
// their functions keep the default target (a header first included inside
// it would be compiled for AVX-512 and could be merged with the generic
// objects' copies).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/VectorMath.h"
#define DS_CPU_ISA_REGION 1
#if defined(DS_CPU_ISA_AVX512)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx2,fma,bmi,bmi2,lzcnt,popcnt,f16c,movbe")
#endif
