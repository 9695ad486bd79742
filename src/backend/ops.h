/*
 * ops.h - the one list of ops, and each op's arguments.
 *
 * WGML_OPS below is the list. Everything else is generated from it:
 *   - enum wgml_op (WGML_OP_MATMUL, ...) and wgml_op_names[] (profiles, messages),
 *   - the typed call a model makes, wgml_op_<name>(be, &args) (backend.h), which
 *     goes through the backend's one entry point, be->run(be, op, args),
 *   - the argument check every backend runs first, wgml_op_validate (validate.c
 *     holds one wgml_validate_<name> per op; a missing one does not link),
 *   - each backend's table of implementations (cpu_op_<name>, wg_op_<name>:
 *     a missing one does not compile),
 *   - the op-by-op test grid (opcheck.c: one oc_check_<name> per op, in the
 *     opcheck_<family>.c of its op: opcheck_impl.h).
 *
 * Adding an op (docs/ARCHITECTURE.md, "Adding an op"): a line here and its
 * arguments struct; wgml_validate_<name> in validate.c; the CPU reference
 * cpu_op_<name>; the WGSL kernel and wg_op_<name>; oc_check_<name> in opcheck_<family>.c.
 */
#ifndef WGML_BACKEND_OPS_H
#define WGML_BACKEND_OPS_H

#include "backend/tensor.h"

/* X(name, NAME, arguments type): the ops, in the order the tests run them. */
#define WGML_OPS(X)                                                                                                    \
    X(matmul, MATMUL, wgml_matmul_args)          /* up to 3 products of one input, fused norm and epilogue */          \
    X(get_rows, GET_ROWS, wgml_get_rows_args)    /* rows of a table by id, dequantized */                              \
    X(attention, ATTENTION, wgml_attention_args) /* attention: causal over the KV cache, or general */                 \
    X(rms_norm, RMS_NORM, wgml_rms_norm_args)    /* x / rms(x) * w per row */                                          \
    X(softmax, SOFTMAX, wgml_softmax_args)       /* softmax(x * scale) per row */                                      \
    X(add, ADD, wgml_add_args)                   /* a + b, b of a's shape or one row */                                \
    X(swiglu, SWIGLU, wgml_swiglu_args)          /* silu(gate) * up */                                                 \
    X(argmax, ARGMAX, wgml_argmax_args)          /* index of each row's largest value */                               \
    X(rope, ROPE, wgml_rope_args)                /* rotary position embedding, in place */                             \
    X(layer_norm, LAYER_NORM, wgml_layer_norm_args) /* (x - mean) / sqrt(var + eps) * w + b per row */                 \
    X(l2_norm, L2_NORM, wgml_l2_norm_args)       /* x / max(||x||, eps) per row */                                     \
    X(unary, UNARY, wgml_unary_args)             /* f(x) elementwise: GELU, tanh, a x + b, ... */                      \
    X(mul, MUL, wgml_mul_args)                   /* a * b, b of a's shape or one row */                                \
    X(pool, POOL, wgml_pool_args)                /* mean, first or last row of each sequence */                        \
    X(copy, COPY, wgml_copy_args)                /* out = x, x any strided view (transpose, slice, broadcast) */ \
    X(im2col, IM2COL, wgml_im2col_args)          /* unfold a signal for a 1-D convolution as a matmul */          \
    X(col2im, COL2IM, wgml_col2im_args)          /* fold (overlap-add) a transposed convolution's matmul */       \
    X(instance_norm, INSTANCE_NORM, wgml_instance_norm_args) /* each column normalized over the rows */           \
    X(lstm, LSTM, wgml_lstm_args)                /* an LSTM layer's recurrence, both directions, whole sequence */ \
    X(stft, STFT, wgml_stft_args)                /* short-time Fourier transform: magnitude and phase */          \
    X(istft, ISTFT, wgml_istft_args)             /* inverse STFT: overlap-add of windowed frames */              \
    X(nsf_source, NSF_SOURCE, wgml_nsf_source_args) /* harmonic-plus-noise excitation of an NSF vocoder */

typedef enum wgml_op {
#define WGML_OP_ENUM(name, NAME, args) WGML_OP_##NAME,
    WGML_OPS(WGML_OP_ENUM)
#undef WGML_OP_ENUM
        WGML_OP_COUNT
} wgml_op;

