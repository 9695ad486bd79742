// reduce.wgsl - workgroup-wide sum and max of one f32 per invocation.
// Tier: all. Two variants are composed by wg_compose.c: with subgroups
// (subgroupAdd/Max, then one value per subgroup through workgroup memory)
// and without (a shared-memory tree). WG must be a power of two.
// Call from uniform control flow only (they contain barriers).

var<workgroup> red: array<f32, WG>;

#ifdef SUBGROUPS
var<private> sg_lane: u32;
var<private> sg_size: u32;

// One value per subgroup goes through workgroup memory. The loop runs to the
// constant WG so that control flow stays uniform for the barriers (the
// subgroup size is not a constant); sg_size may also exceed WG.
fn wg_sum(v: f32, li: u32) -> f32 {
    let s = subgroupAdd(v);
    let n = max(WG / sg_size, 1u);
    if (sg_lane == 0u) { red[li / sg_size] = s; }
    workgroupBarrier();
    var t = 0.0;
    for (var i = 0u; i < WG; i++) {
        if (i < n) { t += red[i]; }
    }
    workgroupBarrier();
    return t;
}

fn wg_max(v: f32, li: u32) -> f32 {
    let s = subgroupMax(v);
    let n = max(WG / sg_size, 1u);
    if (sg_lane == 0u) { red[li / sg_size] = s; }
    workgroupBarrier();
    var t = red[0];
    for (var i = 1u; i < WG; i++) {
        if (i < n) { t = max(t, red[i]); }
    }
    workgroupBarrier();
    return t;
}
#else
fn wg_sum(v: f32, li: u32) -> f32 {
    red[li] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (li < s) { red[li] += red[li + s]; }
        workgroupBarrier();
    }
    let t = red[0];
    workgroupBarrier();
    return t;
}

fn wg_max(v: f32, li: u32) -> f32 {
    red[li] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (li < s) { red[li] = max(red[li], red[li + s]); }
        workgroupBarrier();
    }
    let t = red[0];
    workgroupBarrier();
    return t;
}
#endif
