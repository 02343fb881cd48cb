// shader k1_partial: grid [2, 1, 1], bindings [('in0', False), ('arena', True)], loop_iterations 10
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;



var<workgroup> fg_tv: array<u32, 256>;
var<workgroup> fg_tp: array<i32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = i32(wid.x + wid.y * nwg.x);
  let flat = wg / 2i;
  let grp = wg % 2i;
  if (flat >= 1i) { return; }
  let fg_zero = ((nwg.x * nwg.x) + nwg.x) & 1u;
  let c5 = bitcast<f32>(bitcast<u32>(0.0f) | fg_zero);
  var acc3: f32 = c5;
  var part6: f32 = c5;
  var part7: f32 = c5;
  var part8: f32 = c5;
  var n9: u32 = 0u;
  var pos4: i32 = 0i;
  for (var r1 = grp * 256i + i32(lid); r1 < 5000i; r1 += 512i) {
  let v0 = r1 % 5000i;
  let t2 = bitcast<f32>(b0[v0]);
  part6 = part6 + t2;
  n9 = n9 + 1u;
  if ((n9 & 15u) == 0u) {
    part7 = part7 + part6;
    part6 = c5;
    if ((n9 & 255u) == 0u) {
      part8 = part8 + part7;
      part7 = c5;
      if ((n9 & 4095u) == 0u) {
        acc3 = acc3 + part8;
        part8 = c5;
      }
    }
  }
  }
  acc3 = acc3 + (part8 + (part7 + part6));
  fg_tv[lid] = bitcast<u32>(acc3);
  fg_tp[lid] = pos4;
  workgroupBarrier();
  if (lid < 128u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 128u])));
  }
  workgroupBarrier();
  if (lid < 64u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 64u])));
  }
  workgroupBarrier();
  if (lid < 32u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 32u])));
  }
  workgroupBarrier();
  if (lid < 16u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 16u])));
  }
  workgroupBarrier();
  if (lid < 8u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 8u])));
  }
  workgroupBarrier();
  if (lid < 4u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 4u])));
  }
  workgroupBarrier();
  if (lid < 2u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 2u])));
  }
  workgroupBarrier();
  if (lid < 1u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 1u])));
  }
  workgroupBarrier();
  if (lid == 0u) { b1[flat * 2i + grp] = fg_tv[0];
  }
  workgroupBarrier();
}

// shader k1: grid [1, 1, 1], bindings [('arena', False), ('out0', True)], loop_iterations 1
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;



var<workgroup> fg_tv: array<u32, 256>;
var<workgroup> fg_tp: array<i32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = i32(wid.x + wid.y * nwg.x);
  let flat = wg;
  if (flat >= 1i) { return; }
  let fg_zero = ((nwg.x * nwg.x) + nwg.x) & 1u;
  let c6 = bitcast<f32>(bitcast<u32>(0.0f) | fg_zero);
  var acc4: f32 = c6;
  var part7: f32 = c6;
  var part8: f32 = c6;
  var part9: f32 = c6;
  var n10: u32 = 0u;
  var pos5: i32 = 0i;
  for (var r1 = i32(lid); r1 < 2i; r1 += 256i) {
    let pv2 = bitcast<f32>(b0[flat * 2i + r1]);
  part7 = part7 + pv2;
  n10 = n10 + 1u;
  if ((n10 & 15u) == 0u) {
    part8 = part8 + part7;
    part7 = c6;
    if ((n10 & 255u) == 0u) {
      part9 = part9 + part8;
      part8 = c6;
      if ((n10 & 4095u) == 0u) {
        acc4 = acc4 + part9;
        part9 = c6;
      }
    }
  }
  }
  acc4 = acc4 + (part9 + (part8 + part7));
  fg_tv[lid] = bitcast<u32>(acc4);
  fg_tp[lid] = pos5;
  workgroupBarrier();
  if (lid < 128u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 128u])));
  }
  workgroupBarrier();
  if (lid < 64u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 64u])));
  }
  workgroupBarrier();
  if (lid < 32u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 32u])));
  }
  workgroupBarrier();
  if (lid < 16u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 16u])));
  }
  workgroupBarrier();
  if (lid < 8u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 8u])));
  }
  workgroupBarrier();
  if (lid < 4u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 4u])));
  }
  workgroupBarrier();
  if (lid < 2u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 2u])));
  }
  workgroupBarrier();
  if (lid < 1u) {
    fg_tv[lid] = bitcast<u32>((bitcast<f32>(fg_tv[lid]) + bitcast<f32>(fg_tv[lid + 1u])));
  }
  workgroupBarrier();
  let red11 = bitcast<f32>(fg_tv[0]);
  workgroupBarrier();
  if ((lid == 0u)) {
    b1[0i] = bitcast<u32>(red11);
  }
}

