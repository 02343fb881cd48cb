; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
define internal float @fg_sin_f32(float %a0) alwaysinline nounwind {
entry:
  %large.abs = call float @llvm.fabs.f32(float %a0)
  %large.big = fcmp uge float %large.abs, 0x4170000000000000
  br i1 %large.big, label %large, label %join
large:
  %large.got = call float @fg_sin_large_f32(float %a0) "vector-function-abi-variant"="_ZGV_LLVM_M2v_fg_sin_large_f32(fg_sin_large_f32_v2),_ZGV_LLVM_M4v_fg_sin_large_f32(fg_sin_large_f32_v4),_ZGV_LLVM_M8v_fg_sin_large_f32(fg_sin_large_f32_v8),_ZGV_LLVM_M16v_fg_sin_large_f32(fg_sin_large_f32_v16)"
  br label %join
join:
  %large.r = phi float [poison, %entry], [%large.got, %large]
  %v0 = call float @llvm.fabs.f32(float %a0)
  %v1 = fpext float %v0 to double
  %v2 = fmul double %v1, 0x3FD45F306DC9C883
  %v3 = fsub double %v2, 0x0000000000000000
  %v4 = call double @llvm.rint.f64(double %v3)
  %v5 = fneg double %v4
  %v6 = fneg double %v4
  %v7 = call double @llvm.fma.f64(double %v6, double 0x400921FB54442D18, double %v1)
  %v8 = call double @llvm.fma.f64(double %v5, double 0x3CA1A62633145C07, double %v7)
  %v9 = fptosi double %v4 to i32
  %v10 = fmul double %v8, %v8
  %v11 = fmul double %v8, %v10
  %v12 = call double @llvm.fma.f64(double 0x3EC5DB762C438C6F, double %v10, double 0xBF29F6F8EBAA0524)
  %v13 = call double @llvm.fma.f64(double %v12, double %v10, double 0x3F8110ED142FDB4F)
  %v14 = call double @llvm.fma.f64(double %v13, double %v10, double 0xBFC55554BBB5A68E)
  %v15 = call double @llvm.fma.f64(double %v11, double %v14, double %v8)
  %v16 = fptrunc double %v15 to float
  %v17 = shl i32 %v9, 31
  %v18 = bitcast float %a0 to i32
  %v19 = and i32 %v18, -2147483648
  %v20 = xor i32 %v17, %v19
  %v21 = bitcast float %v16 to i32
  %v22 = xor i32 %v21, %v20
  %v23 = bitcast i32 %v22 to float
  %v32 = select i1 %large.big, float %large.r, float %v23
  ret float %v32
}

declare float @fg_sin_large_f32(float) nounwind cold memory(none)
declare <2 x float> @fg_sin_large_f32_lanes2(<2 x float>) nounwind cold memory(none)
define internal <2 x float> @fg_sin_large_f32_v2(<2 x float> %x, <2 x i1> %m) alwaysinline nounwind {
entry:
  %bits = bitcast <2 x i1> %m to i2
  %any = icmp ne i2 %bits, 0
  br i1 %any, label %lanes, label %none, !prof !{!"branch_weights", i32 1, i32 1048575}
none:
  ret <2 x float> poison
lanes:
  %r = call <2 x float> @fg_sin_large_f32_lanes2(<2 x float> %x)
  ret <2 x float> %r
}

declare <4 x float> @fg_sin_large_f32_lanes4(<4 x float>) nounwind cold memory(none)
define internal <4 x float> @fg_sin_large_f32_v4(<4 x float> %x, <4 x i1> %m) alwaysinline nounwind {
entry:
  %bits = bitcast <4 x i1> %m to i4
  %any = icmp ne i4 %bits, 0
  br i1 %any, label %lanes, label %none, !prof !{!"branch_weights", i32 1, i32 1048575}
none:
  ret <4 x float> poison
lanes:
  %r = call <4 x float> @fg_sin_large_f32_lanes4(<4 x float> %x)
  ret <4 x float> %r
}

declare <8 x float> @fg_sin_large_f32_lanes8(<8 x float>) nounwind cold memory(none)
define internal <8 x float> @fg_sin_large_f32_v8(<8 x float> %x, <8 x i1> %m) alwaysinline nounwind {
entry:
  %bits = bitcast <8 x i1> %m to i8
  %any = icmp ne i8 %bits, 0
  br i1 %any, label %lanes, label %none, !prof !{!"branch_weights", i32 1, i32 1048575}
none:
  ret <8 x float> poison
lanes:
  %r = call <8 x float> @fg_sin_large_f32_lanes8(<8 x float> %x)
  ret <8 x float> %r
}

declare <16 x float> @fg_sin_large_f32_lanes16(<16 x float>) nounwind cold memory(none)
define internal <16 x float> @fg_sin_large_f32_v16(<16 x float> %x, <16 x i1> %m) alwaysinline nounwind {
entry:
  %bits = bitcast <16 x i1> %m to i16
  %any = icmp ne i16 %bits, 0
  br i1 %any, label %lanes, label %none, !prof !{!"branch_weights", i32 1, i32 1048575}
none:
  ret <16 x float> poison
lanes:
  %r = call <16 x float> @fg_sin_large_f32_lanes16(<16 x float> %x)
  ret <16 x float> %r
}

