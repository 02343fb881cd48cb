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

define i32 @main(ptr noalias %args, i64 %nthreads) optnone noinline {
entry:
  %slot0 = getelementptr inbounds i8, ptr %args, i64 24
  %obj0 = load ptr, ptr %slot0
  %tp0 = getelementptr inbounds i8, ptr %obj0, i64 8
  %ty0 = load ptr, ptr %tp0
  %nd0 = load ptr, ptr @fg_ndarray_type
  %isarr0 = icmp eq ptr %ty0, %nd0
  br i1 %isarr0, label %arr0, label %scal0
arr0:
  %fp0 = getelementptr inbounds i8, ptr %obj0, i64 64
  %fl0 = load i32, ptr %fp0
  %ok0.m = and i32 %fl0, 257
  %ok0 = icmp eq i32 %ok0.m, 257
  br i1 %ok0, label %arrok0, label %bad0
bad0:
  ret i32 1
arrok0:
  %dp0 = getelementptr inbounds i8, ptr %obj0, i64 16
  %ad0 = load ptr, ptr %dp0
  br label %got0
scal0:
  %sd0 = getelementptr inbounds i8, ptr %obj0, i64 16
  br label %got0
got0:
  %buf0 = phi ptr [%ad0, %arrok0], [%sd0, %scal0]
  %slot1 = getelementptr inbounds i8, ptr %args, i64 32
  %obj1 = load ptr, ptr %slot1
  %tp1 = getelementptr inbounds i8, ptr %obj1, i64 8
  %ty1 = load ptr, ptr %tp1
  %nd1 = load ptr, ptr @fg_ndarray_type
  %isarr1 = icmp eq ptr %ty1, %nd1
  br i1 %isarr1, label %arr1, label %scal1
arr1:
  %fp1 = getelementptr inbounds i8, ptr %obj1, i64 64
  %fl1 = load i32, ptr %fp1
  %ok1.m = and i32 %fl1, 257
  %ok1 = icmp eq i32 %ok1.m, 257
  br i1 %ok1, label %arrok1, label %bad1
bad1:
  ret i32 2
arrok1:
  %dp1 = getelementptr inbounds i8, ptr %obj1, i64 16
  %ad1 = load ptr, ptr %dp1
  br label %got1
scal1:
  %sd1 = getelementptr inbounds i8, ptr %obj1, i64 16
  br label %got1
got1:
  %buf1 = phi ptr [%ad1, %arrok1], [%sd1, %scal1]
  %slot2 = getelementptr inbounds i8, ptr %args, i64 40
  %obj2 = load ptr, ptr %slot2
  %tp2 = getelementptr inbounds i8, ptr %obj2, i64 8
  %ty2 = load ptr, ptr %tp2
  %nd2 = load ptr, ptr @fg_ndarray_type
  %isarr2 = icmp eq ptr %ty2, %nd2
  br i1 %isarr2, label %arr2, label %scal2
arr2:
  %fp2 = getelementptr inbounds i8, ptr %obj2, i64 64
  %fl2 = load i32, ptr %fp2
  %ok2.m = and i32 %fl2, 257
  %ok2 = icmp eq i32 %ok2.m, 257
  br i1 %ok2, label %arrok2, label %bad2
bad2:
  ret i32 3
arrok2:
  %dp2 = getelementptr inbounds i8, ptr %obj2, i64 16
  %ad2 = load ptr, ptr %dp2
  br label %got2
scal2:
  %sd2 = getelementptr inbounds i8, ptr %obj2, i64 16
  br label %got2
got2:
  %buf2 = phi ptr [%ad2, %arrok2], [%sd2, %scal2]
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