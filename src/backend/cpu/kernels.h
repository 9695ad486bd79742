/*
 * kernels.h - per-type CPU compute kernels: the dot products behind matmul.
 *
 * For a weight type, matmul first converts the f32 activation row x into the
 * type's `act_type` (f32 itself for float weights; Q8_0 for Q4_0/Q5_0/Q8_0;
 * Q8_1 for Q4_1/Q5_1, whose block sum folds in the weight minimum; Q8_K for
 * the K-quants) so that the inner loop is integer multiply-adds, then calls
 * `dot` for each weight row. An activation format is a GGUF dtype or one of
 * the CPU_ACT_* layouts below, private to these kernels: the same values
 * stored in the order one instruction set's dot reads best. Every weight row
 * reads the same activations, so reordering them once in `prepare` spares
 * that work on every row. Both functions are chosen once at startup for the
 * best instruction set this CPU has (AVX-512/VNNI, AVX2+FMA+F16C, or
 * portable scalar code); every variant computes the same math as the scalar
 * reference, up to float summation order.
 */
#ifndef WGML_CPU_KERNELS_H
#define WGML_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/*
 * CPU_ACT_Q8_0_G8: Q8_0 values (one fp16 scale d and 32 int8 q per block of
 * 32) in groups of 8 blocks, 400 bytes each:
 *   bytes 0..15     d of blocks 0..7 (fp16)
 *   bytes 16..207   blocks 0..3:
 *     +0    16 int32: -8 * sum(q) of block j, then three zeros, for j = 0..3
 *     +64   q[0..15] of blocks 0..3 (16 bytes each)
 *     +128  q[16..31] of blocks 0..3
 *   bytes 208..399  the same for blocks 4..7
 * A row's blocks past its last full group follow as plain Q8_0 blocks. Made
 * for Q4_0 weights (AVX-512): each 64-byte run meets the low or the high
 * nibbles of 4 weight blocks in one load, and the int32s are where the
 * integer dot sums start, so the zero point 8 is taken off exactly and for
 * free: sum((w - 8) q) = -8 sum(q) + sum(w q).
 * The id is past every GGUF type id, so it is never a tensor's type.
 */
#define CPU_ACT_Q8_0_G8 100u
#define CPU_ACT_Q8_0_G8_GROUP 400 /* bytes per group of 8 blocks */

/*
 * CPU_ACT_Q8_0_Z128: Q8_0 values in groups of 8 blocks, 528 bytes each:
 *   bytes 0..15     d of blocks 0..7 (fp16)
 *   bytes 16..143   blocks 0 and 1:
 *     +0    16 int32: -128 * sum(q) of block 0, seven zeros, the same for block 1
 *     +64   q of block 0 (32 bytes), q of block 1
 *   bytes 144..527  the same for blocks 2 and 3, 4 and 5, 6 and 7
 * A row's blocks past its last full group follow as plain Q8_0 blocks. Made
 * for Q8_0 weights (AVX-512), which vpdpbusd reads as unsigned w + 128: the
 * int32s are where those sums start, so the zero point's term is taken off
 * exactly, with no second vpdpbusd and subtraction per pair of blocks.
 */
#define CPU_ACT_Q8_0_Z128 102u
#define CPU_ACT_Q8_0_Z128_GROUP 528 /* bytes per group of 8 blocks */

/*
 * CPU_ACT_Q8_K_R: Q8_K values (an f32 scale d and 256 int8 q per block),
 * CPU_ACT_Q8_K_R_BLOCK = 320 bytes per block:
 *   bytes 0..255    q in runs of 32 (sub-blocks j): j = 0 2 1 3 4 6 5 7
 *   bytes 256..271  zero (8 int16)
 *   bytes 272..287  sum(q) of sub-block j, 8 int16
 *   bytes 288..295  d (f32), twice
 *   bytes 296..319  zero
 * Made for Q4_K and Q5_K weights (AVX-512): a 64-byte run of their nibbles
 * splits into the low ones, sub-blocks [j | j + 2], and the high ones,
 * [j + 1 | j + 3], each met by one 64-byte load here; the sums, beside a
 * zero for each scale, meet the weights' [8 scales | 8 mins] words in one
 * multiply-add for the mins term.
 */
