// shader k2: grid [1, 1, 1], bindings [('in0', False), ('arena', True)], loop_iterations 256
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn fg_max_f32(a: f32, b: f32) -> f32 {
  if (fg_isnan(a) || fg_isnan(b)) { return a + b; }
  if (a == b) { return bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)); }
  return select(b, a, a > b);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 8i) { return; }
  let v0 = flat;
  let t1 = (v0 * 128i);
  var acc6: f32 = bitcast<f32>(0xff800000u);
  for (var v1: i32 = 0i; v1 < 128i; v1++) {
  let t4 = (t1 + v1);
  let t5 = bitcast<f32>(b0[t4]);
  acc6 = fg_max_f32(acc6, t5);
  }
  let fg_zero = ((nwg.x * nwg.x) + nwg.x) & 1u;
  let fg_z1 = (nwg.x * (nwg.x + 3u)) & 1u;
  let c11 = bitcast<f32>(bitcast<u32>(0.0f) | fg_zero);
  var acc10: f32 = c11;
  var part12: f32 = c11;
  var part13: f32 = c11;
  var part14: f32 = c11;
  var n15: u32 = 0u;
  for (var v2: i32 = 0i; v2 < 128i; v2++) {
  let t2 = (t1 + v2);
  let t3 = bitcast<f32>(b0[t2]);
  let t7 = (t3 - acc6);
  let m8_v0 = fma(t7, 1.4426950216293335f, 12582912.0f);
  let m8_v17 = (t7 < -87.33654022216797f);
  let m8_v24 = (t7 < -104.0f);
  let m8_v25 = (t7 * bitcast<f32>(0x7f800000u));
  let m8_v27 = (t7 >= -104.0f);
  let m8_v30 = (t7 >= -87.33654022216797f);
  let m8_v31 = (t7 <= 88.72283172607422f);
  let m8_v1 = bitcast<i32>(m8_v0);
  let m8_v26 = select(m8_v25, 0.0f, m8_v24);
  let m8_v28 = (m8_v17 & m8_v27);
  let m8_v32 = (m8_v30 & m8_v31);
  let m8_v2 = (m8_v1 - 1262485504i);
  let m8_v3 = f32(m8_v2);
  let m8_v18 = (m8_v2 + 64i);
  let m8_v34 = (m8_v2 << u32(23i));
  let m8_v4 = (m8_v3 * 0.693145751953125f);
  let m8_v6 = (m8_v3 * 1.428606765330187e-06f);
  let m8_v20 = (m8_v18 << u32(23i));
  let m8_v5 = (t7 - m8_v4);
  let m8_v7 = (m8_v5 - m8_v6);
  let m8_v8 = (m8_v7 * m8_v7);
  let m8_v9 = fma(0.0013814599951729178f, m8_v7, 0.008368715643882751f);
  let m8_v10 = fma(m8_v9, m8_v7, 0.04166838899254799f);
  let m8_v11 = fma(m8_v10, m8_v7, 0.1666652113199234f);
  let m8_v12 = fma(m8_v11, m8_v7, 0.4999999403953552f);
  let m8_v13 = fma(m8_v8, m8_v12, m8_v7);
  let m8_v15 = bitcast<f32>(bitcast<u32>(m8_v13) | fg_zero);
  let m8_v16 = (1.0f + m8_v15);
  let m8_v19 = bitcast<i32>(m8_v16);
  let m8_v33 = bitcast<i32>(m8_v16);
  let m8_v21 = (m8_v19 + m8_v20);
  let m8_v35 = (m8_v33 + m8_v34);
  let m8_v22 = bitcast<f32>(m8_v21);
  let m8_v36 = bitcast<f32>(m8_v35);
  let m8_v23 = (m8_v22 * 5.421010862427522e-20f);
  let m8_v29 = select(m8_v26, m8_v23, m8_v28);
  let m8_v37 = select(m8_v29, m8_v36, m8_v32);
  let h9 = bitcast<f32>(bitcast<u32>(m8_v37) | fg_z1);
  part12 = part12 + h9;
  n15 = n15 + 1u;
  if ((n15 & 15u) == 0u) {
    part13 = part13 + part12;
    part12 = c11;
    if ((n15 & 255u) == 0u) {
      part14 = part14 + part13;
      part13 = c11;
      if ((n15 & 4095u) == 0u) {
        acc10 = acc10 + part14;
        part14 = c11;
      }
    }
  }
  }
  acc10 = acc10 + (part14 + (part13 + part12));
  b1[v0] = bitcast<u32>(acc10);
}

