; module 0: level 3, passes True
@fg_ndarray_type = external global ptr
define internal i1 @sort_t1.less(ptr noalias %in0, i64 %base, i64 %ka, i64 %ia, i64 %kb, i64 %ib) alwaysinline nounwind optsize {
entry:
  %lt0 = icmp slt i64 %ka, %kb
  br i1 %lt0, label %yes, label %no
yes:
  ret i1 true
no:
  ret i1 false
}
define internal void @sort_t1(ptr noalias %in0, ptr noalias %out0, ptr noalias %scratch, i64 %rlo, i64 %rhi) nounwind optsize {
entry:
  %KA = getelementptr inbounds i64, ptr %scratch, i64 0
  %IA = getelementptr inbounds i64, ptr %scratch, i64 100
  %KB = getelementptr inbounds i64, ptr %scratch, i64 200
  %IB = getelementptr inbounds i64, ptr %scratch, i64 300
  br label %row.head
row.head:
  %r = phi i64 [%rlo, %entry], [%r.next, %row.latch]
  %r.c = icmp slt i64 %r, %rhi
  br i1 %r.c, label %row.body, label %done
row.body:
  %ro = udiv i64 %r, 1
  %ri = urem i64 %r, 1
  %rb = mul i64 %ro, 100
  %base = add i64 %rb, %ri
  %obr = mul i64 %ro, 100
  %obase = add i64 %obr, %ri
  br label %ld.head
ld.head:
  %j = phi i64 [0, %row.body], [%j.next, %ld.body]
  %j.c = icmp slt i64 %j, 100
  br i1 %j.c, label %ld.body, label %ins.pre
ld.body:
  %jo0 = mul i64 %j, 1
  %jo = add i64 %base, %jo0
  %p1 = getelementptr inbounds float, ptr %in0, i64 %jo
  %x2 = load float, ptr %p1
  %t3 = fcmp oeq float %x2, 0.0
  %t4 = select i1 %t3, float 0.0, float %x2
  %t5 = bitcast float %t4 to i32
  %t6 = icmp slt i32 %t5, 0
  %t7 = xor i32 %t5, 2147483647
  %t8 = select i1 %t6, i32 %t7, i32 %t5
  %t9 = sext i32 %t8 to i64
  %t10 = fcmp uno float %x2, %x2
  %t11 = select i1 %t10, i64 9223372036854775807, i64 %t9
  %ldk = getelementptr inbounds i64, ptr %KA, i64 %j
  store i64 %t11, ptr %ldk
  %ldi = getelementptr inbounds i64, ptr %IA, i64 %j
  store i64 %j, ptr %ldi
  %j.next = add i64 %j, 1
  br label %ld.head
ins.pre:
  br label %ins.head
ins.head:
  %clo = phi i64 [0, %ins.pre], [%clo.next, %it.head]
  %clo.c = icmp slt i64 %clo, 100
  br i1 %clo.c, label %ins.body, label %pass.pre
ins.body:
  %chi0 = add i64 %clo, 16
  %chi.c = icmp slt i64 %chi0, 100
  %chi = select i1 %chi.c, i64 %chi0, i64 100
  %t0 = add i64 %clo, 1
  br label %it.head
it.head:
  %t = phi i64 [%t0, %ins.body], [%t.next, %it.latch]
  %t.c = icmp slt i64 %t, %chi
  %clo.next = add i64 %clo, 16
  br i1 %t.c, label %it.body, label %ins.head
it.body:
  %ptk = getelementptr inbounds i64, ptr %KA, i64 %t
  %kt = load i64, ptr %ptk
  %pti = getelementptr inbounds i64, ptr %IA, i64 %t
  %it = load i64, ptr %pti
  br label %sh.head
sh.head:
  %s = phi i64 [%t, %it.body], [%sp, %sh.move]
  %s.c = icmp sgt i64 %s, %clo
  br i1 %s.c, label %sh.cmp, label %it.latch
sh.cmp:
  %sp = sub i64 %s, 1
  %pspk = getelementptr inbounds i64, ptr %KA, i64 %sp
  %kp = load i64, ptr %pspk
  %pspi = getelementptr inbounds i64, ptr %IA, i64 %sp
  %ip = load i64, ptr %pspi
  %lt12 = call i1 @sort_t1.less(ptr %in0, i64 %base, i64 %kt, i64 %it, i64 %kp, i64 %ip)
  br i1 %lt12, label %sh.move, label %it.latch
sh.move:
  %psk = getelementptr inbounds i64, ptr %KA, i64 %s
  store i64 %kp, ptr %psk
  %psi = getelementptr inbounds i64, ptr %IA, i64 %s
  store i64 %ip, ptr %psi
  br label %sh.head
it.latch:
  %pok = getelementptr inbounds i64, ptr %KA, i64 %s
  store i64 %kt, ptr %pok
  %poi = getelementptr inbounds i64, ptr %IA, i64 %s
  store i64 %it, ptr %poi
  %t.next = add i64 %t, 1
  br label %it.head
pass.pre:
  br label %pass.head
pass.head:
  %w = phi i64 [16, %pass.pre], [%ww, %mo.head]
  %sK = phi ptr [%KA, %pass.pre], [%dK, %mo.head]
  %sI = phi ptr [%IA, %pass.pre], [%dI, %mo.head]
  %dK = phi ptr [%KB, %pass.pre], [%sK, %mo.head]
  %dI = phi ptr [%IB, %pass.pre], [%sI, %mo.head]
  %w.c = icmp slt i64 %w, 100
  %ww = shl i64 %w, 1
  br i1 %w.c, label %mo.pre, label %g.pre
mo.pre:
  br label %mo.head
mo.head:
  %lo = phi i64 [0, %mo.pre], [%lo.next, %m.head]
  %lo.c = icmp slt i64 %lo, 100
  br i1 %lo.c, label %mo.body, label %pass.head
mo.body:
  %m1 = add i64 %lo, %w
  %m1.c = icmp slt i64 %m1, 100
  %mid = select i1 %m1.c, i64 %m1, i64 100
  %h1 = add i64 %lo, %ww
  %h1.c = icmp slt i64 %h1, 100
  %hi = select i1 %h1.c, i64 %h1, i64 100
  br label %m.head
m.head:
  %mt = phi i64 [%lo, %mo.body], [%mt.next, %m.latch]
  %ma = phi i64 [%lo, %mo.body], [%ma.next, %m.latch]
  %mb = phi i64 [%mid, %mo.body], [%mb.next, %m.latch]
  %mt.c = icmp slt i64 %mt, %hi
  %lo.next = add i64 %lo, %ww
  br i1 %mt.c, label %m.body, label %mo.head
m.body:
  %a.done = icmp sge i64 %ma, %mid
  br i1 %a.done, label %m.takeb, label %m.chk
m.chk:
  %b.done = icmp sge i64 %mb, %hi
  br i1 %b.done, label %m.takea, label %m.cmp
m.cmp:
  %pka = getelementptr inbounds i64, ptr %sK, i64 %ma
  %ka = load i64, ptr %pka
  %pia = getelementptr inbounds i64, ptr %sI, i64 %ma
  %ia = load i64, ptr %pia
  %pkb = getelementptr inbounds i64, ptr %sK, i64 %mb
  %kb = load i64, ptr %pkb
  %pib = getelementptr inbounds i64, ptr %sI, i64 %mb
  %ib = load i64, ptr %pib
  %lt13 = call i1 @sort_t1.less(ptr %in0, i64 %base, i64 %kb, i64 %ib, i64 %ka, i64 %ia)
  br i1 %lt13, label %m.takeb, label %m.takea
m.takea:
  %qka = getelementptr inbounds i64, ptr %sK, i64 %ma
  %vka = load i64, ptr %qka
  %qia = getelementptr inbounds i64, ptr %sI, i64 %ma
  %via = load i64, ptr %qia
  %dka = getelementptr inbounds i64, ptr %dK, i64 %mt
  store i64 %vka, ptr %dka
  %dia = getelementptr inbounds i64, ptr %dI, i64 %mt
  store i64 %via, ptr %dia
  %a1 = add i64 %ma, 1
  br label %m.latch
m.takeb:
  %qkb = getelementptr inbounds i64, ptr %sK, i64 %mb
  %vkb = load i64, ptr %qkb
  %qib = getelementptr inbounds i64, ptr %sI, i64 %mb
  %vib = load i64, ptr %qib
  %dkb = getelementptr inbounds i64, ptr %dK, i64 %mt
  store i64 %vkb, ptr %dkb
  %dib = getelementptr inbounds i64, ptr %dI, i64 %mt
  store i64 %vib, ptr %dib
  %b1 = add i64 %mb, 1
  br label %m.latch
m.latch:
  %ma.next = phi i64 [%a1, %m.takea], [%ma, %m.takeb]
  %mb.next = phi i64 [%mb, %m.takea], [%b1, %m.takeb]
  %mt.next = add i64 %mt, 1
  br label %m.head
g.pre:
  br label %g.head
g.head:
  %g = phi i64 [0, %g.pre], [%g.next, %g.body]
  %g.c = icmp slt i64 %g, 100
  br i1 %g.c, label %g.body, label %row.latch
g.body:
  %pg = getelementptr inbounds i64, ptr %sI, i64 %g
  %gp = load i64, ptr %pg
  %gs0 = mul i64 %gp, 1
  %gs = add i64 %base, %gs0
  %gd0 = mul i64 %g, 1
  %gd = add i64 %obase, %gd0
  %gq0 = getelementptr inbounds float, ptr %in0, i64 %gs
  %gv0 = load float, ptr %gq0
  %gr0 = getelementptr inbounds float, ptr %out0, i64 %gd
  store float %gv0, ptr %gr0
  %g.next = add i64 %g, 1
  br label %g.head
row.latch:
  %r.next = add i64 %r, 1
  br label %row.head
done:
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
  %slot2 = getelementptr inbounds i8, ptr %args, i64 40
  %scratchobj = load ptr, ptr %slot2
  %sp = getelementptr inbounds i8, ptr %scratchobj, i64 16
  %scratch = load ptr, ptr %sp
  %buf2 = getelementptr inbounds i8, ptr %scratch, i64 0
  call void @sort_t1(ptr %buf0, ptr %buf1, ptr %buf2, i64 0, i64 8)
  ret i32 0
}

!1 = !{!"llvm.loop.unroll.disable"}
!2 = !{!"llvm.loop.vectorize.enable", i1 false}
!3 = !{!"llvm.loop.interleave.count", i32 4}