/* "matmul", "get_rows", ...: the names in profiles, messages and tests. */
extern const char *const wgml_op_names[WGML_OP_COUNT];

/* ---- each op's arguments (the math is in the comments) ---- */

/* Rotary position embedding. The rotation angle of pair i at position p is
 * p * freq_scale * freq_base^(-2i/n_rot) / freq_factors[i]. */
typedef struct wgml_rope {
    int n_rot;  /* rotated dims per head (<= head_dim, even) */
    int neox;   /* 0: pairs (x[2i], x[2i+1]) as Llama; 1: (x[i], x[i+n_rot/2]) as NeoX/Qwen2 */
    float freq_base;
    float freq_scale;
    const wgml_tensor *freq_factors; /* optional f32 [n_rot/2] (Llama 3 scaling) */
} wgml_rope;

typedef enum wgml_epilogue {
    WGML_EPI_STORE = 0, /* out = W x (+ bias) */
    WGML_EPI_ADD,       /* out += W x (+ bias): residual connection */
    WGML_EPI_SWIGLU,    /* two weights: out[0] = silu(W0 x) * (W1 x) */
} wgml_epilogue;

#define WGML_MATMUL_MAX 3

/* A 1-D convolution's unfolding of its input signal (matmul's conv). */
typedef struct wgml_conv1d {
    int kernel;       /* taps; 0: no convolution */
    int stride, dilation;
    int pad_l, pad_r; /* zero rows before and after the signal */
} wgml_conv1d;

/* Output rows of a convolution of a T-row signal. */
static inline int64_t wgml_conv1d_rows(const wgml_conv1d *c, int64_t T) {
    return (T + c->pad_l + c->pad_r - (int64_t)c->dilation * (c->kernel - 1) - 1) / c->stride + 1;
}

/* Up to three matrix products sharing one input: out_i[t][r] = sum_c W_i[r][c] x[t][c].
 * W, norm and bias are weights, or activations computed in the step (W then
 * f32: a product of two computed operands, e.g. x times another tensor's
 * rows); an activation operand may not share out's buffer. */
typedef struct wgml_matmul_args {
    const wgml_tensor *x;    /* f32 [n][K] */
    const wgml_tensor *norm; /* optional f32 [K]: use rmsnorm(x) * norm instead of x */
    float eps;               /* for norm */
    int n_w;                 /* 1..3 */
    const wgml_tensor *w[WGML_MATMUL_MAX];    /* [M_i][K] */
    const wgml_tensor *bias[WGML_MATMUL_MAX]; /* optional f32 [M_i] */
    const wgml_tensor *out[WGML_MATMUL_MAX];  /* f32 [n][M_i]; SWIGLU uses out[0] only */
    wgml_epilogue epilogue;
    /* 1: the activations stay f32 whatever the weight type (a quantized
     * weight is dequantized and multiplied in f32, as the GPU backends always
     * do); 0: a backend may round them (the CPU's 8-bit activations for
     * block-quantized weights, bf16 for BF16 in its GEMM). Kokoro asks for
     * f32, so that its audio is the same on every backend. */
    int f32_act;
    /* 1: a row's result does not depend on the other rows of x (no kernel
     * chosen by the row count), so that a sequence decoded beside others in
     * one step gets the bits it gets alone. The CPU then takes one dot
     * product per row (no 4x4 tiles, no GEMM; f32_act keeps its GEMM);
     * WebGPU always the tiled kernel (matmul.wgsl), even for one row. */
    int batch_invariant;
    /* 1: the caller accepts weights and activations rounded to bf16 in the
     * product (8-bit mantissas, f32 sums): the CPU's GEMM then multiplies
     * bf16 pairs where the CPU has them (AVX512_BF16, twice its f32 rate);
     * elsewhere this is f32_act. Kokoro's decoder and vocoder ask for it
     * (their audio measured unchanged: docs/kokoro.md), never its prosody. */
    int bf16_act;
    /* conv.kernel > 0: a 1-D convolution. x is then a signal [T][C] and the
     * product's input rows are its unfolding (as im2col writes it, but never
     * stored on the CPU: its GEMM reads the taps from x): input row t,
     * column j * Ct + c is x[t * stride + j * dilation - pad_l][c] for c < C,
     * zero outside the signal and for C <= c < Ct, where Ct = K / kernel >= C
     * (a quantized file pads each tap with zero columns to whole blocks).
     * out has wgml_conv1d_rows(conv, T) rows. Every weight has rows of that
     * K; no norm, no SwiGLU. */
    wgml_conv1d conv;
} wgml_matmul_args;

