;; NVFP4 kernels (E2M1 elements in blocks of 16, an E4M3 scale per block, an FP32 scale per tensor),
;; bit-identical to src/mx/nvfp4.ts, whose header gives the definition. They work on whole blocks of
;; 16 contiguous floats (the caller sends rows whose length is a multiple of 16, in cache-sized
;; chunks). The caller runs block_amax over the whole tensor first (the tensor's finite amax gives
;; the tensor scales; for 16×16 tiles it merges the blocks' amax per tile), then per chunk
;; block_scales turns each block's amax into its E4M3 scale code, and the element kernels read them.
;; Every step is one float32 operation rounded to nearest even, as in the TypeScript:
;;   scale code: v = min(f32(amax_block · encSixth), 448), rounded to E4M3 by adding and subtracting
;;     2^(e + 20), e = clamp(exponent(v), −6, 8) (that power's ulp is E4M3's step 2^(e − 3)); the
;;     code is bits(v + magic) − bits(magic) + ((e + 6) << 3). A block with NaN or ±Inf gets 0x7F.
;;   per block: s = E4M3 value of the code (table at 64), enc = min(f32(1 / f32(s · decode)), FLT_MAX).
;;   per element: y = f32(x · enc); r = E2M1 rounding of |y| (add and subtract 2^(22 + b), b =
;;     clamp(exponent(|y|), 0, 2)), clamped at 6; q = f32(f32(r · s) · decode) (r · s is exact),
;;     with the sign bit set when y < 0. A NaN block fake-quantizes to NaN and gets codes 0.
(module
  (import "env" "memory" (memory 1))
  ;; Where this instance's statistics area starts (0 unless several instances share one memory).
  (import "env" "area" (global $area i32))

  ;; Statistics area at $area, added to by `stats` (offsets): 0 saturated, 4 flushed, 8 nonZero (u32),
  ;; 16 Σx², 24 Σ(x − q)² (f64). The scale histogram is counted by the caller from the scale codes.
  ;; 64..575 after $area: the value of each E4M3 code 0..127 (f32), written by the caller once.

  ;; Per block of 16 floats at $p: the largest |x| bit pattern (NaN patterns above +Inf's) to $out
  ;; (u32 per block). Returns the largest finite |x| bit pattern of all the blocks.
  (func (export "block_amax") (param $p i32) (param $blocks i32) (param $out i32) (result i32)
    (local $m v128) (local $bits v128) (local $finite v128) (local $abs v128) (local $inf v128) (local $v i32)
    (local.set $abs (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff))
    (local.set $inf (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $m (v128.const i32x4 0 0 0 0))
        (local.set $v (i32.const 0))
        (loop $vectors
          (local.set $bits (v128.and (v128.load (i32.add (local.get $p) (local.get $v))) (local.get $abs)))
          (local.set $m (i32x4.max_u (local.get $m) (local.get $bits)))
          (local.set $finite (i32x4.max_u (local.get $finite)
            (v128.and (local.get $bits) (i32x4.lt_u (local.get $bits) (local.get $inf)))))
          (local.set $v (i32.add (local.get $v) (i32.const 16)))
          (br_if $vectors (i32.lt_u (local.get $v) (i32.const 64))))
        ;; $laneMax written out: a call per block spilled the vector registers around it.
        (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $m) (local.get $m))))
        (i32.store (local.get $out) (i32x4.extract_lane 0
          (i32x4.max_u (local.get $m) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $m) (local.get $m)))))
        (local.set $p (i32.add (local.get $p) (i32.const 64)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop)))
    (call $laneMax (local.get $finite)))

  (func $laneMax (param $m v128) (result i32)
    (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $m) (local.get $m))))
    (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $m) (local.get $m))))
    (i32x4.extract_lane 0 (local.get $m)))

  ;; One E4M3 scale code per block at $out from the blocks' amax bits at $amax (u32 each).
  (func (export "block_scales") (param $amax i32) (param $blocks i32) (param $out i32) (param $encSixth f32)
    (local $a i32) (local $v f32) (local $magic i32) (local $end i32)
    (local.set $end (i32.add (local.get $out) (local.get $blocks)))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $a (i32.load (local.get $amax)))
        (if (i32.ge_u (local.get $a) (i32.const 0x7f800000))
          (then (i32.store8 (local.get $out) (i32.const 0x7f)))
          (else
            (local.set $v (f32.min (f32.mul (f32.reinterpret_i32 (local.get $a)) (local.get $encSixth)) (f32.const 448)))
            ;; 2^(e + 20): v's bits clamped to [2^−6, 2^8], exponent field kept, plus 20.
            (local.set $magic (i32.add
              (i32.and
                (select (i32.const 0x3c800000)
                  (select (i32.const 0x43800000) (i32.reinterpret_f32 (local.get $v))
                    (i32.gt_u (i32.reinterpret_f32 (local.get $v)) (i32.const 0x43800000)))
                  (i32.lt_u (i32.reinterpret_f32 (local.get $v)) (i32.const 0x3c800000)))
                (i32.const 0x7f800000))
              (i32.const 0x0a000000)))
            (i32.store8 (local.get $out)
              (i32.add
                (i32.sub (i32.reinterpret_f32 (f32.add (local.get $v) (f32.reinterpret_i32 (local.get $magic)))) (local.get $magic))
                (i32.shl (i32.sub (i32.shr_u (local.get $magic) (i32.const 23)) (i32.const 141)) (i32.const 3))))))
        (local.set $amax (i32.add (local.get $amax) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 1)))
        (br $blockLoop))))

  ;; The block's E4M3 scale value s (from the table) for a finite code.
  (func $scaleValue (param $code i32) (result f32)
    (f32.load offset=64 (i32.add (global.get $area) (i32.shl (local.get $code) (i32.const 2)))))

  ;; The block's element encode scale: min(f32(1 / f32(s · decode)), FLT_MAX) (s = 0 gives FLT_MAX).
  (func $encode (param $s f32) (param $decode f32) (result v128)
    (f32x4.splat (f32.min (f32.div (f32.const 1) (f32.mul (local.get $s) (local.get $decode))) (f32.const 0x1.fffffep+127))))

  ;; 2^(22 + b) per lane of a ≥ 0, b = clamp(exponent(a), 0, 2): a's bits clamped to [1.0, 4.0],
  ;; exponent kept, plus 22. (a + magic) − magic rounds a to E2M1's step in its binade, ties to even.
  (func $e2m1Magic (param $a v128) (result v128)
    (i32x4.add
      (v128.and
        (i32x4.min_s (i32x4.max_s (local.get $a) (v128.const f32x4 1 1 1 1)) (v128.const f32x4 4 4 4 4))
        (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
      (v128.const i32x4 0x0b000000 0x0b000000 0x0b000000 0x0b000000)))

  ;; 16 canonical quiet NaNs (what TypedArray.fill(NaN) writes) at $p.
  (func $fillNaN (param $p i32)
    (local $nan v128)
    (local.set $nan (v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000))
    (v128.store (local.get $p) (local.get $nan))
    (v128.store offset=16 (local.get $p) (local.get $nan))
    (v128.store offset=32 (local.get $p) (local.get $nan))
    (v128.store offset=48 (local.get $p) (local.get $nan)))

  ;; In place: x := dequantize(quantize(x)) for `blocks` blocks of 16 floats at $p.
  (func (export "fake_quant") (param $p i32) (param $blocks i32) (param $scales i32) (param $decodeScale f32)
    (local $code i32) (local $s f32) (local $enc v128) (local $sv v128) (local $decode v128) (local $v i32) (local $addr i32)
    (local $y v128) (local $q v128) (local $zero v128) (local $a v128) (local $magic v128) (local $one v128) (local $four v128) (local $six v128) (local $exponentMask v128) (local $plus22 v128) (local $signBit v128)
    (local.set $decode (f32x4.splat (local.get $decodeScale)))
    (local.set $one (v128.const f32x4 1 1 1 1))
    (local.set $four (v128.const f32x4 4 4 4 4))
    (local.set $six (v128.const f32x4 6 6 6 6))
    (local.set $exponentMask (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
    (local.set $plus22 (v128.const i32x4 0x0b000000 0x0b000000 0x0b000000 0x0b000000))
    (local.set $signBit (v128.const i32x4 0x80000000 0x80000000 0x80000000 0x80000000))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $code (i32.load8_u (local.get $scales)))
        (if (i32.eq (local.get $code) (i32.const 0x7f))
          (then (call $fillNaN (local.get $p)))
          (else
            (local.set $s (call $scaleValue (local.get $code)))
            (local.set $sv (f32x4.splat (local.get $s)))
            (local.set $enc (call $encode (local.get $s) (local.get $decodeScale)))
            (local.set $v (i32.const 0))
            (loop $vectors
              (local.set $addr (i32.add (local.get $p) (local.get $v)))
              (local.set $y (f32x4.mul (v128.load (local.get $addr)) (local.get $enc)))
              (local.set $a (f32x4.abs (local.get $y)))
              (local.set $magic (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $a) (local.get $one)) (local.get $four)) (local.get $exponentMask))
                (local.get $plus22)))
              (local.set $q (v128.or
                (f32x4.mul
                  (f32x4.mul
                    (f32x4.min (f32x4.sub (f32x4.add (local.get $a) (local.get $magic)) (local.get $magic)) (local.get $six))
                    (local.get $sv))
                  (local.get $decode))
                (v128.and (f32x4.lt (local.get $y) (local.get $zero)) (local.get $signBit))))
              (v128.store (local.get $addr) (local.get $q))
              (local.set $v (i32.add (local.get $v) (i32.const 16)))
              (br_if $vectors (i32.lt_u (local.get $v) (i32.const 64))))))
        (local.set $p (i32.add (local.get $p) (i32.const 64)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop))))

  ;; Adds the element statistics of quantizing the `blocks` blocks at $p (not yet fake-quantized) to
  ;; the statistics area; NaN blocks add nothing. Saturated: |y| ≥ 7 (it rounded past 6 before the
  ;; clamp). Sums in double, like the TypeScript, in two f64 lanes per call (lane 0 takes elements 0
  ;; and 2 of every four, lane 1 elements 1 and 3, each as x_a² + x_b² then added; the lanes added
  ;; once at the end): the checkpoint report's bits depend on this association. The sums work on |x|
  ;; and |q|: q is ±0 or has x's sign, so (x − q)² = (|x| − |q|)², bit for bit.
  (func (export "stats") (param $p i32) (param $blocks i32) (param $scales i32) (param $decodeScale f32)
    (local $code i32) (local $s f32) (local $enc v128) (local $sv v128) (local $decode v128) (local $addr i32) (local $blockEnd i32)
    (local $x v128) (local $a v128) (local $r v128) (local $q v128) (local $zero v128)
    (local $saturated v128) (local $flushed v128) (local $nonZero v128) (local $nz v128) (local $signal v128) (local $error v128)
    (local $xl v128) (local $xh v128)
    (local.set $decode (f32x4.splat (local.get $decodeScale)))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $code (i32.load8_u (local.get $scales)))
        (if (i32.ne (local.get $code) (i32.const 0x7f))
          (then
            ;; $scaleValue and $encode written out: a call per block spilled every vector register around it.
            (local.set $s (f32.load offset=64 (i32.add (global.get $area) (i32.shl (local.get $code) (i32.const 2)))))
            (local.set $sv (f32x4.splat (local.get $s)))
            (local.set $enc (f32x4.splat (f32.min (f32.div (f32.const 1) (f32.mul (local.get $s) (local.get $decodeScale))) (f32.const 0x1.fffffep+127))))
            (local.set $addr (local.get $p))
            (local.set $blockEnd (i32.add (local.get $p) (i32.const 64)))
            (loop $vectors
              (local.set $x (v128.and (v128.load (local.get $addr)) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff)))
              ;; |y| = |x|·enc (enc > 0).
              (local.set $a (f32x4.mul (local.get $x) (local.get $enc)))
              ;; r: |y| rounded on the E2M1 grid (2^(22 + b) as in $e2m1Magic, written out: a call per vector costs more than the rest).
              (local.set $r (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $a) (v128.const f32x4 1 1 1 1)) (v128.const f32x4 4 4 4 4))
                          (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
                (v128.const i32x4 0x0b000000 0x0b000000 0x0b000000 0x0b000000)))
              (local.set $r (f32x4.sub (f32x4.add (local.get $a) (local.get $r)) (local.get $r)))
              ;; |q|. pmin(r, 6) is min(r, 6) here: it returns r unless 6 < r, so a NaN r (|y| = Inf: a
              ;; block with scale code 0 has enc = FLT_MAX) stays NaN, as with min.
              (local.set $q (f32x4.mul (f32x4.mul (f32x4.pmin (local.get $r) (v128.const f32x4 6 6 6 6)) (local.get $sv)) (local.get $decode)))
              ;; Comparison masks are −1 per true lane, so subtracting them counts.
              (local.set $saturated (i32x4.sub (local.get $saturated) (f32x4.ge (local.get $a) (v128.const f32x4 7 7 7 7))))
              (local.set $nz (f32x4.ne (local.get $x) (local.get $zero)))
              (local.set $nonZero (i32x4.sub (local.get $nonZero) (local.get $nz)))
              (local.set $flushed (i32x4.sub (local.get $flushed)
                (v128.and (local.get $nz) (f32x4.eq (local.get $q) (local.get $zero)))))
              (local.set $xl (f64x2.promote_low_f32x4 (local.get $x)))
              (local.set $xh (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $x) (local.get $x))))
              (local.set $signal (f64x2.add (local.get $signal) (f64x2.add (f64x2.mul (local.get $xl) (local.get $xl)) (f64x2.mul (local.get $xh) (local.get $xh)))))
              (local.set $xl (f64x2.sub (local.get $xl) (f64x2.promote_low_f32x4 (local.get $q))))
              (local.set $xh (f64x2.sub (local.get $xh) (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $q) (local.get $q)))))
              (local.set $error (f64x2.add (local.get $error) (f64x2.add (f64x2.mul (local.get $xl) (local.get $xl)) (f64x2.mul (local.get $xh) (local.get $xh)))))
              (local.set $addr (i32.add (local.get $addr) (i32.const 16)))
              (br_if $vectors (i32.lt_u (local.get $addr) (local.get $blockEnd))))))
        (local.set $p (i32.add (local.get $p) (i32.const 64)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop)))
    (i32.store offset=0 (global.get $area) (i32.add (i32.load offset=0 (global.get $area)) (call $countSum (local.get $saturated))))
    (i32.store offset=4 (global.get $area) (i32.add (i32.load offset=4 (global.get $area)) (call $countSum (local.get $flushed))))
    (i32.store offset=8 (global.get $area) (i32.add (i32.load offset=8 (global.get $area)) (call $countSum (local.get $nonZero))))
    (f64.store offset=16 (global.get $area) (f64.add (f64.load offset=16 (global.get $area)) (call $pairSum (local.get $signal))))
    (f64.store offset=24 (global.get $area) (f64.add (f64.load offset=24 (global.get $area)) (call $pairSum (local.get $error)))))

  (func $pairSum (param $v v128) (result f64)
    (f64.add (f64x2.extract_lane 0 (local.get $v)) (f64x2.extract_lane 1 (local.get $v))))

  (func $countSum (param $v v128) (result i32)
    (i32.add
      (i32.add (i32x4.extract_lane 0 (local.get $v)) (i32x4.extract_lane 1 (local.get $v)))
      (i32.add (i32x4.extract_lane 2 (local.get $v)) (i32x4.extract_lane 3 (local.get $v)))))

  ;; One E2M1 code byte per element at $codes. a + magic lies in magic's binade, where consecutive
  ;; float32 bit patterns are consecutive grid points, so bits(a + magic) − bits(magic) is a's
  ;; rounded multiple of the step and the grid index is that plus 2b, 2b = (bits(magic) >> 22) −
  ;; 298, saturated at 7 (also for |y| = ±Inf); plus 8 when y < 0. A NaN block gets codes 0.
  (func (export "quantize") (param $p i32) (param $blocks i32) (param $codes i32) (param $scales i32) (param $decodeScale f32)
    (local $code i32) (local $enc v128) (local $v i32) (local $y v128) (local $a v128) (local $magic v128) (local $c v128)
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $code (i32.load8_u (local.get $scales)))
        (if (i32.eq (local.get $code) (i32.const 0x7f))
          (then (v128.store (local.get $codes) (v128.const i32x4 0 0 0 0)))
          (else
            (local.set $enc (call $encode (call $scaleValue (local.get $code)) (local.get $decodeScale)))
            (local.set $v (i32.const 0))
            (loop $vectors
              (local.set $y (f32x4.mul (v128.load (i32.add (local.get $p) (i32.shl (local.get $v) (i32.const 2)))) (local.get $enc)))
              (local.set $a (f32x4.abs (local.get $y)))
              (local.set $magic (call $e2m1Magic (local.get $a)))
              (local.set $c
                (v128.or
                  (i32x4.min_s
                    (i32x4.add
                      (i32x4.sub (f32x4.add (local.get $a) (local.get $magic)) (local.get $magic))
                      (i32x4.sub (i32x4.shr_u (local.get $magic) (i32.const 22)) (v128.const i32x4 298 298 298 298)))
                    (v128.const i32x4 7 7 7 7))
                  (v128.and (f32x4.lt (local.get $y) (v128.const i32x4 0 0 0 0)) (v128.const i32x4 8 8 8 8))))
              (local.set $c (i16x8.narrow_i32x4_u (local.get $c) (local.get $c)))
              (v128.store32_lane 0 (i32.add (local.get $codes) (local.get $v))
                (i8x16.narrow_i16x8_u (local.get $c) (local.get $c)))
              (local.set $v (i32.add (local.get $v) (i32.const 4)))
              (br_if $vectors (i32.lt_u (local.get $v) (i32.const 16))))))
        (local.set $p (i32.add (local.get $p) (i32.const 64)))
        (local.set $codes (i32.add (local.get $codes) (i32.const 16)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop))))
)
