; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
@fg_parallel_for_fn = external global ptr
define internal float @fg_div_inv_f32(float %x, float %y, float %rf, float %s) noinline nounwind memory(none) {
entry:
  %q0 = fmul float %x, %rf
  %nq0 = fneg float %q0
  %rem = call float @llvm.fma.f32(float %nq0, float %y, float %x)
  %q = call float @llvm.fma.f32(float %rem, float %rf, float %q0)
  %t = fmul float %q, %s
  %tb = bitcast float %t to i32
  %ta = and i32 %tb, 2147483647
  %tn = sub i32 %ta, 8388608
  %bad = icmp uge i32 %tn, 2130706432
  %any = or i1 %bad, false
  br i1 %any, label %div, label %ok, !prof !{!"branch_weights", i32 1, i32 1048575}
ok:
  ret float %q
div:
  %e = fdiv float %x, %y
  ret float %e
}

define internal <8 x float> @fg_div_inv_f32_n8(<8 x float> %x, <8 x float> %y, <8 x float> %rf, <8 x float> %s) alwaysinline nounwind {
entry:
  %q0 = fmul <8 x float> %x, %rf
  %nq0 = fneg <8 x float> %q0
  %rem = call <8 x float> @llvm.fma.v8f32(<8 x float> %nq0, <8 x float> %y, <8 x float> %x)
  %q = call <8 x float> @llvm.fma.v8f32(<8 x float> %rem, <8 x float> %rf, <8 x float> %q0)
  %t = fmul <8 x float> %q, %s
  %tb = bitcast <8 x float> %t to <8 x i32>
  %ta = and <8 x i32> %tb, splat (i32 2147483647)
  %tn = sub <8 x i32> %ta, splat (i32 8388608)
  %bad = icmp uge <8 x i32> %tn, splat (i32 2130706432)
  %bits = bitcast <8 x i1> %bad to i8
  %any = icmp ne i8 %bits, 0
  br i1 %any, label %div, label %ok, !prof !{!"branch_weights", i32 1, i32 1048575}
ok:
  ret <8 x float> %q
div:
  %e = fdiv <8 x float> %x, %y
  ret <8 x float> %e
}

define internal <16 x float> @fg_div_inv_f32_n16(<16 x float> %x, <16 x float> %y, <16 x float> %rf, <16 x float> %s) alwaysinline nounwind {
entry:
  %q0 = fmul <16 x float> %x, %rf
  %nq0 = fneg <16 x float> %q0
  %rem = call <16 x float> @llvm.fma.v16f32(<16 x float> %nq0, <16 x float> %y, <16 x float> %x)
  %q = call <16 x float> @llvm.fma.v16f32(<16 x float> %rem, <16 x float> %rf, <16 x float> %q0)
  %t = fmul <16 x float> %q, %s
  %bad = call <16 x i1> @llvm.x86.avx512.fpclass.ps.512(<16 x float> %t, i32 191)
  %bits = bitcast <16 x i1> %bad to i16
  %any = icmp ne i16 %bits, 0
  br i1 %any, label %div, label %ok, !prof !{!"branch_weights", i32 1, i32 1048575}
ok:
  ret <16 x float> %q
div:
  %e = fdiv <16 x float> %x, %y
  ret <16 x float> %e
}

define internal float @fg_exp_f32(float %a0) alwaysinline nounwind {
entry:
  %v0 = fcmp olt float %a0, 0xC05A000000000000
  %v1 = select i1 %v0, float 0xC05A000000000000, float %a0
  %v2 = fcmp ogt float %v1, 0x4056800000000000
  %v3 = select i1 %v2, float 0x4056800000000000, float %v1
  %v4 = call float @llvm.fma.f32(float %v3, float 0x3FF7154760000000, float 0x4168000000000000)
  %v5 = bitcast float %v4 to i32
  %v6 = sub i32 %v5, 1262485504
  %v7 = sitofp i32 %v6 to float
  %v8 = fneg float %v7
  %v9 = fneg float %v7
  %v10 = call float @llvm.fma.f32(float %v9, float 0x3FE62E4300000000, float %v3)
  %v11 = call float @llvm.fma.f32(float %v8, float 0xBE205C6100000000, float %v10)
  %v12 = fmul float %v11, %v11
  %v13 = call float @llvm.fma.f32(float 0x3F56A24360000000, float %v11, float 0x3F81239E00000000)
  %v14 = call float @llvm.fma.f32(float %v13, float %v11, float 0x3FA5558F20000000)
  %v15 = call float @llvm.fma.f32(float %v14, float %v11, float 0x3FC5554920000000)
  %v16 = call float @llvm.fma.f32(float %v15, float %v11, float 0x3FDFFFFFC0000000)
  %v17 = call float @llvm.fma.f32(float %v12, float %v16, float %v11)
  %v18 = fadd float 0x3FF0000000000000, %v17
  %v19 = call float @llvm.ldexp.f32.i32(float %v18, i32 %v6)
  ret float %v19
}

@llvm.compiler.used = appending global [3 x ptr] [ptr @fg_div_inv_f32, ptr @fg_div_inv_f32_n8, ptr @fg_div_inv_f32_n16], section "llvm.metadata"

