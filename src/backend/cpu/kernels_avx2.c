/*
 * kernels_avx2.c - the x86 kernels (kernels_x86.h) for AVX2 + FMA + F16C.
 *
 * Per-function target attributes, so the rest of the library keeps the
 * baseline instruction set and runs on any x86-64; kernels.c installs these
 * only after __builtin_cpu_supports says the CPU has them.
 */
#include "backend/cpu/kernels_impl.h"

#if defined(WGML_CPU_X86)
#define KX_TARGET __attribute__((target("avx2,fma,f16c")))
#define KX_VNNI   0
#define KX_AVX512 0
#include "backend/cpu/kernels_x86.h"

void cpu_kernels_fill_avx2(cpu_type_kernels t[WGML_DTYPE_COUNT]) { kx_fill(t); }
#else
typedef int cpu_kernels_avx2_unused; /* not x86: nothing to build */
#endif
