; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
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

define internal float @fg_tanh_f32(float %a0) alwaysinline nounwind {
entry:
  %v0 = call float @llvm.fabs.f32(float %a0)
  %v1 = fmul float %v0, %v0
  %v2 = fmul float %v0, %v1
  %v3 = call float @llvm.fma.f32(float 0xBF775E1D40000000, float %v1, float 0x3F952269C0000000)
  %v4 = call float @llvm.fma.f32(float %v3, float %v1, float 0xBFAB83C5A0000000)
  %v5 = call float @llvm.fma.f32(float %v4, float %v1, float 0x3FC1107260000000)
  %v6 = call float @llvm.fma.f32(float %v5, float %v1, float 0xBFD5555320000000)
  %v7 = call float @llvm.fma.f32(float %v2, float %v6, float %v0)
  %v8 = fcmp olt float %v0, 0x4022333340000000
  %v9 = select i1 %v8, float %v0, float 0x4022333340000000
  %v10 = fadd float %v9, %v9
  %v11 = call float @llvm.fma.f32(float %v10, float 0x3FF7154760000000, float 0x4168000000000000)
  %v12 = bitcast float %v11 to i32
  %v13 = sub i32 %v12, 1262485504
  %v14 = sitofp i32 %v13 to float
  %v15 = fneg float %v14
  %v16 = fneg float %v14
  %v17 = call float @llvm.fma.f32(float %v16, float 0x3FE62E4300000000, float %v10)
  %v18 = call float @llvm.fma.f32(float %v15, float 0xBE205C6100000000, float %v17)
  %v19 = fmul float %v18, %v18
  %v20 = call float @llvm.fma.f32(float 0x3F56A24360000000, float %v18, float 0x3F81239E00000000)
  %v21 = call float @llvm.fma.f32(float %v20, float %v18, float 0x3FA5558F20000000)
  %v22 = call float @llvm.fma.f32(float %v21, float %v18, float 0x3FC5554920000000)
  %v23 = call float @llvm.fma.f32(float %v22, float %v18, float 0x3FDFFFFFC0000000)
  %v24 = call float @llvm.fma.f32(float %v19, float %v23, float %v18)
  %v25 = fadd float 0x3FF0000000000000, %v24
  %v26 = bitcast float %v25 to i32
  %v27 = shl i32 %v13, 23
  %v28 = add i32 %v26, %v27
  %v29 = bitcast i32 %v28 to float
  %v30 = fadd float %v29, 0x3FF0000000000000
  %v31 = fdiv float 0x4000000000000000, %v30
  %v32 = fsub float 0x3FF0000000000000, %v31
  %v33 = fcmp ult float %v0, 0x3FE4000000000000
  %v34 = select i1 %v33, float %v7, float %v32
  %v35 = call float @llvm.copysign.f32(float %v34, float %a0)
  ret float %v35
}

define internal void @k1(ptr noalias %b0, ptr noalias %b1, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l0.entry
l0.entry:
  br label %l0.head
l0.head:
  %v0 = phi i64 [0, %l0.entry], [%v0.next, %l0.latch]
  %l0.c = icmp slt i64 %v0, 1000
  br i1 %l0.c, label %l0.body, label %l0.exit
l0.body:
  %p2 = getelementptr inbounds float, ptr %b0, i64 %v0
  %t1 = load float, ptr %p2
  %t3 = call float @fg_exp_f32(float %t1)
  %t4 = fmul float %t3, 0x3FE0000000000000
  %t5 = fadd float %t4, %t1
  %t6 = call float @fg_tanh_f32(float %t5)
  %p7 = getelementptr inbounds float, ptr %b1, i64 %v0
  store float %t6, ptr %p7
  br label %l0.latch
l0.latch:
  %v0.next = add nuw nsw i64 %v0, 1
  br label %l0.head, !llvm.loop !2
l0.exit:
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
  %dp1 = getelementptr inbounds i8, ptr %obj1, i64 16
  %buf1 = load ptr, ptr %dp1
  call void @k1(ptr %buf0, ptr %buf1, i64 0, i64 1000) noinline
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = !{!"llvm.loop.vectorize.enable", i1 false}
!4 = !{!"llvm.loop.interleave.count", i32 4}