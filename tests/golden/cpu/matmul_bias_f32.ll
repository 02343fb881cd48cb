; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
declare void @fg_matmul_f32(i32, i64, i64, i64, float, ptr, i64, ptr, i64, float, ptr, ptr, i64)
define internal void @k1(ptr noalias %b2, ptr noalias %b3, ptr noalias %b4, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l0.entry
l0.entry:
  br label %l0.head
l0.head:
  %v0 = phi i64 [0, %l0.entry], [%v0.next, %l0.latch]
  %l0.c = icmp slt i64 %v0, 32
  br i1 %l0.c, label %l0.body, label %l0.exit
l0.body:
  %t1 = mul i64 %v0, 16
  br label %l1.entry
l1.entry:
  br label %l1.head
l1.head:
  %v1 = phi i64 [0, %l1.entry], [%v1.next, %l1.latch]
  %l1.c = icmp slt i64 %v1, 16
  br i1 %l1.c, label %l1.body, label %l1.exit
l1.body:
  %t2 = add i64 %t1, %v1
  %p4 = getelementptr inbounds float, ptr %b3, i64 %t2
  %t3 = load float, ptr %p4
  %p6 = getelementptr inbounds float, ptr %b2, i64 %v1
  %t5 = load float, ptr %p6
  %t7 = fadd float %t3, %t5
  %p8 = getelementptr inbounds float, ptr %b4, i64 %t2
  store float %t7, ptr %p8
  br label %l1.latch
l1.latch:
  %v1.next = add nuw nsw i64 %v1, 1
  br label %l1.head, !llvm.loop !3
l1.exit:
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
  %in.ok1 = call i1 @fg_input_data(ptr %obj1, ptr %in.data)
  br i1 %in.ok1, label %got1, label %bad1
bad1:
  ret i32 2
got1:
  %buf1 = load ptr, ptr %in.data
  %slot2 = getelementptr inbounds i8, ptr %args, i64 40
  %obj2 = load ptr, ptr %slot2
  %in.ok2 = call i1 @fg_input_data(ptr %obj2, ptr %in.data)
  br i1 %in.ok2, label %got2, label %bad2
bad2:
  ret i32 3
got2:
  %buf2 = load ptr, ptr %in.data
  %slot3 = getelementptr inbounds i8, ptr %args, i64 48
  %obj3 = load ptr, ptr %slot3
  %dp3 = getelementptr inbounds i8, ptr %obj3, i64 16
  %buf4 = load ptr, ptr %dp3
  %slot4 = getelementptr inbounds i8, ptr %args, i64 56
  %scratchobj = load ptr, ptr %slot4
  %sp = getelementptr inbounds i8, ptr %scratchobj, i64 16
  %scratch = load ptr, ptr %sp
  %buf3 = getelementptr inbounds i8, ptr %scratch, i64 0
  call void @fg_matmul_f32(i32 0, i64 32, i64 16, i64 48, float 0x3FF0000000000000, ptr %buf0, i64 48, ptr %buf1, i64 16, float 0x0000000000000000, ptr %buf3, ptr %buf3, i64 16)
  call void @k1(ptr %buf2, ptr %buf3, ptr %buf4, i64 0, i64 32) noinline
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = distinct !{!3, !1}
!4 = !{!"llvm.loop.vectorize.enable", i1 false}
!5 = !{!"llvm.loop.interleave.count", i32 4}