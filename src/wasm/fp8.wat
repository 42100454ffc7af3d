;; Per-tensor FP8 fake-quant, bit-identical to src/mx/fp8.ts: y = |x|·scale in float32, rounded to the
;; FP8 grid (ties to even) by adding and subtracting 2^(E + 23 − m), whose float32 ulp is the grid
;; step 2^(E − m) for E = max(exponent(y), emin); saturated at max; divided by scale in float32; x's
;; sign put back. NaN stays NaN, ±Inf stays ±Inf in E5M2 ($keepInf) and becomes NaN in E4M3.
(module
  (import "env" "memory" (memory 1))

  ;; Largest finite |x| among `count` floats at $p (a multiple of 4), as float32 bits.
  (func (export "amax_finite") (param $p i32) (param $count i32) (result i32)
    (local $end i32) (local $m v128) (local $a v128)
    (local.set $end (i32.add (local.get $p) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $a (v128.and (v128.load (local.get $p)) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff)))
        ;; Non-finite lanes count as 0.
        (local.set $m (i32x4.max_u (local.get $m)
          (v128.and (local.get $a) (i32x4.lt_u (local.get $a) (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000)))))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))
        (br $vectors)))
    (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $m) (local.get $m))))
    (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $m) (local.get $m))))
    (i32x4.extract_lane 0 (local.get $m)))

  ;; In place for `count` floats at $p (a multiple of 4). $minNormal: float32 bits of 2^emin;
  ;; $magicOffset: (23 − m) << 23.
  (func (export "fake_quant_tensor") (param $p i32) (param $count i32) (param $scale f32) (param $max f32)
        (param $minNormal i32) (param $magicOffset i32) (param $keepInf i32)
    (local $end i32) (local $x v128) (local $abs v128) (local $y v128) (local $magic v128) (local $out v128)
    (local $scaleV v128) (local $maxV v128) (local $minNormalV v128) (local $offsetV v128) (local $keepInfV v128)
    (local.set $scaleV (f32x4.splat (local.get $scale)))
    (local.set $maxV (f32x4.splat (local.get $max)))
    (local.set $minNormalV (i32x4.splat (local.get $minNormal)))
    (local.set $offsetV (i32x4.splat (local.get $magicOffset)))
    (local.set $keepInfV (i32x4.splat (i32.sub (i32.const 0) (local.get $keepInf))))
    (local.set $end (i32.add (local.get $p) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $x (v128.load (local.get $p)))
        (local.set $abs (v128.and (local.get $x) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff)))
        (local.set $y (f32x4.mul (local.get $abs) (local.get $scaleV)))
        (local.set $magic (i32x4.add
          (v128.and (i32x4.max_s (local.get $y) (local.get $minNormalV))
                    (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
          (local.get $offsetV)))
        (local.set $out
          (v128.or
            (f32x4.div
              (f32x4.min (f32x4.sub (f32x4.add (local.get $y) (local.get $magic)) (local.get $magic)) (local.get $maxV))
              (local.get $scaleV))
            (v128.and (local.get $x) (v128.const i32x4 0x80000000 0x80000000 0x80000000 0x80000000))))
        ;; Non-finite lanes: x itself for ±Inf when the format keeps it, else the canonical NaN.
        (v128.store (local.get $p)
          (v128.bitselect
            (v128.bitselect (local.get $x) (v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000)
              (v128.and (local.get $keepInfV)
                (i32x4.eq (local.get $abs) (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))))
            (local.get $out)
            (i32x4.ge_u (local.get $abs) (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))
        (br $vectors))))
)
