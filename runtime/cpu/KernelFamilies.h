// The registration function of each kernel family, declared in the
// instruction-set namespace the including kernel file is compiled for
// (IsaBegin.h); RegisterKernels.cpp calls them all.
#pragma once

#include "runtime/cpu/KernelRegistry.h"

#ifndef DS_CPU_ISA
#error "kernel files are compiled with -DDS_CPU_ISA=generic or -DDS_CPU_ISA=avx512"
#endif

namespace ds::rt::cpu::DS_CPU_ISA {

void registerElementwiseKernels(KernelRegistry &r);
void registerLinalgKernels(KernelRegistry &r);
void registerNormalizationKernels(KernelRegistry &r);
void registerDataMovementKernels(KernelRegistry &r);
void registerTrainingKernels(KernelRegistry &r);
void registerConvKernels(KernelRegistry &r);
void registerFusedElementwiseKernel(KernelRegistry &r);
void registerAttentionKernel(KernelRegistry &r);
void registerQuantizedMatmulKernel(KernelRegistry &r);
void registerQuantizedConvKernel(KernelRegistry &r);

} // namespace ds::rt::cpu::DS_CPU_ISA
