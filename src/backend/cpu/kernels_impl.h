/*
 * kernels_impl.h - internal to the CPU kernels: how the per-ISA files plug
 * into the dispatch table of kernels.c.
 *
 * kernels.c fills a table with the portable scalar kernels (the reference),
 * then lets each instruction-set file the CPU supports overwrite the `dot`
 * and `to_float` entries it has faster versions of (`dot` always with its
 * `dot_rows`, the same loop over several activation rows). Most keep the scalar
 * `act_type` and `prepare`; one that reads its activations in another order
 * sets both, to a CPU_ACT_* layout holding the same values (kernels.h).
 */
#ifndef WGML_CPU_KERNELS_IMPL_H
#define WGML_CPU_KERNELS_IMPL_H

#include "backend/cpu/kernels.h"
#include "core/dtype.h"

/* The kernels of one instruction set - "avx512", "avx2" or "scalar" - even
 * when it is not the best one here; NULL when this CPU or build lacks it or
 * the type has no kernel. For tests and benchmarks. */
const cpu_type_kernels *cpu_kernels_get_isa(const char *isa, uint32_t type);

#if defined(__x86_64__) || defined(__i386__)
#define WGML_CPU_X86 1
/* AVX2 + FMA + F16C (kernels_avx2.c). */
void cpu_kernels_fill_avx2(cpu_type_kernels table[WGML_DTYPE_COUNT]);
/* AVX-512 F/BW/VL + VNNI (kernels_avx512.c), over the AVX2 entries. */
void cpu_kernels_fill_avx512(cpu_type_kernels table[WGML_DTYPE_COUNT]);
/* Attention with AVX2 + FMA + F16C (kernels_attn_x86.c); also the one used
 * on AVX-512 machines. */
void cpu_attn_avx2(const cpu_attn_job *job);
/* Block attention (cpu_attn_rows_job) with AVX2 + FMA (kernels_attn_x86.c). */
void cpu_attn_rows_avx2(const cpu_attn_rows_job *job);
/* Block attention with AVX-512, 16 rows in the lanes (kernels_attn_x86.c). */
void cpu_attn_rows_avx512(const cpu_attn_rows_job *job);
/* GEMM micro-kernels (cpu_gemm_fn) for AVX-512 and AVX2 + FMA (kernels_gemm_x86.c). */
void cpu_gemm_avx512(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                     int add);
/* The bf16 GEMM micro-kernel (cpu_gemm_bf16_fn) with AVX512_BF16 (kernels_gemm_x86.c). */
void cpu_gemm_bf16_avx512(int64_t kp, const uint32_t *x, size_t ldx, const uint32_t *wp, float *c, size_t ldc, int mr,
                          int nc, int add);
void cpu_to_bf16_avx512(const float *x, uint16_t *dst, int64_t n);
/* The int8 GEMM micro-kernel (cpu_qgemm_fn) with AVX-512 VNNI (kernels_gemm_x86.c). */
void cpu_qgemm_avx512(int64_t nch, int sub, int zp, const uint8_t *act, size_t act_stride, const uint8_t *wp,
                      float *c, size_t ldc, int nt, int nc, int add, const float *bias);
void cpu_qgemm_pack_avx512(const uint8_t *u, int64_t K, const float *s1, const float *s2, int sub, uint8_t *dst);
void cpu_qgemm_prep_avx512(const float *x, int64_t K, int kind, uint8_t *act);
void cpu_qgemm_direct_avx512(int layout, const uint8_t *w, size_t w_row, int64_t K, uint8_t *dst);
/* The same with AVX2 and no VNNI (kernels_gemm_x86.c); codes below 64 but with zp >= 128. */
void cpu_qgemm_avx2(int64_t nch, int sub, int zp, const uint8_t *act, size_t act_stride, const uint8_t *wp, float *c,
                    size_t ldc, int nt, int nc, int add, const float *bias);
/* SwiGLU (cpu_swiglu_fn) with AVX-512 (kernels_act_x86.c). */
void cpu_swiglu_avx512(float *g, const float *u, const float *bg, const float *bu, int64_t M);
/* Snake1d (cpu_snake_fn) with AVX-512 (kernels_act_x86.c). */
void cpu_snake_avx512(float *out, const float *x, const float *v, int64_t n, int64_t rows);
void cpu_to_f16_f16c(const float *x, uint16_t *dst, int64_t n);
void cpu_gemm_avx2(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                   int add);
#endif

/*
 * GELU in its exact (erf) form over n contiguous floats, out[i] =
 * 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x) for x = in[i] (out may be in), in
 * float (cpu_ops_nn.c, kernels_act_x86.c): Q(t) = Phi(-t) = erfc(t / sqrt 2) / 2
 * for t = |x| < 6 from a degree-7 polynomial on each of 8 intervals of width
 * 3/4 (cpu_gelu_q, a table lookup per coefficient: vpermps), 0 beyond, then
 * x Q(|x|) for x <= 0 and x - x Q(x) in one rounding for x > 0. Within 1e-7
 * of the double formula everywhere (absolute below |GELU| = 1, relative
 * above); -0 stays -0, NaN and -inf give NaN and +inf gives +inf, as the
 * double formula does. The exact backend keeps libm's erf in double.
 */
