// shader sort_t1_tile: grid [12, 1, 1], bindings [('ctl', True), ('in0', False), ('arena', True)], loop_iterations 54
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;
@group(0) @binding(2) var<storage, read_write> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

var<workgroup> fg_sp: array<i32, 512>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = i32(wid.x + wid.y * nwg.x);
  let row = wg / 4i;
  let t0 = (wg % 4i) * 512i;
  if (row >= 3i) { return; }
  let rowbase = (row / 1i) * 1500i + row % 1i;
  let at = row * 2048i + t0;
  fg_sp[lid] = t0 + i32(lid);
  fg_sp[lid + 256u] = t0 + i32(lid) + 256i;
  if (wg == 0i && lid == 0u) {
    b0[0i] = bitcast<u32>(1024i);
    b0[1i] = bitcast<u32>(512i);
  }
  workgroupBarrier();
  for (var kk = 2i; kk <= 512i; kk *= 2i) {
  for (var jj = kk / 2i; jj > 0i; jj /= 2i) {
  let i = (i32(lid) / jj) * 2i * jj + i32(lid) % jj;
  let g = t0 + i;
  let a = fg_sp[i];
  let b = fg_sp[i + jj];
  let up = (g & kk) == 0i;
  let x = select(b, a, up);
  let y = select(a, b, up);
  var swap = y < x;
  if (x < 1500i && y < 1500i) {
    let kx0 = select(select(select(bitcast<i32>(bitcast<f32>(b1[rowbase + x * 1i])), 0i, bitcast<f32>(b1[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b1[rowbase + x * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b1[rowbase + x * 1i])), 0i, bitcast<f32>(b1[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b1[rowbase + x * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b1[rowbase + x * 1i])), 0i, bitcast<f32>(b1[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b1[rowbase + x * 1i]))) < 0i);
    let ky0 = select(select(select(bitcast<i32>(bitcast<f32>(b1[rowbase + y * 1i])), 0i, bitcast<f32>(b1[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b1[rowbase + y * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b1[rowbase + y * 1i])), 0i, bitcast<f32>(b1[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b1[rowbase + y * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b1[rowbase + y * 1i])), 0i, bitcast<f32>(b1[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b1[rowbase + y * 1i]))) < 0i);
    var decided = false;
    if (!decided && kx0 != ky0) { swap = ky0 < kx0; decided = true; }
  }
  if (swap) {
    fg_sp[i] = b;
    fg_sp[i + jj] = a;
  }
  workgroupBarrier();
  }
  }
  b2[6000i + at + i32(lid)] = bitcast<u32>(fg_sp[lid]);
  b2[6000i + at + i32(lid) + 256i] = bitcast<u32>(fg_sp[lid + 256u]);
}

// shader sort_t1_stage: grid [48, 1, 1], bindings [('ctl', True), ('arena', True), ('in0', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 3072i) { return; }
  let kk = bitcast<i32>(b0[0i]);
  let jj = bitcast<i32>(b0[1i]);
  if (flat == 0i) {
    b0[2i] = bitcast<u32>(kk);
    b0[3i] = bitcast<u32>(jj / 2i);
  }
  let row = flat / 1024i;
  let p = flat % 1024i;
  let i = (p / jj) * 2i * jj + p % jj;
  let rowbase = (row / 1i) * 1500i + row % 1i;
  let a = bitcast<i32>(b1[6000i + row * 2048i + i]);
  let b = bitcast<i32>(b1[6000i + row * 2048i + i + jj]);
  let up = (i & kk) == 0i;
  let x = select(b, a, up);
  let y = select(a, b, up);
  var swap = y < x;
  if (x < 1500i && y < 1500i) {
    let kx0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) < 0i);
    let ky0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) < 0i);
    var decided = false;
    if (!decided && kx0 != ky0) { swap = ky0 < kx0; decided = true; }
  }
  if (swap) {
    b1[6000i + row * 2048i + i] = bitcast<u32>(b);
    b1[6000i + row * 2048i + i + jj] = bitcast<u32>(a);
  }
}

// shader sort_t1_local: grid [12, 1, 1], bindings [('ctl', True), ('arena', True), ('in0', False)], loop_iterations 9
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

var<workgroup> fg_sp: array<i32, 512>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = i32(wid.x + wid.y * nwg.x);
  let row = wg / 4i;
  let t0 = (wg % 4i) * 512i;
  if (row >= 3i) { return; }
  let rowbase = (row / 1i) * 1500i + row % 1i;
  let at = row * 2048i + t0;
  let kk = bitcast<i32>(b0[2i]);
  if (wg == 0i && lid == 0u) {
    b0[0i] = bitcast<u32>(kk * 2i);
    b0[1i] = bitcast<u32>(kk);
  }
  fg_sp[lid] = bitcast<i32>(b1[6000i + at + i32(lid)]);
  fg_sp[lid + 256u] = bitcast<i32>(b1[6000i + at + i32(lid) + 256i]);
  workgroupBarrier();
  for (var jj = 256i; jj > 0i; jj /= 2i) {
  let i = (i32(lid) / jj) * 2i * jj + i32(lid) % jj;
  let g = t0 + i;
  let a = fg_sp[i];
  let b = fg_sp[i + jj];
  let up = (g & kk) == 0i;
  let x = select(b, a, up);
  let y = select(a, b, up);
  var swap = y < x;
  if (x < 1500i && y < 1500i) {
    let kx0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) < 0i);
    let ky0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) < 0i);
    var decided = false;
    if (!decided && kx0 != ky0) { swap = ky0 < kx0; decided = true; }
  }
  if (swap) {
    fg_sp[i] = b;
    fg_sp[i + jj] = a;
  }
  workgroupBarrier();
  }
  b1[6000i + at + i32(lid)] = bitcast<u32>(fg_sp[lid]);
  b1[6000i + at + i32(lid) + 256i] = bitcast<u32>(fg_sp[lid + 256u]);
}