/* Grouped-query attention: head h of a query row uses KV head
 * h / (n_head / n_head_kv), and out[t] = softmax_j(scale * q[t] . K[j] + mask[t][j]) V[j]
 * over the key rows j that query row t sees.
 *
 * Today's case (every field below `rope` zero): causal self-attention over
 * the KV cache for the step's tokens, at positions pos..pos+n-1 (the step's
 * pos). In order: q and k are rotated in place (if rope), k and v are stored
 * into the caches at rows pos..pos+n-1, then query t sees cache rows
 * 0..pos+t. This is the fast path (decode and prompts of the LLMs).
 *
 * General attention (any field below `rope` set, or no cache); "key rows"
 * are the cache's rows with a cache, else the rows of k and v:
 *   - positions: pos[t] when `pos` is given, else step pos + t. RoPE rotates
 *     q and k in place at those positions; a cache stores k and v at cache
 *     row = position (0 <= pos[t] < cache rows). Key row j's position is j
 *     with a cache, else its row's position (pos[j], or step pos + j).
 *     Positions lie in [0, WGML_ATTN_MAX_POS).
 *   - causal (bidirectional = 0): query t sees key j iff position(j) <=
 *     position(t); bidirectional (= 1, no cache): every key row.
 *   - seq: query t sees only the key rows of its sequence id: seq[t] ==
 *     kv_seq[j] (kv_seq defaults to seq itself where the key rows are q's
 *     rows: no cache, as many k rows as q rows). This packs independent
 *     sequences in one step without padding.
 *   - mask: added to the scores before the softmax; an entry below -1e30
 *     (-INFINITY, -FLT_MAX) hides the key outright.
 *   - kv_range: a window of key rows per query row, the only ones it looks
 *     at (the rows of its sequence when sequences are packed one after
 *     another): the same result as seq alone, at the cost of the window.
 *   - cross-attention: without a cache, k and v may have n_k != n rows (keys
 *     from another sequence: an encoder's output); it must be bidirectional,
 *     without rope and pos (kv_seq pairs queries with key rows by id).
 *   - f16 k and v (both; no cache, no rope): read as f32 exactly (cross-
 *     attention's keys rounded once by a copy: Whisper's window).
 * A query row that sees no key row gets zeros. The CPU reports positions
 * out of range; a GPU gives unspecified values for them (no access outside
 * the tensors). Positions repeated within one step's cache writes race. */
#define WGML_ATTN_MAX_POS (1 << 20)
#define WGML_ATTN_MASK_HIDE (-1e30f) /* mask entries below it hide the key */
typedef struct wgml_attention_args {
    const wgml_tensor *q;       /* f32 [n][n_head*head_dim] */
    const wgml_tensor *k, *v;   /* f32 [n_k][n_head_kv*head_dim]; n_k = n except cross-attention.
                                   Without a cache and rope both may be f16 (cross-attention's keys
                                   computed once and read every step at half the bytes; where a
                                   backend takes them: supports(), the CPU) */
    const wgml_tensor *k_cache; /* [n_ctx][n_head_kv*head_dim], f32 or f16; NULL (with v_cache): no cache */
    const wgml_tensor *v_cache;
    const wgml_tensor *out;     /* f32 [n][n_head*head_dim], apart from every input (general path) */
    int n_head, n_head_kv, head_dim;
    float scale;
    const wgml_rope *rope; /* NULL: no rotary embedding */
    /* general attention: zero/NULL for today's behaviour */
    int bidirectional;          /* 1: every key row of the query's sequence (no cache); 0: causal */
    const wgml_tensor *seq;     /* optional i32 [n]: sequence id of each query row */
    const wgml_tensor *kv_seq;  /* optional i32 [key rows]: of each key row (needs seq); required with seq
                                   and a cache (the cache rows' ids) or with cross-attention */
    const wgml_tensor *pos;     /* optional i32 [n]: position of each row of q (and k) */
    const wgml_tensor *mask;    /* optional f32 [n][key rows]: additive */
    const wgml_tensor *kv_range; /* optional i32 [n][2]: query row t looks only at key rows
                                    kv_range[t][0] <= j < kv_range[t][1] (clamped to the key rows),
                                    on top of everything above: packed sequences then cost
                                    their own length, not the step's */
} wgml_attention_args;

