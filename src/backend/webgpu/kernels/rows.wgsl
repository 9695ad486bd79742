// rows.wgsl - row-wise ops, one workgroup per row (grid: (rows, 1, 1)):
//   RMS_NORM  out = x / sqrt(mean(x^2) + eps) * w
//   SOFTMAX   out = softmax(x * scale)
//   ARGMAX    out_i[row] = index of the largest x (the first on ties; NaN never wins)
// RMS_NORM and SOFTMAX take o and x from out_x.wgsl: in place (X_IS_OUT) each
// element is read by the invocation that writes it, after the row's
// reductions (whose barriers order every read of the row before any write).
// Tier: all.

struct RowParams {
    n: u32, x_off: u32, o_off: u32, w_off: u32,
    eps: f32, scale: f32, pad0: u32, pad1: u32,
}
@group(0) @binding(1) var<uniform> P: RowParams;
#ifdef ARGMAX
@group(0) @binding(2) var<storage, read> x: array<f32>;
fn xv(i: u32) -> f32 { return x[i]; }
@group(0) @binding(3) var<storage, read_write> out_i: array<i32>;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;
#endif
#ifdef RMS_NORM
@group(0) @binding(4) var<storage, read> w: array<f32>;
#endif

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
    let row = wid.x;
    let xb = P.x_off + row * P.n;
#ifdef RMS_NORM
    var ss = 0.0;
    for (var c = li; c < P.n; c += WG) { ss += xv(xb + c) * xv(xb + c); }
    let s = inverseSqrt(wg_sum(ss, li) / f32(P.n) + P.eps);
    for (var c = li; c < P.n; c += WG) { o[P.o_off + row * P.n + c] = xv(xb + c) * s * w[P.w_off + c]; }
#endif
#ifdef SOFTMAX
    var mx = -3.0e38;
    for (var c = li; c < P.n; c += WG) { mx = max(mx, xv(xb + c) * P.scale); }
    mx = wg_max(mx, li);
    var sum = 0.0;
    for (var c = li; c < P.n; c += WG) { sum += exp(xv(xb + c) * P.scale - mx); }
    let inv = 1.0 / wg_sum(sum, li);
    for (var c = li; c < P.n; c += WG) { o[P.o_off + row * P.n + c] = exp(xv(xb + c) * P.scale - mx) * inv; }
#endif
#ifdef ARGMAX
    var bv = -3.4e38;
    var bi = 0xffffffffu;
    for (var c = li; c < P.n; c += WG) {
        let v = xv(xb + c);
        if (v > bv) { bv = v; bi = c; }   // strided scan: the first index wins within a thread
    }
    best_v[li] = bv;
    best_i[li] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (li < s) {
            let ov = best_v[li + s];
            let oi = best_i[li + s];
            if (ov > best_v[li] || (ov == best_v[li] && oi < best_i[li])) {
                best_v[li] = ov;
                best_i[li] = oi;
            }
        }
        workgroupBarrier();
    }
    if (li == 0u) { out_i[P.o_off + row] = i32(select(best_i[0], 0u, best_i[0] == 0xffffffffu)); }
#endif
}