@llvm.compiler.used = appending global [4 x ptr] [ptr @fg_sin_large_f32_v2, ptr @fg_sin_large_f32_v4, ptr @fg_sin_large_f32_v8, ptr @fg_sin_large_f32_v16], section "llvm.metadata"

define void @k1(ptr noalias %b1, ptr noalias %b3, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l0.entry
l0.entry:
  br label %l0.head
l0.head:
  %v0 = phi i64 [0, %l0.entry], [%v0.next, %l0.latch]
  %l0.c = icmp slt i64 %v0, 50
  br i1 %l0.c, label %l0.body, label %l0.exit
l0.body:
  %p2 = getelementptr inbounds float, ptr %b1, i64 %v0
  %t1 = load float, ptr %p2
  %t3 = fmul float %t1, 0x4000000000000000
  %p4 = getelementptr inbounds float, ptr %b3, i64 %v0
  store float %t3, ptr %p4
  br label %l0.latch
l0.latch:
  %v0.next = add nuw nsw i64 %v0, 1
  br label %l0.head, !llvm.loop !2
l0.exit:
  ret void
}

define void @k2(ptr noalias %b1, ptr noalias %b3, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l1.entry
l1.entry:
  br label %l1.head
l1.head:
  %v1 = phi i64 [0, %l1.entry], [%v1.next, %l1.latch]
  %l1.c = icmp slt i64 %v1, 50
  br i1 %l1.c, label %l1.body, label %l1.exit
l1.body:
  %p2 = getelementptr inbounds float, ptr %b1, i64 %v1
  %t1 = load float, ptr %p2
  %t3 = call float @fg_sin_f32(float %t1)
  %p4 = getelementptr inbounds float, ptr %b3, i64 %v1
  store float %t3, ptr %p4
  br label %l1.latch
l1.latch:
  %v1.next = add nuw nsw i64 %v1, 1
  br label %l1.head, !llvm.loop !3
l1.exit:
  ret void
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = distinct !{!3, !1}
!4 = !{!"llvm.loop.vectorize.enable", i1 false}
!5 = !{!"llvm.loop.interleave.count", i32 4}
; module 1: level 0, passes False
@fg_ndarray_type = external global ptr
declare void @k2(ptr noalias, ptr noalias, i64, i64)

declare void @k1(ptr noalias, ptr noalias, i64, i64)

define internal void @k3(ptr noalias %b0, ptr noalias %b2, i64 %start, i64 %end) "stackrealign" {
entry:
  %p2 = getelementptr inbounds i8, ptr %b0, i64 0
  %t3 = load i8, ptr %p2
  %t1 = icmp ne i8 %t3, 0
  %t4 = zext i1 %t1 to i32
  %p5 = getelementptr inbounds i32, ptr %b2, i64 0
  store i32 %t4, ptr %p5
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
  %in.ok1 = call i1 @fg_input_data(ptr %obj1, ptr %in.data)
  br i1 %in.ok1, label %got1, label %bad1
bad1:
  ret i32 2
got1:
  %buf1 = load ptr, ptr %in.data
  %slot2 = getelementptr inbounds i8, ptr %args, i64 40
  %obj2 = load ptr, ptr %slot2
  %dp2 = getelementptr inbounds i8, ptr %obj2, i64 16
  %buf3 = load ptr, ptr %dp2
  %slot3 = getelementptr inbounds i8, ptr %args, i64 48
  %scratchobj = load ptr, ptr %slot3
  %sp = getelementptr inbounds i8, ptr %scratchobj, i64 16
  %scratch = load ptr, ptr %sp
  %buf2 = getelementptr inbounds i8, ptr %scratch, i64 0
  call void @k3(ptr %buf0, ptr %buf2, i64 0, i64 1) noinline
  %cf1.ix = load i32, ptr %buf2
  %cf1.w = sext i32 %cf1.ix to i64
  %cf1.neg = icmp slt i64 %cf1.w, 0
  %cf1.lo = select i1 %cf1.neg, i64 0, i64 %cf1.w
  %cf1.big = icmp sgt i64 %cf1.lo, 1
  %cf1.k = select i1 %cf1.big, i64 1, i64 %cf1.lo
  switch i64 %cf1.k, label %cf1.b1 [ i64 0, label %cf1.b0 ]
cf1.b0:
  call void @k1(ptr %buf1, ptr %buf3, i64 0, i64 50) noinline
  br label %cf1.end
cf1.b1:
  call void @k2(ptr %buf1, ptr %buf3, i64 0, i64 50) noinline
  br label %cf1.end
cf1.end:
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = distinct !{!3, !1}
!4 = !{!"llvm.loop.vectorize.enable", i1 false}
!5 = !{!"llvm.loop.interleave.count", i32 4}