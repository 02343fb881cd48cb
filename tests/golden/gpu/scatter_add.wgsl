// shader k1: grid [1, 1, 1], bindings [('in0', False), ('out0', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 100i) { return; }
  let v0 = flat;
  let t1 = bitcast<f32>(b0[v0]);
  b1[v0] = bitcast<u32>(t1);
}

// shader scatter_add2: grid [1, 1, 1], bindings [('in2', False), ('in1', False), ('out0', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;
@group(0) @binding(2) var<storage, read_write> b2: array<atomic<u32>>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 40i) { return; }
  let v1 = flat;
  let t1 = bitcast<f32>(b0[v1]);
  let t2 = bitcast<i32>(b1[v1]);
  let t3 = (t2 < 0i);
  let t4 = (t2 + 100i);
  let t5 = select(t2, t4, t3);
  let t6 = t5;
  let t7 = max(t6, 0i);
  let t9 = (t6 >= 0i);
  let t10 = (t6 <= 99i);
  let t8 = min(t7, 99i);
  let t11 = (t9 & t10);
  {
    if (t11) {
      var old = atomicLoad(&b2[t8]);
      loop {
        let r = atomicCompareExchangeWeak(&b2[t8], old, bitcast<u32>((bitcast<f32>(old) + t1)));
        if (r.exchanged) { break; }
        old = r.old_value;
      }
    }
  }
}