#define CPU_ACT_Q8_K_R 101u
#define CPU_ACT_Q8_K_R_BLOCK 320

/* The sub-block stored in CPU_ACT_Q8_K_R's 32-byte run i (0 2 1 3 4 6 5 7: bits 0 and 1
 * swapped; the order is its own inverse). */
static inline int cpu_act_q8_k_r_run(int i) { return (i & 4) | (i & 1) << 1 | (i >> 1 & 1); }

/*
 * CPU_W_Q4_0_X8: a Q4_0 weight row regrouped at load, the same size as the
 * GGUF row: groups of 8 blocks, 144 bytes each:
 *   bytes 0..15     d of blocks 0..7 (fp16)
 *   bytes 16..79    qs of blocks 0..3 (16 bytes each, as in the GGUF block)
 *   bytes 80..143   qs of blocks 4..7
 * A row's blocks past its last full group follow as plain Q4_0 blocks.
 * GGUF's 18-byte blocks put each block's nibbles at another offset in a
 * cache line: gathering four of them into one zmm and the eight scales into
 * one ymm took more instructions than the arithmetic. Here each is one load.
 * (A layout is named by the functions that write and read it, below.)
 */

/* Every activation format is piecewise in runs of CPU_ACT_PIECE elements: a
 * row prepared in pieces, each starting at element a (a multiple of this)
 * and stored at byte cpu_act_row_size(act, a), is the row prepared whole.
 * matmul splits a single token's row across threads that way. */
#define CPU_ACT_PIECE 256

/* Bytes of a prepared row of n activations in format act (a dtype or CPU_ACT_*). */
size_t cpu_act_row_size(uint32_t act, int64_t n);
/* A GGUF Q4_0 row of n elements (a multiple of 32) -> CPU_W_Q4_0_X8, and back to floats. */
void cpu_w_q4_0_x8_repack(const void *src, void *dst, int64_t n);
void cpu_w_q4_0_x8_to_float(const void *src, float *dst, int64_t n);

/* A prepared row back to n floats (the values the dot products use); -1 when act is
 * unknown or the row's redundant fields (CPU_ACT_Q8_0_G8's sums) disagree with its values. */
int cpu_act_to_float(uint32_t act, const void *src, float *dst, int64_t n);

/* Activation rows one pass of a dot_rows kernel takes (more are done in passes of this many). */
#define CPU_DOT_ROWS 4

typedef struct cpu_type_kernels {
    uint32_t act_type; /* format of the prepared activation row: a wgml_dtype or CPU_ACT_* */
    /* x (n f32) -> prepared activation row (cpu_act_row_size(act_type, n) bytes) */
    void (*prepare)(const float *x, void *dst, int64_t n);
    /* sum over n elements of w_row[i] * x[i], x prepared by `prepare` */
    float (*dot)(int64_t n, const void *w_row, const void *x_prepared);
    /* n elements of a weight row to f32 (embedding lookup) */
    void (*to_float)(const void *src, float *dst, int64_t n);
    /* Optional (NULL if none): the 16 dot products of 4 weight rows (w_stride
     * bytes apart) with 4 prepared activation rows (x_stride bytes apart),
     * out[4 * r + t] = row r . row t. Loads each vector once for four
     * products, for prompt processing. */
    void (*dot4x4)(int64_t n, const void *w, size_t w_stride, const void *x, size_t x_stride, float *out);
    /* Optional (NULL if none): the dot products of one weight row with nr >= 1
     * prepared activation rows (x_stride bytes apart), out[t] = dot(n, w_row,
     * x + t * x_stride) bit for bit: `dot`'s own loop with a set of
     * accumulators per row, so each weight block is loaded and decoded once
     * for up to CPU_DOT_ROWS rows. Decoding several sequences in one step
     * (batch-invariant matmuls, ops.h) relies on that identity; without
     * this entry the backend calls `dot` per row, which keeps it too. */
    void (*dot_rows)(int64_t n, const void *w_row, const void *x, size_t x_stride, int nr, float *out);
    /* Optional (NULL if none): the kernels of weights stored in a layout of
     * their own (a CPU_W_*), which read faster than GGUF's. The backend
     * rewrites a weight into it once, when the weight is created, with that
     * table's `repack`; its dot, dot4x4 and to_float then read that layout. */
    const struct cpu_type_kernels *packed;
    /* In a `packed` table: a GGUF row of n elements -> the layout (the same size). */
    void (*repack)(const void *src, void *dst, int64_t n);
} cpu_type_kernels;

