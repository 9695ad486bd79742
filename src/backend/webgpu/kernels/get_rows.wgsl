// get_rows.wgsl - embedding lookup: out[i] = dequantize(table row ids[i]).
// Composed with a weight decoder (weight k = 0 is the table window holding
// rows row0[0] .. row0[0] + m[0]); ids outside this window are skipped, so a
// table split into windows is covered by one dispatch per window. A view of
// some of the table's rows (ids count from the view's first row): row0 is
// where this window's part starts among the view's rows, roff the window row
// it starts at.
// One invocation per 4 output values. Grid: (ceil(K/4 / WG), n, 1). Tier: all.

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let t = gid.y;
    let c4 = gid.x;
    if (c4 * 4u >= P.K) { return; }
    let id = ids[P.x_off + t];
    if (id < 0 || u32(id) < P.row0[0] || u32(id) >= P.row0[0] + P.m[0]) { return; }
    let row = u32(id) - P.row0[0];
    let g = (c4 * 4u) / GROUP;
    let i = ((c4 * 4u) % GROUP) / 4u;
    let v = w_group(0u, wrow(0u, row), g)[i];
    let o = P.oo[0] + t * P.os[0] + c4 * 4u;
    for (var j = 0u; j < 4u; j++) {
        if (c4 * 4u + j < P.K) { out_set(0u, o + j, v[j]); }
    }
}
