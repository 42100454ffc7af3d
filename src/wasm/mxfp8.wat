;; MXFP8 kernels (OCP MX v1.0, E4M3 or E5M2 elements, blocks of 32, E8M0 scales), bit-identical to
;; src/mx/mxfp8.ts. They work on whole blocks of 32 contiguous floats (the caller sends rows whose
;; length is a multiple of 32, in cache-sized chunks), after scale_bytes has written the blocks'
;; scale bytes. The element format comes in as parameters (src/mx/mxfp8-wasm.ts computes them):
;;   $emax floor(log2 max), $mantissaBits m, $max the largest finite element (448 or 57344),
;;   $low / $high the float32 bits of 2^minExponent and 2^(emax + 1) (the binades an element can
;;   fall in), $magicAdd (23 − m) << 23.
;; Per element of a finite block with shared exponent k (scale byte k + 127):
;;   s = |x| · 2^−k in float32 (exact, or a float32 subnormal that rounds to 0 on any FP8 grid).
;;   Round s on the FP8 grid by adding and subtracting 2^(e + 23 − m), e = clamp(exponent(s),
;;   minExponent, emax + 1): that power's float32 ulp is the grid step 2^(e − m) in s's binade (the
;;   subnormal step below the smallest normal), and the add rounds ties to even. Positive floats
;;   order like their bits, so clamping s's bits to [$low, $high] and keeping the exponent field
;;   gives 2^e; adding $magicAdd to the bits multiplies it by 2^(23 − m).
;;   Clamp at $max (saturating), multiply by 2^k (one float32 rounding, as the TypeScript does in
;;   double then rounds once), and put x's sign bit on (−0 stays −0, as in the TypeScript).
;; A block holding NaN or ±Inf gets scale byte 0xFF and fake-quantizes to NaN (code 0x7F).
(module
  (import "env" "memory" (memory 1))
  ;; Where this instance's statistics area starts (0 unless several instances share one memory).
  (import "env" "area" (global $area i32))

  ;; Statistics area at $area, added to by `stats` (offsets): 0 saturated, 4 flushed, 8 nonZero (u32),
  ;; 16 Σx², 24 Σ(x − q)² (f64), 64..1087 the scale histogram (u32 per scale byte).

  ;; The largest |x| bit pattern of the 32 floats at $p (NaN patterns above +Inf's).
  (func $blockAmax (param $p i32) (result i32)
    (local $m v128)
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
    (i32x4.extract_lane 0 (local.get $m)))

  ;; One scale byte per block of 32 floats at $p, written to $out (src/mx/scale-rule.ts, $rule:
  ;; 0 floor, 1 even, 2 rceil): floor is max(field − emax, 0); even the same on the field of amax
  ;; plus half an element ulp (1 << (22 − m)); rceil ceil(log2(f32(amax / max))) + 127 clamped at
  ;; 0: d's field, plus one unless d is a power of two; a subnormal d gives 1 when it exceeds
  ;; 2^−127, else 0. No rule reaches 255 from a finite amax for these element formats.
  (func (export "scale_bytes") (param $p i32) (param $blocks i32) (param $out i32) (param $rule i32)
    (param $emax i32) (param $mantissaBits i32) (param $max f32)
    (local $field i32) (local $end i32) (local $amax i32) (local $d i32)
    (local.set $end (i32.add (local.get $out) (local.get $blocks)))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $amax (call $blockAmax (local.get $p)))
        (local.set $field (i32.shr_u (local.get $amax) (i32.const 23)))
        (i32.store8 (local.get $out)
          (if (result i32) (i32.eq (local.get $field) (i32.const 255))
            (then (i32.const 255))
            (else
              (if (result i32) (i32.eq (local.get $rule) (i32.const 2))
                (then
                  (local.set $d (i32.reinterpret_f32 (f32.div (f32.reinterpret_i32 (local.get $amax)) (local.get $max))))
                  (if (result i32) (i32.shr_u (local.get $d) (i32.const 23))
                    (then (i32.add (i32.shr_u (local.get $d) (i32.const 23)) (i32.ne (i32.and (local.get $d) (i32.const 0x7fffff)) (i32.const 0))))
                    (else (i32.gt_u (local.get $d) (i32.const 0x400000)))))
                (else
                  (if (i32.eq (local.get $rule) (i32.const 1))
                    (then (local.set $field (i32.shr_u
                      (i32.add (local.get $amax) (i32.shl (i32.const 1) (i32.sub (i32.const 22) (local.get $mantissaBits))))
                      (i32.const 23)))))
                  (select (i32.sub (local.get $field) (local.get $emax)) (i32.const 0) (i32.gt_u (local.get $field) (local.get $emax))))))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $out (i32.add (local.get $out) (i32.const 1)))
        (br $blockLoop))))

  ;; 32 canonical quiet NaNs (what TypedArray.fill(NaN) writes) at $p.
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

  ;; 2^(127 − byte) splatted: the inverse of a finite block's scale (byte ≤ 253, so a normal float).
  (func $inverse (param $byte i32) (result v128)
    (i32x4.splat (i32.shl (i32.sub (i32.const 254) (local.get $byte)) (i32.const 23))))

  ;; 2^(byte − 127) splatted; byte 0 is the subnormal 2^−127.
  (func $scale (param $byte i32) (result v128)
    (i32x4.splat (select (i32.shl (local.get $byte) (i32.const 23)) (i32.const 0x00400000) (local.get $byte))))

  ;; In place: x := dequantize(quantize(x)) for `blocks` blocks of 32 floats at $p.
  (func (export "fake_quant") (param $p i32) (param $blocks i32) (param $scales i32)
    (param $lowBits i32) (param $highBits i32) (param $magicAddBits i32) (param $maxValue f32)
    (local $byte i32) (local $addr i32) (local $blockEnd i32)
    (local $inv v128) (local $scale v128) (local $x v128) (local $s v128) (local $magic v128)
    (local $low v128) (local $high v128) (local $magicAdd v128) (local $exponentMask v128) (local $max v128) (local $signBit v128)
    (local.set $low (i32x4.splat (local.get $lowBits)))
    (local.set $high (i32x4.splat (local.get $highBits)))
    (local.set $magicAdd (i32x4.splat (local.get $magicAddBits)))
    (local.set $exponentMask (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
    (local.set $max (f32x4.splat (local.get $maxValue)))
    (local.set $signBit (v128.const i32x4 0x80000000 0x80000000 0x80000000 0x80000000))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $byte (i32.load8_u (local.get $scales)))
        (if (i32.eq (local.get $byte) (i32.const 255))
          (then (call $fillNaN (local.get $p)))
          (else
            (local.set $inv (call $inverse (local.get $byte)))
            (local.set $scale (call $scale (local.get $byte)))
            (local.set $addr (local.get $p))
            (local.set $blockEnd (i32.add (local.get $p) (i32.const 128)))
            (loop $vectors
              (local.set $x (v128.load (local.get $addr)))
              (local.set $s (f32x4.mul (f32x4.abs (local.get $x)) (local.get $inv)))
              (local.set $magic (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $s) (local.get $low)) (local.get $high)) (local.get $exponentMask))
                (local.get $magicAdd)))
              (v128.store (local.get $addr)
                (v128.or
                  (f32x4.mul
                    (f32x4.min (f32x4.sub (f32x4.add (local.get $s) (local.get $magic)) (local.get $magic)) (local.get $max))
                    (local.get $scale))
                  (v128.and (local.get $x) (local.get $signBit))))
              (local.set $addr (i32.add (local.get $addr) (i32.const 16)))
              (br_if $vectors (i32.lt_u (local.get $addr) (local.get $blockEnd))))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop))))

  ;; Adds the statistics of quantizing the `blocks` blocks at $p (not yet fake-quantized) to the
  ;; statistics area: every block to the histogram, the elements of finite blocks to the rest. Sums in double, like the TypeScript, in
  ;; two f64 lanes per call (lane 0 takes elements 0 and 2 of every four, lane 1 elements 1 and 3,
  ;; each as x_a² + x_b² then added; the lanes added once at the end): the checkpoint report's bits
  ;; depend on this association. The sums work on |x| and |q|: q carries x's sign, so (x − q)² =
  ;; (|x| − |q|)², bit for bit. flushed = #(q = 0) − #(x = 0) (a zero gives q = 0); nonZero = 32 per
  ;; finite block − #(x = 0).
  (func (export "stats") (param $p i32) (param $blocks i32) (param $scales i32)
    (param $lowBits i32) (param $highBits i32) (param $magicAddBits i32) (param $maxValue f32)
    (local $byte i32) (local $counter i32) (local $addr i32) (local $blockEnd i32) (local $finite i32)
    (local $inv v128) (local $scale v128) (local $x v128) (local $s v128) (local $r v128) (local $q v128)
    (local $zero v128) (local $saturated v128) (local $small v128) (local $zeros v128)
    (local $signal v128) (local $error v128) (local $xl v128) (local $xh v128)
    (local $low v128) (local $high v128) (local $magicAdd v128) (local $max v128)
    (local.set $low (i32x4.splat (local.get $lowBits)))
    (local.set $high (i32x4.splat (local.get $highBits)))
    (local.set $magicAdd (i32x4.splat (local.get $magicAddBits)))
    (local.set $max (f32x4.splat (local.get $maxValue)))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $byte (i32.load8_u (local.get $scales)))
        (local.set $counter (i32.add (global.get $area) (i32.shl (local.get $byte) (i32.const 2))))
        (i32.store offset=64 (local.get $counter) (i32.add (i32.load offset=64 (local.get $counter)) (i32.const 1)))
        (if (i32.ne (local.get $byte) (i32.const 255))
          (then
            (local.set $finite (i32.add (local.get $finite) (i32.const 1)))
            ;; $inverse and $scale written out: a call per block spilled every vector register around it.
            (local.set $inv (i32x4.splat (i32.shl (i32.sub (i32.const 254) (local.get $byte)) (i32.const 23))))
            (local.set $scale (i32x4.splat (select (i32.shl (local.get $byte) (i32.const 23)) (i32.const 0x00400000) (local.get $byte))))
            (local.set $addr (local.get $p))
            (local.set $blockEnd (i32.add (local.get $p) (i32.const 128)))
            (loop $vectors
              (local.set $x (v128.and (v128.load (local.get $addr)) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff)))
              (local.set $s (f32x4.mul (local.get $x) (local.get $inv)))
              (local.set $r (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $s) (local.get $low)) (local.get $high))
                          (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
                (local.get $magicAdd)))
              (local.set $r (f32x4.sub (f32x4.add (local.get $s) (local.get $r)) (local.get $r)))
              ;; |q|; pmin is min here: r is never NaN in a finite block.
              (local.set $q (f32x4.mul (f32x4.pmin (local.get $r) (local.get $max)) (local.get $scale)))
              ;; Comparison masks are −1 per true lane, so subtracting them counts.
              (local.set $saturated (i32x4.sub (local.get $saturated) (f32x4.gt (local.get $r) (local.get $max))))
              (local.set $zeros (i32x4.sub (local.get $zeros) (f32x4.eq (local.get $x) (local.get $zero))))
              (local.set $small (i32x4.sub (local.get $small) (f32x4.eq (local.get $q) (local.get $zero))))
              (local.set $xl (f64x2.promote_low_f32x4 (local.get $x)))
              (local.set $xh (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $x) (local.get $x))))
              (local.set $signal (f64x2.add (local.get $signal) (f64x2.add (f64x2.mul (local.get $xl) (local.get $xl)) (f64x2.mul (local.get $xh) (local.get $xh)))))
              (local.set $xl (f64x2.sub (local.get $xl) (f64x2.promote_low_f32x4 (local.get $q))))
              (local.set $xh (f64x2.sub (local.get $xh) (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $q) (local.get $q)))))
              (local.set $error (f64x2.add (local.get $error) (f64x2.add (f64x2.mul (local.get $xl) (local.get $xl)) (f64x2.mul (local.get $xh) (local.get $xh)))))
              (local.set $addr (i32.add (local.get $addr) (i32.const 16)))
              (br_if $vectors (i32.lt_u (local.get $addr) (local.get $blockEnd))))))
        (local.set $p (i32.add (local.get $p) (i32.const 128)))
        (local.set $scales (i32.add (local.get $scales) (i32.const 1)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $blockLoop)))
    (i32.store offset=0 (global.get $area) (i32.add (i32.load offset=0 (global.get $area)) (call $countSum (local.get $saturated))))
    (i32.store offset=4 (global.get $area) (i32.add (i32.load offset=4 (global.get $area))
      (i32.sub (call $countSum (local.get $small)) (call $countSum (local.get $zeros)))))
    (i32.store offset=8 (global.get $area) (i32.add (i32.load offset=8 (global.get $area))
      (i32.sub (i32.shl (local.get $finite) (i32.const 5)) (call $countSum (local.get $zeros)))))
    (f64.store offset=16 (global.get $area) (f64.add (f64.load offset=16 (global.get $area)) (call $pairSum (local.get $signal))))
    (f64.store offset=24 (global.get $area) (f64.add (f64.load offset=24 (global.get $area)) (call $pairSum (local.get $error)))))

  (func $pairSum (param $v v128) (result f64)
    (f64.add (f64x2.extract_lane 0 (local.get $v)) (f64x2.extract_lane 1 (local.get $v))))

  (func $countSum (param $v v128) (result i32)
    (i32.add
      (i32.add (i32x4.extract_lane 0 (local.get $v)) (i32x4.extract_lane 1 (local.get $v)))
      (i32.add (i32x4.extract_lane 2 (local.get $v)) (i32x4.extract_lane 3 (local.get $v)))))

  ;; One FP8 code byte per element at $codes, from the scale bytes at $scales. s + magic lies in
  ;; magic's binade, where consecutive float32 bit patterns are consecutive grid points, so
  ;; bits(s + magic) − bits(magic) is q = s / step rounded (2^m + mantissa in a normal binade, the
  ;; mantissa below it); the code is q + ((e − minExponent) << m), with e − minExponent =
  ;; (bits(magic) >> 23) − $binadeBase, saturated at $maxCode (0x7E or 0x7B); x's sign is bit 7.
  ;; A NaN-scale block gets code 0x7F.
  (func (export "quantize") (param $p i32) (param $blocks i32) (param $codes i32) (param $scales i32)
    (param $lowBits i32) (param $highBits i32) (param $magicAddBits i32) (param $mantissaBits i32)
    (param $binadeBase i32) (param $maxCode i32)
    (local $byte i32) (local $v i32) (local $inv v128) (local $x v128) (local $s v128) (local $magic v128) (local $code v128)
    (local $low v128) (local $high v128) (local $magicAdd v128) (local $exponentMask v128) (local $base v128) (local $max v128)
    (local.set $low (i32x4.splat (local.get $lowBits)))
    (local.set $high (i32x4.splat (local.get $highBits)))
    (local.set $magicAdd (i32x4.splat (local.get $magicAddBits)))
    (local.set $exponentMask (v128.const i32x4 0x7f800000 0x7f800000 0x7f800000 0x7f800000))
    (local.set $base (i32x4.splat (local.get $binadeBase)))
    (local.set $max (i32x4.splat (local.get $maxCode)))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.eqz (local.get $blocks)))
        (local.set $byte (i32.load8_u (local.get $scales)))
        (if (i32.eq (local.get $byte) (i32.const 255))
          (then
            (v128.store (local.get $codes) (v128.const i32x4 0x7f7f7f7f 0x7f7f7f7f 0x7f7f7f7f 0x7f7f7f7f))
            (v128.store offset=16 (local.get $codes) (v128.const i32x4 0x7f7f7f7f 0x7f7f7f7f 0x7f7f7f7f 0x7f7f7f7f)))
          (else
            (local.set $inv (call $inverse (local.get $byte)))
            (local.set $v (i32.const 0))
            (loop $vectors
              (local.set $x (v128.load (i32.add (local.get $p) (i32.shl (local.get $v) (i32.const 2)))))
              (local.set $s (f32x4.mul (f32x4.abs (local.get $x)) (local.get $inv)))
              (local.set $magic (i32x4.add
                (v128.and (i32x4.min_s (i32x4.max_s (local.get $s) (local.get $low)) (local.get $high)) (local.get $exponentMask))
                (local.get $magicAdd)))
              (local.set $code
                (v128.or
                  (i32x4.min_s
                    (i32x4.add
                      (i32x4.sub (f32x4.add (local.get $s) (local.get $magic)) (local.get $magic))
                      (i32x4.shl (i32x4.sub (i32x4.shr_u (local.get $magic) (i32.const 23)) (local.get $base)) (local.get $mantissaBits)))
                    (local.get $max))
                  (v128.and (i32x4.shr_u (local.get $x) (i32.const 24)) (v128.const i32x4 0x80 0x80 0x80 0x80))))
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
)
