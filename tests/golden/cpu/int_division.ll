; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
define internal void @k1(ptr noalias %b0, ptr noalias %b1, ptr noalias %b2, ptr noalias %b3, i64 %start, i64 %end) "stackrealign" {
entry:
  br label %l1.entry
l1.entry:
  br label %l1.head
l1.head:
  %v1 = phi i64 [0, %l1.entry], [%v1.next, %l1.latch]
  %l1.c = icmp slt i64 %v1, 37
  br i1 %l1.c, label %l1.body, label %l1.exit
l1.body:
  %p2 = getelementptr inbounds i32, ptr %b0, i64 %v1
  %t1 = load i32, ptr %p2
  %o1 = icmp sgt i32 %t1, 0
  %o2 = icmp slt i32 %t1, 0
  %o3 = zext i1 %o1 to i32
  %o4 = zext i1 %o2 to i32
  %t3 = sub i32 %o3, %o4
  %p5 = getelementptr inbounds i32, ptr %b1, i64 %v1
  %t4 = load i32, ptr %p5
  %o5 = icmp sgt i32 %t4, 0
  %o6 = icmp slt i32 %t4, 0
  %o7 = zext i1 %o5 to i32
  %o8 = zext i1 %o6 to i32
  %t6 = sub i32 %o7, %o8
  %t7 = icmp ne i32 %t3, %t6
  %o9 = icmp eq i32 %t4, 0
  %o13 = icmp eq i32 %t1, -2147483648
  %o14 = icmp eq i32 %t4, -1
  %o15 = and i1 %o13, %o14
  %o10 = or i1 %o9, %o15
  %o11 = select i1 %o10, i32 1, i32 %t4
  %o12 = srem i32 %t1, %o11
  %t8 = select i1 %o9, i32 %t1, i32 %o12
  %t9 = icmp ne i32 %t8, 0
  %t10 = and i1 %t7, %t9
  %o16 = icmp eq i32 %t4, 0
  %o20 = icmp eq i32 %t1, -2147483648
  %o21 = icmp eq i32 %t4, -1
  %o22 = and i1 %o20, %o21
  %o17 = or i1 %o16, %o22
  %o18 = select i1 %o17, i32 1, i32 %t4
  %o19 = sdiv i32 %t1, %o18
  %t11 = select i1 %o16, i32 -1, i32 %o19
  %t12 = sub i32 %t11, 1
  %t13 = select i1 %t10, i32 %t12, i32 %t11
  %p14 = getelementptr inbounds i32, ptr %b2, i64 %v1
  store i32 %t13, ptr %p14
  %t15 = icmp eq i32 %t4, 0
  %t16 = select i1 %t15, i32 1, i32 %t4
  %o23 = icmp eq i32 %t16, 0
  %o27 = icmp eq i32 %t1, -2147483648
  %o28 = icmp eq i32 %t16, -1
  %o29 = and i1 %o27, %o28
  %o24 = or i1 %o23, %o29
  %o25 = select i1 %o24, i32 1, i32 %t16
  %o26 = srem i32 %t1, %o25
  %t17 = select i1 %o23, i32 %t1, i32 %o26
  %t18 = icmp slt i32 %t17, 0
  %t19 = icmp slt i32 %t16, 0
  %t20 = icmp ne i1 %t18, %t19
  %t21 = icmp ne i32 %t17, 0
  %t22 = and i1 %t20, %t21
  %t23 = add i32 %t17, %t16
  %t24 = select i1 %t22, i32 %t23, i32 %t17
  %p25 = getelementptr inbounds i32, ptr %b3, i64 %v1
  store i32 %t24, ptr %p25
  br label %l1.latch
l1.latch:
  %v1.next = add nuw nsw i64 %v1, 1
  br label %l1.head, !llvm.loop !2
l1.exit:
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
  %buf2 = load ptr, ptr %dp2
  %slot3 = getelementptr inbounds i8, ptr %args, i64 48
  %obj3 = load ptr, ptr %slot3
  %dp3 = getelementptr inbounds i8, ptr %obj3, i64 16
  %buf3 = load ptr, ptr %dp3
  call void @k1(ptr %buf0, ptr %buf1, ptr %buf2, ptr %buf3, i64 0, i64 37) noinline
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = distinct !{!2, !1}
!3 = !{!"llvm.loop.vectorize.enable", i1 false}
!4 = !{!"llvm.loop.interleave.count", i32 4}