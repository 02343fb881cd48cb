// shader dot_general: grid [2, 1, 1], bindings [('in0', False), ('in1', False), ('out0', True)], loop_iterations 126
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;
@group(0) @binding(2) var<storage, read_write> b2: array<u32>;

var<workgroup> ta: array<f32, 1024>;
var<workgroup> tb: array<f32, 1024>;

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let tx = i32(lid.x); let ty = i32(lid.y);
  let row0 = i32(wid.y) * 64i; let col0 = i32(wid.x) * 64i;
  let bt = i32(wid.z);
  let abase = bt * 6144i; let bbase = bt * 7680i; let cbase = bt * 5120i;
  let kbeg = 0i; let kend = 96i;
  var acc: array<f32, 16>;
  var mid: array<f32, 16>;
  var tot: array<f32, 16>;
  let t = ty * 16i + tx;
  for (var p0: i32 = kbeg; p0 < kend; p0 += 16i) {
    for (var q: i32 = 0i; q < 4i; q++) {
      let e = t + q * 256i;
      let gi = row0 + e / 16i; let gp = p0 + e % 16i;
      var va = 0.0f;
      if (gi < 64i && gp < kend) { va = bitcast<f32>(b0[abase + gi * 96i + gp]); }
      ta[e] = va;
      let gq = p0 + e / 64i; let gc = col0 + e % 64i;
      var vb = 0.0f;
      if (gq < kend && gc < 80i) { vb = bitcast<f32>(b1[bbase + gq * 80i + gc]); }
      tb[e] = vb;
    }
    workgroupBarrier();
    for (var kk: i32 = 0i; kk < 16i; kk++) {
      let a0 = ta[(ty + 0i) * 16i + kk];
      let a1 = ta[(ty + 16i) * 16i + kk];
      let a2 = ta[(ty + 32i) * 16i + kk];
      let a3 = ta[(ty + 48i) * 16i + kk];
      let c0 = tb[kk * 64i + tx + 0i];
      let c1 = tb[kk * 64i + tx + 16i];
      let c2 = tb[kk * 64i + tx + 32i];
      let c3 = tb[kk * 64i + tx + 48i];
      acc[0] = fma(a0, c0, acc[0]);
      acc[1] = fma(a0, c1, acc[1]);
      acc[2] = fma(a0, c2, acc[2]);
      acc[3] = fma(a0, c3, acc[3]);
      acc[4] = fma(a1, c0, acc[4]);
      acc[5] = fma(a1, c1, acc[5]);
      acc[6] = fma(a1, c2, acc[6]);
      acc[7] = fma(a1, c3, acc[7]);
      acc[8] = fma(a2, c0, acc[8]);
      acc[9] = fma(a2, c1, acc[9]);
      acc[10] = fma(a2, c2, acc[10]);
      acc[11] = fma(a2, c3, acc[11]);
      acc[12] = fma(a3, c0, acc[12]);
      acc[13] = fma(a3, c1, acc[13]);
      acc[14] = fma(a3, c2, acc[14]);
      acc[15] = fma(a3, c3, acc[15]);
    }
    workgroupBarrier();
    if ((p0 - kbeg) % 64i == 48i) {
      mid[0] = mid[0] + acc[0]; acc[0] = 0.0f;
      mid[1] = mid[1] + acc[1]; acc[1] = 0.0f;
      mid[2] = mid[2] + acc[2]; acc[2] = 0.0f;
      mid[3] = mid[3] + acc[3]; acc[3] = 0.0f;
      mid[4] = mid[4] + acc[4]; acc[4] = 0.0f;
      mid[5] = mid[5] + acc[5]; acc[5] = 0.0f;
      mid[6] = mid[6] + acc[6]; acc[6] = 0.0f;
      mid[7] = mid[7] + acc[7]; acc[7] = 0.0f;
      mid[8] = mid[8] + acc[8]; acc[8] = 0.0f;
      mid[9] = mid[9] + acc[9]; acc[9] = 0.0f;
      mid[10] = mid[10] + acc[10]; acc[10] = 0.0f;
      mid[11] = mid[11] + acc[11]; acc[11] = 0.0f;
      mid[12] = mid[12] + acc[12]; acc[12] = 0.0f;
      mid[13] = mid[13] + acc[13]; acc[13] = 0.0f;
      mid[14] = mid[14] + acc[14]; acc[14] = 0.0f;
      mid[15] = mid[15] + acc[15]; acc[15] = 0.0f;
      if ((p0 - kbeg) % 4096i == 4080i) {
        tot[0] = tot[0] + mid[0]; mid[0] = 0.0f;
        tot[1] = tot[1] + mid[1]; mid[1] = 0.0f;
        tot[2] = tot[2] + mid[2]; mid[2] = 0.0f;
        tot[3] = tot[3] + mid[3]; mid[3] = 0.0f;
        tot[4] = tot[4] + mid[4]; mid[4] = 0.0f;
        tot[5] = tot[5] + mid[5]; mid[5] = 0.0f;
        tot[6] = tot[6] + mid[6]; mid[6] = 0.0f;
        tot[7] = tot[7] + mid[7]; mid[7] = 0.0f;
        tot[8] = tot[8] + mid[8]; mid[8] = 0.0f;
        tot[9] = tot[9] + mid[9]; mid[9] = 0.0f;
        tot[10] = tot[10] + mid[10]; mid[10] = 0.0f;
        tot[11] = tot[11] + mid[11]; mid[11] = 0.0f;
        tot[12] = tot[12] + mid[12]; mid[12] = 0.0f;
        tot[13] = tot[13] + mid[13]; mid[13] = 0.0f;
        tot[14] = tot[14] + mid[14]; mid[14] = 0.0f;
        tot[15] = tot[15] + mid[15]; mid[15] = 0.0f;
      }
    }
  }
  mid[0] = mid[0] + acc[0]; acc[0] = 0.0f;
  mid[1] = mid[1] + acc[1]; acc[1] = 0.0f;
  mid[2] = mid[2] + acc[2]; acc[2] = 0.0f;
  mid[3] = mid[3] + acc[3]; acc[3] = 0.0f;
  mid[4] = mid[4] + acc[4]; acc[4] = 0.0f;
  mid[5] = mid[5] + acc[5]; acc[5] = 0.0f;
  mid[6] = mid[6] + acc[6]; acc[6] = 0.0f;
  mid[7] = mid[7] + acc[7]; acc[7] = 0.0f;
  mid[8] = mid[8] + acc[8]; acc[8] = 0.0f;
  mid[9] = mid[9] + acc[9]; acc[9] = 0.0f;
  mid[10] = mid[10] + acc[10]; acc[10] = 0.0f;
  mid[11] = mid[11] + acc[11]; acc[11] = 0.0f;
  mid[12] = mid[12] + acc[12]; acc[12] = 0.0f;
  mid[13] = mid[13] + acc[13]; acc[13] = 0.0f;
  mid[14] = mid[14] + acc[14]; acc[14] = 0.0f;
  mid[15] = mid[15] + acc[15]; acc[15] = 0.0f;
  tot[0] = tot[0] + mid[0]; mid[0] = 0.0f;
  tot[1] = tot[1] + mid[1]; mid[1] = 0.0f;
  tot[2] = tot[2] + mid[2]; mid[2] = 0.0f;
  tot[3] = tot[3] + mid[3]; mid[3] = 0.0f;
  tot[4] = tot[4] + mid[4]; mid[4] = 0.0f;
  tot[5] = tot[5] + mid[5]; mid[5] = 0.0f;
  tot[6] = tot[6] + mid[6]; mid[6] = 0.0f;
  tot[7] = tot[7] + mid[7]; mid[7] = 0.0f;
  tot[8] = tot[8] + mid[8]; mid[8] = 0.0f;
  tot[9] = tot[9] + mid[9]; mid[9] = 0.0f;
  tot[10] = tot[10] + mid[10]; mid[10] = 0.0f;
  tot[11] = tot[11] + mid[11]; mid[11] = 0.0f;
  tot[12] = tot[12] + mid[12]; mid[12] = 0.0f;
  tot[13] = tot[13] + mid[13]; mid[13] = 0.0f;
  tot[14] = tot[14] + mid[14]; mid[14] = 0.0f;
  tot[15] = tot[15] + mid[15]; mid[15] = 0.0f;
  { let r = row0 + ty + 0i; let c = col0 + tx + 0i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[0]); } }
  { let r = row0 + ty + 0i; let c = col0 + tx + 16i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[1]); } }
  { let r = row0 + ty + 0i; let c = col0 + tx + 32i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[2]); } }
  { let r = row0 + ty + 0i; let c = col0 + tx + 48i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[3]); } }
  { let r = row0 + ty + 16i; let c = col0 + tx + 0i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[4]); } }
  { let r = row0 + ty + 16i; let c = col0 + tx + 16i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[5]); } }
  { let r = row0 + ty + 16i; let c = col0 + tx + 32i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[6]); } }
  { let r = row0 + ty + 16i; let c = col0 + tx + 48i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[7]); } }
  { let r = row0 + ty + 32i; let c = col0 + tx + 0i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[8]); } }
  { let r = row0 + ty + 32i; let c = col0 + tx + 16i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[9]); } }
  { let r = row0 + ty + 32i; let c = col0 + tx + 32i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[10]); } }
  { let r = row0 + ty + 32i; let c = col0 + tx + 48i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[11]); } }
  { let r = row0 + ty + 48i; let c = col0 + tx + 0i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[12]); } }
  { let r = row0 + ty + 48i; let c = col0 + tx + 16i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[13]); } }
  { let r = row0 + ty + 48i; let c = col0 + tx + 32i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[14]); } }
  { let r = row0 + ty + 48i; let c = col0 + tx + 48i;
    if (r < 64i && c < 80i) { b2[cbase + r * 80i + c] = bitcast<u32>(tot[15]); } }
}