// shader sort_t1_stage: grid [48, 1, 1], bindings [('ctl', True), ('arena', True), ('in0', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 3072i) { return; }
  let kk = bitcast<i32>(b0[0i]);
  let jj = bitcast<i32>(b0[1i]);
  if (flat == 0i) {
    b0[2i] = bitcast<u32>(kk);
    b0[3i] = bitcast<u32>(jj / 2i);
  }
  let row = flat / 1024i;
  let p = flat % 1024i;
  let i = (p / jj) * 2i * jj + p % jj;
  let rowbase = (row / 1i) * 1500i + row % 1i;
  let a = bitcast<i32>(b1[6000i + row * 2048i + i]);
  let b = bitcast<i32>(b1[6000i + row * 2048i + i + jj]);
  let up = (i & kk) == 0i;
  let x = select(b, a, up);
  let y = select(a, b, up);
  var swap = y < x;
  if (x < 1500i && y < 1500i) {
    let kx0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) < 0i);
    let ky0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) < 0i);
    var decided = false;
    if (!decided && kx0 != ky0) { swap = ky0 < kx0; decided = true; }
  }
  if (swap) {
    b1[6000i + row * 2048i + i] = bitcast<u32>(b);
    b1[6000i + row * 2048i + i + jj] = bitcast<u32>(a);
  }
}

// shader sort_t1_stage: grid [48, 1, 1], bindings [('ctl', True), ('arena', True), ('in0', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 3072i) { return; }
  let kk = bitcast<i32>(b0[2i]);
  let jj = bitcast<i32>(b0[3i]);
  if (flat == 0i) {
    b0[0i] = bitcast<u32>(kk);
    b0[1i] = bitcast<u32>(jj / 2i);
  }
  let row = flat / 1024i;
  let p = flat % 1024i;
  let i = (p / jj) * 2i * jj + p % jj;
  let rowbase = (row / 1i) * 1500i + row % 1i;
  let a = bitcast<i32>(b1[6000i + row * 2048i + i]);
  let b = bitcast<i32>(b1[6000i + row * 2048i + i + jj]);
  let up = (i & kk) == 0i;
  let x = select(b, a, up);
  let y = select(a, b, up);
  var swap = y < x;
  if (x < 1500i && y < 1500i) {
    let kx0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) < 0i);
    let ky0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) < 0i);
    var decided = false;
    if (!decided && kx0 != ky0) { swap = ky0 < kx0; decided = true; }
  }
  if (swap) {
    b1[6000i + row * 2048i + i] = bitcast<u32>(b);
    b1[6000i + row * 2048i + i + jj] = bitcast<u32>(a);
  }
}

// shader sort_t1_local: grid [12, 1, 1], bindings [('ctl', True), ('arena', True), ('in0', False)], loop_iterations 9
@group(0) @binding(0) var<storage, read_write> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

var<workgroup> fg_sp: array<i32, 512>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = i32(wid.x + wid.y * nwg.x);
  let row = wg / 4i;
  let t0 = (wg % 4i) * 512i;
  if (row >= 3i) { return; }
  let rowbase = (row / 1i) * 1500i + row % 1i;
  let at = row * 2048i + t0;
  let kk = bitcast<i32>(b0[0i]);
  if (wg == 0i && lid == 0u) {
    b0[2i] = bitcast<u32>(kk * 2i);
    b0[3i] = bitcast<u32>(kk);
  }
  fg_sp[lid] = bitcast<i32>(b1[6000i + at + i32(lid)]);
  fg_sp[lid + 256u] = bitcast<i32>(b1[6000i + at + i32(lid) + 256i]);
  workgroupBarrier();
  for (var jj = 256i; jj > 0i; jj /= 2i) {
  let i = (i32(lid) / jj) * 2i * jj + i32(lid) % jj;
  let g = t0 + i;
  let a = fg_sp[i];
  let b = fg_sp[i + jj];
  let up = (g & kk) == 0i;
  let x = select(b, a, up);
  let y = select(a, b, up);
  var swap = y < x;
  if (x < 1500i && y < 1500i) {
    let kx0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + x * 1i])), 0i, bitcast<f32>(b2[rowbase + x * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + x * 1i]))) < 0i);
    let ky0 = select(select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))), select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) ^ 2147483647i, select(select(bitcast<i32>(bitcast<f32>(b2[rowbase + y * 1i])), 0i, bitcast<f32>(b2[rowbase + y * 1i]) == 0.0f), 2147483647i, fg_isnan(bitcast<f32>(b2[rowbase + y * 1i]))) < 0i);
    var decided = false;
    if (!decided && kx0 != ky0) { swap = ky0 < kx0; decided = true; }
  }
  if (swap) {
    fg_sp[i] = b;
    fg_sp[i + jj] = a;
  }
  workgroupBarrier();
  }
  b1[6000i + at + i32(lid)] = bitcast<u32>(fg_sp[lid]);
  b1[6000i + at + i32(lid) + 256i] = bitcast<u32>(fg_sp[lid + 256u]);
}

// shader sort_t1_gather: grid [71, 1, 1], bindings [('arena', False), ('out0', True), ('in0', False)], loop_iterations 0
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x + gid.y * nwg.x * 64u);
  if (flat >= 4500i) { return; }
  let row = flat / 1500i;
  let rank = flat % 1500i;
  let pos = bitcast<i32>(b0[6000i + row * 2048i + rank]);
  let at = ((row / 1i) * 1500i + rank) * 1i + (row % 1i);
  let src_at = (row / 1i) * 1500i + pos * 1i + (row % 1i);
  b1[at] = b2[src_at];
}