typedef void (*cpu_gelu_erf_fn)(float *out, const float *in, int64_t n);
#define CPU_GELU_Q_DEGREE 7
/* [coefficient of u^j][interval k]: Q(0.75 k + 0.375 + u) for |u| <= 0.375 */
extern const float cpu_gelu_q[CPU_GELU_Q_DEGREE + 1][8];
void cpu_gelu_erf_scalar(float *out, const float *in, int64_t n);
#if defined(__x86_64__) || defined(__i386__)
void cpu_gelu_erf_avx2(float *out, const float *in, int64_t n);   /* AVX2 + FMA */
void cpu_gelu_erf_avx512(float *out, const float *in, int64_t n); /* AVX-512 F */
#endif
/* The kernel for this CPU (cpu_kernels_isa(): the scalar one when forced or
 * capped by WGML_CPU_ISA), and the one of a given instruction set ("avx512",
 * "avx2", "scalar"; NULL when this CPU or build lacks it). */
cpu_gelu_erf_fn cpu_kernels_gelu_erf(void);
cpu_gelu_erf_fn cpu_kernels_gelu_erf_isa(const char *isa);

/*
 * GELU's two sigmoid forms over n contiguous floats (out may be in), both
 * x sigmoid(z(x)) = x / (1 + exp(-z)): kind CPU_GELU_QUICK, QuickGELU (CLIP),
 * z = 1.702 x; CPU_GELU_TANH, the tanh approximation (SigLIP),
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), z = 2 sqrt(2/pi)
 * (x + 0.044715 x^3) since (1 + tanh(u)) / 2 = sigmoid(2 u). The scalar one
 * is the double formula the exact backend keeps (the reference, and the
 * kernel of other CPUs and wasm); the SIMD ones compute in float
 * (kernels_act_x86.c) with a vectorized exp: within 1e-7 of the double
 * formula everywhere (absolute below |out| = 1, relative above; measured
 * 6.6e-8) and 2.2 ulp of the exact value wherever |out| >= 1e-36 (below
 * that they give -0 where the double formula gives a tiny or subnormal
 * value); -0, NaN, +-inf as the double formula gives them. (Below x = -5
 * tanh GELU's double formula loses digits to 1 + tanh's cancellation, and
 * gives -0 below -7.3: there, at values under 1e-6, the SIMD ones are the
 * closer to the exact value.)
 */
enum { CPU_GELU_QUICK = 0, CPU_GELU_TANH = 1 };
/* z = x (A + B x^2); each constant the float nearest the double one, and the rest */
#define CPU_GELU_QUICK_A 1.702f
#define CPU_GELU_QUICK_A_LO -2.193450932e-08f
#define CPU_GELU_TANH_A 1.59576912160573071f /* 2 sqrt(2/pi) */
#define CPU_GELU_TANH_A_LO -4.534068054e-08f
#define CPU_GELU_TANH_B 0.0713548162726002527f /* 2 sqrt(2/pi) 0.044715 */
#define CPU_GELU_TANH_B_LO 2.398832466e-09f
typedef void (*cpu_gelu_sig_fn)(float *out, const float *in, int64_t n, int kind);
void cpu_gelu_sig_scalar(float *out, const float *in, int64_t n, int kind);
#if defined(__x86_64__) || defined(__i386__)
void cpu_gelu_sig_avx2(float *out, const float *in, int64_t n, int kind);   /* AVX2 + FMA */
void cpu_gelu_sig_avx512(float *out, const float *in, int64_t n, int kind); /* AVX-512 F */
#endif
/* As cpu_kernels_gelu_erf and _isa. */
cpu_gelu_sig_fn cpu_kernels_gelu_sig(void);
cpu_gelu_sig_fn cpu_kernels_gelu_sig_isa(const char *isa);

/* The portable attention kernel (kernels.c): the reference the SIMD one is
 * tested against, and the one used without x86 SIMD. */
void cpu_attn_scalar(const cpu_attn_job *job);
/* The portable block attention kernel (kernels.c), likewise. */
void cpu_attn_rows_scalar(const cpu_attn_rows_job *job);
/* The portable bf16 GEMM micro-kernel (kernels.c), likewise. */
void cpu_gemm_bf16_scalar(int64_t kp, const uint32_t *x, size_t ldx, const uint32_t *wp, float *c, size_t ldc, int mr,
                          int nc, int add);
void cpu_to_bf16_scalar(const float *x, uint16_t *dst, int64_t n);
void cpu_to_f16_scalar(const float *x, uint16_t *dst, int64_t n);
void cpu_swiglu_scalar(float *g, const float *u, const float *bg, const float *bu, int64_t M);
/* The portable Snake (kernels.c), in double, likewise. */
void cpu_snake_scalar(float *out, const float *x, const float *v, int64_t n, int64_t rows);
/* The portable GEMM micro-kernel (kernels.c), likewise. */
void cpu_gemm_scalar(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                     int add);
/* The portable int8 GEMM micro-kernel (kernels.c), likewise. */
void cpu_qgemm_scalar(int64_t nch, int sub, int zp, const uint8_t *act, size_t act_stride, const uint8_t *wp,
                      float *c, size_t ldc, int nt, int nc, int add, const float *bias);
void cpu_qgemm_pack_scalar(const uint8_t *u, int64_t K, const float *s1, const float *s2, int sub, uint8_t *dst);


#if defined(__wasm_simd128__)
/* WebAssembly SIMD128 (kernels_wasm.c), over the scalar entries. */
void cpu_kernels_fill_wasm(cpu_type_kernels table[WGML_DTYPE_COUNT]);
/* The f32 GEMM micro-kernel (cpu_gemm_fn) with SIMD128: the scalar one's bits. */
void cpu_gemm_wasm(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                   int add);
#endif

#endif
