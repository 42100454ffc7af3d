;; Single-precision GEMM for the trainer: C[M×N] (+)= op(A)[M×K] · op(B)[K×N], row-major.
;; Both operands are first packed into zero-padded panels (A: 4 rows × K, B: K × 8 columns) so the
;; 4×8 register-blocked micro-kernel streams both with unit stride and needs no edge cases; only
;; the store of a partial tile goes through a scratch slot. mul then add (no FMA), so results do
;; not depend on the host CPU.
(module
  (import "env" "memory" (memory 1))

  ;; Scratch for partial tiles: two v128 = 8 floats at address 0.

  ;; Packs a [count × K] operand into panels of `width` along `count`: panel p holds, for each k,
  ;; the `width` values (p·width + w, k), zero past `count`. Element (i, k) lives at
  ;; src + 4·(i·strideI + k·strideK), which covers both the plain and the transposed layout.
  (func $pack (param $count i32) (param $K i32) (param $src i32) (param $strideI i32) (param $strideK i32)
              (param $width i32) (param $out i32) (param $base i32)
    (local $k i32) (local $w i32) (local $i i32)
    ;; Start at panel base/width: its packed data begins base·K floats into the output.
    (local.set $out (i32.add (local.get $out) (i32.shl (i32.mul (local.get $base) (local.get $K)) (i32.const 2))))
    (block $done
      (loop $panels
        (br_if $done (i32.ge_u (local.get $base) (local.get $count)))
        (local.set $k (i32.const 0))
        (block $kdone
          (loop $ks
            (br_if $kdone (i32.ge_u (local.get $k) (local.get $K)))
            (local.set $w (i32.const 0))
            (loop $lanes
              (local.set $i (i32.add (local.get $base) (local.get $w)))
              (f32.store (local.get $out)
                (if (result f32) (i32.lt_u (local.get $i) (local.get $count))
                  (then (f32.load (i32.add (local.get $src)
                    (i32.shl (i32.add (i32.mul (local.get $i) (local.get $strideI))
                                      (i32.mul (local.get $k) (local.get $strideK)))
                             (i32.const 2)))))
                  (else (f32.const 0))))
              (local.set $out (i32.add (local.get $out) (i32.const 4)))
              (local.set $w (i32.add (local.get $w) (i32.const 1)))
              (br_if $lanes (i32.lt_u (local.get $w) (local.get $width))))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))
            (br $ks)))
        (local.set $base (i32.add (local.get $base) (local.get $width)))
        (br $panels))))

  ;; The whole panels of the same packing with SIMD, then $pack for the partial one (if any). Two
  ;; layouts have fast paths: consecutive i (strideI = 1: one or two vector loads per k) and
  ;; consecutive k (strideK = 1: 4×4 blocks transposed in registers); others go to $pack.
  (func $packFast (param $count i32) (param $K i32) (param $src i32) (param $strideI i32) (param $strideK i32)
                  (param $width i32) (param $out i32)
    (local $base i32) (local $full i32) (local $k i32) (local $g i32) (local $at i32) (local $dst i32)
    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)
    (local.set $full (i32.sub (local.get $count) (i32.rem_u (local.get $count) (local.get $width))))
    (if (i32.and (i32.ne (local.get $strideI) (i32.const 1)) (i32.ne (local.get $strideK) (i32.const 1)))
      (then (local.set $full (i32.const 0))))
    (local.set $dst (local.get $out))
    (block $panels_done
      (loop $panels
        (br_if $panels_done (i32.ge_u (local.get $base) (local.get $full)))
        (if (i32.eq (local.get $strideI) (i32.const 1))
          (then
            ;; Element (base + w, k) at src + 4·(base + w + k·strideK): width/4 vectors per k.
            (local.set $k (i32.const 0))
            (loop $ks
              (local.set $at (i32.add (local.get $src) (i32.shl (i32.add (local.get $base) (i32.mul (local.get $k) (local.get $strideK))) (i32.const 2))))
              (v128.store (local.get $dst) (v128.load (local.get $at)))
              (if (i32.eq (local.get $width) (i32.const 8))
                (then (v128.store offset=16 (local.get $dst) (v128.load offset=16 (local.get $at)))))
              (local.set $dst (i32.add (local.get $dst) (i32.shl (local.get $width) (i32.const 2))))
              (local.set $k (i32.add (local.get $k) (i32.const 1)))
              (br_if $ks (i32.lt_u (local.get $k) (local.get $K)))))
          (else
            ;; Element (i, k) at src + 4·(i·strideI + k): 4 rows × 4 k at a time, transposed.
            (local.set $k (i32.const 0))
            (block $kquads_done
              (loop $kquads
                (br_if $kquads_done (i32.gt_u (i32.add (local.get $k) (i32.const 4)) (local.get $K)))
                (local.set $g (i32.const 0))
                (loop $groups
                  (local.set $at (i32.add (local.get $src) (i32.shl (i32.add (i32.mul (i32.add (local.get $base) (local.get $g)) (local.get $strideI)) (local.get $k)) (i32.const 2))))
                  (local.set $r0 (v128.load (local.get $at)))
                  (local.set $at (i32.add (local.get $at) (i32.shl (local.get $strideI) (i32.const 2))))
                  (local.set $r1 (v128.load (local.get $at)))
                  (local.set $at (i32.add (local.get $at) (i32.shl (local.get $strideI) (i32.const 2))))
                  (local.set $r2 (v128.load (local.get $at)))
                  (local.set $at (i32.add (local.get $at) (i32.shl (local.get $strideI) (i32.const 2))))
                  (local.set $r3 (v128.load (local.get $at)))
                  (local.set $t0 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $r0) (local.get $r1)))
                  (local.set $t1 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $r0) (local.get $r1)))
                  (local.set $t2 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $r2) (local.get $r3)))
                  (local.set $t3 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $r2) (local.get $r3)))
                  ;; Column k + j of the 4 rows goes to dst + 4·(j·width + g).
                  (local.set $at (i32.add (local.get $dst) (i32.shl (local.get $g) (i32.const 2))))
                  (v128.store (local.get $at) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t2)))
                  (local.set $at (i32.add (local.get $at) (i32.shl (local.get $width) (i32.const 2))))
                  (v128.store (local.get $at) (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t2)))
                  (local.set $at (i32.add (local.get $at) (i32.shl (local.get $width) (i32.const 2))))
                  (v128.store (local.get $at) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t1) (local.get $t3)))
                  (local.set $at (i32.add (local.get $at) (i32.shl (local.get $width) (i32.const 2))))
                  (v128.store (local.get $at) (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t1) (local.get $t3)))
                  (local.set $g (i32.add (local.get $g) (i32.const 4)))
                  (br_if $groups (i32.lt_u (local.get $g) (local.get $width))))
                (local.set $dst (i32.add (local.get $dst) (i32.shl (local.get $width) (i32.const 4))))
                (local.set $k (i32.add (local.get $k) (i32.const 4)))
                (br $kquads)))
            ;; The last K mod 4 columns one value at a time.
            (block $krest_done
              (loop $krest
                (br_if $krest_done (i32.ge_u (local.get $k) (local.get $K)))
                (local.set $g (i32.const 0))
                (loop $lanes
                  (f32.store (local.get $dst) (f32.load (i32.add (local.get $src)
                    (i32.shl (i32.add (i32.mul (i32.add (local.get $base) (local.get $g)) (local.get $strideI)) (local.get $k)) (i32.const 2)))))
                  (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
                  (local.set $g (i32.add (local.get $g) (i32.const 1)))
                  (br_if $lanes (i32.lt_u (local.get $g) (local.get $width))))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))
                (br $krest)))))
        (local.set $base (i32.add (local.get $base) (local.get $width)))
        (br $panels)))
    (call $pack (local.get $count) (local.get $K) (local.get $src) (local.get $strideI) (local.get $strideK)
      (local.get $width) (local.get $out) (local.get $full)))

  ;; Writes (or adds) the first `cols` of the 8 values v0|v1 to the row of C at `dst`.
  (func $storeRow (param $dst i32) (param $v0 v128) (param $v1 v128) (param $cols i32) (param $accumulate i32)
    (local $j i32) (local $addr i32)
    (if (i32.eq (local.get $cols) (i32.const 8))
      (then
        (if (local.get $accumulate)
          (then
            (local.set $v0 (f32x4.add (v128.load (local.get $dst)) (local.get $v0)))
            (local.set $v1 (f32x4.add (v128.load offset=16 (local.get $dst)) (local.get $v1)))))
        (v128.store (local.get $dst) (local.get $v0))
        (v128.store offset=16 (local.get $dst) (local.get $v1))
        (return)))
    (v128.store (i32.const 0) (local.get $v0))
    (v128.store (i32.const 16) (local.get $v1))
    (loop $lanes
      (local.set $addr (i32.add (local.get $dst) (i32.shl (local.get $j) (i32.const 2))))
      (f32.store (local.get $addr)
        (if (result f32) (local.get $accumulate)
          (then (f32.add (f32.load (local.get $addr)) (f32.load (i32.shl (local.get $j) (i32.const 2)))))
          (else (f32.load (i32.shl (local.get $j) (i32.const 2))))))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br_if $lanes (i32.lt_u (local.get $j) (local.get $cols)))))

  ;; ap and bp are free space for the packed panels: 4·ceil(M/4)·K and 4·ceil(N/8)·8·K bytes.
  (func (export "gemm")
        (param $M i32) (param $N i32) (param $K i32)
        (param $a i32) (param $transA i32) (param $b i32) (param $transB i32)
        (param $c i32) (param $accumulate i32) (param $ap i32) (param $bp i32)
    (local $ib i32) (local $jb i32) (local $k i32) (local $pa i32) (local $pb i32) (local $cols i32) (local $row i32)
    (local $b0 v128) (local $b1 v128) (local $av v128)
    (local $c00 v128) (local $c01 v128) (local $c10 v128) (local $c11 v128)
    (local $c20 v128) (local $c21 v128) (local $c30 v128) (local $c31 v128)
    ;; A(i, k): plain a[i·K + k], transposed a[k·M + i]. B(k, j) packed along j: plain b[k·N + j], transposed b[j·K + k].
    (call $packFast (local.get $M) (local.get $K) (local.get $a)
      (select (i32.const 1) (local.get $K) (local.get $transA))
      (select (local.get $M) (i32.const 1) (local.get $transA))
      (i32.const 4) (local.get $ap))
    (call $packFast (local.get $N) (local.get $K) (local.get $b)
      (select (local.get $K) (i32.const 1) (local.get $transB))
      (select (i32.const 1) (local.get $N) (local.get $transB))
      (i32.const 8) (local.get $bp))
    (block $jdone
      (loop $jloop
        (br_if $jdone (i32.ge_u (local.get $jb) (local.get $N)))
        (local.set $cols (i32.sub (local.get $N) (local.get $jb)))
        (if (i32.gt_u (local.get $cols) (i32.const 8)) (then (local.set $cols (i32.const 8))))
        (local.set $ib (i32.const 0))
        (block $idone
          (loop $iloop
            (br_if $idone (i32.ge_u (local.get $ib) (local.get $M)))
            (local.set $pa (i32.add (local.get $ap) (i32.shl (i32.mul (local.get $ib) (local.get $K)) (i32.const 2))))
            (local.set $pb (i32.add (local.get $bp) (i32.shl (i32.mul (local.get $jb) (local.get $K)) (i32.const 2))))
            (local.set $c00 (v128.const i32x4 0 0 0 0)) (local.set $c01 (v128.const i32x4 0 0 0 0))
            (local.set $c10 (v128.const i32x4 0 0 0 0)) (local.set $c11 (v128.const i32x4 0 0 0 0))
            (local.set $c20 (v128.const i32x4 0 0 0 0)) (local.set $c21 (v128.const i32x4 0 0 0 0))
            (local.set $c30 (v128.const i32x4 0 0 0 0)) (local.set $c31 (v128.const i32x4 0 0 0 0))
            (local.set $k (local.get $K))
            (loop $kloop
              (local.set $b0 (v128.load (local.get $pb)))
              (local.set $b1 (v128.load offset=16 (local.get $pb)))
              (local.set $av (v128.load32_splat (local.get $pa)))
              (local.set $c00 (f32x4.add (local.get $c00) (f32x4.mul (local.get $av) (local.get $b0))))
              (local.set $c01 (f32x4.add (local.get $c01) (f32x4.mul (local.get $av) (local.get $b1))))
              (local.set $av (v128.load32_splat offset=4 (local.get $pa)))
              (local.set $c10 (f32x4.add (local.get $c10) (f32x4.mul (local.get $av) (local.get $b0))))
              (local.set $c11 (f32x4.add (local.get $c11) (f32x4.mul (local.get $av) (local.get $b1))))
              (local.set $av (v128.load32_splat offset=8 (local.get $pa)))
              (local.set $c20 (f32x4.add (local.get $c20) (f32x4.mul (local.get $av) (local.get $b0))))
              (local.set $c21 (f32x4.add (local.get $c21) (f32x4.mul (local.get $av) (local.get $b1))))
              (local.set $av (v128.load32_splat offset=12 (local.get $pa)))
              (local.set $c30 (f32x4.add (local.get $c30) (f32x4.mul (local.get $av) (local.get $b0))))
              (local.set $c31 (f32x4.add (local.get $c31) (f32x4.mul (local.get $av) (local.get $b1))))
              (local.set $pa (i32.add (local.get $pa) (i32.const 16)))
              (local.set $pb (i32.add (local.get $pb) (i32.const 32)))
              (local.set $k (i32.sub (local.get $k) (i32.const 1)))
              (br_if $kloop (local.get $k)))
            ;; Rows past M were zero padding; skip them.
            (local.set $row (i32.add (local.get $c) (i32.shl (i32.add (i32.mul (local.get $ib) (local.get $N)) (local.get $jb)) (i32.const 2))))
            (call $storeRow (local.get $row) (local.get $c00) (local.get $c01) (local.get $cols) (local.get $accumulate))
            (if (i32.lt_u (i32.add (local.get $ib) (i32.const 1)) (local.get $M)) (then
              (local.set $row (i32.add (local.get $row) (i32.shl (local.get $N) (i32.const 2))))
              (call $storeRow (local.get $row) (local.get $c10) (local.get $c11) (local.get $cols) (local.get $accumulate))))
            (if (i32.lt_u (i32.add (local.get $ib) (i32.const 2)) (local.get $M)) (then
              (local.set $row (i32.add (local.get $row) (i32.shl (local.get $N) (i32.const 2))))
              (call $storeRow (local.get $row) (local.get $c20) (local.get $c21) (local.get $cols) (local.get $accumulate))))
            (if (i32.lt_u (i32.add (local.get $ib) (i32.const 3)) (local.get $M)) (then
              (local.set $row (i32.add (local.get $row) (i32.shl (local.get $N) (i32.const 2))))
              (call $storeRow (local.get $row) (local.get $c30) (local.get $c31) (local.get $cols) (local.get $accumulate))))
            (local.set $ib (i32.add (local.get $ib) (i32.const 4)))
            (br $iloop)))
        (local.set $jb (i32.add (local.get $jb) (i32.const 8)))
        (br $jloop))))
)
