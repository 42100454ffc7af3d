;; Block Walsh–Hadamard transform in float32, bit-identical to src/mx/hadamard.ts: first every
;; element is multiplied by sign·float32(1/√n), then butterflies (a, b) → (a + b, a − b) run with
;; h = 1, 2, 4, … n/2, the same operations in the same order as the TypeScript loops.
(module
  (import "env" "memory" (memory 1))

  ;; Along rows: the `count` floats at $src (consecutive segments of n, n ≥ 16) go to $dst rotated
  ;; ($src may be $dst); factors has one float per column, `cols` of them (a multiple of n). The
  ;; factors are applied as each vector is first loaded, before the in-vector butterflies: the same
  ;; float32 operations as a separate pass, without it (and without a copy when $dst is elsewhere).
  (func (export "rows") (param $src i32) (param $dst i32) (param $count i32) (param $cols i32) (param $n i32) (param $factors i32)
    (local $seg i32) (local $end i32) (local $h i32) (local $i i32) (local $j i32) (local $a v128) (local $b v128) (local $v v128)
    (local $f i32) (local $fend i32)
    (local.set $end (i32.add (local.get $dst) (i32.shl (local.get $count) (i32.const 2))))
    (local.set $fend (i32.add (local.get $factors) (i32.shl (local.get $cols) (i32.const 2))))
    (local.set $f (local.get $factors))
    (local.set $seg (local.get $dst))
    (block $done
      (loop $segments
        (br_if $done (i32.ge_u (local.get $seg) (local.get $end)))
        ;; h = 1 and h = 2 inside each vector: [x0+x1, x0−x1, x2+x3, x2−x3], then [y0+y2, y1+y3, y0−y2, y1−y3].
        (local.set $i (local.get $seg))
        (loop $small
          (local.set $v (f32x4.mul (v128.load (i32.add (local.get $src) (i32.sub (local.get $i) (local.get $dst)))) (v128.load (local.get $f))))
          (local.set $f (i32.add (local.get $f) (i32.const 16)))
          (if (i32.ge_u (local.get $f) (local.get $fend)) (then (local.set $f (local.get $factors))))
          (local.set $v (f32x4.add
            (i8x16.shuffle 0 1 2 3 0 1 2 3 8 9 10 11 8 9 10 11 (local.get $v) (local.get $v))
            (f32x4.mul (i8x16.shuffle 4 5 6 7 4 5 6 7 12 13 14 15 12 13 14 15 (local.get $v) (local.get $v))
                       (v128.const f32x4 1 -1 1 -1))))
          (local.set $v (f32x4.add
            (i8x16.shuffle 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 (local.get $v) (local.get $v))
            (f32x4.mul (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $v) (local.get $v))
                       (v128.const f32x4 1 1 -1 -1))))
          (v128.store (local.get $i) (local.get $v))
          (local.set $i (i32.add (local.get $i) (i32.const 16)))
          (br_if $small (i32.lt_u (local.get $i) (i32.add (local.get $seg) (i32.shl (local.get $n) (i32.const 2))))))
        ;; h = 4 … n/2 across vectors (h counted in bytes: 16 … 2n).
        (local.set $h (i32.const 16))
        (block $hdone
          (loop $hs
            (br_if $hdone (i32.ge_u (local.get $h) (i32.shl (local.get $n) (i32.const 2))))
            (local.set $i (local.get $seg))
            (loop $groups
              (local.set $j (local.get $i))
              (loop $pairs
                (local.set $a (v128.load (local.get $j)))
                (local.set $b (v128.load (i32.add (local.get $j) (local.get $h))))
                (v128.store (local.get $j) (f32x4.add (local.get $a) (local.get $b)))
                (v128.store (i32.add (local.get $j) (local.get $h)) (f32x4.sub (local.get $a) (local.get $b)))
                (local.set $j (i32.add (local.get $j) (i32.const 16)))
                (br_if $pairs (i32.lt_u (local.get $j) (i32.add (local.get $i) (local.get $h)))))
              (local.set $i (i32.add (local.get $i) (i32.shl (local.get $h) (i32.const 1))))
              (br_if $groups (i32.lt_u (local.get $i) (i32.add (local.get $seg) (i32.shl (local.get $n) (i32.const 2))))))
            (local.set $h (i32.shl (local.get $h) (i32.const 1)))
            (br $hs)))
        (local.set $seg (i32.add (local.get $seg) (i32.shl (local.get $n) (i32.const 2))))
        (br $segments))))

  ;; Down columns: n rows of `cols` floats at $p (cols a multiple of 4) form one segment group;
  ;; row r is first multiplied by factors[r] (one float per row of the group, splatted).
  (func (export "columns") (param $p i32) (param $cols i32) (param $n i32) (param $factors i32)
    (local $rowBytes i32) (local $r i32) (local $row i32) (local $c i32) (local $f v128)
    (local $h i32) (local $i i32) (local $j i32) (local $top i32) (local $bottom i32) (local $a v128) (local $b v128)
    (local.set $rowBytes (i32.shl (local.get $cols) (i32.const 2)))
    (loop $rows
      (local.set $f (v128.load32_splat (i32.add (local.get $factors) (i32.shl (local.get $r) (i32.const 2)))))
      (local.set $row (i32.add (local.get $p) (i32.mul (local.get $r) (local.get $rowBytes))))
      (local.set $c (i32.const 0))
      (loop $scale
        (v128.store (i32.add (local.get $row) (local.get $c))
          (f32x4.mul (v128.load (i32.add (local.get $row) (local.get $c))) (local.get $f)))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (br_if $scale (i32.lt_u (local.get $c) (local.get $rowBytes))))
      (local.set $r (i32.add (local.get $r) (i32.const 1)))
      (br_if $rows (i32.lt_u (local.get $r) (local.get $n))))
    (local.set $h (i32.const 1))
    (block $hdone
      (loop $hs
        (br_if $hdone (i32.ge_u (local.get $h) (local.get $n)))
        (local.set $i (i32.const 0))
        (loop $groups
          (local.set $j (local.get $i))
          (loop $pairs
            (local.set $top (i32.add (local.get $p) (i32.mul (local.get $j) (local.get $rowBytes))))
            (local.set $bottom (i32.add (local.get $top) (i32.mul (local.get $h) (local.get $rowBytes))))
            (local.set $c (i32.const 0))
            (loop $columns
              (local.set $a (v128.load (i32.add (local.get $top) (local.get $c))))
              (local.set $b (v128.load (i32.add (local.get $bottom) (local.get $c))))
              (v128.store (i32.add (local.get $top) (local.get $c)) (f32x4.add (local.get $a) (local.get $b)))
              (v128.store (i32.add (local.get $bottom) (local.get $c)) (f32x4.sub (local.get $a) (local.get $b)))
              (local.set $c (i32.add (local.get $c) (i32.const 16)))
              (br_if $columns (i32.lt_u (local.get $c) (local.get $rowBytes))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $pairs (i32.lt_u (local.get $j) (i32.add (local.get $i) (local.get $h)))))
          (local.set $i (i32.add (local.get $i) (i32.shl (local.get $h) (i32.const 1))))
          (br_if $groups (i32.lt_u (local.get $i) (local.get $n))))
        (local.set $h (i32.shl (local.get $h) (i32.const 1)))
        (br $hs))))
)
