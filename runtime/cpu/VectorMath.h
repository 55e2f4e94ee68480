// Lets GCC vectorize loops that call expf/logf/erff/tanhf: these
// declarations carry the OpenMP "simd" attribute that glibc's own headers
// add only under -ffast-math, so loops call libmvec's vector variants
// (_ZGVdN8v_expf, _ZGVeN16v_erff, ...; within 4 ulp) while the rest of the
// kernels keep strict IEEE semantics. Include before ElementMath.h.
#pragma once

#include <cmath>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
extern "C" {
__attribute__((__simd__("notinbranch"))) float expf(float) noexcept;
__attribute__((__simd__("notinbranch"))) float logf(float) noexcept;
__attribute__((__simd__("notinbranch"))) float erff(float) noexcept;
__attribute__((__simd__("notinbranch"))) float tanhf(float) noexcept;
}
#endif
