// matvec.wgsl - y = W x for decode-sized steps (one or two tokens).
// Memory-bound: every weight byte is read once per token. Two layouts:
//
// LANE_ROWS (CPU adapters: lavapipe, SwiftShader, which run the invocations
//   of a workgroup as SIMD lanes): each invocation computes R whole rows by
//   itself - WG * R rows per workgroup (WG = the SIMD width), no reduction,
//   no barrier; the input is loaded once per lane group and shared.
// otherwise (GPUs): each workgroup computes R rows of weight k for one token;
//   its invocations stride over the row's groups (consecutive invocations
//   read consecutive blocks: coalesced), then one reduction: subgroupAdd
//   alone when the workgroup is one subgroup (WG_IS_SUBGROUP), else partial
//   sums through workgroup memory and a single barrier.
// Grid: (ceil(max m / rows per workgroup), n, NW), or NW = 1 for SWIGLU,
// which computes rows of both weights. R comes from the composer.

#ifdef LANE_ROWS
// Cost model of a SIMD JIT such as llvmpipe's: a storage load whose address
// it cannot prove uniform becomes a loop over the lanes (a branch and a
// bounds check each), whatever the width of the load. So loads are few and
// wide: each lane computes R rows, which share every load of the input, and
// with subgroups (SG_X) the lanes of a subgroup split each tile of 32 input
// values between them, a vec4 each, and pass them around with
// subgroupBroadcast (constant lane indices: a register move, no memory). The
// fused RMS norm's sum of squares is taken from those same loads (no pass of
// its own over the input), added up over the lanes and applied to the sums
// once at the end.
// Affine decoders (W_AFFINE, mm_common.wgsl) leave their scale and offset out
// of the per-weight work. The weight index k is a constant in every copy of
// the rows' code (lane_rows; main has one copy per fused weight, K_COPIES):
// the weight accessors' switch on k then folds away instead of running every
// case under a mask.
const TG: u32 = 32u / GROUP; // weight groups per tile of 32 input values

// 4 input values from element c, times the RMS-norm weights when fused;
// their squares go to ss4 (for the norm's sum, which thus needs no loop of
// its own: on a CPU adapter every input load is a loop over the lanes).
fn xin(xb: u32, c: u32, ss4: ptr<function, vec4<f32>>) -> vec4<f32> {
    let v = x4(xb, c);
#ifdef HAS_NORM
    *ss4 += v * v;
    return v * nw4(c);
#else
    return v;
#endif
}

#ifdef W_AFFINE
// One group of an affine decoder against input values x[o..o+7] whose halves
// sum to sl and sh.
fn affine_dot(w: WAff, x: array<vec4<f32>, 8>, o: u32, sl: f32, sh: f32) -> f32 {
    let lo = w.q[0] * x[o] + w.q[1] * x[o + 1u] + w.q[2] * x[o + 2u] + w.q[3] * x[o + 3u];
    let hi = w.q[4] * x[o + 4u] + w.q[5] * x[o + 5u] + w.q[6] * x[o + 6u] + w.q[7] * x[o + 7u];
    return w.d.x * dot(lo, vec4<f32>(1.0)) + w.d.y * dot(hi, vec4<f32>(1.0)) + w.m.x * sl + w.m.y * sh;
}
#endif

