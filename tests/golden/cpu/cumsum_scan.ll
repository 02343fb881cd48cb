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