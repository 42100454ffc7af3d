;; MXFP4 kernels (OCP MX v1.0 §6.3, exact arithmetic), bit-identical to src/mx/mxfp4-ts.ts.
;; They work on whole blocks of 32 contiguous floats (the caller sends rows whose length is a multiple
;; of 32, in cache-sized chunks), after scale_bytes has written the blocks' scale bytes. Per block:
;;   amax bits = max of |x| bits; field = amax >> 23; NaN/Inf (field 255) → scale byte 0xFF, all NaN.
;;   byte = max(field − 2, 0): floor(log2 amax) − 2 clamped at −127, read straight from the bits.
;;   p = x · 2^(127−byte) + 0 in float32: exact unless it underflows; adding +0 turns −0 into +0, so
;;   p's sign bit is exactly the code's sign (set for negative x unless x/2^shared is 0). s = |p|.
;;   Round s on the E2M1 grid by adding and subtracting 2^(22+b), b = clamp(exponent(s), 0, 2): in
;;   that binade the float32 ulp is the grid step (0.5, 1 or 2), and the add rounds ties to even.
;;   (Positive floats order like their bits, so clamping the bits of s to [1.0, 4.0] clamps b.)
;;   Clamp at 6, then put p's sign on.
;; fake_quant_sr rounds stochastically instead, from one random u32 per element (fill_random writes
;; them from the same xoshiro128** stream as src/mx/rng.ts): with t = s / step and f = t − floor(t),
;; it rounds up when r + floor(f·2^32) carries past 2^32, i.e. when f + r/2^32 ≥ 1: the same event,
;; bit for bit, as the TypeScript kernel's floor(t + r/2^32).
(module
  (import "env" "memory" (memory 1))
  ;; Where this instance's statistics area starts (0 unless several instances share one memory).
  (import "env" "area" (global $area i32))

  ;; Statistics area at $area, added to by `stats` (offsets):
  ;;   0..1023 histogram (u32 per scale byte), 1024 saturated, 1028 flushed, 1032 nonZero (u32),
  ;;   1040 Σx², 1048 Σ(x − q)² (f64).

  ;; One scale byte per block of 32 floats at $p, written to $out (0xFF when the block holds NaN or
  ;; ±Inf). A separate pass, so the per-element kernels read the byte instead of calling per block.
  ;; $rule (src/mx/scale-rule.ts): 0 floor, max(field − 2, 0); 1 even, the same on the field of
  ;; amax + 2^21 (amax rounded half up to E2M1's 1 mantissa bit); 2 rceil, ceil(log2(f32(amax / 6)))
  ;; + 127 clamped at 0: d's field, plus one unless d is a power of two; a subnormal d gives 1 when
  ;; it exceeds 2^−127, else 0.
  (func (export "scale_bytes") (param $p i32) (param $blocks i32) (param $out i32) (param $rule i32)
    (local $m v128) (local $field i32) (local $end i32) (local $amax i32) (local $d i32)
    (local.set $end (i32.add (local.get $out) (local.get $blocks)))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $m (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff))
        (local.set $m
          (i32x4.max_u
            (i32x4.max_u
              (i32x4.max_u (v128.and (v128.load (local.get $p)) (local.get $m))
                           (v128.and (v128.load offset=16 (local.get $p)) (local.get $m)))
              (i32x4.max_u (v128.and (v128.load offset=32 (local.get $p)) (local.get $m))
                           (v128.and (v128.load offset=48 (local.get $p)) (local.get $m))))
            (i32x4.max_u
              (i32x4.max_u (v128.and (v128.load offset=64 (local.get $p)) (local.get $m))
                           (v128.and (v128.load offset=80 (local.get $p)) (local.get $m)))
              (i32x4.max_u (v128.and (v128.load offset=96 (local.get $p)) (local.get $m))
                           (v128.and (v128.load offset=112 (local.get $p)) (local.get $m))))))
        (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $m) (local.get $m))))
        (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $m) (local.get $m))))
        (local.set $amax (i32x4.extract_lane 0 (local.get $m)))
        (local.set $field (i32.shr_u (local.get $amax) (i32.const 23)))
        (i32.store8 (local.get $out)
          (if (result i32) (i32.eq (local.get $field) (i32.const 255))
            (then (i32.const 255))
            (else
              (if (result i32) (i32.eq (local.get $rule) (i32.const 2))
                (then
                  (local.set $d (i32.reinterpret_f32 (f32.div (f32.reinterpret_i32 (local.get $amax)) (f32.const 6))))
                  (if (result i32) (i32.shr_u (local.get $d) (i32.const 23))
                    (then (i32.add (i32.shr_u (local.get $d) (i32.const 23)) (i32.ne (i32.and (local.get $d) (i32.const 0x7fffff)) (i32.const 0))))
                    (else (i32.gt_u (local.get $d) (i32.const 0x400000)))))
                (else
                  (if (i32.eq (local.get $rule) (i32.const 1))
                    (then (local.set $field (i32.shr_u (i32.add (local.get $amax) (i32.const 0x200000)) (i32.const 23)))))
                  (select (i32.sub (local.get $field) (i32.const 2)) (i32.const 0) (i32.gt_u (local.get $field) (i32.const 2))))))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $out (i32.add (local.get $out) (i32.const 1)))
        (br $blockLoop))))

  ;; A NaN-scale block dequantizes to NaN (the canonical quiet NaN, as TypedArray.fill(NaN) writes).
  (func $fillNaN (param $p i32)
    (local $nan v128)
    (local.set $nan (v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000))
    (v128.store (local.get $p) (local.get $nan))
    (v128.store offset=16 (local.get $p) (local.get $nan))
    (v128.store offset=32 (local.get $p) (local.get $nan))
    (v128.store offset=48 (local.get $p) (local.get $nan))
    (v128.store offset=64 (local.get $p) (local.get $nan))
    (v128.store offset=80 (local.get $p) (local.get $nan))
    (v128.store offset=96 (local.get $p) (local.get $nan))
    (v128.store offset=112 (local.get $p) (local.get $nan)))

  ;; In place: x := dequantize(quantize(x)) for `blocks` blocks of 32 floats at $p.
  (func (export "fake_quant") (param $p i32) (param $blocks i32) (param $scales i32)
    (local $byte i32) (local $addr i32) (local $blockEnd i32)
    (local $inv v128) (local $scale v128) (local $x v128) (local $s v128) (local $magic v128) (local $signed v128) (local $zero v128)
    (local $one v128) (local $four v128) (local $exponentMask v128) (local $plus22 v128) (local $six v128) (local $signBit v128)
    (local.set $one (v128.const f32x4 1 1 1 1))
    (local.set $four (v128.const f32x4 4 4 4 4))
    (local.set $exponentMask (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
    (local.set $plus22 (v128.const i32x4 0x0b000000 0x0b000000 0x0b000000 0x0b000000))
    (local.set $six (v128.const f32x4 6 6 6 6))
    (local.set $signBit (v128.const i32x4 0x80000000 0x80000000 0x80000000 0x80000000))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $byte (i32.load8_u (local.get $scales)))
        (if (i32.eq (local.get $byte) (i32.const 255))
          (then
            (call $fillNaN (local.get $p)))
          (else
            (local.set $inv (i32x4.splat (i32.shl (i32.sub (i32.const 254) (local.get $byte)) (i32.const 23))))
            (local.set $scale (i32x4.splat (select (i32.shl (local.get $byte) (i32.const 23)) (i32.const 0x00400000) (local.get $byte))))
            (local.set $addr (local.get $p))
            (local.set $blockEnd (i32.add (local.get $p) (i32.const 128)))
            (loop $vectors
              (local.set $x (v128.load (local.get $addr)))
              (local.set $signed (f32x4.add (f32x4.mul (local.get $x) (local.get $inv)) (local.get $zero)))
              (local.set $s (f32x4.abs (local.get $signed)))
              ;; magic = 2^(22+b): clamp s's bits to [1.0, 4.0], keep the exponent, add 22 to it.
              (local.set $magic (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $s) (local.get $one)) (local.get $four)) (local.get $exponentMask))
                (local.get $plus22)))
              (v128.store (local.get $addr)
                (v128.or
                  (f32x4.mul
                    (f32x4.min (f32x4.sub (f32x4.add (local.get $s) (local.get $magic)) (local.get $magic)) (local.get $six))
                    (local.get $scale))
                  (v128.and (local.get $signed) (local.get $signBit))))
              (local.set $addr (i32.add (local.get $addr) (i32.const 16)))
              (br_if $vectors (i32.lt_u (local.get $addr) (local.get $blockEnd))))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop))))

  ;; Adds the statistics of quantizing the `blocks` blocks at $p (not yet fake-quantized) to the
  ;; statistics area; a pass of its own so the fake-quant loop carries no statistics branch. It works
  ;; on the scaled magnitudes s = |x|·2^−shared alone, without forming q, and every count is one
  ;; comparison of s (see the element rules in the header): rounded past 6 ⇔ s ≥ 7 (7 is a tie that
  ;; goes to 8); rounded to 0 ⇔ s ≤ 0.25 (a tie that goes to 0), so flushed = #(s ≤ 0.25) − #(x = 0),
  ;; the zeros being among them; nonZero = 32 per finite block − #(x = 0).
  ;; The sums keep one association, which the checkpoint report's bits depend on: per block, four
  ;; float32 lanes (lane k takes elements k, k + 4, …, in order) of s² and (s − min(r, 6))²; the lanes
  ;; added in double as (l0 + l1) + (l2 + l3), times 2^(2·shared), added to one double per call.
  ;; Signal and error go side by side in the two lanes of an f64x2, which is the same arithmetic.
  (func (export "stats") (param $p i32) (param $blocks i32) (param $scales i32)
    (local $byte i32) (local $counter i32) (local $addr i32) (local $blockEnd i32) (local $finite i32)
    (local $inv v128) (local $x v128) (local $s v128) (local $r v128) (local $d v128) (local $zero v128)
    (local $saturated v128) (local $small v128) (local $zeros v128) (local $signal v128) (local $error v128)
    (local $sums v128)
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $byte (i32.load8_u (local.get $scales)))
        (local.set $counter (i32.add (global.get $area) (i32.shl (local.get $byte) (i32.const 2))))
        (i32.store (local.get $counter) (i32.add (i32.load (local.get $counter)) (i32.const 1)))
        (if (i32.ne (local.get $byte) (i32.const 255))
          (then
            (local.set $finite (i32.add (local.get $finite) (i32.const 1)))
            (local.set $inv (i32x4.splat (i32.shl (i32.sub (i32.const 254) (local.get $byte)) (i32.const 23))))
            (local.set $signal (local.get $zero))
            (local.set $error (local.get $zero))
            (local.set $addr (local.get $p))
            (local.set $blockEnd (i32.add (local.get $p) (i32.const 128)))
            (loop $vectors
              (local.set $x (v128.load (local.get $addr)))
              (local.set $s (v128.and (f32x4.mul (local.get $x) (local.get $inv)) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff)))
              ;; Comparison masks are −1 per true lane, so subtracting them counts.
              (local.set $zeros (i32x4.sub (local.get $zeros) (f32x4.eq (local.get $x) (local.get $zero))))
              (local.set $small (i32x4.sub (local.get $small) (f32x4.le (local.get $s) (v128.const f32x4 0.25 0.25 0.25 0.25))))
              (local.set $saturated (i32x4.sub (local.get $saturated) (f32x4.ge (local.get $s) (v128.const f32x4 7 7 7 7))))
              ;; r: s rounded on the E2M1 grid (add and subtract 2^(22+b), see the header).
              (local.set $r (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $s) (v128.const f32x4 1 1 1 1)) (v128.const f32x4 4 4 4 4))
                          (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
                (v128.const i32x4 0x0b000000 0x0b000000 0x0b000000 0x0b000000)))
              (local.set $r (f32x4.sub (f32x4.add (local.get $s) (local.get $r)) (local.get $r)))
              ;; Squares of the scaled values (< 64, so float32 cannot overflow); |x − q| = |s − min(r, 6)|·2^shared.
              ;; pmin is min here: r is never NaN in a finite block.
              (local.set $signal (f32x4.add (local.get $signal) (f32x4.mul (local.get $s) (local.get $s))))
              (local.set $d (f32x4.sub (local.get $s) (f32x4.pmin (local.get $r) (v128.const f32x4 6 6 6 6))))
              (local.set $error (f32x4.add (local.get $error) (f32x4.mul (local.get $d) (local.get $d))))
              (local.set $addr (i32.add (local.get $addr) (i32.const 16)))
              (br_if $vectors (i32.lt_u (local.get $addr) (local.get $blockEnd))))
            ;; [Σsignal, Σerror] += ((l0 + l1) + (l2 + l3)) · 2^(2·shared), both sums at once.
            (local.set $sums (f64x2.add (local.get $sums) (f64x2.mul
              (f64x2.add
                (f64x2.add
                  (f64x2.promote_low_f32x4 (i8x16.shuffle 0 1 2 3 16 17 18 19 0 1 2 3 0 1 2 3 (local.get $signal) (local.get $error)))
                  (f64x2.promote_low_f32x4 (i8x16.shuffle 4 5 6 7 20 21 22 23 0 1 2 3 0 1 2 3 (local.get $signal) (local.get $error))))
                (f64x2.add
                  (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 24 25 26 27 0 1 2 3 0 1 2 3 (local.get $signal) (local.get $error)))
                  (f64x2.promote_low_f32x4 (i8x16.shuffle 12 13 14 15 28 29 30 31 0 1 2 3 0 1 2 3 (local.get $signal) (local.get $error)))))
              ;; Back to x units: × 2^(2·shared), exact in double.
              (i64x2.splat (i64.shl
                (i64.extend_i32_u (i32.add (i32.const 769) (i32.shl (local.get $byte) (i32.const 1))))
                (i64.const 52))))))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop)))
    (i32.store offset=1024 (global.get $area) (i32.add (i32.load offset=1024 (global.get $area)) (call $countSum (local.get $saturated))))
    (i32.store offset=1028 (global.get $area) (i32.add (i32.load offset=1028 (global.get $area))
      (i32.sub (call $countSum (local.get $small)) (call $countSum (local.get $zeros)))))
    (i32.store offset=1032 (global.get $area) (i32.add (i32.load offset=1032 (global.get $area))
      (i32.sub (i32.shl (local.get $finite) (i32.const 5)) (call $countSum (local.get $zeros)))))
    (f64.store offset=1040 (global.get $area) (f64.add (f64.load offset=1040 (global.get $area)) (f64x2.extract_lane 0 (local.get $sums))))
    (f64.store offset=1048 (global.get $area) (f64.add (f64.load offset=1048 (global.get $area)) (f64x2.extract_lane 1 (local.get $sums)))))

  (func $countSum (param $v v128) (result i32)
    (i32.add
      (i32.add (i32x4.extract_lane 0 (local.get $v)) (i32x4.extract_lane 1 (local.get $v)))
      (i32.add (i32x4.extract_lane 2 (local.get $v)) (i32x4.extract_lane 3 (local.get $v)))))

  ;; One code byte per element at $codes, from the scale bytes at $scales. s + magic lies in
  ;; magic's binade, where consecutive float32 bit patterns are consecutive grid points, so the
  ;; integer bits(s + magic) − bits(magic) is the rounded multiple q of the step, and the grid index
  ;; is q + 2b with 2b = (bits(magic) >> 22) − 298, saturated at 7; plus 8 for the sign.
  (func (export "quantize") (param $p i32) (param $blocks i32) (param $codes i32) (param $scales i32)
    (local $byte i32) (local $v i32) (local $inv v128) (local $x v128) (local $s v128) (local $magic v128)
    (local $code v128) (local $signed v128) (local $zero v128)
    (local $one v128) (local $four v128) (local $exponentMask v128) (local $plus22 v128) (local $signBit v128)
    (local $k298 v128) (local $seven v128)
    (local.set $k298 (i32x4.splat (i32.const 298)))
    (local.set $seven (i32x4.splat (i32.const 7)))
    (local.set $one (v128.const f32x4 1 1 1 1))
    (local.set $four (v128.const f32x4 4 4 4 4))
    (local.set $exponentMask (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
    (local.set $plus22 (v128.const i32x4 0x0b000000 0x0b000000 0x0b000000 0x0b000000))
    (local.set $signBit (v128.const i32x4 0x80000000 0x80000000 0x80000000 0x80000000))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $byte (i32.load8_u (local.get $scales)))
        (if (i32.eq (local.get $byte) (i32.const 255))
          (then
            (v128.store (local.get $codes) (v128.const i32x4 0 0 0 0))
            (v128.store offset=16 (local.get $codes) (v128.const i32x4 0 0 0 0)))
          (else
            (local.set $inv (i32x4.splat (i32.shl (i32.sub (i32.const 254) (local.get $byte)) (i32.const 23))))
            (local.set $v (i32.const 0))
            (loop $vectors
              (local.set $x (v128.load (i32.add (local.get $p) (i32.shl (local.get $v) (i32.const 2)))))
              (local.set $signed (f32x4.add (f32x4.mul (local.get $x) (local.get $inv)) (local.get $zero)))
              (local.set $s (f32x4.abs (local.get $signed)))
              (local.set $magic (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $s) (local.get $one)) (local.get $four)) (local.get $exponentMask))
                (local.get $plus22)))
              (local.set $code
                (v128.or
                  (i32x4.min_s
                    (i32x4.add
                      (i32x4.sub (f32x4.add (local.get $s) (local.get $magic)) (local.get $magic))
                      (i32x4.sub (i32x4.shr_u (local.get $magic) (i32.const 22)) (local.get $k298)))
                    (local.get $seven))
                  (i32x4.shr_u
                    (v128.and (local.get $signed) (local.get $signBit))
                    (i32.const 28))))
              (local.set $code (i16x8.narrow_i32x4_u (local.get $code) (local.get $code)))
              (v128.store32_lane 0 (i32.add (local.get $codes) (local.get $v))
                (i8x16.narrow_i16x8_u (local.get $code) (local.get $code)))
              (local.set $v (i32.add (local.get $v) (i32.const 4)))
              (br_if $vectors (i32.lt_u (local.get $v) (i32.const 32))))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $codes (i32.add (local.get $codes) (i32.const 32)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop))))

  ;; Writes `count` u32 from the xoshiro128** state at $state (4 words, updated) to $dst.
  (func (export "fill_random") (param $dst i32) (param $count i32) (param $state i32)
    (local $s0 i32) (local $s1 i32) (local $s2 i32) (local $s3 i32) (local $t i32) (local $end i32)
    (local.set $s0 (i32.load (local.get $state)))
    (local.set $s1 (i32.load offset=4 (local.get $state)))
    (local.set $s2 (i32.load offset=8 (local.get $state)))
    (local.set $s3 (i32.load offset=12 (local.get $state)))
    (local.set $end (i32.add (local.get $dst) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $draws
        (br_if $done (i32.ge_u (local.get $dst) (local.get $end)))
        (i32.store (local.get $dst)
          (i32.mul (i32.rotl (i32.mul (local.get $s1) (i32.const 5)) (i32.const 7)) (i32.const 9)))
        (local.set $t (i32.shl (local.get $s1) (i32.const 9)))
        (local.set $s2 (i32.xor (local.get $s2) (local.get $s0)))
        (local.set $s3 (i32.xor (local.get $s3) (local.get $s1)))
        (local.set $s1 (i32.xor (local.get $s1) (local.get $s2)))
        (local.set $s0 (i32.xor (local.get $s0) (local.get $s3)))
        (local.set $s2 (i32.xor (local.get $s2) (local.get $t)))
        (local.set $s3 (i32.rotl (local.get $s3) (i32.const 11)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
        (br $draws)))
    (i32.store (local.get $state) (local.get $s0))
    (i32.store offset=4 (local.get $state) (local.get $s1))
    (i32.store offset=8 (local.get $state) (local.get $s2))
    (i32.store offset=12 (local.get $state) (local.get $s3)))

  ;; In place: x := x · factor in float32, for `count` floats (the SR pre-scale and its undoing).
  (func (export "scale_in_place") (param $p i32) (param $count i32) (param $factor f32)
    (local $end i32) (local $f v128)
    (local.set $f (f32x4.splat (local.get $factor)))
    (local.set $end (i32.add (local.get $p) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (v128.store (local.get $p) (f32x4.mul (v128.load (local.get $p)) (local.get $f)))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))
        (br $vectors))))

  ;; In place, stochastic rounding: x := dequantize(quantize(x)) with the random u32 at $random
  ;; (one per element, consumed by NaN blocks too).
  (func (export "fake_quant_sr") (param $p i32) (param $blocks i32) (param $scales i32) (param $random i32)
    (local $byte i32) (local $v i32) (local $inv v128) (local $scale v128) (local $x v128) (local $signed v128)
    (local $s v128) (local $binadeBits v128) (local $t v128) (local $floor v128) (local $draw v128) (local $up v128)
    (local $q v128) (local $zero v128)
    (local $one v128) (local $four v128) (local $exponentMask v128) (local $six v128) (local $signBit v128)
    (local.set $one (v128.const f32x4 1 1 1 1))
    (local.set $four (v128.const f32x4 4 4 4 4))
    (local.set $exponentMask (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
    (local.set $six (v128.const f32x4 6 6 6 6))
    (local.set $signBit (v128.const i32x4 0x80000000 0x80000000 0x80000000 0x80000000))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $byte (i32.load8_u (local.get $scales)))
        (local.set $inv (i32x4.splat (i32.shl (i32.sub (i32.const 254) (local.get $byte)) (i32.const 23))))
        (local.set $scale (i32x4.splat (select (i32.shl (local.get $byte) (i32.const 23)) (i32.const 0x00400000) (local.get $byte))))
        (local.set $v (i32.const 0))
        (loop $vectors
          (local.set $x (v128.load (i32.add (local.get $p) (local.get $v))))
          (local.set $signed (f32x4.add (f32x4.mul (local.get $x) (local.get $inv)) (local.get $zero)))
          (local.set $s (f32x4.abs (local.get $signed)))
          ;; (127 + b) << 23, b = clamp(exponent(s), 0, 2); the step is 2^(b−1).
          (local.set $binadeBits
            (v128.and (i32x4.min_s (i32x4.max_s (local.get $s) (local.get $one)) (local.get $four)) (local.get $exponentMask)))
          ;; t = s / step = s · 2^(1−b), exact; 2^(1−b) has bits (255 << 23) − binadeBits.
          (local.set $t (f32x4.mul (local.get $s)
            (i32x4.sub (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000) (local.get $binadeBits))))
          (local.set $floor (f32x4.floor (local.get $t)))
          (local.set $draw (v128.load (i32.add (local.get $random) (local.get $v))))
          ;; Carry out of draw + floor(frac(t)·2^32): the unsigned sum wraps below draw. Masks are −1.
          (local.set $up (i32x4.lt_u
            (i32x4.add (local.get $draw)
              (i32x4.trunc_sat_f32x4_u (f32x4.mul (f32x4.sub (local.get $t) (local.get $floor))
                                                  (v128.const f32x4 4294967296 4294967296 4294967296 4294967296))))
            (local.get $draw)))
          (local.set $q (i32x4.sub (i32x4.trunc_sat_f32x4_u (local.get $floor)) (local.get $up)))
          ;; q · step, clamped at 6, scaled back, signed; 2^(b−1) has bits binadeBits − (1 << 23).
          (v128.store (i32.add (local.get $p) (local.get $v))
            (v128.or
              (f32x4.mul
                (f32x4.min
                  (f32x4.mul (f32x4.convert_i32x4_u (local.get $q))
                             (i32x4.sub (local.get $binadeBits) (v128.const i32x4 0x00800000 0x00800000 0x00800000 0x00800000)))
                  (local.get $six))
                (local.get $scale))
              (v128.and (local.get $signed) (local.get $signBit))))
          (local.set $v (i32.add (local.get $v) (i32.const 16)))
          (br_if $vectors (i32.lt_u (local.get $v) (i32.const 128))))
        (if (i32.eq (local.get $byte) (i32.const 255))
          (then (call $fillNaN (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $random (i32.add (local.get $random) (i32.const 128)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop))))
)