define internal void @k1(ptr noalias %b0, ptr noalias %b1, i64 %start, i64 %end) "stackrealign" {
entry:
  %row1 = alloca float, i64 256, align 64
  br label %l0.entry
l0.entry:
  br label %l0.head
l0.head:
  %v0 = phi i64 [%start, %l0.entry], [%v0.next, %l0.latch]
  %l0.c = icmp slt i64 %v0, %end
  br i1 %l0.c, label %l0.body, label %l0.exit
l0.body:
  %t4 = add i64 %v0, 2
  %t5 = mul i64 %t4, 256
  %t9 = mul i64 %v0, 256
  br label %r2.entry
r2.entry:
  br label %r2.head
r2.head:
  %v2 = phi i64 [0, %r2.entry], [%v2.next, %r2.latch]
  %acc2 = phi i32 [-2139095041, %r2.entry], [%acc2.new, %r2.latch]
  %r2.c = icmp slt i64 %v2, 256
  br i1 %r2.c, label %r2.body, label %r2.exit
r2.body:
  %t13 = add i64 %t9, %v2
  %p15 = getelementptr inbounds float, ptr %b0, i64 %t13
  %t14 = load float, ptr %p15
  %o1 = bitcast float %t14 to i32
  %o4 = ashr i32 %o1, 31
  %o5 = and i32 %o4, 2147483647
  %o6 = xor i32 %o1, %o5
  %o2 = fcmp uno float %t14, %t14
  %o3 = select i1 %o2, i32 2147483647, i32 %o6
  %acc2.new = call i32 @llvm.smax.i32(i32 %acc2, i32 %o3)
  br label %r2.latch
r2.latch:
  %v2.next = add nuw nsw i64 %v2, 1
  br label %r2.head, !llvm.loop !2
r2.exit:
  %o8 = ashr i32 %acc2, 31
  %o9 = and i32 %o8, 2147483647
  %o10 = xor i32 %acc2, %o9
  %o7 = bitcast i32 %o10 to float
  %t16 = call float @llvm.maximum.f32(float 0xFFF0000000000000, float %o7)
  br label %l5.entry
l5.entry:
  br label %l5.head
l5.head:
  %v5 = phi i64 [0, %l5.entry], [%v5.next, %l5.latch]
  %l5.c = icmp slt i64 %v5, 256
  br i1 %l5.c, label %l5.body, label %l5.exit
l5.body:
  %t6 = add i64 %t5, %v5
  %pf7 = getelementptr float, ptr %b0, i64 %t6
  call void @llvm.prefetch.p0(ptr %pf7, i32 0, i32 3, i32 1)
  %pf8 = getelementptr float, ptr %b1, i64 %t6
  call void @llvm.prefetch.p0(ptr %pf8, i32 1, i32 3, i32 1)
  br label %l4.entry
l4.entry:
  br label %l4.head
l4.head:
  %l4.j = phi i64 [0, %l4.entry], [%l4.j.next, %l4.latch]
  %l4.c = icmp slt i64 %l4.j, 16
  br i1 %l4.c, label %l4.body, label %l4.exit
l4.body:
  %v4 = add nuw nsw i64 %v5, %l4.j
  %t10 = add i64 %t9, %v4
  %p12 = getelementptr inbounds float, ptr %b0, i64 %t10
  %t11 = load float, ptr %p12
  %t17 = fsub float %t11, %t16
  %t18 = call float @fg_exp_f32(float %t17)
  %p19 = getelementptr inbounds float, ptr %row1, i64 %v4
  store float %t18, ptr %p19
  br label %l4.latch
l4.latch:
  %l4.j.next = add nuw nsw i64 %l4.j, 1
  br label %l4.head, !llvm.loop !4
l4.exit:
  br label %l5.latch
l5.latch:
  %v5.next = add nuw nsw i64 %v5, 16
  br label %l5.head, !llvm.loop !3
l5.exit:
  br label %r3.entry
r3.entry:
  br label %r3.head
r3.head:
  %v3 = phi i64 [0, %r3.entry], [%v3.next, %r3.latch]
  %acc3 = phi float [0x0000000000000000, %r3.entry], [%acc3.new, %r3.latch]
  %r3.c = icmp slt i64 %v3, 256
  br i1 %r3.c, label %r3.body, label %r3.exit
r3.body:
  %p20 = getelementptr inbounds float, ptr %row1, i64 %v3
  %t21 = load float, ptr %p20
  %acc3.new = fadd reassoc contract float %acc3, %t21
  br label %r3.latch
r3.latch:
  %v3.next = add nuw nsw i64 %v3, 1
  br label %r3.head, !llvm.loop !5
r3.exit:
  %o11 = fdiv float 1.0, %acc3
  %o12.b = bitcast float %acc3 to i32
  %o12.e = lshr i32 %o12.b, 23
  %o12.eb = and i32 %o12.e, 255
  %o12.lo = sub i32 %o12.eb, 27
  %o12.ok = icmp ult i32 %o12.lo, 226
  %o12.k = call i32 @llvm.smin.i32(i32 %o12.eb, i32 150)
  %o12.kb = sub i32 %o12.k, 25
  %o12.sb = shl i32 %o12.kb, 23
  %o12.v = bitcast i32 %o12.sb to float
  %o12 = select i1 %o12.ok, float %o12.v, float 0x7FF8000000000000
  br label %l1.entry
l1.entry:
  br label %l1.head
l1.head:
  %v1 = phi i64 [0, %l1.entry], [%v1.next, %l1.latch]
  %l1.c = icmp slt i64 %v1, 256
  br i1 %l1.c, label %l1.body, label %l1.exit
l1.body:
  %p2 = getelementptr inbounds float, ptr %row1, i64 %v1
  %t3 = load float, ptr %p2
  %t22 = call float @fg_div_inv_f32(float %t3, float %acc3, float %o11, float %o12) "vector-function-abi-variant"="_ZGV_LLVM_N8vvvv_fg_div_inv_f32(fg_div_inv_f32_n8),_ZGV_LLVM_N16vvvv_fg_div_inv_f32(fg_div_inv_f32_n16)"
  %t23 = add i64 %t9, %v1
  %p24 = getelementptr inbounds float, ptr %b1, i64 %t23
  store float %t22, ptr %p24
  br label %l1.latch
l1.latch:
  %v1.next = add nuw nsw i64 %v1, 1
  br label %l1.head, !llvm.loop !7
l1.exit:
  br label %l0.latch
l0.latch:
  %v0.next = add nuw nsw i64 %v0, 1
  br label %l0.head, !llvm.loop !6
l0.exit:
  ret void
}

