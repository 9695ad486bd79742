// mm_common.wgsl - parameters and input helpers shared by matvec and matmul.
//
// Composition (wg_compose.c): prelude, this file, the generated bindings and
// accessors (ww(k, i): word i of weight k; bias_at, out_get/out_set,
// x, nw), a weight decoder w_<type>.wgsl, then the kernel.
// Up to three weights k = 0..NW-1 share the input x; per weight: rows m,
// scale-region word sb, base word wo, output offset oo and row stride os,
// bias offset bo, first output row row0 (for tensors split into windows),
// and roff, the window row a weight view (a row range of the weight) starts
// at: the decoders read window row roff + row, the output is row row0 + row.

struct MMParams {
    K: u32,          // input width
    n: u32,          // tokens (rows of x)
    x_off: u32,      // first element of x
    x_stride: u32,   // elements between token rows of x
    norm_off: u32,   // first element of the RMS-norm weight
    eps: f32,
    bpr: u32,        // blocks per weight row (quantized types)
    ngroups: u32,    // groups of GROUP elements per row
    m: vec4<u32>,
    sb: vec4<u32>,
    wo: vec4<u32>,
    oo: vec4<u32>,
    os: vec4<u32>,
    bo: vec4<u32>,
    row0: vec4<u32>,
    roff: vec4<u32>,
}
@group(0) @binding(1) var<uniform> P: MMParams;

// The window row a decoder reads for row `row` of weight k: shifted by roff
// only in the variant for weight views (ROW_VIEW), so whole weights pay nothing.
fn wrow(k: u32, row: u32) -> u32 {
#ifdef ROW_VIEW
    return row + P.roff[k];
#else
    return row;
#endif
}

// Affine decoders (those defining w_affine, for groups of 32) give a group
// as w[e] = d[e / 16] * q[e / 4][e % 4] + m[e / 16]: the lane-rows matvec
// then sums d * dot(q, x) + m * sum(x) per half group, where expanding the
// weights first costs two more operations per weight, on CPU adapters the
// larger part of a matvec's time. Their w_group (matmul, GPU layout) is
// affine_expand of w_affine, or of w_affine_h for decoders with w_head.
struct WAff {
    q: array<vec4<f32>, 8>,
    d: vec2<f32>,
    m: vec2<f32>,
}

fn affine_expand(a: WAff) -> array<vec4<f32>, 8> {
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 4u; i++) {
        r[i] = a.q[i] * a.d.x + a.m.x;
        r[i + 4u] = a.q[i + 4u] * a.d.y + a.m.y;
    }
    return r;
}

#ifndef GET_ROWS
// 4 consecutive input values from element c of the row at xb (zero past K).
// K_ALIGNED (quantized weights: K is a multiple of 32, and every caller's c
// a multiple of 4 below K) needs no check: a CPU adapter's JIT would run the
// fallback loop under a mask even when no lane takes it.
fn x4(xb: u32, c: u32) -> vec4<f32> {
#ifdef K_ALIGNED
    return vec4<f32>(x[xb + c], x[xb + c + 1u], x[xb + c + 2u], x[xb + c + 3u]);
#else
    if (c + 4u <= P.K) { return vec4<f32>(x[xb + c], x[xb + c + 1u], x[xb + c + 2u], x[xb + c + 3u]); }
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (c + j < P.K) { v[j] = x[xb + c + j]; }
    }
    return v;
#endif
}

#ifdef HAS_NORM
fn nw4(c: u32) -> vec4<f32> {
    let b = P.norm_off + c;
#ifdef K_ALIGNED
    return vec4<f32>(nw[b], nw[b + 1u], nw[b + 2u], nw[b + 3u]);
#else
    if (c + 4u <= P.K) { return vec4<f32>(nw[b], nw[b + 1u], nw[b + 2u], nw[b + 3u]); }
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (c + j < P.K) { v[j] = nw[b + j]; }
    }
    return v;
#endif
}
#endif

fn silu(g: f32) -> f32 { return g / (1.0 + exp(-g)); }

// Writes the result for output row `row` (of this window) of token t.
fn epilogue(k: u32, t: u32, row: u32, a: f32, b: f32) {
    let r = P.row0[k] + row;
    let idx = P.oo[k] + t * P.os[k] + r;
#ifdef SWIGLU
    out_set(0u, idx, silu(a + bias_at(0u, r)) * (b + bias_at(1u, r)));
#else
    let v = a + bias_at(k, r);
#ifdef EPI_ADD
    out_set(k, idx, out_get(k, idx) + v);
#else
    out_set(k, idx, v);
#endif
#endif
}
#endif
