// shader k6: grid [1, 1, 1], bindings [('arena', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 1i) { return; }
  b0[32i + 0i] = bitcast<u32>(0i);
}

// shader k7: grid [1, 1, 1], bindings [('in0', False), ('arena', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 32i) { return; }
  let v0 = flat;
  let t1 = bitcast<f32>(b0[v0]);
  b1[96i + v0] = bitcast<u32>(t1);
}

// shader k1: grid [1, 1, 1], bindings [('arena', True), ('ctl', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let it0 = bitcast<i32>(b1[0i]);
  let flat = i32(gid.x);
  if (flat >= 1i) { return; }
  let t1 = bitcast<i32>(b0[select(48i, 32i, (it0 % 2i == 0i)) + 0i]);
  let t2 = (t1 < 5i);
  b0[64i + 0i] = select(0u, 1u, t2);
}

// shader k4: grid [1, 1, 1], bindings [('arena', True), ('ctl', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;

fn fg_rem_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return a; }
  let ma = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);
  let mb = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);
  let r = ma % mb;
  return bitcast<i32>(select(r, 0u - r, a < 0i));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let it0 = bitcast<i32>(b1[0i]);
  let flat = i32(gid.x);
  if (flat >= 1i) { return; }
  let t1 = bitcast<i32>(b0[select(48i, 32i, (it0 % 2i == 0i)) + 0i]);
  let t2 = fg_rem_i32(t1, 2i);
  let t3 = (t2 < 0i);
  let t5 = (t2 != 0i);
  let t7 = (t2 + 2i);
  let t4 = (t3 != false);
  let t6 = (t4 & t5);
  let t8 = select(t2, t7, t6);
  let t9 = (t8 == 0i);
  let t10 = select(0i, 1i, t9);
  b0[80i + 0i] = bitcast<u32>(t10);
}

// shader k2: grid [1, 1, 1], bindings [('arena', True), ('ctl', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let it0 = bitcast<i32>(b1[0i]);
  let sel0 = clamp(bitcast<i32>(b0[80i + 0i]), 0i, 1i);
  if (!(sel0 == 0i)) { return; }
  let flat = i32(gid.x);
  if (flat >= 32i) { return; }
  let v1 = flat;
  let fg_zero = ((nwg.x * nwg.x) + nwg.x) & 1u;
  let t1 = bitcast<f32>(b0[select(0i, 96i, (it0 % 2i == 0i)) + v1]);
  let c2 = bitcast<f32>(bitcast<u32>(1.0f) | fg_zero);
  let t3 = (t1 - c2);
  b0[select(96i, 0i, (it0 % 2i == 0i)) + v1] = bitcast<u32>(t3);
}

// shader k3: grid [1, 1, 1], bindings [('arena', True), ('ctl', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let it0 = bitcast<i32>(b1[0i]);
  let sel0 = clamp(bitcast<i32>(b0[80i + 0i]), 0i, 1i);
  if (!(sel0 == 1i)) { return; }
  let flat = i32(gid.x);
  if (flat >= 32i) { return; }
  let v2 = flat;
  let fg_zero = ((nwg.x * nwg.x) + nwg.x) & 1u;
  let t1 = bitcast<f32>(b0[select(0i, 96i, (it0 % 2i == 0i)) + v2]);
  let c2 = bitcast<f32>(bitcast<u32>(2.0f) | fg_zero);
  let t3 = (t1 * c2);
  b0[select(96i, 0i, (it0 % 2i == 0i)) + v2] = bitcast<u32>(t3);
}

// shader k5: grid [1, 1, 1], bindings [('arena', True), ('ctl', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let it0 = bitcast<i32>(b1[0i]);
  let flat = i32(gid.x);
  if (flat >= 1i) { return; }
  let t1 = bitcast<i32>(b0[select(48i, 32i, (it0 % 2i == 0i)) + 0i]);
  let t2 = (t1 + 1i);
  b0[select(32i, 48i, (it0 % 2i == 0i)) + 0i] = bitcast<u32>(t2);
}

// shader counter0: grid [1, 1, 1], bindings [('ctl', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;

@compute @workgroup_size(1)
fn main() {
  let it0 = bitcast<i32>(b0[0i]);
  b0[0i] = bitcast<u32>(it0 + 1i);
}

// shader copy: grid [1, 1, 1], bindings [('arena', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 1i) { return; }
  b0[32i + flat] = b0[48i + flat];
}

// shader copy: grid [1, 1, 1], bindings [('arena', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 32i) { return; }
  b0[96i + flat] = b0[flat];
}

// shader counter0: grid [1, 1, 1], bindings [('ctl', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;

@compute @workgroup_size(1)
fn main() {
  let it0 = bitcast<i32>(b0[0i]);
  b0[0i] = bitcast<u32>(0i);
}

// shader copy: grid [1, 1, 1], bindings [('out0', True), ('arena', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 32i) { return; }
  b0[flat] = b1[96i + flat];
}