define internal void @k1.par(ptr %ctx, i64 %s, i64 %e) optnone noinline {
entry:
  %p0 = getelementptr inbounds ptr, ptr %ctx, i64 0
  %a0 = load ptr, ptr %p0
  %p1 = getelementptr inbounds ptr, ptr %ctx, i64 1
  %a1 = load ptr, ptr %p1
  call void @k1(ptr %a0, ptr %a1, i64 %s, i64 %e) noinline
  ret void
}

define internal void @fg_serial_for(ptr %fn, ptr %ctx, i64 %n, i64 %nthreads) optnone noinline {
entry:
  call void %fn(ptr %ctx, i64 0, i64 %n)
  ret void
}

define internal i1 @fg_input_data(ptr %obj, ptr %out) optnone noinline {
entry:
  %tp = getelementptr inbounds i8, ptr %obj, i64 8
  %ty = load ptr, ptr %tp
  %nd = load ptr, ptr @fg_ndarray_type
  %isarr = icmp eq ptr %ty, %nd
  br i1 %isarr, label %arr, label %scal
arr:
  %fp = getelementptr inbounds i8, ptr %obj, i64 64
  %fl = load i32, ptr %fp
  %m = and i32 %fl, 257
  %ok = icmp eq i32 %m, 257
  br i1 %ok, label %arrok, label %bad
bad:
  ret i1 false
arrok:
  %dp = getelementptr inbounds i8, ptr %obj, i64 16
  %ad = load ptr, ptr %dp
  store ptr %ad, ptr %out
  ret i1 true
scal:
  %sd = getelementptr inbounds i8, ptr %obj, i64 16
  store ptr %sd, ptr %out
  ret i1 true
}

define i32 @main(ptr noalias %args, i64 %nthreads) optnone noinline {
entry:
  %in.data = alloca ptr
  %pf.ctx = alloca ptr, i64 2
  %pf.pool = load ptr, ptr @fg_parallel_for_fn
  %pf.nopool = icmp eq ptr %pf.pool, null
  %pf.one = icmp sle i64 %nthreads, 1
  %pf.serial = or i1 %pf.nopool, %pf.one
  %pf.for = select i1 %pf.serial, ptr @fg_serial_for, ptr %pf.pool
  %slot0 = getelementptr inbounds i8, ptr %args, i64 24
  %obj0 = load ptr, ptr %slot0
  %in.ok0 = call i1 @fg_input_data(ptr %obj0, ptr %in.data)
  br i1 %in.ok0, label %got0, label %bad0
bad0:
  ret i32 1
got0:
  %buf0 = load ptr, ptr %in.data
  %slot1 = getelementptr inbounds i8, ptr %args, i64 32
  %obj1 = load ptr, ptr %slot1
  %dp1 = getelementptr inbounds i8, ptr %obj1, i64 16
  %buf1 = load ptr, ptr %dp1
  store ptr %buf0, ptr %pf.ctx
  %k1.c1 = getelementptr inbounds ptr, ptr %pf.ctx, i64 1
  store ptr %buf1, ptr %k1.c1
  call void %pf.for(ptr @k1.par, ptr %pf.ctx, i64 64, i64 %nthreads)
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = distinct !{!3, !1}
!4 = distinct !{!4, !1}
!5 = distinct !{!5, !1, !9}
!6 = distinct !{!6, !1}
!7 = distinct !{!7, !1}
!8 = !{!"llvm.loop.vectorize.enable", i1 false}
!9 = !{!"llvm.loop.interleave.count", i32 4}