/* Whether attention takes the general path (not today's causal KV-cache one). */
static inline int wgml_attention_is_general(const wgml_attention_args *a) {
    return a->bidirectional || a->seq || a->kv_seq || a->pos || a->mask || a->kv_range || !a->k_cache || !a->v_cache;
}

/* out[i] = dequantize(table row ids[i]); ids: i32 [n]. The table is a weight
 * or an activation (f32 on a GPU; contiguous, apart from out). The CPU
 * reports an id outside [0, rows of the table); a GPU gives unspecified
 * values for it (no access outside the table). */
typedef struct wgml_get_rows_args {
    const wgml_tensor *out, *table, *ids;
} wgml_get_rows_args;

/* out = x / sqrt(mean(x^2) + eps) * w, per row; w a weight or an f32 activation (apart from out);
 * out may be x itself (in place) */
typedef struct wgml_rms_norm_args {
    const wgml_tensor *out, *x, *w;
    float eps;
} wgml_rms_norm_args;

/* out = softmax(x * scale) per row; out may be x itself (in place) */
typedef struct wgml_softmax_args {
    const wgml_tensor *out, *x;
    float scale;
} wgml_softmax_args;

/* out = a + b, elementwise. b has a's shape, or is one row added to every row
 * of a (a bias); b may be a weight or an activation. out may be a or b itself
 * (in place). */
typedef struct wgml_add_args {
    const wgml_tensor *out, *a, *b;
} wgml_add_args;

/* out = silu(gate) * up, elementwise */
typedef struct wgml_swiglu_args {
    const wgml_tensor *out, *gate, *up;
} wgml_swiglu_args;

/* out[r] = index of the largest x[r][:] (first on ties, NaN never); out: i32 [rows] */
typedef struct wgml_argmax_args {
    const wgml_tensor *out, *x;
} wgml_argmax_args;

/* x rotated in place; rows are tokens at positions pos.., n_head heads per row */
typedef struct wgml_rope_args {
    const wgml_tensor *x;
    int n_head, head_dim;
    const wgml_rope *rope;
} wgml_rope_args;

/* The ops for encoders (BERT-family text encoders, Kokoro, Whisper). Their
 * vector arguments (w, b, v below) are f32 rows of the input's row length,
 * weights or activations (computed at run time, as Kokoro's AdaLayerNorm
 * does). out may be the very view of the input x (or a) it replaces (in
 * place); otherwise it must not overlap any input. */

/* out = (x - mean(x)) / sqrt(var(x) + eps) * w + b per row, with the biased
 * variance (as torch.nn.LayerNorm); w and b optional (NULL: 1 and 0). */
typedef struct wgml_layer_norm_args {
    const wgml_tensor *out, *x;
    const wgml_tensor *w, *b; /* optional f32 [ne0 of x] */
    float eps;
} wgml_layer_norm_args;

/* out = x / max(||x||_2, eps) per row (as torch.nn.functional.normalize) */
typedef struct wgml_l2_norm_args {
    const wgml_tensor *out, *x;
    float eps;
} wgml_l2_norm_args;

/* The functions of wgml_op_unary. A new one is a value here and a case in
 * each backend's switch (cpu_ops_nn.c, unary.wgsl). */
typedef enum wgml_unary_kind {
    WGML_UNARY_GELU = 0,   /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (gelu_pytorch_tanh) */
    WGML_UNARY_GELU_ERF,   /* 0.5 x (1 + erf(x / sqrt(2))) (exact GELU, torch's default) */
    WGML_UNARY_TANH,       /* tanh(x) */
    WGML_UNARY_SCALE,      /* a x + b */
    WGML_UNARY_SIGMOID,    /* 1 / (1 + exp(-x)) */
    WGML_UNARY_LEAKY_RELU, /* x > 0 ? x : a x */
    WGML_UNARY_SIN,        /* sin(x) */
    WGML_UNARY_EXP,        /* exp(x) */
    WGML_UNARY_SNAKE,      /* x + sin(v x)^2 / v, v per column (Snake1d's alpha, channels last) */
    WGML_UNARY_GELU_QUICK, /* x sigmoid(1.702 x) (OpenAI CLIP's QuickGELU) */
    WGML_UNARY_COUNT
} wgml_unary_kind;

