; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @k5(ptr noalias, ptr noalias, i64, i64)

declare void @k4(ptr noalias, i64, i64)

define internal void @k1(ptr noalias %b3, ptr noalias %b9, i64 %start, i64 %end) "stackrealign" {
entry:
  %p2 = getelementptr inbounds i32, ptr %b3, i64 0
  %t1 = load i32, ptr %p2
  %t3 = icmp slt i32 %t1, 10
  %p4 = getelementptr inbounds i8, ptr %b9, i64 0
  %t5 = zext i1 %t3 to i8
  store i8 %t5, ptr %p4
  ret void
}

define internal void @k2(ptr noalias %b3, ptr noalias %b4, i64 %start, i64 %end) "stackrealign" {
entry:
  %p2 = getelementptr inbounds i32, ptr %b3, i64 0
  %t1 = load i32, ptr %p2
  %t3 = add i32 %t1, 1
  %p4 = getelementptr inbounds i32, ptr %b4, i64 0
  store i32 %t3, ptr %p4
  ret void
}

define internal void @k3(ptr noalias %b7, ptr noalias %b8, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l0.entry
l0.entry:
  br label %l0.head
l0.head:
  %v0 = phi i64 [0, %l0.entry], [%v0.next, %l0.latch]
  %l0.c = icmp slt i64 %v0, 50
  br i1 %l0.c, label %l0.body, label %l0.exit
l0.body:
  %p2 = getelementptr inbounds float, ptr %b7, i64 %v0
  %t1 = load float, ptr %p2
  %t3 = fmul float %t1, 0x3FF8000000000000
  %p4 = getelementptr inbounds float, ptr %b8, i64 %v0
  store float %t3, ptr %p4
  br label %l0.latch
l0.latch:
  %v0.next = add nuw nsw i64 %v0, 1
  br label %l0.head, !llvm.loop !3
l0.exit:
  ret void
}

define internal i1 @fg_input_data(ptr %obj, ptr %out) {
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

define i32 @main(ptr noalias %args, i64 %nthreads) {
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
  %buf5 = load ptr, ptr %dp1
  %slot2 = getelementptr inbounds i8, ptr %args, i64 40
  %scratchobj = load ptr, ptr %slot2
  %sp = getelementptr inbounds i8, ptr %scratchobj, i64 16
  %scratch = load ptr, ptr %sp
  %buf1 = getelementptr inbounds i8, ptr %scratch, i64 256
  %buf2 = getelementptr inbounds i8, ptr %scratch, i64 320
  %buf6 = getelementptr inbounds i8, ptr %scratch, i64 0
  %buf9 = getelementptr inbounds i8, ptr %scratch, i64 384
  call void @k4(ptr %buf1, i64 0, i64 1) noinline
  call void @k5(ptr %buf0, ptr %buf5, i64 0, i64 50) noinline
  br label %cf1.pre
cf1.pre:
  br label %cf1.head
cf1.head:
  %cf1.c0 = phi ptr [%buf1, %cf1.pre], [%cf1.n0, %cf1.latch]
  %cf1.n0 = phi ptr [%buf2, %cf1.pre], [%cf1.c0, %cf1.latch]
  %cf1.c1 = phi ptr [%buf5, %cf1.pre], [%cf1.n1, %cf1.latch]
  %cf1.n1 = phi ptr [%buf6, %cf1.pre], [%cf1.c1, %cf1.latch]
  call void @k1(ptr %cf1.c0, ptr %buf9, i64 0, i64 1) noinline
  %cf1.p = load i8, ptr %buf9
  %cf1.go = icmp ne i8 %cf1.p, 0
  br i1 %cf1.go, label %cf1.body, label %cf1.exit
cf1.body:
  call void @k2(ptr %cf1.c0, ptr %cf1.n0, i64 0, i64 1) noinline
  call void @k3(ptr %cf1.c1, ptr %cf1.n1, i64 0, i64 50) noinline
  br label %cf1.latch
cf1.latch:
  br label %cf1.head
cf1.exit:
  call void @llvm.memcpy.p0.p0.i64(ptr %buf1, ptr %cf1.c0, i64 4, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr %buf5, ptr %cf1.c1, i64 200, i1 false)
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = distinct !{!3, !1}
!4 = !{!"llvm.loop.vectorize.enable", i1 false}
!5 = !{!"llvm.loop.interleave.count", i32 4}
; module 1: level 0, passes False
@fg_ndarray_type = external global ptr
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
define void @k4(ptr noalias %b1, i64 %start, i64 %end) "stackrealign" {
entry:
  %p1 = getelementptr inbounds i32, ptr %b1, i64 0
  store i32 0, ptr %p1
  ret void
}

define void @k5(ptr noalias %b0, ptr noalias %b5, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l1.entry
l1.entry:
  br label %l1.head
l1.head:
  %v1 = phi i64 [0, %l1.entry], [%v1.next, %l1.latch]
  %l1.c = icmp slt i64 %v1, 50
  br i1 %l1.c, label %l1.body, label %l1.exit
l1.body:
  %p2 = getelementptr inbounds float, ptr %b0, i64 %v1
  %t1 = load float, ptr %p2
  %p3 = getelementptr inbounds float, ptr %b5, i64 %v1
  store float %t1, ptr %p3
  br label %l1.latch
l1.latch:
  %v1.next = add nuw nsw i64 %v1, 1
  br label %l1.head, !llvm.loop !2
l1.exit:
  ret void
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = distinct !{!3, !1}
!4 = !{!"llvm.loop.vectorize.enable", i1 false}
!5 = !{!"llvm.loop.interleave.count", i32 4}