// Rows of weight k for token t: lane li of row tile wx.
fn lane_rows(k: u32, t: u32, li: u32, wx: u32) {
    let xb = P.x_off + t * P.x_stride;
    // sums of squares of the inputs this lane loads (the fused RMS norm)
    var ss4 = vec4<f32>(0.0);
    // Rows past the end recompute row m - 1 and skip the store, so control
    // flow stays uniform.
    let M = max(P.m[k], 1u);
    let r0 = (wx * WG + li) * R;
    var acc: array<f32, R>;
#ifdef SWIGLU
    var acc2: array<f32, R>;
#endif
#ifdef W_HEAD
    // per-block words of each row (decoders with blocks of several groups)
    var hd: array<WHead, R>;
#ifdef SWIGLU
    var hd2: array<WHead, R>;
#endif
#endif
    for (var c0 = 0u; c0 < P.K; c0 += 32u) {
        var xt: array<vec4<f32>, 8>;
#ifdef SG_X
        // values 0..15 from lanes 0..3 (xa); 16..31 from lanes 4..7 of xa, or
        // with 4 lanes (SG_X4) from lanes 0..3 again, of a second load (xc)
#ifdef SG_X4
        let xa = xin(xb, c0 + 4u * sg_lane, &ss4);
        let xc = xin(xb, c0 + 16u + 4u * sg_lane, &ss4);
        const XH = 0u;
#else
        let xa = xin(xb, c0 + 4u * (sg_lane & 7u), &ss4);
        let xc = xa;
        const XH = 4u;
#endif
        xt[0] = subgroupBroadcast(xa, 0u);
        xt[1] = subgroupBroadcast(xa, 1u);
        xt[2] = subgroupBroadcast(xa, 2u);
        xt[3] = subgroupBroadcast(xa, 3u);
        xt[4] = subgroupBroadcast(xc, XH);
        xt[5] = subgroupBroadcast(xc, XH + 1u);
        xt[6] = subgroupBroadcast(xc, XH + 2u);
        xt[7] = subgroupBroadcast(xc, XH + 3u);
#else
        for (var i = 0u; i < 8u; i++) { xt[i] = xin(xb, c0 + 4u * i, &ss4); }
#endif
        for (var j = 0u; j < TG; j++) {
            let g = c0 / GROUP + j;
#ifdef W_AFFINE
            // sums of the group's two halves of input (GROUP = 32, GV = 8)
            let sxl = dot(xt[j * GV] + xt[j * GV + 1u] + xt[j * GV + 2u] + xt[j * GV + 3u], vec4<f32>(1.0));
            let sxh = dot(xt[j * GV + 4u] + xt[j * GV + 5u] + xt[j * GV + 6u] + xt[j * GV + 7u], vec4<f32>(1.0));
#endif
            if (g < P.ngroups) {
                for (var r = 0u; r < R; r++) {
                    let row = min(r0 + r, M - 1u);
#ifdef W_HEAD
                    if (g % GPB == 0u) {
                        hd[r] = w_head(k, wrow(k, row), g / GPB);
#ifdef SWIGLU
                        hd2[r] = w_head(1u, wrow(1u, row), g / GPB);
#endif
                    }
#endif
#ifdef W_AFFINE
#ifdef W_HEAD
                    acc[r] += affine_dot(w_affine_h(k, wrow(k, row), g, hd[r]), xt, j * GV, sxl, sxh);
#ifdef SWIGLU
                    acc2[r] += affine_dot(w_affine_h(1u, wrow(1u, row), g, hd2[r]), xt, j * GV, sxl, sxh);
#endif
#else
                    acc[r] += affine_dot(w_affine(k, wrow(k, row), g), xt, j * GV, sxl, sxh);
#ifdef SWIGLU
                    acc2[r] += affine_dot(w_affine(1u, wrow(1u, row), g), xt, j * GV, sxl, sxh);
#endif
#endif
#else
                    let w = w_group(k, wrow(k, row), g);
#ifdef SWIGLU
                    let u = w_group(1u, wrow(1u, row), g);
#endif
                    for (var i = 0u; i < GV; i++) {
                        acc[r] += dot(w[i], xt[j * GV + i]);
#ifdef SWIGLU
                        acc2[r] += dot(u[i], xt[j * GV + i]);
#endif
                    }
#endif
                }
            }
        }
    }
#ifdef HAS_NORM
#ifdef SG_X
#ifndef SG_X4
    // lanes 8 and up of a wider subgroup loaded the same values again
    ss4 = select(vec4<f32>(0.0), ss4, sg_lane < 8u);
#endif
    let ss = subgroupAdd(ss4.x + ss4.y + ss4.z + ss4.w);
#else
    let ss = ss4.x + ss4.y + ss4.z + ss4.w;
#endif
    let scale = inverseSqrt(ss / f32(P.K) + P.eps);
#endif
    for (var r = 0u; r < R; r++) {
#ifdef HAS_NORM
        let a = acc[r] * scale;
#else
        let a = acc[r];
#endif
#ifdef SWIGLU
#ifdef HAS_NORM
        let b = acc2[r] * scale;
#else
        let b = acc2[r];
#endif
#else
        let b = 0.0;
#endif
        if (r0 + r < P.m[k]) { epilogue(k, t, r0 + r, a, b); }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
#ifdef ONE_WEIGHT
    lane_rows(0u, wid.y, li, wid.x);
#else
#ifdef K_COPIES
    // One copy of the rows' code per weight, each with a constant k, so the
    // weight accessors' switch on k folds away in every load: with k =
    // wid.z the JIT runs the loads of every case, lane by lane, under a
    // mask (fused Q/K/V 30-40% slower per byte than one weight), where a
    // copy whose weight the workgroup does not have costs one pass of its
    // loop with no lane active. (Not with more than 8 lanes: wg_compose.c.)
    switch wid.z {
        case 1u: { lane_rows(1u, wid.y, li, wid.x); }
#ifdef NW3
        case 2u: { lane_rows(2u, wid.y, li, wid.x); }
#endif
        default: { lane_rows(0u, wid.y, li, wid.x); }
    }
#else
    lane_rows(wid.z, wid.y, li, wid.x);
#endif
#endif
}
#else

#ifndef WG_IS_SUBGROUP
var<workgroup> part: array<f32, R * WG>;
#ifdef SWIGLU
var<workgroup> part2: array<f32, R * WG>;
#endif
#endif

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
    let t = wid.y;
    let k = wid.z;
    let r0 = wid.x * R;
    let xb = P.x_off + t * P.x_stride;
#ifdef HAS_NORM
    var ss = 0.0;
    for (var c = li; c < P.K; c += WG) {
        let v = x[xb + c];
        ss += v * v;
    }
#ifdef WG_IS_SUBGROUP
    let scale = inverseSqrt(subgroupAdd(ss) / f32(P.K) + P.eps);
#else
    let scale = inverseSqrt(wg_sum(ss, li) / f32(P.K) + P.eps);
#endif
#endif
    let M = P.m[k];
    var acc: array<f32, R>;
#ifdef SWIGLU
    var acc2: array<f32, R>;
#endif
    for (var g = li; g < P.ngroups; g += WG) {
        var xg: array<vec4<f32>, GV>;
        for (var i = 0u; i < GV; i++) {
            let c = g * GROUP + i * 4u;
#ifdef HAS_NORM
            xg[i] = x4(xb, c) * scale * nw4(c);
#else
            xg[i] = x4(xb, c);
#endif
        }
        for (var r = 0u; r < R; r++) {
            let row = r0 + r;
            if (row < M) {
                let w = w_group(k, wrow(k, row), g);
#ifdef SWIGLU
                let u = w_group(1u, wrow(1u, row), g);
#endif
                for (var i = 0u; i < GV; i++) {
                    acc[r] += dot(w[i], xg[i]);
#ifdef SWIGLU
                    acc2[r] += dot(u[i], xg[i]);
#endif
                }
            }
        }
    }
#ifdef WG_IS_SUBGROUP
    for (var r = 0u; r < R; r++) {
        let a = subgroupAdd(acc[r]);
#ifdef SWIGLU
        let b = subgroupAdd(acc2[r]);
#else
        let b = 0.0;
#endif
        if (li == 0u && r0 + r < M) { epilogue(k, t, r0 + r, a, b); }
    }
#else
    // One reduction for all rows: partial sums (one per subgroup with
    // subgroups, else one per invocation) through workgroup memory, a single
    // barrier, then invocation r adds up row r.
#ifdef SUBGROUPS
    let nparts = max(WG / sg_size, 1u);
    let slot = li / sg_size;
    for (var r = 0u; r < R; r++) {
        let s = subgroupAdd(acc[r]);
#ifdef SWIGLU
        let s2 = subgroupAdd(acc2[r]);
#endif
        if (sg_lane == 0u) {
            part[r * WG + slot] = s;
#ifdef SWIGLU
            part2[r * WG + slot] = s2;
#endif
        }
    }
#else
    let nparts = WG;
    for (var r = 0u; r < R; r++) {
        part[r * WG + li] = acc[r];
#ifdef SWIGLU
        part2[r * WG + li] = acc2[r];
#endif
    }
#endif
    workgroupBarrier();
    if (li < R && r0 + li < M) {
        var a = 0.0;
        var b = 0.0;
        for (var i = 0u; i < nparts; i++) {
            a += part[li * WG + i];
#ifdef SWIGLU
            b += part2[li * WG + i];
#endif
        }
        epilogue(k, t, r0 + li, a, b);
    }
#endif
}
#endif
