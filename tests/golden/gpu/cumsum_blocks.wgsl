// shader cumsum_t1_first: grid [1, 1, 1], bindings [('in0', False), ('out0', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;



@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 3i) { return; }
  let v0 = flat;
  let t1 = (v0 * 1200i);
  let t2 = bitcast<f32>(b0[t1]);
  b1[t1] = bitcast<u32>(t2);
}

// shader cumsum_t1_totals: grid [1, 1, 1], bindings [('out0', False), ('in0', False), ('arena', True)], loop_iterations 400
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;
@group(0) @binding(2) var<storage, read_write> b2: array<u32>;



@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 6i) { return; }
  let row = flat / 2i;
  let blk = flat % 2i;
  let v0 = row % 3i;
  let t1 = (v0 * 1200i);
  let fg_z1 = (nwg.x * (nwg.x + 3u)) & 1u;
  var pre: f32;
  var mid: f32;
  var pm: f32;
  var has_pre = false;
  var has_mid = false;
  var has_pm = false;
  var acc: f32;
  let k0 = blk * 400i;
  let k1 = min(k0 + 400i, 1200i);
  var k = k0;
  var fresh = true;
  if (blk == 0i) {
    let v1 = 0i;
  let t2 = (t1 + v1);
  let t3 = bitcast<f32>(b0[t2]);
    acc = t3;
    fresh = false;
    k = 1i;
  }
  var last = acc;
  for (; k < k1; k++) {
    let v1 = k - 1i;
  let t7 = (v1 + 1i);
  let t8 = (t1 + t7);
  let t9 = bitcast<f32>(b1[t8]);
  let h10 = bitcast<f32>(bitcast<u32>(t9) | fg_z1);
  let t11 = (acc + h10);
    acc = select(t11, h10, fresh);
    fresh = false;
  let t4 = (pm + acc);
    last = select(acc, t4, has_pm);
    let count = k - k0 + 1i;
    if (count % 64i == 0i) {
  let t5 = (mid + acc);
      mid = select(acc, t5, has_mid);
      has_mid = true;
      fresh = true;
  let t6 = (pre + mid);
      pm = select(mid, t6, has_pre);
      has_pm = true;
      if (count % 4096i == 0i) {
        pre = pm;
        has_pre = true;
        has_mid = false;
      }
    }
  }
  b2[row * 3i + blk] = bitcast<u32>(last);
}

// shader cumsum_t1_prefix: grid [1, 1, 1], bindings [('arena', True)], loop_iterations 3
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;



@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 3i) { return; }
  let row = flat / 1i;
  let blk = flat % 1i;
  let v0 = row % 3i;
  var lo = bitcast<f32>(b0[row * 3i + 0i]);
  var hi: f32;
  var has_hi = false;
  var lo_fresh = false;
  for (var b = 1i; b < 3i; b++) {
    let tv = bitcast<f32>(b0[row * 3i + b]);
  let t1 = (hi + lo);
    let pre = select(select(lo, t1, has_hi), hi, lo_fresh);
    b0[row * 3i + b] = bitcast<u32>(pre);
    if (b % 64i == 0i) {
      hi = pre;
      has_hi = true;
      lo_fresh = true;
    }
  let t2 = (lo + tv);
    lo = select(t2, tv, lo_fresh);
    lo_fresh = false;
  }
}

// shader cumsum_t1: grid [1, 1, 1], bindings [('out0', True), ('in0', False), ('arena', False)], loop_iterations 400
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;



@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 9i) { return; }
  let row = flat / 3i;
  let blk = flat % 3i;
  let v0 = row % 3i;
  let t1 = (v0 * 1200i);
  let fg_z1 = (nwg.x * (nwg.x + 3u)) & 1u;
  var pre: f32;
  var mid: f32;
  var pm: f32;
  var has_pre = false;
  var has_mid = false;
  var has_pm = false;
  var acc: f32;
  let k0 = blk * 400i;
  let k1 = min(k0 + 400i, 1200i);
  var k = k0;
  var fresh = true;
  if (blk == 0i) {
    let v1 = 0i;
  let t2 = (t1 + v1);
  let t3 = bitcast<f32>(b0[t2]);
    acc = t3;
    fresh = false;
    k = 1i;
  } else { pre = bitcast<f32>(b2[row * 3i + blk]); has_pre = true; pm = pre; has_pm = true; }
  var last = acc;
  for (; k < k1; k++) {
    let v1 = k - 1i;
  let t7 = (v1 + 1i);
  let t8 = (t1 + t7);
  let t9 = bitcast<f32>(b1[t8]);
  let h10 = bitcast<f32>(bitcast<u32>(t9) | fg_z1);
  let t11 = (acc + h10);
    acc = select(t11, h10, fresh);
    fresh = false;
  let t4 = (pm + acc);
    last = select(acc, t4, has_pm);
    b0[t8] = bitcast<u32>(last);
    let count = k - k0 + 1i;
    if (count % 64i == 0i) {
  let t5 = (mid + acc);
      mid = select(acc, t5, has_mid);
      has_mid = true;
      fresh = true;
  let t6 = (pre + mid);
      pm = select(mid, t6, has_pre);
      has_pm = true;
      if (count % 4096i == 0i) {
        pre = pm;
        has_pre = true;
        has_mid = false;
      }
    }
  }
}

