// shader sort_t1: grid [1, 1, 1], bindings [('in0', False), ('out0', True)], loop_iterations 16
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 64i) { return; }
  let q = flat % 1i;
  let i = (flat / 1i) % 16i;
  let o = flat / 16i;
  let base = o * 16i + q;
  var rank = 0i;
  for (var j = 0i; j < 16i; j++) {
    var before = false;
    var decided = false;
    let ki0 = select(select(select(bitcast<i32>(bitcast<f32>(b0[base + i * 1i])), 0i, bitcast<f32>(b0[base + i * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b0[base + i * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b0[base + i * 1i])), 0i, bitcast<f32>(b0[base + i * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b0[base + i * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b0[base + i * 1i])), 0i, bitcast<f32>(b0[base + i * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b0[base + i * 1i]))) < 0i);
    let kj0 = select(select(select(bitcast<i32>(bitcast<f32>(b0[base + j * 1i])), 0i, bitcast<f32>(b0[base + j * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b0[base + j * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b0[base + j * 1i])), 0i, bitcast<f32>(b0[base + j * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b0[base + j * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b0[base + j * 1i])), 0i, bitcast<f32>(b0[base + j * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b0[base + j * 1i]))) < 0i);
    if (!decided && kj0 != ki0) { before = kj0 < ki0; decided = true; }
    if (!decided) { before = j < i; }
    rank += select(0i, 1i, before);
  }
  if (rank >= 16i) { return; }
  let at = (o * 16i + rank) * 1i + q;
  let src_at = o * 16i + i * 1i + q;
  b1[at] = b0[src_at];
}

