// conv.wgsl - the data movement around a 1-D convolution as a matrix product
// (ops.h, wg_ops_audio.c); signals are [time][channels] rows:
//   IM2COL  o[t][k*Ct + c0 + c] = xp[t*stride + k*dilation][c] for t < T_out,
//           k < K, c < C, xp being x with pad_l rows before it and pad_r after
//           it (zeros, or with P.reflect its mirror image without the edge
//           row); the other channel slots of o are left as they are;
//   COL2IM  o[t][c] = bias[c] + sum of y[i][k*C + c] over the taps k < K and
//           rows i < T_in with i*stride + k = t + pad (a transposed
//           convolution's overlap-add), the taps in increasing order.
// One invocation per element written (T_out*K*C for IM2COL, T_out*C for
// COL2IM). Grid: P.rows rows of P.cols (x: columns; rows over y and z, row =
// gid.z * 65535 + gid.y), element i = row * cols + column < n: any size fits
// the 65535 workgroups of a grid dimension. x (IM2COL's input, COL2IM's y) in
// o's buffer (apart from the output: validate.c) is read through o (X_IS_OUT,
// out_x.wgsl), and so is COL2IM's bias (B_IS_OUT; P.flags 1: there is one).
// Tier: all.

struct ConvParams {
    n: u32, x_off: u32, o_off: u32, cols: u32,
    rows: u32, C: u32, K: u32, Ct: u32,
    T: u32, stride: u32, dil: u32, pad: u32,
    reflect: u32, c0: u32, b_off: u32, flags: u32,
}
@group(0) @binding(1) var<uniform> P: ConvParams;
#ifdef COL2IM
#ifdef B_IS_OUT
fn bv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(4) var<storage, read> bias: array<f32>;
fn bv(i: u32) -> f32 { return bias[i]; }
#endif
#endif

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let row = gid.z * 65535u + gid.y;
    let i = row * P.cols + gid.x;
    if (gid.x >= P.cols || row >= P.rows || i >= P.n) { return; }
    let c = i % P.C;
    let r = i / P.C;
#ifdef IM2COL
    // P.T: x's rows; P.pad: pad_l; r = t * K + k
    let k = r % P.K;
    let t = r / P.K;
    let p = t * P.stride + k * P.dil; // row of the padded signal
    var v = 0.0;
    var src = 0u;
    var inside = true;
    if (p < P.pad) {
        src = P.pad - p;              // xp[-j] = x[j]
        inside = P.reflect != 0u;
    } else if (p - P.pad >= P.T) {
        src = 2u * (P.T - 1u) - (p - P.pad); // xp[T-1+j] = x[T-1-j]
        inside = P.reflect != 0u;
    } else {
        src = p - P.pad;
    }
    if (inside) { v = xv(P.x_off + src * P.C + c); }
    o[P.o_off + (t * P.K + k) * P.Ct + P.c0 + c] = v;
#endif
#ifdef COL2IM
    // r: the output row; P.T: y's rows (T_in); the taps k = q mod stride, + stride, ... <= q
    var v = 0.0;
    if ((P.flags & 1u) != 0u) { v = bv(P.b_off + c); }
    let q = r + P.pad;
    let kc = P.K * P.C;
    for (var k = q % P.stride; k < P.K && k <= q; k += P.stride) {
        let src = (q - k) / P.stride;
        if (src < P.T) { v += xv(P.x_off + src * kc + k * P.C + c); }
    }
    o[P.o_off + i] = v;
#endif
}
