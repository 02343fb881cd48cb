; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
define void @colred2(ptr noalias %b0, ptr noalias %b1, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l2.entry
l2.entry:
  br label %l2.head
l2.head:
  %v2 = phi i64 [0, %l2.entry], [%v2.next, %l2.latch]
  %l2.c = icmp slt i64 %v2, 3
  br i1 %l2.c, label %l2.body, label %l2.exit
l2.body:
  %t1 = mul i64 %v2, 128
  %t11 = mul i64 %v2, 40
  br label %l3.entry
l3.entry:
  br label %l3.head
l3.head:
  %v3 = phi i64 [0, %l3.entry], [%v3.next, %l3.latch]
  %l3.c = icmp slt i64 %v3, 128
  br i1 %l3.c, label %l3.body, label %l3.exit
l3.body:
  %t2 = add i64 %t1, %v3
  %t3 = icmp slt i64 %t2, 300
  %t4 = call i64 @llvm.smax.i64(i64 %t2, i64 0)
  %t5 = call i64 @llvm.smin.i64(i64 %t4, i64 299)
  %t6 = mul i64 %t5, 40
  br label %l4.entry
l4.entry:
  br label %l4.head
l4.head:
  %v4 = phi i64 [0, %l4.entry], [%v4.next, %l4.latch]
  %l4.c = icmp slt i64 %v4, 40
  br i1 %l4.c, label %l4.body, label %l4.exit
l4.body:
  %t7 = add i64 %t6, %v4
  %p9 = getelementptr inbounds float, ptr %b0, i64 %t7
  %t8 = load float, ptr %p9
  %t10 = select i1 %t3, float %t8, float 0x0000000000000000
  %t12 = add i64 %t11, %v4
  %p13 = getelementptr inbounds float, ptr %b1, i64 %t12
  %t14 = load float, ptr %p13
  %t15 = fadd float %t14, %t10
  store float %t15, ptr %p13
  br label %l4.latch
l4.latch:
  %v4.next = add nuw nsw i64 %v4, 1
  br label %l4.head, !llvm.loop !6
l4.exit:
  br label %l3.latch
l3.latch:
  %v3.next = add nuw nsw i64 %v3, 1
  br label %l3.head, !llvm.loop !5
l3.exit:
  br label %l2.latch
l2.latch:
  %v2.next = add nuw nsw i64 %v2, 1
  br label %l2.head, !llvm.loop !4
l2.exit:
  ret void
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1, !9}
!3 = distinct !{!3, !1}
!4 = distinct !{!4, !1, !9}
!5 = distinct !{!5, !1}
!6 = distinct !{!6, !1}
!7 = distinct !{!7, !1, !9}
!8 = distinct !{!8, !1}
!9 = !{!"llvm.loop.vectorize.enable", i1 false}
!10 = !{!"llvm.loop.interleave.count", i32 4}
; module 1: level 0, passes False
@fg_ndarray_type = external global ptr
declare void @colred2(ptr noalias, ptr noalias, i64, i64)

define internal void @init1(ptr noalias %b1, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l0.entry
l0.entry:
  br label %l0.head
l0.head:
  %v0 = phi i64 [0, %l0.entry], [%v0.next, %l0.latch]
  %l0.c = icmp slt i64 %v0, 3
  br i1 %l0.c, label %l0.body, label %l0.exit
l0.body:
  %t1 = mul i64 %v0, 40
  br label %l1.entry
l1.entry:
  br label %l1.head
l1.head:
  %v1 = phi i64 [0, %l1.entry], [%v1.next, %l1.latch]
  %l1.c = icmp slt i64 %v1, 40
  br i1 %l1.c, label %l1.body, label %l1.exit
l1.body:
  %t2 = add i64 %t1, %v1
  %p3 = getelementptr inbounds float, ptr %b1, i64 %t2
  store float 0x0000000000000000, ptr %p3
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

define internal void @k3(ptr noalias %b1, ptr noalias %b2, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l5.entry
l5.entry:
  br label %l5.head
l5.head:
  %v5 = phi i64 [0, %l5.entry], [%v5.next, %l5.latch]
  %l5.c = icmp slt i64 %v5, 40
  br i1 %l5.c, label %l5.body, label %l5.exit
l5.body:
  br label %r6.entry
r6.entry:
  br label %r6.head
r6.head:
  %v6 = phi i64 [0, %r6.entry], [%v6.next, %r6.latch]
  %acc6 = phi float [0x0000000000000000, %r6.entry], [%acc6.new, %r6.latch]
  %r6.c = icmp slt i64 %v6, 3
  br i1 %r6.c, label %r6.body, label %r6.exit
r6.body:
  %t1 = mul i64 %v6, 40
  %t2 = add i64 %t1, %v5
  %p4 = getelementptr inbounds float, ptr %b1, i64 %t2
  %t3 = load float, ptr %p4
  %acc6.new = fadd reassoc contract float %acc6, %t3
  br label %r6.latch
r6.latch:
  %v6.next = add nuw nsw i64 %v6, 1
  br label %r6.head, !llvm.loop !7
r6.exit:
  %p5 = getelementptr inbounds float, ptr %b2, i64 %v5
  store float %acc6, ptr %p5
  br label %l5.latch
l5.latch:
  %v5.next = add nuw nsw i64 %v5, 1
  br label %l5.head, !llvm.loop !8
l5.exit:
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
  %buf2 = load ptr, ptr %dp1
  %slot2 = getelementptr inbounds i8, ptr %args, i64 40
  %scratchobj = load ptr, ptr %slot2
  %sp = getelementptr inbounds i8, ptr %scratchobj, i64 16
  %scratch = load ptr, ptr %sp
  %buf1 = getelementptr inbounds i8, ptr %scratch, i64 0
  call void @init1(ptr %buf1, i64 0, i64 3) noinline
  call void @colred2(ptr %buf0, ptr %buf1, i64 0, i64 3) noinline
  call void @k3(ptr %buf1, ptr %buf2, i64 0, i64 40) noinline
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1, !9}
!3 = distinct !{!3, !1}
!4 = distinct !{!4, !1, !9}
!5 = distinct !{!5, !1}
!6 = distinct !{!6, !1}
!7 = distinct !{!7, !1, !9}
!8 = distinct !{!8, !1}
!9 = !{!"llvm.loop.vectorize.enable", i1 false}
!10 = !{!"llvm.loop.interleave.count", i32 4}