/* out = f(x), elementwise, with f given by kind and its parameters. */
typedef struct wgml_unary_args {
    const wgml_tensor *out, *x;
    wgml_unary_kind kind;
    float a, b;           /* scalar parameters of the kind (SCALE, LEAKY_RELU); others ignore them */
    const wgml_tensor *v; /* f32 [ne0 of x]: one parameter per column, for the kinds that take
                             one (SNAKE); NULL for the others */
} wgml_unary_args;

/* out = a * b, elementwise; b has a's shape or is one row (a per-column scale), as in add */
typedef struct wgml_mul_args {
    const wgml_tensor *out, *a, *b;
} wgml_mul_args;

typedef enum wgml_pool_mode {
    WGML_POOL_MEAN = 0, /* mean of the sequence's rows */
    WGML_POOL_FIRST,    /* its first row ([CLS]) */
    WGML_POOL_LAST,     /* its last row */
} wgml_pool_mode;

/* Pooling over sequences packed in one tensor: sequence s is rows
 * seq[s] .. seq[s+1]-1 of x, and out[s] = mode over those rows. seq: i32
 * [n_seq + 1] row offsets, seq[0] = 0, increasing (every sequence has a
 * row), seq[n_seq] = rows of x; the CPU reports a bad table, a GPU gives
 * unspecified values for it (no access outside x). out must not overlap x. */
typedef struct wgml_pool_args {
    const wgml_tensor *out; /* f32 [n_seq][d] */
    const wgml_tensor *x;   /* f32 [rows][d] */
    const wgml_tensor *seq; /* i32 [n_seq + 1] */
    wgml_pool_mode mode;
} wgml_pool_args;

/* out = x: x read through its strides (tensor.h), out contiguous. The one op
 * that reads a strided view: it makes contiguous the transposes, column
 * slices, permutations and broadcasts (stride 0) that no other op takes.
 * x: f32, strides multiples of 4 bytes, an activation on a GPU (which lays
 * weights out its own way); out: f32 with x's shape (ne[0] and the rows
 * ne[1] ne[2] ne[3], in x's order), apart from x (it may share its buffer).
 * Either may instead be f16 (strides multiples of 2 bytes): f32 -> f16 rounds
 * to nearest even (wgml_f32_to_f16), f16 -> f32 is exact; where a backend
 * converts is said by supports() (the CPU: every pair; WebGPU: f32 only). */
typedef struct wgml_copy_args {
    const wgml_tensor *out, *x;
} wgml_copy_args;

/* ---- ops for audio models (Kokoro; next Whisper) ----
 * A signal of C channels over T time steps is an activation [T][C]: time in
 * rows, channels in columns (PyTorch's [C, T] transposed), so that a
 * convolution is one matrix product over its taps:
 *   y = conv1d(x):            im2col(x) -> matmul with the weight laid out
 *                             [C_out][K][C_in] (rows of K*C_in, tap-major)
 *   y = conv_transpose1d(x):  matmul with the weight laid out [K][C_out][C_in]
 *                             (rows (k, o) of C_in) -> col2im
 * Groups: a depthwise transposed convolution (groups = channels) is
 * copy (x repeated K times: a broadcast view) -> mul (by the weight as one row
 * [K*C]) -> col2im; a concatenation of inputs along channels is im2col of each
 * part into its own channel slots (c0). */

/* out[t][k*Ct + c0 + c] = xp[t*stride + k*dilation][c], for t < T_out, k <
 * kernel, c < C (x: f32 [T][C]), where xp is x with pad_l rows before it and
 * pad_r after it: zeros, or with reflect the mirror image of x without its
 * edge row (numpy.pad mode "reflect": xp[-j] = x[j], xp[T-1+j] = x[T-1-j];
 * each pad < T). out: f32 [T_out][kernel*Ct], T_out = (T + pad_l + pad_r -
 * dilation*(kernel-1) - 1) / stride + 1 exactly, Ct = out's ne[0] / kernel
 * >= c0 + C. Columns of other channel slots are left as they are: unfolding
 * the parts of a concatenation one by one (or, with kernel 1, copying a
 * signal into channels [c0, c0 + C) of a wider one). out apart from x.
 * With x NULL, zeros: out[t][k*Ct + c0 + c] = 0 for every row t of out, k <
 * kernel, c < zero_c (stride, dilation and padding unused), for a weight
 * whose taps hold more columns than the signal has channels (zeros padding
 * each tap to whole blocks of a quantized type): those channels must be
 * exactly 0, as a scratch buffer's old values times a zero weight need not be
 * (NaN, or an activation's quantization scale). */
