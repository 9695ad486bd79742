// matvec.wgsl - y = W x for decode-sized steps (few tokens).
// Each workgroup computes R rows of weight k for one token: its WG
// invocations stride over the row's groups, then one shared reduction. Memory-bound: every
// weight byte is read once per token. Grid: (ceil(max m / R), n, NW), or
// (ceil(m / R), n, 1) for SWIGLU, which computes rows of both weights.
// Tier: all (subgroup reductions when SUBGROUPS).
// R (rows per workgroup) comes from the composer.
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
        for (var i = 0u; i < GROUP / 4u; i++) {
            let c = g * GROUP + i * 4u;
#ifdef HAS_NORM
            let xv = x4(xb, c) * scale * nw4(c);
#else
            let xv = x4(xb, c);
#endif
            for (var r = 0u; r < R; r++) {
                let row = r0 + r;
                if (row < M) {
                    acc[r] += dot(w_vec4(k, row, g, i), xv);
#ifdef SWIGLU
                    acc2[r] += dot(w_vec4(1u, row, g, i), xv);
#endif
                }
            }
        }
    }
#ifdef WG_IS_SUBGROUP
    // The workgroup is one subgroup: every row's sum is one subgroupAdd,
    // with no barrier and no workgroup memory.
    for (var r = 0u; r < R; r++) {
        let a = subgroupAdd(acc[r]);
#ifdef SWIGLU
        let b = subgroupAdd(acc2[r]);
#else
        let b = 0.0;
#endif
        if (li == 0u && r0 + r < M) { epilogue(k, t, r0 + r, a, b); }
    }
}
#else
    // One reduction for all R rows (and both SwiGLU products): each
    // invocation (or, with subgroups, each subgroup) leaves its partial sums
    // in workgroup memory, one barrier, then invocation r adds up row r.
    // Barriers are costly on CPU adapters, so there is exactly one here.
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
}
#endif