/*
 * Attention of `ng` query heads over one KV head's cache rows 0..len-1 (the
 * heads of a grouped-query group share every K and V row, so each row is
 * loaded once for all of them). For each query head h:
 *   s_j  = scale * q_h . K_j
 *   m[h] = max_j s_j,  l[h] = sum_j exp(s_j - m[h]),
 *   o_h  = sum_j exp(s_j - m[h]) V_j          (not yet divided by l[h])
 * so that a caller can split the rows into chunks and merge the chunks'
 * (m, l, o) afterwards (split-K), or divide by l when there is one chunk.
 */
typedef struct cpu_attn_job {
    int hd;               /* head dimension */
    int ng;               /* query heads sharing this KV head */
    int len;              /* cache rows, >= 1 */
    int f16;              /* the cache holds fp16 (else f32) */
    const uint8_t *k, *v; /* this KV head's slice of cache row 0 */
    size_t stride;        /* bytes from one cache row to the next */
    const float *q;       /* ng query rows of hd floats, one after another */
    float scale;
    float *s;     /* scratch: ng * len + hd floats */
    float *m, *l; /* out: ng floats each */
    float *o;     /* out: ng rows of hd floats */
} cpu_attn_job;
typedef void (*cpu_attn_fn)(const cpu_attn_job *job);

/* The attention kernel for this CPU (the scalar one when forced). */
cpu_attn_fn cpu_kernels_attn(void);

/*
 * Attention of a block of up to CPU_ATTN_ROWS query rows, one head each,
 * over key rows 0..len-1 of one KV head (general attention: encoders,
 * packed sequences; the rows of a block share most of their key rows, so
 * every K and V row loaded serves the whole block). For each query row r:
 *   s_j = scale * q_r . K_j + bias[j][r]      (bias NULL: + 0)
 *   o_r = sum_j softmax_j(s) V_j              (normalized)
 * A bias of -INFINITY hides the key from that row; a row whose keys are all
 * hidden gets zeros. Rows nr..CPU_ATTN_ROWS-1 of bias are read but unused.
 */
#define CPU_ATTN_ROWS 16
typedef struct cpu_attn_rows_job {
    int hd;             /* head dimension */
    int nr;             /* query rows, 1..CPU_ATTN_ROWS */
    int len;            /* key rows, >= 1 */
    const float *q;     /* query row 0 (hd floats) */
    size_t q_stride;    /* floats from one query row to the next */
    const float *k, *v; /* key row 0 of K and V (hd floats each), f32 */
    size_t kv_stride;   /* floats from one key row to the next */
    const float *bias;  /* NULL or [len][CPU_ATTN_ROWS] */
    float scale;
    float *s;        /* scratch: CPU_ATTN_ROWS * (len + hd) floats */
    float *o;        /* out: row 0 */
    size_t o_stride; /* floats from one output row to the next */
} cpu_attn_rows_job;
typedef void (*cpu_attn_rows_fn)(const cpu_attn_rows_job *job);

/* The block attention kernel for this CPU (the scalar one when forced). */
cpu_attn_rows_fn cpu_kernels_attn_rows(void);

/*
 * Attention of a few query vectors (decode: one query row, a beam's rows, or
 * the heads of a grouped-query group) over the same key rows 0..len-1 of one
 * KV head, each K and V row streamed once for all of them. For each r < nr:
 *   s_j  = scale * q_r . K_j + bias_r[j]     (bias_r NULL: + 0; -INFINITY hides the key)
 *   m[r] = max_j s_j over the keys not hidden (-INFINITY if every key is hidden),
 *   l[r] = sum_j exp(s_j - m[r]),  o_r = sum_j exp(s_j - m[r]) V_j  (not divided by l;
 *   l = 0 and o_r zeros when every key is hidden)
 * so that a caller can split the keys into chunks and merge (m, l, o) (split-K).
 */
