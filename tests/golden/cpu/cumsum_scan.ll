; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
define void @k1(ptr noalias %b3, ptr noalias %b4, ptr noalias %b5, ptr noalias %b7, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l1.entry
l1.entry:
  br label %l1.head
l1.head:
  %v1 = phi i64 [0, %l1.entry], [%v1.next, %l1.latch]
  %l1.c = icmp slt i64 %v1, 8
  br i1 %l1.c, label %l1.body, label %l1.exit
l1.body:
  %p2 = getelementptr inbounds float, ptr %b3, i64 %v1
  %t1 = load float, ptr %p2
  %p4 = getelementptr inbounds float, ptr %b5, i64 %v1
  %t3 = load float, ptr %p4
  %t5 = fadd float %t1, %t3
  %p6 = getelementptr inbounds float, ptr %b4, i64 %v1
  store float %t5, ptr %p6
  %p7 = getelementptr inbounds float, ptr %b7, i64 %v1
  store float %t5, ptr %p7
  br label %l1.latch
l1.latch:
  %v1.next = add nuw nsw i64 %v1, 1
  br label %l1.head, !llvm.loop !3
l1.exit:
  ret void
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1, !4}
!3 = distinct !{!3, !1, !4}
!4 = !{!"llvm.loop.vectorize.enable", i1 false}
!5 = !{!"llvm.loop.interleave.count", i32 4}
; module 1: level 0, passes False
@fg_ndarray_type = external global ptr
declare void @k1(ptr noalias, ptr noalias, ptr noalias, ptr noalias, i64, i64)

define internal void @k2(ptr noalias %b1, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l2.entry
l2.entry:
  br label %l2.head
l2.head:
  %v2 = phi i64 [0, %l2.entry], [%v2.next, %l2.latch]
  %l2.c = icmp slt i64 %v2, 8
  br i1 %l2.c, label %l2.body, label %l2.exit
l2.body:
  %p1 = getelementptr inbounds float, ptr %b1, i64 %v2
  store float 0x0000000000000000, ptr %p1
  br label %l2.latch
l2.latch:
  %v2.next = add nuw nsw i64 %v2, 1
  br label %l2.head, !llvm.loop !2
l2.exit:
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
  %dp1 = getelementptr inbounds i8, ptr %obj1, i64 16
  %buf6 = load ptr, ptr %dp1
  %slot2 = getelementptr inbounds i8, ptr %args, i64 40
  %scratchobj = load ptr, ptr %slot2
  %sp = getelementptr inbounds i8, ptr %scratchobj, i64 16
  %scratch = load ptr, ptr %sp
  %buf1 = getelementptr inbounds i8, ptr %scratch, i64 0
  %buf2 = getelementptr inbounds i8, ptr %scratch, i64 64
  call void @k2(ptr %buf1, i64 0, i64 8) noinline
  br label %cf1.pre
cf1.pre:
  br label %cf1.head
cf1.head:
  %cf1.t = phi i64 [0, %cf1.pre], [%cf1.t1, %cf1.latch]
  %cf1.c0 = phi ptr [%buf1, %cf1.pre], [%cf1.n0, %cf1.latch]
  %cf1.n0 = phi ptr [%buf2, %cf1.pre], [%cf1.c0, %cf1.latch]
  %cf1.go = icmp slt i64 %cf1.t, 20
  br i1 %cf1.go, label %cf1.body, label %cf1.exit
cf1.body:
  %cf1.off5 = mul i64 %cf1.t, 32
  %cf1.row5 = getelementptr inbounds i8, ptr %buf0, i64 %cf1.off5
  %cf1.off7 = mul i64 %cf1.t, 32
  %cf1.row7 = getelementptr inbounds i8, ptr %buf6, i64 %cf1.off7
  call void @k1(ptr %cf1.c0, ptr %cf1.n0, ptr %cf1.row5, ptr %cf1.row7, i64 0, i64 8) noinline
  br label %cf1.latch
cf1.latch:
  %cf1.t1 = add nuw nsw i64 %cf1.t, 1
  br label %cf1.head
cf1.exit:
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1, !4}
!3 = distinct !{!3, !1, !4}
!4 = !{!"llvm.loop.vectorize.enable", i1 false}
!5 = !{!"llvm.loop.interleave.count", i32 4}