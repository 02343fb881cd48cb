// shader k1: grid [4, 1, 1], bindings [('in0', False), ('out0', True)], loop_iterations 0
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<u32>;

fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let flat = i32(gid.x);
  if (flat >= 1000i) { return; }
  let v0 = flat;
  let fg_zero = ((nwg.x * nwg.x) + nwg.x) & 1u;
  let t1 = bitcast<f32>(b0[v0]);
  let c3 = bitcast<f32>(bitcast<u32>(2.0f) | fg_zero);
  let c6 = bitcast<f32>(bitcast<u32>(1.0f) | fg_zero);
  let m2_v0 = abs(t1);
  let m2_v1 = (t1 * t1);
  let m2_v37 = bitcast<i32>(t1);
  let m2_v2 = (m2_v0 * m2_v1);
  let m2_v3 = fma(-0.0057049887254834175f, m2_v1, 0.0206390880048275f);
  let m2_v8 = (m2_v0 < 9.100000381469727f);
  let m2_v35 = (!(m2_v0 >= 0.625f));
  let m2_v38 = (m2_v37 & bitcast<i32>(0x80000000u));
  let m2_v4 = fma(m2_v3, m2_v1, -0.05373971536755562f);
  let m2_v9 = select(9.100000381469727f, m2_v0, m2_v8);
  let m2_v5 = fma(m2_v4, m2_v1, 0.13331441581249237f);
  let m2_v10 = (m2_v9 + m2_v9);
  let m2_v6 = fma(m2_v5, m2_v1, -0.3333328068256378f);
  let m2_v11 = fma(m2_v10, 1.4426950216293335f, 12582912.0f);
  let m2_v7 = fma(m2_v2, m2_v6, m2_v0);
  let m2_v12 = bitcast<i32>(m2_v11);
  let m2_v13 = (m2_v12 - 1262485504i);
  let m2_v14 = f32(m2_v13);
  let m2_v29 = (m2_v13 << u32(23i));
  let m2_v15 = (m2_v14 * 0.693145751953125f);
  let m2_v17 = (m2_v14 * 1.428606765330187e-06f);
  let m2_v16 = (m2_v10 - m2_v15);
  let m2_v18 = (m2_v16 - m2_v17);
  let m2_v19 = (m2_v18 * m2_v18);
  let m2_v20 = fma(0.0013814599951729178f, m2_v18, 0.008368715643882751f);
  let m2_v21 = fma(m2_v20, m2_v18, 0.04166838899254799f);
  let m2_v22 = fma(m2_v21, m2_v18, 0.1666652113199234f);
  let m2_v23 = fma(m2_v22, m2_v18, 0.4999999403953552f);
  let m2_v24 = fma(m2_v19, m2_v23, m2_v18);
  let m2_v26 = bitcast<f32>(bitcast<u32>(m2_v24) | fg_zero);
  let m2_v27 = (1.0f + m2_v26);
  let m2_v28 = bitcast<i32>(m2_v27);
  let m2_v30 = (m2_v28 + m2_v29);
  let m2_v31 = bitcast<f32>(m2_v30);
  let m2_v32 = (m2_v31 + 1.0f);
  let m2_v33 = (2.0f / m2_v32);
  let m2_v34 = (1.0f - m2_v33);
  let m2_v36 = select(m2_v34, m2_v7, m2_v35);
  let m2_v39 = bitcast<i32>(m2_v36);
  let m2_v40 = (m2_v39 ^ m2_v38);
  let m2_v41 = bitcast<f32>(m2_v40);
  let t4 = (m2_v41 * c3);
  let m5_v0 = fma(t4, 1.4426950216293335f, 12582912.0f);
  let m5_v17 = (t4 < -87.33654022216797f);
  let m5_v24 = (t4 < -104.0f);
  let m5_v25 = (t4 * bitcast<f32>(0x7f800000u));
  let m5_v27 = (t4 >= -104.0f);
  let m5_v30 = (t4 >= -87.33654022216797f);
  let m5_v31 = (t4 <= 88.72283172607422f);
  let m5_v1 = bitcast<i32>(m5_v0);
  let m5_v26 = select(m5_v25, 0.0f, m5_v24);
  let m5_v28 = (m5_v17 & m5_v27);
  let m5_v32 = (m5_v30 & m5_v31);
  let m5_v2 = (m5_v1 - 1262485504i);
  let m5_v3 = f32(m5_v2);
  let m5_v18 = (m5_v2 + 64i);
  let m5_v34 = (m5_v2 << u32(23i));
  let m5_v4 = (m5_v3 * 0.693145751953125f);
  let m5_v6 = (m5_v3 * 1.428606765330187e-06f);
  let m5_v20 = (m5_v18 << u32(23i));
  let m5_v5 = (t4 - m5_v4);
  let m5_v7 = (m5_v5 - m5_v6);
  let m5_v8 = (m5_v7 * m5_v7);
  let m5_v9 = fma(0.0013814599951729178f, m5_v7, 0.008368715643882751f);
  let m5_v10 = fma(m5_v9, m5_v7, 0.04166838899254799f);
  let m5_v11 = fma(m5_v10, m5_v7, 0.1666652113199234f);
  let m5_v12 = fma(m5_v11, m5_v7, 0.4999999403953552f);
  let m5_v13 = fma(m5_v8, m5_v12, m5_v7);
  let m5_v15 = bitcast<f32>(bitcast<u32>(m5_v13) | fg_zero);
  let m5_v16 = (1.0f + m5_v15);
  let m5_v19 = bitcast<i32>(m5_v16);
  let m5_v33 = bitcast<i32>(m5_v16);
  let m5_v21 = (m5_v19 + m5_v20);
  let m5_v35 = (m5_v33 + m5_v34);
  let m5_v22 = bitcast<f32>(m5_v21);
  let m5_v36 = bitcast<f32>(m5_v35);
  let m5_v23 = (m5_v22 * 5.421010862427522e-20f);
  let m5_v29 = select(m5_v26, m5_v23, m5_v28);
  let m5_v37 = select(m5_v29, m5_v36, m5_v32);
  let t7 = (m5_v37 + c6);
  b1[v0] = bitcast<u32>(t7);
}

