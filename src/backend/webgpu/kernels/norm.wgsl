// norm.wgsl - row normalizations, one workgroup per row (grid: rows over x
// and y, row = wid.y * 65535 + wid.x):
//   LAYER_NORM  out = (x - mean) / sqrt(var + eps) * w + b (biased variance;
//               P.flags: 1 = w, 2 = b, else 1 and 0)
//   L2_NORM     out = x / max(||x||, eps)
// One pass over the row for the sums, shifted by the row's first value k so
// that var = E[(x-k)^2] - E[x-k]^2 does not cancel for rows far from 0; one
// workgroup barrier in all (wg_sum2: no tree, as llvmpipe compiles each
// barrier as a coroutine suspension); one pass to write. Each element is read
// and written by one invocation, so x may be out itself: x, w, b in o's
// buffer are read through o (X_IS_OUT in out_x.wgsl, W_IS_OUT, B_IS_OUT). Tier: all.

struct NormParams {
    n: u32, rows: u32, x_off: u32, o_off: u32,
    w_off: u32, b_off: u32, flags: u32, pad0: u32,
    eps: f32, pad1: u32, pad2: u32, pad3: u32,
}
@group(0) @binding(1) var<uniform> P: NormParams;
#ifdef LAYER_NORM
#ifdef W_IS_OUT
fn wv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(4) var<storage, read> w: array<f32>;
fn wv(i: u32) -> f32 { return w[i]; }
#endif
#ifdef B_IS_OUT
fn bv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(5) var<storage, read> b: array<f32>;
fn bv(i: u32) -> f32 { return b[i]; }
#endif
#endif

var<workgroup> part: array<vec2<f32>, WG>;
#ifdef SUBGROUPS
var<private> sg_lane: u32;
var<private> sg_size: u32;
#endif

// The sum over the workgroup of one vec2 per invocation, the same in every
// invocation: partials (one per subgroup, or per invocation) through
// workgroup memory, one barrier, then each invocation adds them in the same
// order. Call from uniform control flow, once per dispatch (part is not
// guarded for reuse).
fn wg_sum2(v: vec2<f32>, li: u32) -> vec2<f32> {
#ifdef SUBGROUPS
    let s = subgroupAdd(v);
    let n = max(WG / sg_size, 1u);
    if (sg_lane == 0u) { part[li / sg_size] = s; }
    workgroupBarrier();
    var t = vec2<f32>(0.0);
    for (var i = 0u; i < n; i++) { t += part[i]; }
    return t;
#else
    part[li] = v;
    workgroupBarrier();
    var t = vec2<f32>(0.0);
    for (var i = 0u; i < WG; i++) { t += part[i]; }
    return t;
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
    let row = wid.y * 65535u + wid.x;
    if (row >= P.rows) { return; }
    let xb = P.x_off + row * P.n;
    let ob = P.o_off + row * P.n;
    let nf = f32(P.n);
#ifdef LAYER_NORM
    let k = xv(xb);
    var s = vec2<f32>(0.0);
    for (var c = li; c < P.n; c += WG) {
        let d = xv(xb + c) - k;
        s += vec2<f32>(d, d * d);
    }
    let t = wg_sum2(s, li);
    let m = t.x / nf; // mean - k
    let inv = inverseSqrt(max(t.y / nf - m * m, 0.0) + P.eps);
    for (var c = li; c < P.n; c += WG) {
        var v = (xv(xb + c) - k - m) * inv;
        if ((P.flags & 1u) != 0u) { v *= wv(P.w_off + c); }
        if ((P.flags & 2u) != 0u) { v += bv(P.b_off + c); }
        o[ob + c] = v;
    }
#endif
#ifdef L2_NORM
    var s = vec2<f32>(0.0);
    for (var c = li; c < P.n; c += WG) {
        let v = xv(xb + c);
        s.x += v * v;
    }
    let inv = 1.0 / max(sqrt(wg_sum2(s, li).x), P.eps);
    for (var c = li; c < P.n; c += WG) { o[ob + c] = xv(xb + c) * inv; }
#endif
}
