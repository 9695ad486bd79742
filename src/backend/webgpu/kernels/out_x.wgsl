// out_x.wgsl - the output binding and the input x of the row and elementwise
// kernels that may run in place (norm, unary, pool; composed by wg_compose.c
// before the kernel). o is read_write at binding 3; x is read through xv(i):
// from its own binding 2, or, when x lies in o's buffer (X_IS_OUT: in place,
// each element read and then written by one invocation), through o.

@group(0) @binding(3) var<storage, read_write> o: array<f32>;
#ifdef X_IS_OUT
fn xv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(2) var<storage, read> x: array<f32>;
fn xv(i: u32) -> f32 { return x[i]; }
#endif