typedef struct wgml_im2col_args {
    const wgml_tensor *out, *x; /* x NULL: zeros (zero_c) */
    int kernel, stride, dilation;
    int pad_l, pad_r;
    int reflect; /* 1: reflection padding; 0: zeros */
    int c0;      /* first channel slot of x (or of the zeros) in out */
    int zero_c;  /* with x NULL: the channels written, zeros; 0 with an x */
} wgml_im2col_args;

/* The overlap-add of a transposed convolution: out[t][c] = bias[c] + sum of
 * y[i][k*C + c] over the taps k < kernel and input rows i < T_in with
 * i*stride + k = t + pad. y: f32 [T_in][kernel*C] (x times the weight, as
 * above); bias optional f32 [C]; out: f32 [T_out][C], any T_out >= 1
 * (ConvTranspose1d's (T_in-1)*stride - 2*pad + kernel + output_padding). out
 * apart from y. */
typedef struct wgml_col2im_args {
    const wgml_tensor *out, *y, *bias;
    int kernel, stride, pad;
} wgml_col2im_args;

/* Instance norm of a signal: each column (channel) normalized over the rows
 * (time), out[t][c] = (x[t][c] - mean_c) / sqrt(var_c + eps) * w[c] + b[c],
 * with the biased variance (torch.nn.InstanceNorm1d); w and b optional f32
 * [C] (NULL: 1 and 0), weights or activations (AdaIN's style-dependent scale
 * and shift). out may be x itself (in place). */
typedef struct wgml_instance_norm_args {
    const wgml_tensor *out, *x;
    const wgml_tensor *w, *b;
    float eps;
} wgml_instance_norm_args;

/* The recurrence of one LSTM layer over a whole sequence of T rows, zero
 * initial state, in one op (no host round trip per step). gx: f32
 * [T][dirs*4H], the input's share of the gates, x W_ih^T + b_ih + b_hh,
 * computed before by a matmul (the forward direction's 4H columns, then the
 * backward one's), gates in PyTorch's order i, f, g, o; w_hh: [dirs*4H][H]
 * (the directions' recurrent weights one after another; f32 or f16, a weight
 * or an activation). The forward direction runs t = 0 .. T-1, the backward
 * one t = T-1 .. 0:
 *   z = gx[t] + W_hh h;  c = sigmoid(z_f) c + sigmoid(z_i) tanh(z_g);
 *   h = sigmoid(z_o) tanh(c);  out[t] = h
 * out: f32 [T][dirs*H] (forward h, then backward h: PyTorch's output),
 * apart from gx. dirs = 2 when bidirectional, else 1. */
typedef struct wgml_lstm_args {
    const wgml_tensor *out, *gx, *w_hh;
    int hidden;        /* H */
    int bidirectional; /* 1: two directions; 0: forward only */
} wgml_lstm_args;

/* Short-time Fourier transform of one signal x (f32, one row of L samples),
 * as torch.stft(center=True, pad_mode="reflect", onesided): frame f (f <
 * F = L/hop + 1) holds samples f*hop - n_fft/2 .. f*hop + n_fft/2 - 1 of x
 * reflect-padded by n_fft/2 on each side (n_fft/2 < L), times the window w
 * (f32 [n_fft], symmetric: w[n] = w[n_fft - n], as a periodic Hann window);
 * X[f][k] = sum_n frame[n] w[n] e^(-2 pi i k n / n_fft) for the B = n_fft/2 + 1
 * bins. out: f32 [F][2B]: |X| for the B bins, then atan2(Im X, Re X) in
 * (-pi, pi]. The values that are real in exact arithmetic (bins 0 and
 * n_fft/2, and every bin of frame 0 and of a last frame centred on the last
 * sample, when (L - 1) is a multiple of hop: each is symmetric about its centre)
 * get the canonical phase: 0 for a real part >= 0, pi otherwise (never a
 * sign of rounding noise). n_fft even; out apart from x. */