// shader k3: grid [1, 1, 1], bindings [('in0', False), ('arena', True)], loop_iterations 128
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn fg_max_f32(a: f32, b: f32) -> f32 {
  if (fg_isnan(a) || fg_isnan(b)) { return a + b; }
  if (a == b) { return bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)); }
  return select(b, a, a > b);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 8i) { return; }
  let v3 = flat;
  let t1 = (v3 * 128i);
  var acc4: f32 = bitcast<f32>(0xff800000u);
  for (var v4: i32 = 0i; v4 < 128i; v4++) {
  let t2 = (t1 + v4);
  let t3 = bitcast<f32>(b0[t2]);
  acc4 = fg_max_f32(acc4, t3);
  }
  b1[16i + v3] = bitcast<u32>(acc4);
}

// shader k4: grid [4, 1, 1], bindings [('in0', False), ('arena', False), ('out0', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;
@group(0) @binding(2) var<storage, read_write> b2: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 1024i) { return; }
  let v5 = (flat / 128i);
  let v6 = flat % 128i;
  let fg_zero = ((nwg.x * nwg.x) + nwg.x) & 1u;
  let t1 = (v5 * 128i);
  let t4 = bitcast<f32>(b1[16i + v5]);
  let t7 = bitcast<f32>(b1[v5]);
  let t2 = (t1 + v6);
  let t3 = bitcast<f32>(b0[t2]);
  let t5 = (t3 - t4);
  let m6_v0 = fma(t5, 1.4426950216293335f, 12582912.0f);
  let m6_v17 = (t5 < -87.33654022216797f);
  let m6_v24 = (t5 < -104.0f);
  let m6_v25 = (t5 * bitcast<f32>(0x7f800000u));
  let m6_v27 = (t5 >= -104.0f);
  let m6_v30 = (t5 >= -87.33654022216797f);
  let m6_v31 = (t5 <= 88.72283172607422f);
  let m6_v1 = bitcast<i32>(m6_v0);
  let m6_v26 = select(m6_v25, 0.0f, m6_v24);
  let m6_v28 = (m6_v17 & m6_v27);
  let m6_v32 = (m6_v30 & m6_v31);
  let m6_v2 = (m6_v1 - 1262485504i);
  let m6_v3 = f32(m6_v2);
  let m6_v18 = (m6_v2 + 64i);
  let m6_v34 = (m6_v2 << u32(23i));
  let m6_v4 = (m6_v3 * 0.693145751953125f);
  let m6_v6 = (m6_v3 * 1.428606765330187e-06f);
  let m6_v20 = (m6_v18 << u32(23i));
  let m6_v5 = (t5 - m6_v4);
  let m6_v7 = (m6_v5 - m6_v6);
  let m6_v8 = (m6_v7 * m6_v7);
  let m6_v9 = fma(0.0013814599951729178f, m6_v7, 0.008368715643882751f);
  let m6_v10 = fma(m6_v9, m6_v7, 0.04166838899254799f);
  let m6_v11 = fma(m6_v10, m6_v7, 0.1666652113199234f);
  let m6_v12 = fma(m6_v11, m6_v7, 0.4999999403953552f);
  let m6_v13 = fma(m6_v8, m6_v12, m6_v7);
  let m6_v15 = bitcast<f32>(bitcast<u32>(m6_v13) | fg_zero);
  let m6_v16 = (1.0f + m6_v15);
  let m6_v19 = bitcast<i32>(m6_v16);
  let m6_v33 = bitcast<i32>(m6_v16);
  let m6_v21 = (m6_v19 + m6_v20);
  let m6_v35 = (m6_v33 + m6_v34);
  let m6_v22 = bitcast<f32>(m6_v21);
  let m6_v36 = bitcast<f32>(m6_v35);
  let m6_v23 = (m6_v22 * 5.421010862427522e-20f);
  let m6_v29 = select(m6_v26, m6_v23, m6_v28);
  let m6_v37 = select(m6_v29, m6_v36, m6_v32);
  let t8 = (m6_v37 / t7);
  b2[t2] = bitcast<u32>(t8);
}