#define CPU_ATTN_DEC_ROWS 4
typedef struct cpu_attn_dec_job {
    int hd;               /* head dimension */
    int nr;               /* query vectors, 1..CPU_ATTN_DEC_ROWS */
    int len;              /* key rows, >= 1 */
    int f16;              /* K and V rows hold fp16 (else f32) */
    const uint8_t *k, *v; /* this KV head's slice of key row 0 */
    size_t stride;        /* bytes from one key row to the next */
    const float *q[CPU_ATTN_DEC_ROWS];    /* hd floats each */
    const float *bias[CPU_ATTN_DEC_ROWS]; /* NULL or len floats each */
    float scale;
    float *s;                          /* scratch: cpu_attn_dec_scratch(len, hd) floats */
    float *m, *l;                      /* out: nr floats each */
    float *o[CPU_ATTN_DEC_ROWS];       /* out: hd floats each */
} cpu_attn_dec_job;
typedef void (*cpu_attn_dec_fn)(const cpu_attn_dec_job *job);

/* Floats of scratch a cpu_attn_dec_job over len keys needs. */
static inline size_t cpu_attn_dec_scratch(int len, int hd) {
    return (size_t)CPU_ATTN_DEC_ROWS * ((size_t)len + (size_t)hd) + 64;
}

/* The decode attention kernel for this CPU (the scalar one when forced);
 * NULL where there is no SIMD one (callers take the block kernel). */
cpu_attn_dec_fn cpu_kernels_attn_dec(void);
/* The portable one (kernels.c) and the AVX-512 one (kernels_attn_x86.c, x86
 * only; hd % 16 != 0 goes to the portable one). */
void cpu_attn_dec_scalar(const cpu_attn_dec_job *job);
void cpu_attn_dec_avx512(const cpu_attn_dec_job *job);

/*
 * The GEMM micro-kernel behind matmuls of many token rows (cpu_gemm.c): for
 * rows r < mr (1..CPU_GEMM_MR) and columns j < nc (1..CPU_GEMM_NR),
 *   c[r*ldc + j] = (add ? c[r*ldc + j] : 0) + sum_{k < kc} x[r*ldx + k] * wp[k*CPU_GEMM_NR + j]
 * wp: a panel of CPU_GEMM_NR weight rows packed k-major (each k's
 * CPU_GEMM_NR floats together), 64-byte aligned; columns past nc are zero
 * there and not written to c. Sums in f32, in order of k per output.
 */
#define CPU_GEMM_MR 6
#define CPU_GEMM_NR 32
typedef void (*cpu_gemm_fn)(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr,
                            int nc, int add);

/* The GEMM micro-kernel for this CPU (the scalar one when forced); the
 * scalar reference for an isa of "scalar"; NULL for an isa this CPU or
 * build lacks. */
cpu_gemm_fn cpu_kernels_gemm(void);
cpu_gemm_fn cpu_kernels_gemm_isa(const char *isa);
/*
 * The same for BF16 weights with activations rounded to bf16 (AVX512_BF16's
 * vdpbf16ps, twice the f32 FMA rate): x and wp hold bf16 pairs (element 2k
 * in the low half of word k); kp pairs; ldx in words. For BF16 weights the
 * blocked GEMM rounds the activations to bf16 (round to nearest even), as
 * llama.cpp does: products exact in f32, sums in f32. NULL where the CPU
 * lacks it (and when the scalar kernels are forced); the scalar reference
 * from cpu_kernels_gemm_bf16_isa("scalar").
 */
#define CPU_GEMM_MR_BF16 12 /* rows per tile (mr <= this): 24 accumulators, 14 loads per 24 vdpbf16ps */
typedef void (*cpu_gemm_bf16_fn)(int64_t kp, const uint32_t *x, size_t ldx, const uint32_t *wp, float *c, size_t ldc,
                                 int mr, int nc, int add);
cpu_gemm_bf16_fn cpu_kernels_gemm_bf16(void);
cpu_gemm_bf16_fn cpu_kernels_gemm_bf16_isa(const char *isa);
/* f32 -> bf16, round to nearest even, for that kernel's activations (the
 * instruction set's own with cpu_kernels_gemm_bf16, else the scalar one). */
