// Closes the region IsaBegin.h opened.
#if defined(DS_CPU_ISA_AVX512)
#pragma GCC pop_options
#endif
#undef DS_CPU_ISA_REGION