typedef struct wgml_stft_args {
    const wgml_tensor *out, *x, *window;
    int n_fft, hop;
} wgml_stft_args;

/* Inverse of stft (torch.istft(center=True, onesided) of mag * e^(i phase)):
 * frame f's signal is the real inverse DFT of its B = n_fft/2 + 1 bins
 * (imaginary parts of bins 0 and n_fft/2 ignored) times the window w (f32
 * [n_fft]), added at f*hop; the sum is divided by the windows' summed squares
 * there, and n_fft/2 samples are dropped at each end. mag, phase: f32 [F][B];
 * out: f32, one row of hop*(F-1) samples, apart from mag and phase. */
typedef struct wgml_istft_args {
    const wgml_tensor *out, *mag, *phase, *window;
    int n_fft, hop;
} wgml_istft_args;

/* The excitation of a neural-source-filter vocoder (Kokoro's
 * SourceModuleHnNSF and SineGen): f0 (f32, one row of N frames, Hz) held for
 * upp samples each; out (f32, one row of N*upp samples) is
 *   out[t] = tanh(b + sum_k w[k] e_k(t)),  k < H = harmonics,
 *   e_k(t) = uv(t) (amp sin(2 pi phi_k(t)) + noise_std n) + (1 - uv(t)) amp/3 n,
 * uv(t) = f0 of t's frame > voiced_threshold, n = normal (t*H + k) of the kit
 * stream (core/kit_rng.h: output wgml_kit_sine_noise_at(t*H + k) of seed).
 * The phase, in cycles (only its fraction matters): harmonic m = k + 1 of
 * frame j advances by r_j = frac(f0_j m / sample_rate) per sample (floor
 * fraction: negative f0 too); at the centre of frame j (sample upp j +
 * (upp-1)/2) it is P_j = upp (r_0 + ... + r_j), and in between it is
 * interpolated linearly: phi_k(t) = P_j + (t - upp j - (upp-1)/2) r_{j+1},
 * j = floor((t - (upp-1)/2) / upp); P_0 before the first centre, P_{N-1}
 * after the last (torch's linear interpolation with align_corners=False).
 * It is computed in 64-bit fixed point (cycles * 2^64, wrapping; r_j exact
 * to 2^-63 from f0's float value), never as a float sum that grows with the
 * utterance: every backend gets the same phase however long the signal.
 * The normals are bit for bit the kit stream's on every backend. w: f32
 * [H]; b: f32 [1]; harmonics <= 64, sample_rate < 2^24, upp >= 1. */
typedef struct wgml_nsf_source_args {
    const wgml_tensor *out, *f0, *w, *b;
    int harmonics, upp, sample_rate;
    float amp, noise_std, voiced_threshold;
    uint64_t seed;
} wgml_nsf_source_args;

/* ---- argument checks (validate.c) ---- */

/* Shapes, types and parameters of op's arguments, the same on every backend
 * (whether a view fits its buffer is the backend's check). pos is the step's
 * first position. Every backend's run() calls it first. */
wgml_status wgml_op_validate(wgml_op op, const void *args, int pos, wgml_error *err);
#define WGML_OP_VALIDATOR(name, NAME, args) wgml_status wgml_validate_##name(const args *a, int pos, wgml_error *err);
WGML_OPS(WGML_OP_VALIDATOR)
#undef WGML_OP_VALIDATOR

/* Helpers the validators share. */
wgml_status wgml_check_type(const char *op, const wgml_tensor *t, uint32_t type, wgml_error *err);
wgml_status wgml_check_same_shape(const char *op, const wgml_tensor *a, const wgml_tensor *b, wgml_error *err);
/* out and an input in one buffer: the same view (when in_place is allowed) or
 * apart; a partial overlap would race on a GPU. */
wgml_status wgml_check_overlap(const char *op, const wgml_tensor *out, const wgml_tensor *in, int in_place,
                               wgml_error *err);
/* Whether two views share bytes of one buffer. */
int wgml_tensors_overlap(const wgml_tensor *a, const wgml_tensor *b);
/* (cos, sin) of the rotation angles of position pos: cs[2i], cs[2i+1] for
 * i < n_rot/2, computed in double (the values every backend uses). */
void wgml_rope_angles(const wgml_rope *r, const float *freq_factors, int pos, float *cs);

#endif