typedef void (*cpu_to_bf16_fn)(const float *x, uint16_t *dst, int64_t n);
cpu_to_bf16_fn cpu_kernels_to_bf16(void);
/* f32 -> f16, round to nearest even, the bits of wgml_f32_to_f16 (NaN
 * payloads included): the KV cache's stores. F16C where the CPU has it. */
typedef void (*cpu_to_f16_fn)(const float *x, uint16_t *dst, int64_t n);
cpu_to_f16_fn cpu_kernels_to_f16(void);
cpu_to_f16_fn cpu_kernels_to_f16_isa(const char *isa);

/* Whether the micro-kernel is a SIMD one: matmul takes the GEMM path only
 * then (the scalar one is the reference, slower than the dot products). */
int cpu_kernels_gemm_fast(void);

/*
 * The int8 GEMM micro-kernel behind matmuls of many token rows with
 * quantized weights (cpu_qgemm.c). Every weight type is first unpacked to
 * unsigned codes u and, per sub-block of `sub` (16 or 32) elements, two
 * floats with w = s1 * u - s2; types whose offset is a fixed number of steps
 * (s2 = zp * s1: Q4_0 8, Q5_0 16, Q8_0 128, Q3_K 4, Q6_K 32) take it off in
 * the integer sums instead (zp > 0), exactly, as their dot products do. The
 * activations are x ~ d * q (q int8), with sq_h = sum(q) and m_h = -d sq_h
 * over sub-block h.
 *
 * A panel holds CPU_QGEMM_NC weight rows (output columns); its chunk c
 * (k = 32c .. 32c+31) is cpu_qgemm_chunk_bytes(sub) bytes:
 *   bytes 0..511  u: 8 runs of 64 bytes, run g holds u[col][32c + 4g .. 4g+3]
 *                 at bytes 4 col .. 4 col + 3 (what vpdpbusd multiplies)
 *   then per sub-block h of the chunk: s1 of the 16 columns, s2 of the 16 columns
 * A token's chunk c is CPU_QGEMM_ACT bytes at act + c * CPU_QGEMM_ACT:
 *   bytes 0..31   q (int8)
 *   bytes 32..35  d (f32)
 *   bytes 36..43  m_0, m_1 of the 16-element halves (f32)
 *   bytes 44..47  m of the whole chunk (f32)
 *   bytes 48..59  sq_0, sq_1, sq of the whole chunk (int32), the rest zero
 * For tokens t < nt (1..CPU_QGEMM_NT) and columns j < nc (1..CPU_QGEMM_NC):
 *   c[t*ldc + j] = (add ? c[t*ldc + j] : 0) + (bias ? bias[j] : 0) + sum_{c,h}
 *     zp == 0: s1[c][h][j] * d[t][c] * sum_{k in h} u[c][k][j] * q[t][c][k] + s2[c][h][j] * m[t][c][h]
 *     zp > 0:  s1[c][h][j] * d[t][c] * (sum_{k in h} u[c][k][j] * q[t][c][k] - zp * sq[t][c][h])
 * Integer sums per sub-block are exact; the rest in f32.
 */
#define CPU_QGEMM_NT 8
#define CPU_QGEMM_NC 16
#define CPU_QGEMM_ACT 64
static inline size_t cpu_qgemm_chunk_bytes(int sub) { return 512 + (size_t)(32 / sub) * 128; }
typedef void (*cpu_qgemm_fn)(int64_t nch, int sub, int zp, const uint8_t *act, size_t act_stride, const uint8_t *wp,
                             float *c, size_t ldc, int nt, int nc, int add, const float *bias);
/* The micro-kernel for this CPU (AVX-512 VNNI, or AVX2: vpmaddubsw, whose
 * int16 pair sums need the codes below 64 except with zp >= 128, and the
 * activations in -127..127, as every type and both encoders have them);
 * NULL where it has none or the scalar kernels are forced: matmul then keeps
 * the dot products. The scalar reference from cpu_kernels_qgemm_isa("scalar");
 * "avx2" gives the AVX2 kernel on any CPU with AVX2. */
