// Every kernel family of one instruction set (compiled once per set, as
// the kernel files are: IsaBegin.h).
#include "runtime/cpu/KernelFamilies.h"

namespace ds::rt::cpu::DS_CPU_ISA {

void registerKernels(KernelRegistry &r) {
  registerElementwiseKernels(r);
  registerLinalgKernels(r);
  registerNormalizationKernels(r);
  registerDataMovementKernels(r);
  registerTrainingKernels(r);
  registerConvKernels(r);
  registerFusedElementwiseKernel(r);
  registerAttentionKernel(r);
  registerQuantizedMatmulKernel(r);
  registerQuantizedConvKernel(r);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