cpu_qgemm_fn cpu_kernels_qgemm(void);
cpu_qgemm_fn cpu_kernels_qgemm_isa(const char *isa);
/* A panel from 16 unpacked weight rows: u holds row j's K codes at u + j K,
 * s1 and s2 the scales of sub-block b (16 elements) of the 16 rows at
 * [16 b .. 16 b + 15]; dst gets the K / 32 chunks in the layout above. */
typedef void (*cpu_qgemm_pack_fn)(const uint8_t *u, int64_t K, const float *s1, const float *s2, int sub, uint8_t *dst);
/* The panel packer matching cpu_kernels_qgemm_isa(isa) (NULL where that is NULL). */
cpu_qgemm_pack_fn cpu_kernels_qgemm_pack_isa(const char *isa);
/* One activation row of K (a multiple of 32; of 256 for kind 1) into the
 * GEMM's chunks: kind 0 as the library's Q8_0 encoder rounds it (d = max|x| /
 * 127 per 32, q = x / d rounded half away from zero, d kept as f16), kind 1
 * as its Q8_K encoder (per 256: d = -max / 127 for the first element of
 * largest magnitude, q rounded half to even), the same bytes either way.
 * NULL for "scalar": cpu_qgemm.c then runs the encoders themselves. */
typedef void (*cpu_qgemm_prep_fn)(const float *x, int64_t K, int kind, uint8_t *act);
/* A panel straight from 16 weight rows (w_row bytes apart) in one of these
 * layouts, the bytes cpu_qgemm_pack_fn writes from the unpacked rows, without
 * the unpacking. NULL where the instruction set has none. */
enum { CPU_QGEMM_DIRECT_Q4_0, CPU_QGEMM_DIRECT_Q4_0_X8, CPU_QGEMM_DIRECT_Q8_0, CPU_QGEMM_DIRECT_Q4_K, CPU_QGEMM_DIRECT_Q6_K };
typedef void (*cpu_qgemm_direct_fn)(int layout, const uint8_t *w, size_t w_row, int64_t K, uint8_t *dst);
cpu_qgemm_direct_fn cpu_kernels_qgemm_direct_isa(const char *isa);
cpu_qgemm_prep_fn cpu_kernels_qgemm_prep_isa(const char *isa);

/*
 * Snake1d over rows of n columns: out[r][c] = x[r][c] + sin(v[c] x[r][c])^2 / v[c]
 * (out may be x). The SIMD versions compute in float (a few ulp); the
 * scalar one, the reference, in double. Arguments |v x| beyond
 * CPU_SNAKE_MAX_ARG take the double path everywhere.
 */
#define CPU_SNAKE_MAX_ARG 4096.0f
typedef void (*cpu_snake_fn)(float *out, const float *x, const float *v, int64_t n, int64_t rows);
/* The Snake kernel for this CPU (the scalar one when forced). */
cpu_snake_fn cpu_kernels_snake(void);

/*
 * SwiGLU of one row after a matmul: g[m] = silu(g[m] + bg[m]) * (u[m] + bu[m])
 * for m < M, silu(a) = a / (1 + exp(-a)); bg, bu NULL: 0. The SIMD version
 * computes exp with a polynomial (about 2 ulp, the argument clamped to
 * [-87.3, 88]); the scalar one, the reference, with libm's expf.
 */
typedef void (*cpu_swiglu_fn)(float *g, const float *u, const float *bg, const float *bu, int64_t M);
cpu_swiglu_fn cpu_kernels_swiglu(void);
cpu_swiglu_fn cpu_kernels_swiglu_isa(const char *isa);

/* NULL when the CPU backend cannot compute with weights of this type. */
const cpu_type_kernels *cpu_kernels_get(uint32_t type);

/* The instruction set the kernels were chosen for: "avx512", "avx2", "wasm-simd128", "scalar". */
const char *cpu_kernels_isa(void);

/* The same for people (wgml --version): the architecture and the instruction
 * sets that this build has kernels for and this CPU runs, e.g. "x86-64 AVX2
 * AVX-512 VNNI", "x86-64 AVX2", "x86-64 scalar"; not changed by
 * cpu_kernels_force_scalar. */
const char *cpu_kernels_features(void);

/* Forces the portable scalar kernels (tests compare them with the SIMD ones). */
void cpu_kernels_force_scalar(int on);

#endif
